"""The command line: fast help with examples, `make help`, the version, and custom profiles
(`run --set KEY=VALUE`, `run --profile file.yaml`): parsing, merging, validation by the schemas
before anything runs, and results under results/custom/<name>/."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib

import pytest
import yaml

import implicit_bias
from implicit_bias.core.engine import overrides
from implicit_bias.core.engine.overrides import (
    CustomProfile,
    apply_set,
    custom_profile,
    deep_merge,
    differences,
    parse_set,
)
from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.engine.profiles import ProfileError

ROOT = project_root()
COMMANDS = ["run", "status", "status-page", "baselines", "compare", "stale", "recompute", "data"]
HEAVY = (
    "torch",
    "pandas",
    "matplotlib",
    "papermill",
    "jupytext",
    "implicit_bias.core.chapter",
    "implicit_bias.core.tools.runner",
)


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "implicit_bias", *args], capture_output=True, text=True, env=env
    )


# ---- help, version, make help ----------------------------------------------------------------


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_imports_nothing_heavy(command):
    """--help builds the parser only: the libraries a command needs are imported when it runs."""
    args = ["--help"] if command is None else [command, "--help"]
    code = (
        f"import sys\nfrom implicit_bias.__main__ import main\ntry:\n    main({args!r})\n"
        f"except SystemExit:\n    pass\nprint('LOADED', sorted(m for m in {HEAVY!r} if m in "
        "sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout


def test_the_runners_process_imports_no_computing_library():
    """The runner computes nothing (its kernels do): torch, matplotlib and pandas stay out of
    its process, a few tenths of a second of every run (the suite runs chapters about a
    hundred times)."""
    code = (
        "import sys\nimport implicit_bias.core.tools.runner\n"
        "print('LOADED', sorted(m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout


def test_help_is_fast_and_shows_examples():
    start = time.perf_counter()
    result = cli("--help")
    seconds = time.perf_counter() - start
    assert result.returncode == 0
    assert "examples:" in result.stdout and "--set seeds=[0,1]" in result.stdout
    assert seconds < 2.0, f"--help took {seconds:.2f} s"  # ~0.1 s; margin for a busy machine
    run = cli("run", "--help").stdout
    assert "examples:" in run and "results/custom/" in run and "gln_norm" in run


def test_profiles_of_the_command_line_are_the_libraries():
    from implicit_bias.__main__ import PROFILES
    from implicit_bias.core.verdicts.claims import PROFILES as CLAIMS_PROFILES

    assert PROFILES == CLAIMS_PROFILES


def test_version_comes_from_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert implicit_bias.__version__ == pyproject
    assert cli("--version").stdout.strip() == f"python -m implicit_bias {pyproject}"
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["version"] == pyproject
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{pyproject}]" in changelog


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_target():
    result = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    phony = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    listed = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    assert sorted(listed) == sorted(phony)
    assert all(len(line.split()) > 2 for line in listed.values())  # each with its description


# ---- parsing --set and merging -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("seeds=2", ("seeds", 2)),
        ("widths=[10,50]", ("widths", [10, 50])),
        ("dtype=float64", ("dtype", "float64")),
        ("lr=0.5", ("lr", 0.5)),
        ("lr=1e-3", ("lr", 1e-3)),  # a number, as YAML 1.2 reads it (PyYAML alone gives text)
        ("scales=[1e-5, 3E2]", ("scales", [1e-5, 300.0])),
        ("tag=e5", ("tag", "e5")),
        ("flag=true", ("flag", True)),
        ("name=a=b", ("name", "a=b")),
        (" theorem1.n = 10", ("theorem1.n", 10)),
        ("blocks=[{H: [10], C: [2]}]", ("blocks", [{"H": [10], "C": [2]}])),
    ],
)
def test_set_values_are_read_as_yaml(text, expected):
    assert parse_set(text) == expected


@pytest.mark.parametrize(
    "text,message",
    [
        ("seeds", "write KEY=VALUE"),
        ("=3", "write KEY=VALUE"),
        ("a..b=3", "write KEY=VALUE"),
        ("seeds=[0,", "not valid YAML"),
    ],
)
def test_malformed_set_is_rejected(text, message):
    with pytest.raises(ProfileError, match=re.escape(message)):
        parse_set(text)


def test_set_reaches_into_mappings_and_merging_is_deep():
    config = {"seeds": [0, 1], "theorem1": {"n": 10, "d": 25}}
    apply_set(config, "theorem1.n", 5)
    apply_set(config, "new.key", 1)  # added: the schema decides whether it may be there
    assert config == {"seeds": [0, 1], "theorem1": {"n": 5, "d": 25}, "new": {"key": 1}}
    with pytest.raises(ProfileError, match="seeds is not a mapping"):
        apply_set(config, "seeds.x", 1)
    base = {"a": 1, "m": {"x": 1, "y": 2}, "l": [1, 2]}
    merged = deep_merge(base, {"m": {"y": 3}, "l": [5]})
    assert merged == {"a": 1, "m": {"x": 1, "y": 3}, "l": [5]} and base["m"]["y"] == 2
    assert differences(base, merged) == {"m.y": 3, "l": [5]}
    assert differences({"n": 1}, {"n": 1.0}) == {"n": 1.0}  # a type change is a change


def test_set_overrides_a_standard_profile():
    custom = custom_profile("gln_norm", "paper", ["seeds=[0,1]", "n_steps=400"])
    paper = yaml.safe_load((ROOT / "data/profiles/gln_norm.yaml").read_text())["paper"]
    assert custom.base == "paper" and custom.changes == {"seeds": [0, 1], "n_steps": 400}
    assert custom.config == {**paper, "seeds": [0, 1], "n_steps": 400}
    assert custom.source == "--set seeds=[0,1] n_steps=400"
    assert re.fullmatch(r"paper-[0-9a-f]{8}", custom.name)
    # the same overrides: the same folder (and cache); others: another folder
    assert custom_profile("gln_norm", "paper", ["seeds=[0,1]", "n_steps=400"]).name == custom.name
    assert custom_profile("gln_norm", "paper", ["seeds=[0]"]).name != custom.name
    assert custom_profile("gln_norm", "smoke", ["seeds=[0,1]"]).name.startswith("smoke-")
    assert custom_profile("gln_norm", "paper", []) is None  # a standard run
    nested = custom_profile("untied_diagonal", "smoke", ["theorem1.seeds=[0,1]"])
    assert nested.changes == {"theorem1.seeds": [0, 1]}
    assert nested.config["theorem1"]["n"] == 10  # the rest of the mapping is kept


# ---- validation: the schema's message, naming the key --------------------------------------


@pytest.mark.parametrize(
    "chapter,sets,where,allowed",
    [
        ("gln_norm", ["seeds=2"], "paper.seeds: got 2", "seeds must be a non-empty list"),
        ("gln_norm", ["widths=[10,50]"], "paper: unknown keys ['widths']", "allowed keys: n_val"),
        (
            "gln_norm",
            ["dtype=float16"],
            "paper.dtype: unknown dtype 'float16'",
            "one of 'float32', 'float64'",
        ),
        ("gln_norm", ["workers=0"], "paper.workers: got 0", "a positive integer or 'auto'"),
        (
            "untied_diagonal",
            ["theorem1.nn=5"],
            "paper.theorem1: unknown keys ['nn']",
            "did you mean 'n'?",
        ),
    ],
)
def test_bad_overrides_fail_with_the_schemas_message(chapter, sets, where, allowed):
    with pytest.raises(ProfileError) as caught:
        custom_profile(chapter, "paper", sets)
    message = str(caught.value)
    assert message.startswith(f"{chapter}, profile paper with --set {' '.join(sets)}: {where}")
    assert allowed in message


def test_cli_rejects_bad_overrides_before_running_anything(tmp_path):
    env = {**os.environ, "IMPLICIT_BIAS_RESULTS": str(tmp_path / "results")}
    result = cli(
        "run",
        "gln_norm",
        "--profile",
        "paper",
        "--set",
        "seeds=2",
        "--set",
        "widths=[10,50]",
        env=env,
    )
    assert result.returncode == 2
    assert "paper.seeds: got 2; seeds must be" in result.stderr
    assert "unknown keys ['widths']" in result.stderr
    assert "Traceback" not in result.stderr and "running" not in result.stdout
    assert not (tmp_path / "results").exists()  # nothing ran, nothing was written
    for args, message in (
        (["--set", "seeds"], "write KEY=VALUE"),
        (["--profile", "no_such.yaml"], "valid: smoke, paper, or a profile"),
        (["warped_imd", "--profile", str(tmp_path)], "valid: smoke, paper"),
    ):
        result = cli("run", "gln_norm", *args, env=env)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


# ---- profile files ---------------------------------------------------------------------------


def test_profile_file_holds_one_profile_and_may_leave_keys_out(tmp_path):
    path = tmp_path / "two seeds.yaml"
    path.write_text("paper:\n  seeds: [0, 1]\n")
    custom = custom_profile("gln_norm", str(path), [])
    assert custom.base == "paper" and custom.changes == {"seeds": [0, 1]}
    assert custom.name == "two_seeds" and custom.source == "two seeds.yaml"
    both = custom_profile("gln_norm", str(path), ["n_steps=10"])
    assert both.changes == {"seeds": [0, 1], "n_steps": 10}
    assert re.fullmatch(r"two_seeds-[0-9a-f]{8}", both.name)
    # a complete profile, e.g. copied from data/profiles/ and edited, works the same way
    smoke = yaml.safe_load((ROOT / "data/profiles/gln_norm.yaml").read_text())["smoke"]
    path.write_text(yaml.safe_dump({"smoke": {**smoke, "n_val": 100}}))
    assert custom_profile("gln_norm", str(path), []).changes == {"n_val": 100}


@pytest.mark.parametrize(
    "text,message",
    [
        ("smoke: {seeds: [0]}\npaper: {seeds: [0]}\n", "a profile file holds one profile"),
        ("fast: {seeds: [0]}\n", "under the name of the profile they change, smoke or paper"),
        ("[1, 2]\n", "found no mapping"),
        ("paper: 3\n", "paper must be a mapping of parameters"),
        ("paper: {seeds: 2}\n", "my.yaml: paper.seeds: got 2; seeds must be"),
        ("paper: {seeds: [0}\n", "my.yaml: not valid YAML at line 1"),
    ],
)
def test_bad_profile_files_are_rejected(tmp_path, text, message):
    path = tmp_path / "my.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        custom_profile("gln_norm", str(path), [])
    assert message in str(caught.value)


# ---- where a custom run writes, and what its kernel reads -------------------------------------


def test_custom_run_writes_under_results_custom_and_the_kernel_reads_its_profile(
    tmp_path, monkeypatch
):
    from implicit_bias.core.chapter import load_profile
    from implicit_bias.core.engine.paths import (
        chapter_results,
        claims_results,
        figures_dir,
        results_root,
    )

    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv(overrides.PROFILES_ENV, raising=False)
    warped = load_profile("warped_imd", "paper")
    custom = custom_profile("gln_norm", "paper", ["seeds=[0,1]"])
    assert isinstance(custom, CustomProfile)
    assert custom.root == tmp_path / "results" / "custom" / custom.name
    with custom.active():
        root = results_root()
        assert root == custom.root
        for path in (
            chapter_results("paper", "gln_norm"),
            claims_results("paper"),
            figures_dir("paper", "gln_norm"),
            custom.notebook,
        ):
            assert path.is_relative_to(custom.root)
        assert load_profile("gln_norm", "paper")["seeds"] == [0, 1]
        assert load_profile("warped_imd", "paper") == warped  # not changed
        with pytest.raises(ProfileError, match="holds the paper profile"):
            load_profile("gln_norm", "smoke")
        written = yaml.safe_load(custom.profile_file.read_text())
        assert written == {"paper": custom.config}
        # the written file is itself a profile file: it reruns the same run
        again = custom_profile("gln_norm", str(custom.profile_file), [])
        assert again.config == custom.config and again.changes == custom.changes
    assert results_root() == tmp_path / "results"  # restored
    assert overrides.PROFILES_ENV not in os.environ
    assert load_profile("gln_norm", "paper")["seeds"] == [0, 1, 2]
    record = custom.record()
    assert record["changes"] == {"seeds": [0, 1]} and record["source"] == "--set seeds=[0,1]"


def test_demo_chapter_runs_with_an_override(demo_project):
    """End to end (a few seconds): `run demo --set n=200` writes only under results/custom/,
    its run record and its executed notebook say what was overridden, and its tasks used it."""
    env = dict(os.environ)
    result = cli("run", "demo", "--device", "cpu", "--set", "n=200", env=env)
    assert result.returncode == 0, result.stderr
    custom = demo_project / "results" / "custom"
    (name,) = [p.name for p in custom.iterdir()]
    assert re.fullmatch(r"smoke-[0-9a-f]{8}", name)
    root = custom / name
    assert not (demo_project / "results" / "smoke").exists()
    assert not (demo_project / "book" / "chapters" / "demo.ipynb").exists()
    run = json.loads((root / "smoke" / "demo" / "run.json").read_text())
    assert run["ok"] and run["profile"] == "smoke"
    assert run["custom"]["changes"] == {"n": 200} and run["custom"]["source"] == "--set n=200"
    assert (root / "smoke" / "claims" / "demo.json").exists()
    assert (root / "smoke" / "figures" / "demo" / "moments.png").exists()
    entries = [json.loads(p.read_text()) for p in (root / "smoke/demo/moments").glob("*.json")]
    assert len(entries) == 3 and all(e["task"]["n"] == 200 for e in entries)
    notebook = (root / "chapters" / "demo.ipynb").read_text()
    # the profile line, folded under "How this page was run" (core.chapter.profile_fold)
    assert "with overrides <code>n = 200</code>" in notebook and "(a custom run)" in notebook
    assert f"results/custom/{name}/smoke" in result.stdout
