"""Binder's environment (binder/requirements.txt, behind the book's launch buttons) installs
what `make setup` installs: the pins of requirements.lock, torch at the Makefile's TORCH_SPEC,
JupyterLab at the [lab] extra's pin, and the package."""

from __future__ import annotations

import re
import tomllib

from implicit_bias.core.engine.paths import project_root

ROOT = project_root()


def pins(text: str) -> dict[str, str]:
    """{normalized name: version} of the `name==version` lines of a requirements file."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+)\s*(?:#.*)?", line)
        if match:
            found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return found


def expected() -> dict[str, str]:
    lock = pins((ROOT / "requirements.lock").read_text())
    torch = re.search(r"^TORCH_SPEC\s*\?=\s*torch==(\S+)", (ROOT / "Makefile").read_text(), re.M)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lab = pins("\n".join(extras["optional-dependencies"]["lab"]))
    return {**lock, "torch": torch.group(1), **lab}


def differences(binder: dict[str, str], wanted: dict[str, str]) -> list[str]:
    return [
        f"{name}: binder {binder.get(name)}, expected {wanted.get(name)}"
        for name in sorted(set(binder) | set(wanted))
        if binder.get(name) != wanted.get(name)
    ]


def test_binder_has_the_pins_of_the_lock_file():
    text = (ROOT / "binder" / "requirements.txt").read_text()
    assert not differences(pins(text), expected()), "\n".join(differences(pins(text), expected()))
    assert re.search(r"^-e \.$", text, re.M), "Binder does not install the package"


def test_the_pin_comparison_can_fail():
    wanted = expected()
    changed = {**wanted, "numpy": "0.0.1"}
    assert differences(changed, wanted) == [f"numpy: binder 0.0.1, expected {wanted['numpy']}"]
    assert differences({k: v for k, v in wanted.items() if k != "torch"}, wanted)
