"""Claims under the book's design: the confirmatory stage of a registered seed plan, the "no
practical effect" outcome, the seeds an open claim needs, audits kept out of the counts, and
the schema's checks of the new fields."""

import pytest
import yaml

from implicit_bias.core.verdicts import decision, planning
from implicit_bias.core.verdicts.claims import (
    INCONCLUSIVE,
    NEGLIGIBLE,
    PASS,
    ClaimsError,
    ClaimsReport,
    claim_negligible,
    evaluate,
    load_claims,
    plan_summary,
)
from implicit_bias.core.verdicts.decision import Evidence

CLAIM = {
    "id": "a_better",
    "where": "Sec. 1",
    "quote": "A is better than B",
    "metric": "a_minus_b",
    "expect": "< 0",
    "profiles": ["paper"],
    "kind": "comparison",
    "unit": "error_rate",
}
PLAN = {
    "exploratory_seeds": [0, 1, 2],
    "seeds": [3, 4, 5, 6],
    "new_seeds": 4,
    "needed": 4,
    "power": 0.93,
    "estimate": -0.01,
    "sd": 0.004,
}


def _evidence(values: dict) -> Evidence:
    return decision.paired_differences(values)


def test_a_claimed_difference_within_the_negligible_size_has_no_practical_effect():
    assert claim_negligible(CLAIM) == 0.001
    assert claim_negligible({**CLAIM, "expect": "< 0.5"}) is None  # a bound, not a difference
    assert claim_negligible({k: v for k, v in CLAIM.items() if k != "unit"}) is None
    row = evaluate(CLAIM, {"a_minus_b": _evidence([0.0001, -0.0001, 0.00005])}, "paper")
    assert row["status"] == NEGLIGIBLE and row["needs_seeds"] is None
    # the same seeds with no unit (so no negligible size) stay open, and say what would decide
    bare = {k: v for k, v in CLAIM.items() if k != "unit"}
    row = evaluate(bare, {"a_minus_b": _evidence([0.0001, -0.0001, 0.00005])}, "paper")
    assert row["status"] == INCONCLUSIVE
    # sized at the 80% upper limit of the spread: more than SEARCH_SEEDS, so undecidable
    assert row["needs_seeds"] is None and row["undecidable"]["seeds"] == planning.MAX_NEW_SEEDS
    assert "a decision needs more than 1000 new seeds" in plan_summary(row)


def test_a_registered_plan_decides_on_its_new_seeds_alone():
    claim = {**CLAIM, "seed_plan": PLAN}
    # exploratory seeds only: decided on them, labelled exploratory
    seen = {0: -0.01, 1: -0.012, 2: -0.011}
    row = evaluate(claim, {"a_minus_b": _evidence(seen)}, "paper")
    assert row["stage"] == "exploratory" and row["status"] == PASS and row["seeds"]["n"] == 3
    # part of the new seeds: still the exploratory seeds, never the pooled ones
    row = evaluate(claim, {"a_minus_b": _evidence({**seen, 3: 0.5, 4: 0.6})}, "paper")
    assert row["stage"] == "exploratory" and row["seeds"]["seeds"] == [0, 1, 2]
    # all new seeds: decided on them alone (here they contradict the exploratory ones)
    new = {3: 0.02, 4: 0.021, 5: 0.019, 6: 0.022}
    row = evaluate(claim, {"a_minus_b": _evidence({**seen, **new})}, "paper")
    assert row["stage"] == "confirmatory" and row["seeds"]["seeds"] == [3, 4, 5, 6]
    assert row["status"] == "fail"
    # the plan is the paper profile's: smoke decides on its own seeds
    smoke = {**claim, "profiles": ["smoke", "paper"]}
    assert evaluate(smoke, {"a_minus_b": _evidence(seen)}, "smoke")["stage"] is None
    # a plan voided after registration (a new seed it names had been seen) never decides:
    # the exploratory verdict stays, however many of its seeds are there
    void = {**claim, "seed_plan": {**PLAN, "void": "seed 3 had been run before the plan"}}
    row = evaluate(void, {"a_minus_b": _evidence({**seen, **new})}, "paper")
    assert row["stage"] == "exploratory" and row["seeds"]["seeds"] == [0, 1, 2]
    assert row["status"] == PASS
    assert "plan void: seed 3 had been run" in plan_summary(row)


def test_a_void_plans_replacement_decides_on_its_own_new_seeds_alone():
    """A plan voided after registration may be replaced by one on seeds never seen: the
    replacement decides as any plan (on its new seeds alone, once all have run), and neither
    the void plan's seeds nor the pooled seeds ever do."""
    seen = {0: -0.01, 1: -0.012, 2: -0.011}
    void_seeds = {3: 0.02, 4: 0.021, 5: 0.019, 6: 0.022}  # the void plan's, seen
    replacement = {**PLAN, "seeds": [7, 8, 9, 10]}
    plan = {**PLAN, "void": "seed 3 had been run before the plan", "replacement": replacement}
    claim = {**CLAIM, "seed_plan": plan}
    row = evaluate(claim, {"a_minus_b": _evidence({**seen, **void_seeds})}, "paper")
    assert row["stage"] == "exploratory" and row["seeds"]["seeds"] == [0, 1, 2]
    assert "replacement plan: 4 new seeds; the first plan was void: seed 3" in plan_summary(row)
    fresh = {7: -0.02, 8: -0.021, 9: -0.019, 10: -0.022}
    row = evaluate(claim, {"a_minus_b": _evidence({**seen, **void_seeds, **fresh})}, "paper")
    assert row["stage"] == "confirmatory" and sorted(row["seeds"]["seeds"]) == [7, 8, 9, 10]
    assert row["status"] == PASS and row["seed_plan"] == plan  # the record keeps both plans
    # the plan that decides: the replacement of a void plan, else the registered plan
    from implicit_bias.core.verdicts.schema import active_plan

    void = {**PLAN, "void": "x" * 20}
    assert active_plan(plan) == replacement and active_plan(void) == void
    assert active_plan(PLAN) == PLAN


def test_a_stored_confirmatory_verdict_is_decided_again_on_its_stored_seeds():
    """A least-favourable cell chosen on the plan's seeds may hold only some of them (the
    others infeasible there): its stored evidence is decided again as stored, not sent back
    to the exploratory stage for lacking the plan's other seeds."""
    from implicit_bias.core.verdicts.claims import reevaluate

    claim = {**CLAIM, "seed_plan": PLAN}
    stored = _evidence({5: -0.02, 6: -0.021})  # seeds 3 and 4 had no value in the cell
    row = {**evaluate(CLAIM, {"a_minus_b": stored}, "paper"), "stage": "confirmatory"}
    assert row["status"] == PASS and row["seeds"]["seeds"] == [5, 6]
    report = {"profile": "paper", "claims": [row]}
    assert reevaluate(report, [claim]) == []
    # an edited expectation still shows at once
    assert reevaluate(report, [{**claim, "expect": "> 0"}]) != []


def test_a_plan_seed_whose_runs_were_left_out_has_run_and_one_never_run_has_not():
    claim = {**CLAIM, "seed_plan": PLAN}
    seen = {0: -0.01, 1: -0.012, 2: -0.011}
    new = {3: 0.02, 4: 0.021, 5: 0.019}
    # seed 6 ran, but its only run was unconverged: the plan has run, decided on 3-5
    ran = _evidence({**seen, **new}).with_dropped_runs([6])
    row = evaluate(claim, {"a_minus_b": ran}, "paper")
    assert row["stage"] == "confirmatory" and row["seeds"]["seeds"] == [3, 4, 5]
    assert row["dropped_runs"] == 1 and row["status"] == "fail"
    # seed 6 never ran (or the chapter does not name its dropped runs): still exploratory
    for missing in (_evidence({**seen, **new}), _evidence({**seen, **new}).with_dropped_runs([2])):
        row = evaluate(claim, {"a_minus_b": missing}, "paper")
        assert row["stage"] == "exploratory" and row["seeds"]["seeds"] == [0, 1, 2]


def test_audits_are_not_counted_as_claims():
    rows = [
        {"id": "a", "status": PASS, "audit_of": None},
        {"id": "a_authors_program", "status": INCONCLUSIVE, "audit_of": "a"},
    ]
    report = ClaimsReport("demo", "paper", rows)
    assert report.counts() == {PASS: 1} and report.audit_counts() == {INCONCLUSIVE: 1}
    from implicit_bias.core.site.status_page import counts_text

    assert counts_text(rows) == "1 claim of the paper: 1 pass; 1 audit: 1 inconclusive"


def _load(tmp_path, claims):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(claims))
    return load_claims("demo", path)


def test_the_schema_checks_kind_audits_and_bounds(tmp_path):
    with pytest.raises(ClaimsError, match="needs its reason"):
        _load(tmp_path, [{**CLAIM, "kind": "single_run"}])
    with pytest.raises(ClaimsError, match="needs kind 'single_run'"):
        _load(tmp_path, [{**CLAIM, "single_run": "one fixed problem"}])
    with pytest.raises(ClaimsError, match="kind"):
        _load(tmp_path, [{**CLAIM, "kind": "pooled"}])
    with pytest.raises(ClaimsError, match="not another claim"):
        _load(tmp_path, [{**CLAIM, "audit_of": "nothing_here"}])
    with pytest.raises(ClaimsError, match="not another claim"):
        _load(tmp_path, [{**CLAIM, "audit_of": CLAIM["id"]}])
    with pytest.raises(ClaimsError, match="why"):
        _load(tmp_path, [{**CLAIM, "bound": {"origin": "book"}}])
    with pytest.raises(ClaimsError, match="negligible"):
        _load(tmp_path, [{**CLAIM, "effect": "negligible"}])
    audit = {**CLAIM, "id": "a_better_authors_program", "audit_of": "a_better"}
    book = {"origin": "book", "why": "a tenth of the margin"}
    loaded = _load(tmp_path, [CLAIM, {**audit, "bound": book, "notes": {"paper": "open"}}])
    assert loaded[1]["audit_of"] == "a_better" and loaded[1]["bound"] == book


def test_a_seed_plan_must_name_paper_claims(tmp_path, monkeypatch):
    from implicit_bias.core.verdicts import claims as claims_module

    plans = tmp_path / "plans.yaml"
    plans.write_text(
        yaml.safe_dump({"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"other": PLAN}})
    )
    monkeypatch.setattr(claims_module, "seed_plan_file", lambda chapter: plans)
    with pytest.raises(ClaimsError, match="not paper claims"):
        claims_module.load_seed_plans("demo", [CLAIM])
    plans.write_text(
        yaml.safe_dump({"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": PLAN}})
    )
    assert claims_module.load_seed_plans("demo", [CLAIM])["a_better"]["seeds"] == [3, 4, 5, 6]
    bad = {**PLAN, "seeds": [2, 3]}
    plans.write_text(
        yaml.safe_dump({"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": bad}})
    )
    with pytest.raises(ClaimsError, match="repeat exploratory"):
        claims_module.load_seed_plans("demo", [CLAIM])
    # a replacement replaces a void plan only, and on seeds neither plan had seen
    void = {**PLAN, "void": "seed 3 had been run before the plan"}
    for plan, said in [
        ({**PLAN, "replacement": {**PLAN, "seeds": [9]}}, "void plan only"),
        ({**void, "replacement": {**PLAN, "seeds": [6, 7]}}, "already seen"),
        ({**void, "replacement": {**PLAN, "seeds": [1, 9]}}, "already seen"),
    ]:
        plans.write_text(
            yaml.safe_dump(
                {"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": plan}}
            )
        )
        with pytest.raises(ClaimsError, match=said):
            claims_module.load_seed_plans("demo", [CLAIM])
    good = {**void, "replacement": {**PLAN, "seeds": [7, 8]}}
    plans.write_text(
        yaml.safe_dump({"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": good}})
    )
    assert claims_module.load_seed_plans("demo", [CLAIM])["a_better"] == good


def test_every_registered_plan_loads_with_its_claims():
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.verdicts.claims import seed_plan_file

    planned = [c for c in chapters() if seed_plan_file(c).exists()]
    assert planned, "no seed plan registered"
    for chapter in planned:
        with_plan = [c for c in load_claims(chapter) if "seed_plan" in c]
        # a claim counted once as an audit of another keeps the plan it was registered with
        # (a plan is never rewritten; it decides the audit's verdict as it did the claim's),
        # but `plan_seeds` makes no new plan for an audit
        assert with_plan and all("paper" in c["profiles"] for c in with_plan), chapter


def test_a_withdrawn_claims_plan_stays_on_record_and_decides_nothing(tmp_path, monkeypatch):
    from implicit_bias.core.verdicts import claims as claims_module

    plans = tmp_path / "plans.yaml"
    gone = {**PLAN, "withdrawn": "true by construction, so no claim of the paper"}
    plans.write_text(
        yaml.safe_dump(
            {"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": PLAN, "gone": gone}}
        )
    )
    monkeypatch.setattr(claims_module, "seed_plan_file", lambda chapter: plans)
    assert list(claims_module.load_seed_plans("demo", [CLAIM])) == ["a_better"]
    # a withdrawn plan whose claim is still in the file is refused
    with pytest.raises(ClaimsError, match="withdrawn plans for claims still in the file"):
        claims_module.load_seed_plans("demo", [CLAIM, {**CLAIM, "id": "gone"}])


def test_writing_plans_keeps_every_registered_plan_and_adds_the_missing(tmp_path, monkeypatch):
    """`claims plan` after new exploratory values: a registered plan stays as it was (the fresh
    power analysis would give other seeds, so a rewrite fails this), a claim without one gets
    one."""
    from implicit_bias.core.verdicts import claims as claims_module

    plans = tmp_path / "plans.yaml"
    plans.write_text(
        yaml.safe_dump({"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": PLAN}})
    )
    fresh = {**PLAN, "seeds": [3, 4, 5, 6, 7, 8], "new_seeds": 6, "needed": 6}
    monkeypatch.setattr(claims_module, "seed_plan_file", lambda chapter: plans)
    monkeypatch.setattr(
        claims_module,
        "plan_seeds",
        lambda chapter: {
            "chapter": "demo",
            "power": 0.9,
            "cap": 20,
            "claims": {"a_better": fresh, "c_better": fresh},
        },
    )
    claims_module.write_seed_plans("demo")
    written = yaml.safe_load(plans.read_text())["claims"]
    assert written["a_better"] == PLAN
    assert written["c_better"] == fresh
    # a void plan keeps its record and gets a replacement (the fresh plan) once, never again
    void = {**PLAN, "void": "seed 3 had been run before the plan"}
    plans.write_text(
        yaml.safe_dump({"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": void}})
    )
    claims_module.write_seed_plans("demo")
    assert yaml.safe_load(plans.read_text())["claims"]["a_better"] == {
        **void,
        "replacement": fresh,
    }
    later = {**fresh, "seeds": [20, 21], "new_seeds": 2}
    monkeypatch.setattr(
        claims_module,
        "plan_seeds",
        lambda chapter: {"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": later}},
    )
    claims_module.write_seed_plans("demo")
    assert yaml.safe_load(plans.read_text())["claims"]["a_better"]["replacement"] == fresh


def test_no_plan_where_no_number_of_seeds_decides(monkeypatch):
    """A grid metric whose resolution is as wide as its region gets no seed plan (seeds cannot
    narrow it); the same claim read on a finer grid gets one."""
    from implicit_bias.core.verdicts import claims as claims_module

    claim = {**CLAIM, "expect": "in [-0.2, 0.2]", "unit": None}
    monkeypatch.setattr(claims_module, "load_claims", lambda chapter: [claim])

    def report(resolution):
        ev = decision.per_seed({0: 0.25, 1: 0.25, 2: 0.25}, resolution=resolution)
        return {"claims": [{"id": claim["id"], "seeds": ev.to_json()}]}

    assert claims_module.plan_seeds("demo", report(0.125))["claims"] == {}
    planned = claims_module.plan_seeds("demo", report(0.01))["claims"]
    assert planned[claim["id"]]["seeds"][0] == 3


def test_new_seeds_start_after_every_seed_the_report_holds(monkeypatch):
    """A claim whose seed 2 was run and dropped (infeasible) has evidence on seeds 0 and 1; its
    new seeds must not start at 2, which was seen: they start after the largest seed of any
    claim of the report."""
    from implicit_bias.core.verdicts import claims as claims_module

    other = {**CLAIM, "id": "c_better"}
    monkeypatch.setattr(claims_module, "load_claims", lambda chapter: [CLAIM, other])
    dropped = decision.paired_differences({0: -0.01, 1: -0.012})
    full = decision.paired_differences({0: -0.02, 1: -0.021, 2: -0.019})
    report = {
        "claims": [
            {"id": CLAIM["id"], "seeds": dropped.to_json()},
            {"id": "c_better", "seeds": full.to_json()},
        ]
    }
    plans = claims_module.plan_seeds("demo", report)["claims"]
    assert plans[CLAIM["id"]]["exploratory_seeds"] == [0, 1]
    assert plans[CLAIM["id"]]["seeds"][0] == 3 and plans["c_better"]["seeds"][0] == 3


# ---- a plan's registration covers its protocol and its metric's code ---------------------------


def _protocol_project(tmp_path, monkeypatch, profile: str, module: str):
    """A project root with the demo chapter's profile and analysis module, and a seed-plan
    file the claims module reads."""
    from implicit_bias.core.verdicts import claims as claims_module
    from implicit_bias.core.verdicts import protocol

    (tmp_path / "data" / "profiles").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data" / "profiles" / "demo.yaml").write_text(profile)
    path = protocol.analysis_module("demo", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(module)
    monkeypatch.setattr(protocol, "project_root", lambda: tmp_path)
    plans = tmp_path / "plans.yaml"
    monkeypatch.setattr(claims_module, "seed_plan_file", lambda chapter: plans)
    return plans


PROFILE = "paper:\n  lr_factor: 1.0\n  max_steps: 20000\n  seeds: [0, 1, 2]\n"
MODULE = 'def metric(x):\n    """The gap."""\n    return x.mean()\n'
ALL_SEEDS = {0: -0.01, 1: -0.012, 2: -0.011, 3: -0.01, 4: -0.011, 5: -0.012, 6: -0.01}


def _registered(plans, fingerprints: dict) -> None:
    data = {
        "chapter": "demo",
        "power": 0.9,
        "cap": 20,
        "claims": {"a_better": {**PLAN, **fingerprints}},
    }
    plans.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_plan_whose_protocol_changed_since_registration_is_void(tmp_path, monkeypatch):
    """The plan records the fingerprint of the paper profile it was registered under; the
    profile changed (a step factor and a step cap, as deep_matrix_factorization's did) voids
    it: no confirmatory verdict, and its row and the table say why. Running the plan (its
    seeds added to the profile), a comment or the description change nothing."""
    from implicit_bias.core.verdicts import claims as claims_module
    from implicit_bias.core.verdicts import protocol

    plans = _protocol_project(tmp_path, monkeypatch, PROFILE, MODULE)
    _registered(plans, protocol.current("demo"))
    profile = tmp_path / "data" / "profiles" / "demo.yaml"

    def row():
        plan = claims_module.load_seed_plans("demo", [CLAIM])["a_better"]
        return evaluate({**CLAIM, "seed_plan": plan}, {"a_minus_b": _evidence(ALL_SEEDS)}, "paper")

    assert row()["stage"] == "confirmatory"
    profile.write_text(
        "paper:\n  description: the plan's seeds run\n  lr_factor: 1.0   # the step\n"
        "  max_steps: 20000\n  seeds: [0, 1, 2]\n  confirmatory_seeds: [3, 4, 5, 6]\n"
    )
    assert row()["stage"] == "confirmatory"
    profile.write_text("paper:\n  lr_factor: 0.1\n  max_steps: 250000\n  seeds: [0, 1, 2]\n")
    changed = row()
    assert changed["stage"] == "exploratory" and changed["seeds"]["seeds"] == [0, 1, 2]
    assert "its protocol changed since it was registered" in changed["seed_plan"]["void"]
    # a reader's sentence: the fingerprints stay in the registration record, not in the reason
    fingerprint = protocol.current("demo")["protocol"]
    assert fingerprint and fingerprint[:8] not in changed["seed_plan"]["void"]
    summary = plan_summary(changed)
    assert "plan void: its protocol changed since it was registered" in summary
    table = ClaimsReport("demo", "paper", [changed])._repr_html_()
    assert "its protocol changed since it was registered" in table
    # the file keeps what was registered: the void is read, never written
    assert "void" not in yaml.safe_load(plans.read_text())["claims"]["a_better"]


def test_a_plan_whose_metric_code_changed_since_registration_is_void(tmp_path, monkeypatch):
    """The plan records the fingerprint of the chapter's analysis module: a changed body voids
    it; a changed docstring or comment does not."""
    from implicit_bias.core.verdicts import claims as claims_module
    from implicit_bias.core.verdicts import protocol

    plans = _protocol_project(tmp_path, monkeypatch, PROFILE, MODULE)
    _registered(plans, protocol.current("demo"))
    module = protocol.analysis_module("demo", tmp_path)

    def void():
        return claims_module.load_seed_plans("demo", [CLAIM])["a_better"].get("void")

    assert void() is None
    module.write_text('def metric(x):\n    """The mean gap."""\n    return x.mean()  # seeds\n')
    assert void() is None
    module.write_text('def metric(x):\n    """The gap."""\n    return x.median()\n')
    assert "the code computing its metric changed since it was registered" in void()
    row = evaluate(
        {**CLAIM, "seed_plan": claims_module.load_seed_plans("demo", [CLAIM])["a_better"]},
        {"a_minus_b": _evidence(ALL_SEEDS)},
        "paper",
    )
    assert row["stage"] == "exploratory"


def test_plan_seeds_records_the_fingerprints_and_refuses_a_report_of_another_protocol(
    tmp_path, monkeypatch
):
    from implicit_bias.core.verdicts import claims as claims_module
    from implicit_bias.core.verdicts import protocol

    _protocol_project(tmp_path, monkeypatch, PROFILE, MODULE)
    monkeypatch.setattr(claims_module, "load_claims", lambda chapter: [CLAIM])
    ev = _evidence({0: -0.01, 1: -0.012, 2: -0.011})
    report = {"claims": [{"id": CLAIM["id"], "seeds": ev.to_json()}]}
    plan = claims_module.plan_seeds("demo", report)["claims"]["a_better"]
    assert (plan["protocol"], plan["code"]) == tuple(protocol.current("demo").values())
    assert plan["sizing"]["confidence"] == planning.SD_CONFIDENCE
    stale = {**report, "protocol": {"protocol": "0" * 16, "code": plan["code"]}}
    with pytest.raises(ClaimsError, match="another experiment"):
        claims_module.plan_seeds("demo", stale)


def test_a_plan_void_by_a_changed_protocol_gets_a_replacement_once(tmp_path, monkeypatch):
    """`claims plan` after the protocol changed: the plan's void reason is written as its
    record, with a replacement sized on the report's values (of the current protocol)."""
    from implicit_bias.core.verdicts import claims as claims_module
    from implicit_bias.core.verdicts import protocol

    plans = _protocol_project(tmp_path, monkeypatch, PROFILE, MODULE)
    _registered(plans, protocol.current("demo"))
    (tmp_path / "data" / "profiles" / "demo.yaml").write_text(
        "paper:\n  lr_factor: 0.1\n  max_steps: 250000\n  seeds: [0, 1, 2]\n"
    )
    fresh = {**PLAN, "seeds": [7, 8, 9], "new_seeds": 3, **protocol.current("demo")}
    monkeypatch.setattr(
        claims_module,
        "plan_seeds",
        lambda chapter: {"chapter": "demo", "power": 0.9, "cap": 20, "claims": {"a_better": fresh}},
    )
    claims_module.write_seed_plans("demo")
    written = yaml.safe_load(plans.read_text())["claims"]["a_better"]
    assert "its protocol changed since it was registered" in written["void"]
    assert written["replacement"] == fresh and written["seeds"] == PLAN["seeds"]
    loaded = claims_module.load_seed_plans("demo", [CLAIM])["a_better"]
    assert "void" not in loaded["replacement"]  # the replacement holds under the new protocol


def test_a_pass_whose_estimate_is_below_its_practical_size_says_so():
    # error rate, negligible 0.001: the interval passes "< 0" and reaches past -0.001, while
    # the estimate lies within it (-0.0009): green by the interval only, which the row says
    values = [-0.0005, -0.0013, -0.0009, -0.0007, -0.0011, -0.0009, -0.0010, -0.0008]
    row = evaluate(CLAIM, {"a_minus_b": _evidence(values)}, "paper")
    assert row["status"] == "pass" and abs(row["seeds"]["estimate"]) < row["practical"]
    assert "the estimate lies below the practical size 0.001" in plan_summary(row)
    # can fail: an estimate past the practical size says nothing of it
    row = evaluate(CLAIM, {"a_minus_b": _evidence([v - 0.001 for v in values])}, "paper")
    assert row["status"] == "pass" and "practical size" not in plan_summary(row)
