import json

import pytest
import yaml

from implicit_bias.core.verdicts import claims
from implicit_bias.core.verdicts.claims import ClaimsError, evaluate, load_claims, parse_expect


@pytest.mark.parametrize(
    "expect,value,holds",
    [
        ("< 1", 0.5, True),
        ("< 1", 1.0, False),
        ("<= 1", 1.0, True),
        ("> -2e-3", 0.0, True),
        (">= 3", 2.9, False),
        ("== 2", 2, True),
        ("in [0.1, 0.2]", 0.15, True),
        ("in [0.1, 0.2]", 0.25, False),
        ("true", True, True),
        ("false", True, False),
    ],
)
def test_parse_expect(expect, value, holds):
    assert parse_expect(expect)(value) is holds


@pytest.mark.parametrize("bad", ["about 1", "<", "in [1, ]", "~= 3"])
def test_parse_expect_rejects(bad):
    with pytest.raises(ClaimsError):
        parse_expect(bad)


CLAIM = {
    "id": "c",
    "where": "Fig. 1",
    "quote": "q",
    "metric": "m",
    "expect": "< 1",
    "profiles": ["smoke", "paper"],
}


def test_statuses():
    assert evaluate(CLAIM, {"m": 0.5}, "smoke")["status"] == "pass"
    assert evaluate(CLAIM, {"m": 2.0}, "smoke")["status"] == "fail"
    assert evaluate(CLAIM, {}, "smoke")["status"] == "missing metric"
    assert evaluate(CLAIM, {"m": float("nan")}, "smoke")["status"] == "missing metric"
    deviating = {**CLAIM, "known_deviation": {"profiles": ["smoke"], "evidence": "e"}}
    assert evaluate(deviating, {"m": 2.0}, "smoke")["status"] == "known deviation"
    assert evaluate(deviating, {"m": 0.5}, "smoke")["status"] == "unexpected pass"
    assert evaluate(deviating, {"m": 0.5}, "paper")["status"] == "pass"


def test_a_known_deviation_row_carries_its_cause():
    from implicit_bias.core.verdicts import tally

    deviating = {
        **CLAIM,
        "known_deviation": {"profiles": ["smoke"], "evidence": "e", "cause": "not_testable"},
    }
    row = evaluate(deviating, {"m": 2.0}, "smoke")
    assert row["status"] == "known deviation" and row["cause"] == "not_testable"
    assert tally.state(row) == tally.CAUSE_STATES["not_testable"]
    # no cause where the claim is not a known deviation at this run
    assert evaluate(deviating, {"m": 0.5}, "smoke")["cause"] is None  # unexpected pass
    assert evaluate(deviating, {"m": 2.0}, "paper")["cause"] is None  # a plain fail
    assert evaluate(CLAIM, {"m": 2.0}, "smoke")["cause"] is None


def write_claims(root, entries):
    folder = root / "data" / "claims"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "demo.yaml").write_text(yaml.safe_dump(entries))


@pytest.mark.parametrize(
    "change,message",
    [
        ({"expect": "roughly 1"}, "cannot read"),
        ({"profiles": ["gpu"]}, "unknown profiles"),
        ({"colour": "red"}, "unknown keys"),
        ({"known_deviation": {"profiles": ["smoke"]}}, "evidence"),
        # a known deviation names its cause, one of tally.CAUSES
        ({"known_deviation": {"evidence": "e"}}, r"known_deviation.cause: a known deviation "),
        ({"known_deviation": {"cause": "wrong", "evidence": "e"}}, "unknown cause 'wrong'"),
        ({"known_deviation": "e"}, "known_deviation must be a mapping"),
    ],
)
def test_schema_errors(demo_project, change, message):
    write_claims(demo_project, [{**CLAIM, **change}])
    with pytest.raises(ClaimsError, match=message):
        load_claims("demo")


def test_missing_key_and_duplicate(demo_project):
    write_claims(demo_project, [{k: v for k, v in CLAIM.items() if k != "quote"}])
    with pytest.raises(ClaimsError, match="missing keys"):
        load_claims("demo")
    write_claims(demo_project, [CLAIM, CLAIM])
    with pytest.raises(ClaimsError, match="duplicate"):
        load_claims("demo")


def test_check_writes_report_and_renders(demo_project):
    report = claims.check("demo", {"abs_mean": 0.1, "variance": 1.0}, "smoke")
    assert report.ok and report.counts() == {"pass": 1, "does not reproduce": 1}
    saved = json.loads((demo_project / "results/smoke/claims/demo.json").read_text())
    assert saved["ok"] and len(saved["claims"]) == 2
    html = report._repr_html_()
    assert "does not reproduce" in html and "mean_is_small" in html
    strict = claims.check("demo", {"abs_mean": 0.1, "variance": 2.0}, "smoke")
    assert not strict.ok and strict.counts()["unexpected pass"] == 1


def test_check_adds_a_chapters_own_columns(demo_project):
    # the demo's claims: mean_is_small and a known deviation; one gets the extra column's text
    column = {"on other data": {"mean_is_small": "fail (0.5; 95% CI [0.4, 0.6])"}}
    report = claims.check("demo", {"abs_mean": 0.1, "variance": 1.0}, "smoke", columns=column)
    html = report._repr_html_()
    assert "<th>on other data</th>" in html and "with-columns" in html
    assert html.count("<td class='claim-column'>") == 2  # one cell per claim, "–" where none
    assert "fail (0.5; 95% CI [0.4, 0.6])" in html and "colspan='5'" in html
    frame = report.to_frame()
    assert frame["on other data"].iloc[0] == "fail (0.5; 95% CI [0.4, 0.6])"
    assert frame["on other data"].isna().iloc[1]
    saved = json.loads((demo_project / "results/smoke/claims/demo.json").read_text())
    assert saved["columns"] == ["on other data"]
    assert saved["claims"][0]["columns"] == {
        "on other data": column["on other data"]["mean_is_small"]
    }
    assert report.counts() == {"pass": 1, "does not reproduce": 1}  # the verdicts do not change
    plain = claims.check("demo", {"abs_mean": 0.1, "variance": 1.0}, "smoke")
    assert "claim-column" not in plain._repr_html_() and "colspan='4'" in plain._repr_html_()
    with pytest.raises(ClaimsError, match="names no claim of this table: nope"):
        claims.check("demo", {"abs_mean": 0.1}, "smoke", columns={"x": {"nope": "pass"}})


def test_check_rejects_unknown_profile(demo_project):
    with pytest.raises(ValueError, match="valid: smoke, paper"):
        claims.check("demo", {}, "quick")


def test_failed_tasks_leave_every_claim_undecided(tmp_path, monkeypatch):
    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path))
    monkeypatch.setattr(claims, "load_claims", lambda chapter: [CLAIM])
    failed = [{"sweep": "svm", "task": {"x": 1}, "error": "Traceback...\nMemoryError: oom"}]
    report = claims.check("demo", {"m": 0.5}, "smoke", failed_tasks=failed)
    assert not report.ok
    row = report.rows[0]
    assert row["status"] == "missing tasks" and "svm" in row["evidence"]
    assert "MemoryError: oom" in row["evidence"]
    assert claims.check("demo", {"m": 0.5}, "smoke").ok  # same metrics, nothing failed


def test_committed_report_is_decided_again_from_its_stored_values():
    report = {
        "profile": "paper",
        "claims": [{"id": "c", "metric": "m", "value": 0.5, "status": "pass", "expect": "< 1"}],
    }
    assert claims.reevaluate(report, [CLAIM]) == []
    # an expectation edited so that the stored value must fail: caught without rerunning
    assert "fail" in claims.reevaluate(report, [{**CLAIM, "expect": "> 1"}])[0]
    # a known deviation declared now: the stored pass becomes an unexpected pass
    deviating = {**CLAIM, "known_deviation": {"profiles": ["paper"], "evidence": "e"}}
    assert "unexpected pass" in claims.reevaluate(report, [deviating])[0]
    # the claim's metric renamed, a claim added: the report must be recomputed
    assert "metric" in claims.reevaluate(report, [{**CLAIM, "metric": "m2"}])[0]
    added = claims.reevaluate(report, [CLAIM, {**CLAIM, "id": "d"}])
    assert added == ["d: in the claims file but not in the stored report (rerun)"]


WRITER = """
import sys
from pathlib import Path
from implicit_bias.core.verdicts.claims import write_json_atomic
for i in range(300):
    write_json_atomic(Path(sys.argv[1]), {"writer": sys.argv[2], "i": i})
"""


def test_concurrent_report_writes_do_not_collide(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "report.json"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target), str(k)], stderr=subprocess.PIPE
        )
        for k in range(3)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert json.loads(target.read_text())["i"] == 299
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temp file left
