"""What a reader can trust after any run: the kernels a run is labelled with are the
ones it ran with, a native-kernel run never publishes over the pinned results, a refresh
replaces committed cache entries only once the whole run is complete, the swap of a run's
outputs is all or nothing, and every number of a profile is checked before any work."""

from __future__ import annotations

import copy
import math

import pytest

from implicit_bias.core.engine.paths import chapters, project_root

NON_FINITE = (math.nan, math.inf, -math.inf)


# ---- every number of a profile is finite, checked before any work --------------------------


def _admits_number(schema: dict) -> bool:
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    return bool({"number", "integer"} & set(types))


def _branches(schema: dict, value) -> list[dict]:
    """The schema itself, or the branches of its oneOf/anyOf that could hold `value`."""
    options = schema.get("oneOf") or schema.get("anyOf")
    if not options:
        return [schema]
    fitting = [o for o in options if "type" not in o or _fits(o["type"], value)]
    return fitting or [schema]


def _fits(types, value) -> bool:
    types = [types] if isinstance(types, str) else types
    kinds = {"object": dict, "array": list, "number": (int, float), "integer": int}
    return any(isinstance(value, kinds.get(t, ())) for t in types)


def numeric_locations(schema: dict, value, where: tuple = ()):
    """Every place of `value` (a profile) where its schema admits a number, as a path of keys
    and list indices; optional numeric keys the profile leaves out count too."""
    for branch in _branches(schema, value):
        if _admits_number(branch) and not isinstance(value, (dict, list)):
            yield where
        if isinstance(value, dict):
            props = branch.get("properties", {})
            for key, sub in props.items():
                if key in value:
                    yield from numeric_locations(sub, value[key], (*where, key))
                elif _admits_number(sub):
                    yield (*where, key)
        elif isinstance(value, list):
            prefix = branch.get("prefixItems", [])
            for i, item in enumerate(value):
                sub = prefix[i] if i < len(prefix) else branch.get("items", {})
                if isinstance(sub, dict):
                    yield from numeric_locations(sub, item, (*where, i))


def _profile_schema(chapter: str) -> dict:
    """The schema of one profile of `chapter`: its parameter schema and the reserved keys of
    data/schemas/profiles.yaml, references inlined."""
    from implicit_bias.core.engine.profiles import _inline_refs, read_yaml

    root = project_root() / "data" / "schemas"
    generic = read_yaml(root / "profiles.yaml")
    reserved = _inline_refs(generic["$defs"]["profile"], generic).get("properties", {})
    own = read_yaml(root / "profiles" / f"{chapter}.yaml")
    own = _inline_refs(own, own)
    return {**own, "properties": {**own.get("properties", {}), **reserved}}


def numeric_places() -> dict[str, list[tuple]]:
    """Every numeric place of every chapter's smoke profile, as its schemas define them."""
    from implicit_bias.core.engine.overrides import standard_profile

    return {
        chapter: list(
            dict.fromkeys(
                numeric_locations(_profile_schema(chapter), standard_profile(chapter, "smoke"))
            )
        )
        for chapter in chapters()
    }


def _put(config: dict, where: tuple, number: float) -> None:
    node = config
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = number


def _dotted(where: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where)


def test_every_numeric_place_of_every_profile_is_found():
    places = numeric_places()
    assert all(places.values()) and sum(map(len, places.values())) > 300
    assert ("hessian_map", "deltas", 0) in places["warped_imd"]
    assert ("thm6_y",) in places["tensor_networks"]


@pytest.mark.parametrize("number", NON_FINITE, ids=["nan", "inf", "-inf"])
def test_no_profile_number_may_be_nan_or_infinite(number):
    """NaN and infinity at every numeric place of every chapter's profile (found from the
    schemas) are refused, each place by name, by the validation that runs before any work
    (36 of them passed where a number had no bounds: untied_diagonal's log10 grids,
    warped_imd's hessian_map.deltas, tensor_networks' thm6_y; the run failed later, exit 1)."""
    from implicit_bias.core.engine.overrides import standard_profile
    from implicit_bias.core.engine.profiles import ProfileError, validate_profile

    missed = []
    for chapter, places in numeric_places().items():
        config = copy.deepcopy(standard_profile(chapter, "smoke"))
        for where in places:
            _put(config, where, number)
        with pytest.raises(ProfileError) as err:
            validate_profile(config, chapter, "smoke", chapter)
        named = {line.split(": ")[1] for line in err.value.messages}
        for where in places:
            if f"smoke{_dotted(where)}" in named:
                continue
            # named with its list (a oneOf of a number and a list): changed alone, then
            alone = copy.deepcopy(standard_profile(chapter, "smoke"))
            _put(alone, where, number)
            try:
                validate_profile(alone, chapter, "smoke", chapter)
            except ProfileError:
                continue
            missed.append(f"{chapter}: {_dotted(where)}")
    assert not missed, f"{len(missed)} accepted:\n" + "\n".join(missed)


@pytest.mark.parametrize(
    "chapter, setting",
    [
        ("untied_diagonal", "fig71_log10_alpha=[.nan, 1, 8]"),
        ("warped_imd", "hessian_map.deltas=[-1.0, .inf, 1.0]"),
        ("tensor_networks", "thm6_y=-.inf"),
    ],
)
def test_a_non_finite_set_stops_the_run_before_it_starts(
    chapter, setting, tmp_path, monkeypatch, capsys
):
    from implicit_bias.__main__ import main
    from implicit_bias.core.tools import runner

    def started(*args, **kwargs):
        raise AssertionError(f"{chapter} started with --set {setting}")

    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path))
    monkeypatch.setattr(runner, "run_chapter", started)
    assert main(["run", chapter, "--device", "cpu", "--set", setting]) == 2
    err = capsys.readouterr().err
    assert "got nan" in err or "got inf" in err or "got -inf" in err, err


# ---- the kernels a run is labelled with are the ones it ran with ---------------------------


def _cli(*args, env=None, **kwargs):
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "implicit_bias", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def _paper_run(*extra, env=None, **kwargs):
    return _cli("run", "demo", "--profile", "paper", "--device", "cpu", *extra, env=env, **kwargs)


def _published(root) -> dict[str, bytes]:
    """What a commit of the demo project would hold of its paper results, and its page."""
    from pathlib import Path

    base = Path(root) / "results" / "paper"
    files = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
        and not {".run", ".locks"} & set(p.relative_to(base).parts)
        and not (p.name.startswith(".") and p.name.endswith(".tmp"))
    }
    page = Path(root) / "book" / "chapters" / "demo.ipynb"
    files["book/chapters/demo.ipynb"] = page.read_bytes() if page.exists() else b""
    return files


def _entries(root) -> dict:
    from pathlib import Path

    return {
        p.name: p.read_bytes()
        for p in (Path(root) / "results/paper/demo/moments").glob("*.json")
        if len(p.stem) == 64
    }


def _pinnable() -> bool:
    import platform

    from implicit_bias.core.engine.kernels import REQUIRED_FLAGS, cpu_flags

    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return x86 and set(REQUIRED_FLAGS) <= cpu_flags()


@pytest.mark.skipif(not _pinnable(), reason="the pin needs an x86-64 CPU with AVX2 and FMA")
def test_a_native_or_inherited_kernel_run_never_passes_for_the_pinned_results(demo_project):
    """`OPENBLAS_CORETYPE` inherited with another value (and `IMPLICIT_BIAS_NATIVE_KERNELS=1`):
    the run is labelled native with its variables, its results go to `results/native/`, and the
    pinned cache entries, figures, claims, run.json and page stay byte for byte (a refresh under
    an inherited variable had rewritten every pinned entry, still labelled pinned, and both had
    published their figures and claims over the pinned ones)."""
    import json

    # implicit_bias imported first, as the book's chapters do (the demo imports numpy first,
    # which had made the kernel say "native" where the book's chapters said "pinned")
    nb = demo_project / "notebooks/demo.md"
    nb.write_text(
        nb.read_text().replace(
            "import numpy as np\n", "import implicit_bias\nimport numpy as np\n", 1
        )
    )
    assert _paper_run().returncode == 0
    before = _published(demo_project)
    entries = _entries(demo_project)
    assert len(entries) == 3
    labels = {json.loads(e)["kernels"]["state"] for e in entries.values()}
    assert labels == {"AVX2 (pinned)"}
    native = demo_project / "results/native/paper/demo"
    for env, said in [
        ({"OPENBLAS_CORETYPE": "Prescott"}, "native (OPENBLAS_CORETYPE=Prescott inherited)"),
        ({"IMPLICIT_BIAS_NATIVE_KERNELS": "1"}, "native (IMPLICIT_BIAS_NATIVE_KERNELS is set)"),
    ]:
        result = _paper_run("--refresh", env=env)
        assert result.returncode == 0, result.stderr
        assert _entries(demo_project) == entries
        assert _published(demo_project) == before
        assert "results/native/" in result.stdout
        record = json.loads((native / ".run/last-run.json").read_text())
        assert record["kernels"] == said
        for key, value in env.items():
            assert record["kernel_variables"][key] == value
        states = {
            json.loads(p.read_text())["kernels"]["state"] for p in native.glob("moments/*.json")
        }
        assert states == {said}
        assert (demo_project / "results/native/paper/claims/demo.json").exists()
        assert (demo_project / "results/native/book/demo.ipynb").exists()


# ---- a refresh replaces committed entries only once the whole run is complete --------------


def _pause_after_the_sweep(root) -> str:
    nb = root / "notebooks" / "demo.md"
    source = nb.read_text()
    end = '                   name="moments")\n'
    assert end in source
    nb.write_text(source.replace(end, end + '__import__("time").sleep(60)\n'))
    return source


def test_an_interrupted_refresh_leaves_every_committed_entry_as_it_was(ran_demo):
    """Stopped after its sweep recomputed every entry, a `--refresh` run leaves the committed
    entries byte for byte (they were rewritten in place, while the message said that no result
    was changed); a complete one replaces them, and says how many."""
    import signal
    import subprocess
    import sys
    import time

    demo_project = ran_demo("paper")
    before, entries = _published(demo_project), _entries(demo_project)
    source = _pause_after_the_sweep(demo_project)
    proc = subprocess.Popen(
        [sys.executable, "-m", "implicit_bias", "run", "demo", "--profile", "paper"]
        + ["--device", "cpu", "--refresh"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    runs = demo_project / "results/paper/demo/.run"

    def recomputed() -> int:  # staged (or, as before, written over the committed entries)
        staged = len(list(runs.glob("*/stage/**/moments/*.json")))
        now = _entries(demo_project)
        return max(staged, sum(now.get(k) != v for k, v in entries.items()))

    deadline = time.time() + 60
    while time.time() < deadline and recomputed() < 3:
        time.sleep(0.1)
    assert recomputed() == 3
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert _entries(demo_project) == entries
    assert _published(demo_project) == before
    assert "discarded" in err and "no result was changed" in err
    (demo_project / "notebooks" / "demo.md").write_text(source)
    done = _paper_run("--refresh")
    assert done.returncode == 0, done.stderr
    assert "replaced 3 cached result(s)" in done.stdout
    after = _entries(demo_project)
    assert set(after) == set(entries) and all(after[k] != entries[k] for k in entries)


# ---- the swap of a run's outputs is all or nothing ------------------------------------------


def test_a_swap_that_fails_half_way_puts_every_file_back(ran_demo):
    """A figure that cannot be replaced (a folder stands at its path): the run fails and the
    claims report, run record and page it had already swapped in are put back (they stayed
    replaced, the figure not)."""
    demo_project = ran_demo("paper")
    page = demo_project / "book/chapters/demo.ipynb"
    claims = demo_project / "data/claims/demo.yaml"
    claims.write_text(claims.read_text().replace('expect: "< 0.5"', 'expect: "< 0.6"'))
    figure = demo_project / "results/paper/figures/demo/moments.png"
    figure.unlink()
    figure.mkdir()
    (figure / "keep").write_text("a folder where the figure goes")
    before = _published(demo_project)
    before_page = page.read_bytes()
    result = _paper_run()
    assert result.returncode != 0
    assert _published(demo_project) == before and page.read_bytes() == before_page


SWAP_SCRIPT = """
import sys
from pathlib import Path
from implicit_bias.core.tools.run_safety import swap_in
run = Path(sys.argv[1])
moves = [(Path(a), Path(b)) for a, b in zip(sys.argv[2::2], sys.argv[3::2])]
swap_in(moves, run)
"""


def _swap_setup(tmp_path):
    """A run folder with four staged files: two replace files in place (one in another
    folder), two are new (one in a folder that does not exist yet)."""
    chapter_run = tmp_path / "results/.run"
    run = chapter_run / "0123456789ab"
    stage = run / "stage"
    stage.mkdir(parents=True)
    (chapter_run / "0123456789ab.lock").write_text("")
    targets = [
        tmp_path / "results/claims/demo.json",
        tmp_path / "results/figures/demo/new.png",
        tmp_path / "book/demo.ipynb",
        tmp_path / "results/demo/moments/new.json",
    ]
    for i, target in enumerate(targets):
        (stage / f"{i}").write_text(f"new {i}")
        if "new" not in target.name:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"old {i}")
    moves = [(stage / f"{i}", t) for i, t in enumerate(targets)]
    return chapter_run, run, moves


def _state(moves) -> list[str | None]:
    return [t.read_text() if t.exists() else None for _, t in moves]


@pytest.mark.parametrize("step", range(5))
def test_a_swap_killed_at_any_step_is_put_back_by_the_next_run(tmp_path, step):
    """SIGKILL just before each rename of the swap (and after the last, before the journal is
    removed): the files swapped so far are in place until the next run of the chapter, which
    puts every old file back before it starts (`clean_dead_runs`): all or nothing."""
    import os
    import signal
    import subprocess
    import sys

    from implicit_bias.core.tools.run_safety import FAULT_ENV, JOURNAL, clean_dead_runs

    chapter_run, run, moves = _swap_setup(tmp_path)
    before = _state(moves)
    args = [str(p) for move in moves for p in move]
    done = subprocess.run(
        [sys.executable, "-c", SWAP_SCRIPT, str(run), *args],
        env={**os.environ, FAULT_ENV: str(step)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (run / JOURNAL).exists()
    assert clean_dead_runs(chapter_run) == ["0123456789ab"]
    assert _state(moves) == before
    assert not run.exists() and not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("step", range(5))
def test_a_swap_that_fails_at_any_step_puts_every_file_back_at_once(tmp_path, step, monkeypatch):
    from implicit_bias.core.tools.run_safety import FAULT_ENV, JOURNAL, swap_in

    _, run, moves = _swap_setup(tmp_path)
    before = _state(moves)
    monkeypatch.setenv(FAULT_ENV, f"{step}:error")
    with pytest.raises(OSError, match="fault injected"):
        swap_in(moves, run)
    assert _state(moves) == before and not (run / JOURNAL).exists()
    monkeypatch.delenv(FAULT_ENV)
    swap_in(moves, run)  # and a swap that completes puts every new file in place
    assert _state(moves) == [f"new {i}" for i in range(4)]


def test_a_run_killed_half_way_through_its_swap_changes_nothing(ran_demo):
    """The runner's own swap, killed after two of its renames: the next run puts the files
    back before anything else, then completes."""
    import signal

    from implicit_bias.core.tools.run_safety import clean_dead_runs

    demo_project = ran_demo("paper")
    claims = demo_project / "data/claims/demo.yaml"
    claims.write_text(claims.read_text().replace('expect: "< 0.5"', 'expect: "< 0.6"'))
    before = _published(demo_project)
    killed = _paper_run(env={"IMPLICIT_BIAS_FAULT_SWAP": "2"})  # run_safety.FAULT_ENV
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _published(demo_project) != before  # half swapped, until the next run
    clean_dead_runs(demo_project / "results/paper/demo/.run")  # what the next run does first
    assert _published(demo_project) == before
    assert _paper_run().returncode == 0
    assert b"< 0.6" in _published(demo_project)["results/paper/claims/demo.json"]


def test_a_swap_whose_roll_back_fails_too_is_put_back_by_the_next_run(tmp_path, monkeypatch):
    """The roll-back itself fails (a second error): the run folder keeps its journal and
    backups, and the next run of the chapter puts every old file back."""
    from implicit_bias.core.tools import run_safety

    chapter_run, run, moves = _swap_setup(tmp_path)
    before = _state(moves)
    real = run_safety.roll_back

    def fails(journal):
        raise OSError(5, "roll-back failed")

    monkeypatch.setattr(run_safety, "roll_back", fails)
    monkeypatch.setenv(run_safety.FAULT_ENV, "2:error")
    with pytest.raises(OSError, match="roll-back failed"):
        with run_safety.RunFolder(chapter_run, "0123456789ab"):
            run_safety.swap_in(moves, run)
    assert (run / run_safety.JOURNAL).exists() and _state(moves) != before
    monkeypatch.setattr(run_safety, "roll_back", real)
    assert run_safety.clean_dead_runs(chapter_run) == ["0123456789ab"]
    assert _state(moves) == before and not run.exists()
