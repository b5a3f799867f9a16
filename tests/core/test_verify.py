"""Stale committed results and the comparison of recomputed results: both can fail."""

from __future__ import annotations

import fnmatch
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.tools import verify

ROOT = project_root()
TOLERANCES = {
    "default": {"rtol": 1e-9, "atol": 0.0},
    "functions": {
        "m:f": {
            "*": {"rtol": 1e-6, "atol": 1e-12},
            "steps": {"rtol": 1e-4, "atol": 0.0},
            "GD.*": {"rtol": 0.0, "atol": 1e-3},
        }
    },
}


@pytest.mark.parametrize(
    "fn,key,expected",
    [
        ("m:f", "loss", (1e-6, 1e-12)),
        ("m:f", "steps", (1e-4, 0.0)),
        ("m:f", "GD.val_error", (0.0, 1e-3)),
        ("other:g", "loss", (1e-9, 0.0)),
    ],
)
def test_tolerance_lookup(fn, key, expected):
    assert verify.tolerance(TOLERANCES, fn, key) == expected


def test_comparison_catches_what_moves_beyond_its_tolerance():
    stored = {
        "loss": 1.0,
        "steps": [100.0, 200.0],
        "GD": {"val_error": [0.1]},
        "status": "ok",
        "seconds": 3.0,
    }
    same = json.loads(json.dumps(stored))
    same["seconds"] = 9.0  # timings are not results
    same["loss"] *= 1 + 1e-7
    assert verify.compare_results(stored, same, "m:f", TOLERANCES)[0] == []
    for path, value in (
        ("loss", 1.0 + 1e-5),
        ("steps", [100.0, 200.1]),
        ("GD", {"val_error": [0.102]}),
        ("status", "unconverged"),
    ):
        moved = {**json.loads(json.dumps(stored)), path: value}
        problems, spread = verify.compare_results(stored, moved, "m:f", TOLERANCES)
        assert len(problems) == 1 and problems[0].startswith(path), problems


def test_round_off_level_values_are_judged_in_absolute_terms():
    """A solver-tolerance-level error (1e-11) that moves by half is absolute spread; a value of
    the output's own scale, and a tiny one of an output whose scale is large, are told apart."""
    stored = {"gf_error": [1e-11, 2e-13], "beta": [3.0, 1e-5, 2e-3]}
    new = {"gf_error": [1.5e-11, 1e-13], "beta": [3.3, 2e-5, 2e-3]}
    spread = verify.compare_results(stored, new, "m:f", {})[1]
    assert spread["gf_error"]["rel_of_large"] == 0.0
    assert spread["gf_error"]["abs_of_small"] == pytest.approx(5e-12)
    assert spread["beta"]["rel_of_large"] == pytest.approx(0.1)  # 3.0 -> 3.3
    assert spread["beta"]["abs_of_small"] == pytest.approx(1e-5)  # below 1e-3 x 3.3


def test_every_committed_task_function_has_measured_tolerances():
    """Every output that the recompute test compares (the cheapest committed task of every task
    function) has a tolerance measured for it (`benchmarks/recompute_spread.py`), not the
    file's default."""
    tolerances = verify.load_tolerances().get("functions", {})
    missing = set()
    committed = {e["fn"] for _, _, e in verify.committed_entries() if e and "fn" in e}
    for _, _, entry in verify.cheapest_entries():
        committed.discard(entry["fn"])
        section = tolerances.get(entry["fn"])
        if section is None:
            missing.add(entry["fn"])
            continue
        for path, value, _ in verify.deviations(entry["result"], entry["result"]):
            key = verify.output_key(path)  # numbers need a tolerance; text and NaN must be
            if (
                verify._is_number(value)
                and not math.isnan(value)
                and not any(  # identical
                    fnmatch.fnmatchcase(key, pattern) for pattern in section
                )
            ):
                missing.add(f"{entry['fn']}: {key}")
    assert not committed, f"no readable committed entry of {sorted(committed)}"
    assert not missing, f"no measured tolerances for {sorted(missing)[:20]}"


THEORY = "models/tensor_networks_theory.py"  # the numerics the tensor_networks tasks reach
TASKS = "chapters/tensor_networks/tasks.py"  # the task functions themselves


def _copy_package(tmp_path, module=THEORY):
    """A copy of the package under `tmp_path`; returns the path of `module` (relative to the
    package) in it."""
    copy = tmp_path / "lib"
    shutil.copytree(
        ROOT / "lib" / "implicit_bias",
        copy / "implicit_bias",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return copy / "implicit_bias" / module


def _stale(lib):
    env = {**os.environ, "PYTHONPATH": str(lib), "IMPLICIT_BIAS_ROOT": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "implicit_bias", "stale", "tensor_networks"],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize(
    "module,edit,stale",
    [
        (THEORY, ("previous = abs(r)", "previous = abs(r) * 1.0000001"), True),  # arithmetic
        (TASKS, ("# train_square's target", "# the target of train_square"), False),  # a comment
    ],
)
def test_editing_a_task_makes_its_committed_results_stale(tmp_path, module, edit, stale):
    if not verify.cheapest_entries(["tensor_networks"]):
        pytest.skip("no committed tensor_networks results")
    module = _copy_package(tmp_path, module)
    source = module.read_text()
    assert edit[0] in source
    module.write_text(source.replace(edit[0], edit[1]))
    result = _stale(tmp_path / "lib")
    if stale:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "tensor_networks:" in result.stdout and "has changed" in result.stdout
        assert "python -m implicit_bias run tensor_networks --profile paper" in result.stdout
    else:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "no stale" in result.stdout


def test_moving_a_helper_keeps_committed_results_fresh(tmp_path):
    """`_two_layer_gd` moves from tensor_networks_theory.py to a module of its own."""
    if not verify.cheapest_entries(["tensor_networks"]):
        pytest.skip("no committed tensor_networks results")
    module = _copy_package(tmp_path, THEORY)
    source = module.read_text()
    start = source.index("def _two_layer_gd(")
    end = source.index("def _two_layer_flow(")
    (module.parent / "gd_helpers.py").write_text("import math\n\n\n" + source[start:end])
    module.write_text(
        source[:start] + source[end:] + "\n\nfrom .gd_helpers import _two_layer_gd  # noqa: E402\n"
    )
    result = _stale(tmp_path / "lib")
    assert result.returncode == 0, result.stdout + result.stderr


def test_cheapest_entries_take_the_cheapest_task_of_every_code_path():
    """gln_norm's `gd_task` trains a shallow GLN (kernel form or row-lazy) or a deep one (kernel
    or feature form), each with its own round-off: the recompute check takes the cheapest
    committed task of each."""
    from implicit_bias.chapters.gln_norm.tasks import gd_code_path

    chosen = [
        e for _, _, e in verify.cheapest_entries(["gln_norm"]) if e["fn"].endswith(":gd_task")
    ]
    if not chosen:
        pytest.skip("no committed gln_norm results")
    by_path: dict[str, float] = {}
    for _, _, e in verify.committed_entries(chapters=["gln_norm"]):
        if e and e["fn"].endswith(":gd_task"):
            path, seconds = gd_code_path(e["task"]), e["result"]["seconds"]
            by_path[path] = min(by_path.get(path, math.inf), seconds)
    assert sorted(gd_code_path(e["task"]) for e in chosen) == sorted(by_path)
    assert len(by_path) == 4  # shallow and deep, each in kernel form and the other one
    for e in chosen:
        assert e["result"]["seconds"] == by_path[gd_code_path(e["task"])]


def test_packed_signs_may_flip_within_their_measured_share():
    """Packed predicted signs (`gln.pack_signs`) compare by the share of flipped signs: within
    a `{signs: share}` tolerance they pass, beyond it or without one they fail."""
    import numpy as np

    from implicit_bias.models.gln import pack_signs

    f = np.where(np.arange(1000) % 3 == 0, 1.0, -1.0)
    g = f.copy()
    g[:10] *= -1  # 10 of 1000 signs flip
    a, b = pack_signs(f), pack_signs(g)
    assert verify.packed_sign_share(a, b) == pytest.approx(10 / 1000)
    assert verify.packed_sign_share(a, "ok") is None  # not a packing: compared as text
    fn = "m:task"
    allow = {"functions": {fn: {"pred_val": {"signs": 0.02}}}}
    strict = {"functions": {fn: {"pred_val": {"signs": 0.005}}}}
    assert verify.compare_results({"pred_val": [a]}, {"pred_val": [b]}, fn, allow)[0] == []
    assert verify.compare_results({"pred_val": [a]}, {"pred_val": [b]}, fn, strict)[0]
    problems, spread = verify.compare_results({"pred_val": [a]}, {"pred_val": [b]}, fn, {})
    assert problems and spread["pred_val"]["signs"] == pytest.approx(0.01)
    # a sign entry does not stand in for a number's tolerance
    assert verify.tolerance(allow, fn, "pred_val") == (0.0, 0.0)


def test_a_shared_queue_gives_each_entry_to_the_first_process_only(tmp_path):
    from implicit_bias.core.tools.verify import claim_in

    first, second = claim_in(tmp_path / "queue"), claim_in(tmp_path / "queue")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert first(a) and not second(a) and not first(a)
    assert second(b) and not first(b)
    assert claim_in(tmp_path / "other")(a)  # another queue knows nothing of these
