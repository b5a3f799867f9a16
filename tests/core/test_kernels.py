"""The book computes with the AVX2 generation's CPU kernels wherever the CPU has them."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from implicit_bias.core.engine.kernels import (
    OPT_OUT,
    PINNED,
    STATE,
    cpu_flags,
    kernels_state,
    pin_kernels,
)
from implicit_bias.core.tools.verify import kernel_env

AVX2 = {"avx2", "fma", "sse4_2"}


def test_pins_every_library_on_an_avx2_cpu():
    env: dict[str, str] = {}
    state = pin_kernels(env, flags=AVX2, machine="x86_64", loaded=set())
    assert state == "AVX2 (pinned)" and env[STATE] == state
    assert {k: env[k] for k in PINNED} == PINNED


@pytest.mark.parametrize("key", sorted(PINNED))
def test_an_inherited_kernel_variable_is_kept_and_never_called_pinned(key):
    """An inherited override is what its library runs: the run is native, said so with the
    variable, and nothing else is half-pinned (it was labelled "AVX2 (pinned)")."""
    env = {key: "other"}
    state = pin_kernels(env, flags=AVX2, machine="x86_64", loaded=set())
    assert state == f"native ({key}=other inherited)" and env[STATE] == state
    assert env[key] == "other" and not (set(PINNED) - {key}) & set(env)


def test_an_inherited_variable_equal_to_the_pin_is_the_pin():
    env = {"OPENBLAS_CORETYPE": PINNED["OPENBLAS_CORETYPE"]}
    assert pin_kernels(env, flags=AVX2, machine="x86_64", loaded=set()) == "AVX2 (pinned)"


@pytest.mark.parametrize(
    "env, flags, machine, loaded, why",
    [
        ({OPT_OUT: "1"}, AVX2, "x86_64", set(), OPT_OUT),
        ({}, {"sse4_2", "avx"}, "x86_64", set(), "lacks AVX2"),
        ({}, AVX2, "aarch64", set(), "aarch64"),
        ({}, AVX2, "x86_64", {"numpy"}, "numpy loaded before"),
    ],
)
def test_leaves_the_native_kernels_and_says_why(env, flags, machine, loaded, why):
    state = pin_kernels(env, flags=flags, machine=machine, loaded=loaded)
    assert state.startswith("native (") and why in state
    assert not set(PINNED) & set(env)  # nothing half-pinned


def test_an_inherited_pin_survives_libraries_loaded_first():
    env = dict(PINNED)  # the parent process pinned: the libraries loaded with these settings
    assert pin_kernels(env, flags=AVX2, machine="x86_64", loaded={"numpy"}) == "AVX2 (pinned)"


def test_kernel_configurations_are_exactly_what_they_name():
    native = kernel_env("native-1thread", base=dict(PINNED))
    assert not set(PINNED) & set(native) and native[OPT_OUT] == "1"
    haswell = kernel_env("Haswell-2threads", base={})
    assert haswell["OPENBLAS_CORETYPE"] == "Haswell" and haswell[STATE].startswith("Haswell")
    assert pin_kernels(dict(haswell), flags=AVX2, machine="x86_64", loaded=set()) == haswell[STATE]


@pytest.mark.skipif(
    not {"avx2", "fma"} <= cpu_flags(), reason="the CPU has no AVX2: the native kernels run"
)
def test_importing_the_package_first_pins_numpy_and_torch_in_a_new_process():
    probe = (
        "import json, implicit_bias, numpy, torch\n"
        "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
        "print(json.dumps({'torch': torch.backends.cpu.get_cpu_capability(),\n"
        "  'numpy_v4': f.get('X86_V4', False),\n"
        "  'state': implicit_bias.core.engine.kernels.kernels_state()}))"
    )
    env = {k: v for k, v in os.environ.items() if k not in PINNED and k not in (STATE, OPT_OUT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"torch": "AVX2", "numpy_v4": False, "state": "AVX2 (pinned)"}
    # the control: opting out gives the libraries their own choice back
    env[OPT_OUT] = "1"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    native = json.loads(out.stdout.strip().splitlines()[-1])
    assert native["state"].startswith("native (")
    if "avx512f" in cpu_flags():
        assert native["torch"] == "AVX512" and native["numpy_v4"] is True


def test_shell_exports_carry_the_pin_to_processes_started_elsewhere(monkeypatch):
    from implicit_bias.core.engine import kernels

    monkeypatch.setattr(kernels, "cpu_flags", lambda: AVX2)
    monkeypatch.setattr(kernels.platform, "machine", lambda: "x86_64")
    monkeypatch.delenv(OPT_OUT, raising=False)
    lines = kernels.shell_exports().splitlines()
    assert lines == [f"export {k}='{v}'" for k, v in {**PINNED, STATE: "AVX2 (pinned)"}.items()]
    monkeypatch.setenv(OPT_OUT, "1")
    assert kernels.shell_exports() == ""


def test_the_test_process_itself_computes_with_the_pinned_kernels():
    """conftest imports the package before any test module imports numpy, so unit tests see the
    kernels the book computes with (a test passed on an AVX2 CPU and failed on an AVX-512 one
    when numpy kept its own loops)."""
    if os.environ.get(OPT_OUT, "") not in ("", "0"):
        pytest.skip(f"{OPT_OUT} is set")
    if platform.machine().lower() not in ("x86_64", "amd64") or not {"avx2", "fma"} <= cpu_flags():
        pytest.skip("no AVX2 and FMA: nothing is pinned")
    assert kernels_state() == "AVX2 (pinned)"
    import numpy as np

    features = np._core._multiarray_umath.__cpu_features__  # what numpy's loops dispatch on
    assert not any(features[name] for name in PINNED["NPY_DISABLE_CPU_FEATURES"].split())


def test_the_opt_out_never_keeps_an_inherited_pinned_label():
    """`IMPLICIT_BIAS_NATIVE_KERNELS=1` in a process started by a pinned one (which exports
    its label): native, not "AVX2 (pinned)" (a native run was labelled pinned); an
    emulated configuration's own label is kept."""
    env = {OPT_OUT: "1", STATE: "AVX2 (pinned)"}
    assert pin_kernels(env, flags=AVX2, machine="x86_64", loaded=set()).startswith("native (")
    env = {OPT_OUT: "1", STATE: "prescott-1thread (emulated)"}
    state = pin_kernels(env, flags=AVX2, machine="x86_64", loaded=set())
    assert state == "prescott-1thread (emulated)"
