"""Profiles and claims files against their JSON Schemas (data/schemas/): every real file
validates, every schema is well formed, and broken variants of real files fail with one message
per problem naming the file, the key path and what is allowed."""

import time

import pytest
import yaml
from jsonschema import Draft202012Validator

from implicit_bias.core.chapter import ProfileError, chapters, load_profile
from implicit_bias.core.engine import profiles
from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.verdicts.claims import ClaimsError, load_claims, parse_expect

ROOT = project_root()
SCHEMAS = ROOT / "data" / "schemas"
PROFILE_CHAPTERS = sorted(p.stem for p in (ROOT / "data" / "profiles").glob("*.yaml"))
CLAIM_CHAPTERS = sorted(p.stem for p in (ROOT / "data" / "claims").glob("*.yaml"))


def real(kind: str, chapter: str):
    return yaml.safe_load((ROOT / "data" / kind / f"{chapter}.yaml").read_text())


# ---- (a) the real files and the schemas ------------------------------------------------------


@pytest.mark.parametrize("chapter", PROFILE_CHAPTERS)
def test_real_profiles_validate(chapter):
    for profile in ("smoke", "paper"):
        assert load_profile(chapter, profile) == real("profiles", chapter)[profile]


@pytest.mark.parametrize("chapter", CLAIM_CHAPTERS)
def test_real_claims_validate(chapter):
    claims = load_claims(chapter)
    assert [c["id"] for c in claims] == [c["id"] for c in real("claims", chapter)]
    for claim in claims:
        deviation = claim.get("known_deviation")
        assert deviation is None or set(deviation["profiles"]) <= set(claim["profiles"])


def test_every_chapter_has_profiles_claims_and_a_parameter_schema():
    assert set(chapters()) <= set(PROFILE_CHAPTERS) & set(CLAIM_CHAPTERS)
    assert sorted(p.stem for p in (SCHEMAS / "profiles").glob("*.yaml")) == PROFILE_CHAPTERS


@pytest.mark.parametrize(
    "path", sorted(SCHEMAS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(SCHEMAS))
)
def test_schemas_are_valid_draft_2020_12(path):
    Draft202012Validator.check_schema(yaml.safe_load(path.read_text()))


def _objects(node, where="root"):
    """Every object schema (a node with `properties`) below `node`, with where it is."""
    if isinstance(node, dict):
        if "properties" in node:
            yield where, node
        for key, value in node.items():
            yield from _objects(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{where}/{i}")


@pytest.mark.parametrize("chapter", PROFILE_CHAPTERS)
def test_parameter_schemas_are_closed_complete_and_described(chapter):
    params = yaml.safe_load((SCHEMAS / "profiles" / f"{chapter}.yaml").read_text())
    for where, node in _objects(params):
        assert node.get("additionalProperties") is False, where
        assert sorted(node.get("required", [])) == sorted(node["properties"]), where
    assert not set(params["properties"]) & set(profiles.RESERVED_PROFILE_KEYS)
    undescribed = [k for k, v in params["properties"].items() if not v.get("description")]
    assert not undescribed
    keys = set(params["properties"]) | set(profiles.RESERVED_PROFILE_KEYS)
    for profile in ("smoke", "paper"):
        assert set(real("profiles", chapter)[profile]) <= keys


def test_claims_schema_is_closed_everywhere():
    claims_schema = yaml.safe_load((SCHEMAS / "claims.yaml").read_text())
    for where, node in _objects(claims_schema):
        assert node.get("additionalProperties") is False, where


# ---- (b) broken variants of real files -----------------------------------------------------


def put(path, value):
    def change(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def drop(path):
    def change(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


def both(*changes):
    def change(data):
        for one in changes:
            one(data)

    return change


def whole(value):
    return lambda data: value


# (chapter, change, key path in the message, words of what is allowed)
BAD_PROFILES = [
    pytest.param(
        "gln_norm",
        put(["paper", "seeds", 2], -1),
        "paper.seeds[2]",
        "each entry of seeds must be a non-negative integer",
        id="negative-seed",
    ),
    pytest.param(
        "gln_norm",
        put(["paper", "seeds"], []),
        "paper.seeds",
        "must be a non-empty list of distinct entries",
        id="empty-seeds",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "seeds"], [0, 1, 0]),
        "smoke.seeds",
        "repeated entries [0]",
        id="repeated-seed",
    ),
    pytest.param(
        "gln_norm",
        put(["paper", "workers"], 0),
        "paper.workers",
        "workers must be a positive integer or 'auto'",
        id="workers-0",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "workers"], "many"),
        "smoke.workers",
        "workers must be a positive integer or 'auto'",
        id="workers-many",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "gln_blocks", 0, "median_init"], ["true"]),
        "smoke.gln_blocks[0].median_init[0]",
        "must be true or false",
        id="string-true-for-boolean",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "gln_blocks", 0, "colour"], [1]),
        "smoke.gln_blocks[0]",
        "unknown keys ['colour']; allowed keys: H, C, N",
        id="unknown-key-nested-object",
    ),
    pytest.param(
        "gln_norm",
        both(put(["smoke", "n_step"], 800), put(["paper", "n_step"], 3200)),
        "smoke",
        "did you mean 'n_steps'?",
        id="unknown-key-in-profile",
    ),
    pytest.param(
        "gln_norm",
        put(["fast"], {"n_val": 10}),
        "top level",
        "unknown keys ['fast']; allowed keys: smoke, paper",
        id="unknown-profile",
    ),
    pytest.param(
        "gln_norm",
        drop(["paper"]),
        "top level",
        "missing keys ['paper']; paper must be a mapping",
        id="missing-profile",
    ),
    pytest.param(
        "gln_norm",
        whole([]),
        "top level",
        "the file must be a mapping with the keys smoke, paper",
        id="profiles-list",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "solver"], "mosek"),
        "smoke.solver",
        "one of 'fast', 'ECOS', 'CLARABEL', 'OSQP', 'SCS'",
        id="unknown-solver",
    ),
    pytest.param(
        "gln_norm",
        put(["paper", "dtype"], "float16"),
        "paper.dtype",
        "one of 'float32', 'float64'",
        id="unknown-dtype",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "n_steps"], 800.0),
        "smoke.n_steps",
        "n_steps must be a positive integer",
        id="float-for-integer",
    ),
    pytest.param(
        "gln_norm",
        put(["paper", "toy_lr"], "1e-3"),
        "paper.toy_lr",
        "toy_lr must be a positive number",
        id="string-for-number",
    ),
    pytest.param(
        "gln_norm",
        put(["smoke", "relu_blocks", 0, "momentum"], [1.0]),
        "smoke.relu_blocks[0].momentum[0]",
        "a number in [0, 1)",
        id="momentum-1",
    ),
    pytest.param(
        "untied_diagonal",
        put(["smoke", "fig71_mirror"], "true"),
        "smoke.fig71_mirror",
        "fig71_mirror must be true or false",
        id="string-true-top-level",
    ),
    pytest.param(
        "untied_diagonal",
        both(drop(["smoke", "data", "r_star"]), drop(["paper", "data", "r_star"])),
        "smoke.data",
        "missing keys ['r_star']; r_star must be a positive integer",
        id="missing-nested-key",
    ),
    pytest.param(
        "untied_diagonal",
        put(["smoke", "fig71_log10_alpha"], [-6, 1]),
        "smoke.fig71_log10_alpha",
        "a list [start, stop, num]",
        id="short-grid",
    ),
    pytest.param(
        "untied_diagonal",
        put(["paper", "theorem1", "rel_steps", 1], 1.5),
        "paper.theorem1.rel_steps[1]",
        "a number in (0, 1]",
        id="rel-step-above-1",
    ),
    pytest.param(
        "untied_diagonal",
        put(["paper", "gd", "max_steps"], 0),
        "paper.gd.max_steps",
        "max_steps must be a positive integer",
        id="zero-steps",
    ),
    pytest.param(
        "galu_expressivity",
        put(["smoke", "thm1_cases", 0], [128, 8, 4, "relu"]),
        "smoke.thm1_cases[0][3]",
        "unknown gate 'relu'; gate must be one of 'step', 'sigmoid'",
        id="unknown-gate",
    ),
    pytest.param(
        "galu_expressivity",
        put(["smoke", "fig3_p", 0], 1.5),
        "smoke.fig3_p[0]",
        "a number in [0, 1]",
        id="probability-above-1",
    ),
    pytest.param(
        "galu_expressivity",
        put(["paper", "fig1_datasets"], ["mnist", "cifar"]),
        "paper.fig1_datasets[1]",
        "one of 'mnist', 'fashion_mnist'",
        id="unknown-dataset",
    ),
    pytest.param(
        "warped_imd",
        put(["smoke", "leaky", "rhos"], [0.0]),
        "smoke.leaky.rhos[0]",
        "a number in (0, 1]",
        id="leaky-slope-0",
    ),
    pytest.param(
        "warped_imd",
        put(["paper", "time_warp", "colour"], 2.0),
        "paper.time_warp",
        "unknown keys ['colour']; allowed keys: alpha, s, seed, end, dt, n_plot",
        id="unknown-key-nested-mapping",
    ),
    pytest.param(
        "tensor_networks",
        put(["smoke", "cls_depths"], [1, 2]),
        "smoke.cls_depths[0]",
        "an integer >= 2",
        id="depth-1",
    ),
    pytest.param(
        "tensor_networks",
        put(["smoke", "thm6_y"], 0),
        "smoke.thm6_y",
        "a number other than 0",
        id="zero-label",
    ),
    pytest.param(
        "low_rank_invariants",
        put(["smoke", "description"], 3),
        "smoke.description",
        "description must be a non-empty string",
        id="reserved-description-type",
    ),
    pytest.param(
        "low_rank_invariants",
        drop(["smoke", "mnist_steps"]),
        "top level",
        "smoke and paper must have the same keys; differ in ['mnist_steps']",
        id="different-keys",
    ),
]


@pytest.mark.parametrize("chapter,change,where,allowed", BAD_PROFILES)
def test_bad_profiles_are_rejected(tmp_path, chapter, change, where, allowed):
    data = real("profiles", chapter)
    replaced = change(data)
    data = data if replaced is None else replaced
    path = tmp_path / f"broken_{chapter}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ProfileError) as caught:
        load_profile(chapter, "smoke", path=path)
    assert_names(caught.value, path, where, allowed)


def first_id(chapter, index=2):
    return real("claims", chapter)[index]["id"]


# claims of gln_norm: #3 (index 2) has a known deviation, #4 (index 3) too
C2, C3 = f"claim '{first_id('gln_norm')}'", f"claim '{first_id('gln_norm', 3)}'"

BAD_CLAIMS = [
    pytest.param(
        put([2, "expect"], "in [1, 0]"), f"{C2}: expect", "needs a <= b", id="empty-interval"
    ),
    pytest.param(
        put([2, "expect"], "about 1"),
        f"{C2}: expect",
        "cannot read 'about 1'; expect must be an expectation",
        id="unreadable-expect",
    ),
    pytest.param(
        put([3, "expect"], True),
        f"{C3}: expect",
        "got true; expect must be an expectation",
        id="boolean-expect",
    ),
    pytest.param(
        put([2, "profiles"], []),
        f"{C2}: profiles",
        "profiles must be a non-empty list",
        id="empty-profiles",
    ),
    pytest.param(
        put([2, "profiles"], ["smoke", "gpu"]),
        f"{C2}: profiles[1]",
        "unknown profiles entry 'gpu'; each entry of profiles must be one of 'smoke', 'paper'",
        id="unknown-profile-name",
    ),
    pytest.param(
        put([2, "colour"], "red"),
        f"{C2}",
        "unknown keys ['colour']; allowed keys: id, where, quote",
        id="unknown-claim-key",
    ),
    pytest.param(
        put([2, "known_deviation", "why"], "x"),
        f"{C2}: known_deviation",
        "unknown keys ['why']; allowed keys: cause, evidence, profiles",
        id="unknown-deviation-key",
    ),
    pytest.param(
        put([2, "known_deviation"], {"cause": "erratum", "profiles": ["smoke"]}),
        f"{C2}: known_deviation",
        "missing keys ['evidence']; evidence must be a non-empty string",
        id="deviation-without-evidence",
    ),
    pytest.param(
        put([2, "known_deviation"], {"evidence": "e"}),
        f"{C2}: known_deviation.cause",
        "a known deviation needs its cause; cause must be one of: paper_fails: the paper's "
        "claim fails in this reproduction; erratum: ",
        id="deviation-without-cause",
    ),
    pytest.param(
        put([2, "known_deviation"], {"cause": "paper_wrong", "evidence": "e"}),
        f"{C2}: known_deviation.cause",
        "unknown cause 'paper_wrong'; cause must be one of: paper_fails",
        id="deviation-with-unknown-cause",
    ),
    pytest.param(
        both(
            put([2, "origin"], "book"),
            put([2, "known_deviation"], {"cause": "paper_fails", "evidence": "e"}),
        ),
        f"{C2}: known_deviation.cause",
        "cause 'paper_fails' is a finding against the paper, and this is a check of the book's",
        id="book-check-failing-against-the-paper",
    ),
    pytest.param(
        put([2, "known_deviation"], {"cause": "target_missed", "evidence": "e"}),
        f"{C2}: known_deviation.cause",
        "cause 'target_missed' is for the book's own checks (origin book)",
        id="paper-claim-as-a-missed-target",
    ),
    pytest.param(
        put([2, "known_deviation"], {"cause": "false_alarm", "evidence": "e"}),
        f"{C2}: known_deviation.cause",
        "cause 'false_alarm' is for a formula checked by Monte Carlo (effect 'exact')",
        id="false-alarm-outside-a-monte-carlo-formula",
    ),
    pytest.param(
        put(
            [2, "known_deviation"],
            {"cause": "paper_fails", "evidence": "e", "confirmation": "draws.json"},
        ),
        f"{C2}: known_deviation.cause",
        "a false alarm, and only a false alarm, names its `confirmation`",
        id="confirmation-outside-a-false-alarm",
    ),
    pytest.param(
        put(
            [2, "known_deviation"], {"cause": "paper_fails", "evidence": "e", "same_cause_as": "x"}
        ),
        f"{C2}: known_deviation.same_cause_as",
        "'x' is not another claim of this file with a known deviation of the same cause",
        id="same-cause-as-an-unknown-claim",
    ),
    pytest.param(
        put([2, "known_deviation"], "the evidence as a string"),
        f"{C2}: known_deviation",
        "known_deviation must be a mapping",
        id="deviation-as-a-string",
    ),
    pytest.param(
        put([2, "known_deviation"], ""),
        f"{C2}: known_deviation",
        "must be a mapping",
        id="empty-deviation",
    ),
    pytest.param(
        both(
            put([2, "profiles"], ["paper"]),
            put(
                [2, "known_deviation"],
                {"cause": "paper_fails", "evidence": "e", "profiles": ["smoke"]},
            ),
        ),
        f"{C2}: known_deviation.profiles[0]",
        "one of 'paper' (the claim's profiles)",
        id="deviation-profile-not-claimed",
    ),
    pytest.param(
        put([3, "id"], first_id("gln_norm")), f"{C2}: id", "duplicate id", id="duplicate-id"
    ),
    pytest.param(
        put([3, "id"], "Bad-Id"),
        "claim 'Bad-Id': id",
        "id must be a snake_case identifier",
        id="id-not-snake-case",
    ),
    pytest.param(
        put([3, "metric"], "9lives"),
        f"{C3}: metric",
        "metric must be a metric name",
        id="metric-not-identifier",
    ),
    pytest.param(
        put([3, "paper_value"], "0.5"),
        f"{C3}: paper_value",
        "must be a number, true or false",
        id="string-paper-value",
    ),
    pytest.param(
        drop([3, "quote"]),
        C3,
        "missing keys ['quote']; quote must be a non-empty string",
        id="missing-quote",
    ),
    pytest.param(
        put([3, "where"], ""), f"{C3}: where", "where must be a non-empty string", id="empty-where"
    ),
    pytest.param(
        whole({"claims": []}),
        "top level",
        "the file must be a non-empty list",
        id="claims-not-a-list",
    ),
    pytest.param(whole([]), "top level", "the file must be a non-empty list", id="no-claims"),
    pytest.param(
        put([3], "a claim"),
        "claim #4",
        "got 'a claim'; claim must be a mapping with the keys id, where",
        id="claim-not-a-mapping",
    ),
]


@pytest.mark.parametrize("change,where,allowed", BAD_CLAIMS)
def test_bad_claims_are_rejected(tmp_path, change, where, allowed):
    data = real("claims", "gln_norm")
    replaced = change(data)
    data = data if replaced is None else replaced
    path = tmp_path / "broken_gln_norm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ClaimsError) as caught:
        load_claims("gln_norm", path=path)
    assert_names(caught.value, path, where, allowed)


def assert_names(error, path, where, allowed):
    """Some line of the error names the file (not its folder), the key path and the allowed."""
    assert str(path.parent) not in str(error)
    assert all(line.startswith(f"{path.name}: ") for line in error.messages)
    assert str(error) == "\n".join(error.messages)
    lines = [line for line in error.messages if line.startswith(f"{path.name}: {where}: ")]
    assert lines, f"no line at {where!r} in:\n{error}"
    assert any(allowed in line for line in lines), f"{allowed!r} not in:\n{error}"


def test_bad_variants_are_many_and_distinct():
    ids = [p.id for p in BAD_PROFILES + BAD_CLAIMS]
    assert len(ids) == len(set(ids)) >= 20


# ---- all problems at once; missing schema; what load_claims returns --------------------------


def test_all_problems_of_a_file_at_once_sorted_by_path(tmp_path):
    data = real("profiles", "gln_norm")
    data["paper"]["workers"] = 0
    data["smoke"]["seeds"][0] = -1
    data["smoke"]["dtype"] = "half"
    path = tmp_path / "gln_norm.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError) as caught:
        load_profile("gln_norm", "paper", path=path)
    where = [line.split(": ")[1] for line in caught.value.messages]
    assert where == ["paper.workers", "smoke.dtype", "smoke.seeds[0]"]


def test_claims_problems_at_once_in_file_order(tmp_path):
    data = real("claims", "gln_norm")
    data[5]["expect"] = "in [2, 1]"
    data[1]["profiles"] = []
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ClaimsError) as caught:
        load_claims("gln_norm", path=path)
    assert [line.split(": ")[1] for line in caught.value.messages] == [
        f"claim '{data[1]['id']}'",
        f"claim '{data[5]['id']}'",
    ]


def test_chapter_without_parameter_schema(tmp_path):
    path = tmp_path / "new_chapter.yaml"
    path.write_text("smoke: {n: 1}\npaper: {n: 2}\n")
    with pytest.raises(ProfileError, match="create data/schemas/profiles/new_chapter.yaml"):
        load_profile("new_chapter", "smoke", path=path)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "gln_norm.yaml"
    path.write_text("smoke: {n: 1\npaper: [\n")
    with pytest.raises(ProfileError, match=r"^gln_norm.yaml: not valid YAML at line \d+"):
        load_profile("gln_norm", "smoke", path=path)


def test_parse_expect_rejects_empty_interval():
    assert parse_expect("in [0, 0]")(0.0)
    with pytest.raises(ClaimsError, match="a <= b"):
        parse_expect("in [1, 0]")


def test_load_claims_normalizes_and_returns_fresh_copies(tmp_path):
    # claims of the paper: an erratum on a check of the book's own is refused
    data = [c for c in real("claims", "gln_norm") if c.get("origin", "paper") == "paper"][:3]
    data[0]["known_deviation"] = {"cause": "erratum", "evidence": "profiles left out"}
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(data))
    claims = load_claims("gln_norm", path=path)
    assert claims[0]["known_deviation"] == {
        "cause": "erratum",
        "evidence": "profiles left out",
        "profiles": data[0]["profiles"],
    }
    claims[0]["id"] = "changed"
    assert load_claims("gln_norm", path=path)[0]["id"] == data[0]["id"]


def test_load_claims_is_cheap():
    load_claims("gln_norm")  # the largest file; later loads of the same content are cached
    start = time.perf_counter()
    load_claims("gln_norm")
    assert time.perf_counter() - start < 0.05
