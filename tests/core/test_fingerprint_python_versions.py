"""Fingerprints print code as Python 3.11 does on every version: from 3.12 on, `ast.unparse`
quotes an f-string whose expressions hold quotes differently, which made every committed result
reaching one stale under Python 3.12 (the GPU image's)."""

from __future__ import annotations

import ast

import pytest

from implicit_bias.core.engine.fingerprint import unparse

# source -> what Python 3.11's ast.unparse prints (checked on 3.11 and 3.12)
PRINTED_BY_311 = {
    "f\"unknown dataset {dataset!r}; valid: {', '.join(DATASETS)}\"": (
        "f\"unknown dataset {dataset!r}; valid: {', '.join(DATASETS)}\""
    ),
    "f'{x}'": "f'{x}'",
    "f\"{a['k']} and 'q'\"": "f\"{a['k']} and 'q'\"",
    "f'{x:.3g} \"q\"'": "f'{x:.3g} \"q\"'",
    'f"a\\n{b}"': "f'a\\n{b}'",
    "f\"{f'{x!r:>{w}}'} y\"": "f\"{f'{x!r:>{w}}'} y\"",
    'f"{x}\\t{y:{z}}"': "f'{x}\\t{y:{z}}'",
}


@pytest.mark.parametrize("source", sorted(PRINTED_BY_311))
def test_f_strings_print_as_python_311_prints_them(source):
    assert unparse(ast.parse(source)) == PRINTED_BY_311[source]
