"""Pre-registration from git: the order of a claim's definition and its first stored value."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from implicit_bias.core.chapter import chapters
from implicit_bias.core.verdicts.registration import (
    decided_on_new_seeds,
    format_registrations,
    history_available,
    plan_registrations,
    registrations,
)

ROOT = Path(__file__).resolve().parents[2]


def _commit(root: Path, message: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", message], cwd=root, check=True, env=env)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def _write(root: Path, claims: list[dict] | None = None, rows: list[dict] | None = None):
    if claims is not None:
        (root / "data" / "claims").mkdir(parents=True, exist_ok=True)
        (root / "data" / "claims" / "demo.yaml").write_text(yaml.safe_dump(claims))
    if rows is not None:
        (root / "results" / "paper" / "claims").mkdir(parents=True, exist_ok=True)
        (root / "results" / "paper" / "claims" / "demo.json").write_text(
            json.dumps({"claims": rows})
        )


def test_registration_follows_the_order_of_commits(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    a = {"id": "a", "metric": "m", "expect": "< 0"}
    b = {"id": "b", "metric": "n", "expect": "> 1"}
    first = _commit_after(tmp_path, claims=[a])  # a registered alone
    stored = _commit_after(tmp_path, claims=[a, b], rows=[a, b])  # b with its result
    regs = registrations("demo", tmp_path)
    assert regs["a"].defined == first and regs["a"].stored == stored and regs["a"].pre_registered
    assert regs["b"].pre_registered is False
    # changing a's expectation after its result makes it a new definition with no stored value
    _commit_after(tmp_path, claims=[{**a, "expect": "< -1"}, b])
    regs = registrations("demo", tmp_path)
    assert regs["a"].pre_registered is None and regs["a"].stored is None
    # ... until a run stores it: then it was registered before that value, but after its data
    # were first seen (the first stored value of a), which the registration says
    _commit_after(tmp_path, rows=[{**a, "expect": "< -1"}, b])
    again = registrations("demo", tmp_path)["a"]
    assert again.pre_registered is True and again.after_data and again.data_seen == stored
    assert not registrations("demo", tmp_path)["b"].after_data
    # changed back to the first definition, registered, then run: pre-registered, and the
    # value stored under that definition long before is reported
    _commit_after(tmp_path, claims=[a, b])
    _commit_after(tmp_path, rows=[a, b])
    reg = registrations("demo", tmp_path)["a"]
    assert reg.pre_registered is True and reg.earlier_value == stored


def _commit_after(root, claims=None, rows=None) -> str:
    _write(root, claims, rows)
    return _commit(root, "step")


def test_claims_changed_from_now_on_are_pre_registered():
    """Every claim whose definition was committed after this test was added must have been
    committed before the first commit that stored its paper value."""
    if not history_available(ROOT):
        if os.environ.get("CI"):
            pytest.fail("CI's clone is shallow: the registration test needs the full history")
        pytest.skip("no full git history here")
    log = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "tests/core/test_registration.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not log:
        pytest.skip("this test is not committed yet")
    since = log[-1]
    order = subprocess.run(
        ["git", "rev-list", "--reverse", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    cutoff = order.index(since)
    late = []
    for chapter in chapters():
        for reg in registrations(chapter, ROOT).values():
            if (
                reg.defined in order
                and order.index(reg.defined) > cutoff
                and reg.pre_registered is False
            ):
                late.append(
                    f"{chapter}:{reg.claim} defined in {reg.short}, stored in {reg.stored[:7]}"
                )
    assert late == [], "commit the claim, then run: " + "; ".join(late)


def _plan_file(root: Path, seeds: list[int]):
    (root / "data" / "seed_plans").mkdir(parents=True, exist_ok=True)
    plan = {"exploratory_seeds": [0, 1, 2], "seeds": seeds}
    (root / "data" / "seed_plans" / "demo.yaml").write_text(
        yaml.safe_dump({"chapter": "demo", "claims": {"a": plan}})
    )


def _confirmatory_row(seeds: list[int]) -> dict:
    plan = {"exploratory_seeds": [0, 1, 2], "seeds": seeds}
    return {"id": "a", "metric": "m", "expect": "< 0", "stage": "confirmatory", "seed_plan": plan}


def test_a_seed_plan_is_registered_before_its_confirmatory_verdict(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    a = {"id": "a", "metric": "m", "expect": "< 0"}
    _commit_after(tmp_path, claims=[a], rows=[a])  # the exploratory verdict
    _plan_file(tmp_path, [3, 4, 5])
    planned = _commit(tmp_path, "plan")
    reg = plan_registrations("demo", tmp_path)["a"]
    assert reg.planned == planned and reg.pre_registered is None  # not run yet
    confirmed = _commit_after(tmp_path, rows=[_confirmatory_row([3, 4, 5])])
    reg = plan_registrations("demo", tmp_path)["a"]
    assert reg.confirmed == confirmed and reg.pre_registered is True
    # a plan rewritten together with the verdict that uses it is not pre-registered
    _plan_file(tmp_path, [3, 4, 5, 6])
    _commit_after(tmp_path, rows=[_confirmatory_row([3, 4, 5, 6])])
    assert plan_registrations("demo", tmp_path)["a"].pre_registered is False


def test_a_claim_redefined_after_its_data_is_decided_on_new_seeds_only_if_they_ran_after(tmp_path):
    """Redefined once its exploratory value was stored: its verdict rests on new data when its
    confirmatory seeds were first stored after the new definition, on seen data otherwise."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    a = {"id": "a", "metric": "m", "expect": "< 0"}
    _commit_after(tmp_path, claims=[a], rows=[a])  # its exploratory value, seen
    redefined = {**a, "expect": "< -1"}
    _commit_after(tmp_path, claims=[redefined])
    _plan_file(tmp_path, [3, 4, 5])
    _commit(tmp_path, "plan")
    _commit_after(tmp_path, rows=[{**_confirmatory_row([3, 4, 5]), "expect": "< -1"}])
    regs = registrations("demo", tmp_path)
    assert regs["a"].after_data and decided_on_new_seeds("demo", regs, tmp_path) == {"a"}
    assert "decided on seeds run after" in format_registrations(["demo"], tmp_path)
    # redefined again after those seeds were stored: the same seeds now decide on seen data
    _commit_after(tmp_path, claims=[{**a, "expect": "< -2"}])
    _commit_after(tmp_path, rows=[{**_confirmatory_row([3, 4, 5]), "expect": "< -2"}])
    regs = registrations("demo", tmp_path)
    assert regs["a"].after_data and decided_on_new_seeds("demo", regs, tmp_path) == set()
    assert "decided on values seen before" in format_registrations(["demo"], tmp_path)


def test_every_confirmatory_verdict_was_planned_first():
    if not history_available(ROOT):
        pytest.skip("no full git history here")
    late = [
        f"{chapter}:{reg.claim} planned in {(reg.planned or 'uncommitted')[:7]}, "
        f"confirmed in {(reg.confirmed or '')[:7]}"
        for chapter in chapters()
        for reg in plan_registrations(chapter, ROOT).values()
        if reg.pre_registered is False
    ]
    assert late == [], "commit the seed plan, then run: " + "; ".join(late)


def test_the_protocol_a_plan_was_registered_under_is_read_from_git(tmp_path):
    """A plan registered under one profile and run under another (the step factor and cap of
    deep_matrix_factorization's first plans): the fingerprint recorded from git is the
    profile's at the plan's commit, every line of the plan file is kept, and the plan then
    loads void; a plan registered after the change records the new profile and stays."""
    from implicit_bias.core.verdicts import protocol
    from implicit_bias.core.verdicts.registration import record_registered_protocols

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    profiles = tmp_path / "data" / "profiles"
    profiles.mkdir(parents=True)
    old = "paper:\n  lr_factor: 1.0\n  max_steps: 20000\n  seeds: [0, 1, 2]\n"
    new = "paper:\n  lr_factor: 0.1\n  max_steps: 250000\n  seeds: [0, 1, 2]\n"
    (profiles / "demo.yaml").write_text(old)
    plan = {
        "exploratory_seeds": [0, 1, 2],
        "seeds": [3, 4, 5],
        "new_seeds": 3,
        "needed": 3,
        "power": 1.0,
        "estimate": -0.1,
        "sd": 0.01,
    }
    plans = tmp_path / "data" / "seed_plans" / "demo.yaml"
    plans.parent.mkdir(parents=True)
    head = "# a header kept as it is\n"
    data = {"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a": plan}}
    plans.write_text(head + yaml.safe_dump(data, sort_keys=False))
    _commit(tmp_path, "plan a under the old profile")
    (profiles / "demo.yaml").write_text(new + "  # the new protocol\n")
    _commit(tmp_path, "the protocol changes")
    data["claims"]["b"] = {**plan, "seeds": [6, 7, 8]}
    plans.write_text(head + yaml.safe_dump(data, sort_keys=False))
    _commit(tmp_path, "plan b under the new profile")
    before = plans.read_text()
    added = record_registered_protocols("demo", tmp_path)
    assert len(added) == 2
    after = plans.read_text()
    kept = [line for line in after.splitlines(keepends=True) if "protocol:" not in line]
    assert "".join(kept) == before
    written = yaml.safe_load(after)["claims"]
    assert written["a"]["protocol"] == protocol.protocol_fingerprint_of(old)
    assert written["b"]["protocol"] == protocol.protocol_fingerprint_of(new)
    now = protocol.current("demo", tmp_path)
    assert protocol.changed_since_registration(written["a"], now, "demo")
    assert protocol.changed_since_registration(written["b"], now, "demo") is None
    assert record_registered_protocols("demo", tmp_path) == []  # recorded once


def test_every_plan_of_the_book_records_the_protocol_it_was_registered_under():
    """The recorded fingerprints are the ones git gives (a plan file edited by hand, or a
    fingerprint recorded from the wrong commit, fails this)."""
    from implicit_bias.core.verdicts.registration import registered_protocols

    if not history_available(ROOT):
        pytest.skip("needs the full history")
    for chapter in chapters():
        path = ROOT / "data" / "seed_plans" / f"{chapter}.yaml"
        if not path.exists():
            continue
        plans = yaml.safe_load(path.read_text())["claims"]
        for reg in registered_protocols(chapter, ROOT):
            plan = plans[reg.claim] if reg.part == "plan" else plans[reg.claim]["replacement"]
            assert plan.get("protocol") == reg.protocol, (chapter, reg)
