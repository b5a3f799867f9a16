import json
import subprocess
import sys

import pytest

from implicit_bias.core.chapter import Chapter, ProfileError, load_profile
from implicit_bias.core.engine.device import resolve_device
from implicit_bias.core.site.status_page import write_status_page
from implicit_bias.core.tools.runner import format_status


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "implicit_bias", *args], capture_output=True, text=True, env=env
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "gln_norm", "--profile", "nonsense"], "valid: smoke, paper"),
        (["run", "no_such_chapter"], "unknown chapter 'no_such_chapter'; valid:"),
        (["run", "gln_norm", "--device", "tpu"], "valid values: auto, cpu, cuda, cuda:N\n"),
    ],
)
def test_cli_rejects_bad_arguments(args, message):
    result = cli(*args)
    assert result.returncode != 0
    assert message in result.stderr


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="valid values"):
        resolve_device("gpu")


def test_profiles_are_validated(demo_project):
    assert load_profile("demo", "smoke") == {"n": 50, "seed": 0}
    with pytest.raises(ProfileError, match="valid: smoke, paper"):
        load_profile("demo", "fast")
    path = demo_project / "data" / "profiles" / "demo.yaml"
    path.write_text("smoke: {n: 1}\npaper: {n: 2, extra: 3}\n")
    with pytest.raises(ProfileError, match="same keys"):
        load_profile("demo", "smoke")
    with pytest.raises(ValueError, match="unknown chapter"):
        Chapter("nope")


def test_sweep_workers_come_from_the_profile(demo_project):
    import os

    assert Chapter("demo", device="cpu").workers == 1  # no `workers` key: serial
    path = demo_project / "data" / "profiles" / "demo.yaml"
    path.write_text("smoke: {n: 1, workers: auto}\npaper: {n: 2, workers: 3}\n")
    assert Chapter("demo", device="cpu").workers == (os.cpu_count() or 1)
    assert Chapter("demo", "paper", device="cpu").workers == 3
    path.write_text("smoke: {n: 1, workers: 0}\npaper: {n: 2, workers: many}\n")
    for profile in ("smoke", "paper"):
        with pytest.raises(ProfileError, match="workers must be a positive integer"):
            _ = Chapter("demo", profile, device="cpu").workers


def test_demo_chapter_executes_end_to_end(demo_project):
    import os

    result = cli("run", "demo", "--profile", "smoke", "--device", "cpu", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    # the kernel is reached over IPC sockets: no "running over TCP without encryption" warning
    assert "WARNING" not in result.stderr and "encryption" not in result.stderr, result.stderr
    executed = json.loads((demo_project / "book" / "chapters" / "demo.ipynb").read_text())
    tags = [c["metadata"].get("tags", []) for c in executed["cells"]]
    assert any("injected-parameters" in t and "remove-cell" in t for t in tags)
    html = [
        "".join(o["data"]["text/html"])
        for c in executed["cells"]
        for o in c.get("outputs", [])
        if "text/html" in o.get("data", {})
    ]
    figures = [h for h in html if "<figure class='book-figure'" in h]
    assert len(figures) == 1 and "<strong>Figure 1.</strong>" in figures[0]
    assert "alt='One panel: a panel, series: mean.'" in figures[0]
    assert not any(
        "image/png" in o.get("data", {}) for c in executed["cells"] for o in c.get("outputs", [])
    )  # shown once, in the captioned figure
    streams = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("name")]
    assert not [o for o in streams if o["name"] == "stderr"]  # no progress bar in the page
    progress = json.loads((demo_project / "results/smoke/demo/.run/progress.json").read_text())
    assert progress == {"sweep": "moments", "total": 3, "done": 3, "cached": 0, "failed": 0}
    record = "".join(executed["cells"][-1]["source"])  # the chapter ends with its run record
    assert record.startswith("## Run record") and "| profile | `smoke` |" in record
    assert "3 computed in this run, 0 read from the cache, 0 failed" in record
    assert "| code | commit `" in record and " UTC |" in record
    run = json.loads((demo_project / "results/smoke/demo/run.json").read_text())
    assert run["ok"] and run["claims"] == {"does not reproduce": 1, "pass": 1}
    assert (demo_project / "results/smoke/figures/demo/moments.png").exists()
    assert "mean_is_small" in format_status()
    page = write_status_page().read_text()
    assert "does not reproduce" in page and "mean_is_small" in page


def test_failing_chapter_exits_nonzero(demo_project):
    import os

    nb = demo_project / "notebooks" / "demo.md"
    nb.write_text(nb.read_text().replace("ch.check_claims(metrics)", "1 / 0"))
    result = cli("run", "demo", "--device", "cpu", env=dict(os.environ))
    assert result.returncode == 1
    assert "ZeroDivisionError" in result.stderr


def _claims_file(demo_project):
    return demo_project / "data" / "claims" / "demo.yaml"


@pytest.mark.parametrize(
    "edit,named",
    [
        (('expect: "< 0.5"', 'expect: "> 0.5"'), "mean_is_small: fail"),
        (
            ('expect: "in [1.9, 2.1]"', 'expect: "in [0.5, 2.1]"'),
            "variance_is_two: unexpected pass",
        ),
    ],
)
def test_run_fails_naming_claims_that_are_not_as_expected(demo_project, edit, named):
    import os

    path = _claims_file(demo_project)
    path.write_text(path.read_text().replace(*edit))
    result = cli("run", "demo", "--device", "cpu", env=dict(os.environ))
    assert result.returncode == 1
    assert named in result.stderr


def test_failed_execution_is_never_published_nor_its_old_claims_shown(ran_demo):
    import os

    env = dict(os.environ)
    demo_project = ran_demo("smoke")
    published = demo_project / "book" / "chapters" / "demo.ipynb"
    good = published.read_text()
    nb = demo_project / "notebooks" / "demo.md"
    nb.write_text(nb.read_text().replace("ch.check_claims(metrics)", "1 / 0"))
    result = cli("run", "demo", "--device", "cpu", env=env)
    assert result.returncode == 1 and "ZeroDivisionError" in result.stderr
    assert published.read_text() == good  # the last complete execution stays published
    assert (demo_project / "results/smoke/demo/.run/failed.ipynb").exists()
    # the claims report and run record stay those of the last complete run, which is the one
    # published; the failed run's record is kept beside its notebook
    report = json.loads((demo_project / "results/smoke/claims/demo.json").read_text())
    run = json.loads((demo_project / "results/smoke/demo/run.json").read_text())
    assert run["ok"] and report["counts"] == run["claims"]
    failed = json.loads((demo_project / "results/smoke/demo/.run/last-failed-run.json").read_text())
    assert failed["claims"] is None and not failed["ok"]


def test_run_record_counts_tasks_and_prunes_what_the_run_no_longer_uses(ran_demo):
    import os

    env = dict(os.environ)
    demo_project = ran_demo("smoke")
    run = json.loads((demo_project / "results/smoke/demo/run.json").read_text())
    assert run["tasks"]["computed"] == 3 and run["tasks"]["devices"] == ["cpu"]
    folder = demo_project / "results/smoke/demo/moments"
    orphan = folder / ("0" * 64 + ".json")
    orphan.write_text("{}")
    assert cli("run", "demo", "--device", "cpu", env=env).returncode == 0
    run = json.loads((demo_project / "results/smoke/demo/.run/last-run.json").read_text())
    assert run["tasks"]["cached"] == 3 and run["tasks"]["computed"] == 0
    assert not orphan.exists() and len(list(folder.glob("*.json"))) == 3


def test_failed_tasks_make_the_run_fail_and_are_retried(demo_project):
    import os

    tasks = demo_project / "tests_demo_tasks.py"
    source = tasks.read_text()
    tasks.write_text(
        source.replace(
            "    x = np.random",
            '    if task["seed"] == 1:\n'
            '        raise MemoryError("out of memory")\n'
            "    x = np.random",
        )
    )
    env = dict(os.environ)
    result = cli("run", "demo", "--device", "cpu", env=env)
    assert result.returncode == 1
    assert "MemoryError: out of memory" in result.stderr and "{'n': 50, 'seed': 1}" in result.stderr
    # the run's claims report is kept for whoever debugs it; the results stay as they were
    report = json.loads((demo_project / "results/smoke/demo/.run/failed-claims.json").read_text())
    assert {row["status"] for row in report["claims"]} == {"missing tasks"}
    assert not (demo_project / "results/smoke/claims/demo.json").exists()
    assert "left as they were: 1 task(s) failed" in result.stderr
    tasks.write_text(source)  # the cause is fixed: the next run computes the task
    result = cli("run", "demo", "--device", "cpu", env=env)
    assert result.returncode == 0, result.stderr
    run = json.loads((demo_project / "results/smoke/demo/run.json").read_text())
    assert run["tasks"]["failed"] == 0 and run["tasks"]["total"] == 3


def test_compare_and_baselines_fail_with_a_message(demo_project, tmp_path):
    result = cli(
        "compare",
        "demo",
        "--reference",
        str(tmp_path / "none"),
        "--candidate",
        str(tmp_path / "none2"),
    )
    assert result.returncode == 2 and "no paper-profile results" in result.stderr
    assert "Traceback" not in result.stderr
    import os

    result = cli("baselines", "demo", env=dict(os.environ))  # nothing executed yet
    assert result.returncode == 2 and "run the chapter first" in result.stderr
    assert "Traceback" not in result.stderr
    result = cli("baselines", "no_such_chapter", env=dict(os.environ))
    assert result.returncode == 2 and "unknown chapter" in result.stderr


def test_compare_writes_its_figure_report_with_claims_present(ran_demo, tmp_path):
    """A candidate with claims reports: the figure report still goes to its folder."""
    import os

    env = dict(os.environ)
    demo_project = ran_demo("smoke")
    results = str(demo_project / "results")
    report = tmp_path / "report"
    result = cli(
        "compare",
        "demo",
        "--profile",
        "smoke",
        "--reference",
        results,
        "--candidate",
        results,
        "--report",
        str(report),
        env=env,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert (report / "index.html").exists() and (report / "summary.json").exists()
    # the demo chapter's deliberate known deviation keeps the claims ok
    assert result.returncode == 0, result.stdout + result.stderr


def test_warnings_go_to_the_terminal_not_the_page(demo_project):
    import os

    nb = demo_project / "notebooks" / "demo.md"
    nb.write_text(
        nb.read_text().replace(
            "ch.check_claims(metrics)",
            'import warnings\nwarnings.warn("solution may be inaccurate")\n'
            "ch.check_claims(metrics)",
        )
    )
    result = cli("run", "demo", "--device", "cpu", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert "solution may be inaccurate" in result.stderr  # in the terminal
    executed = json.loads((demo_project / "book" / "chapters" / "demo.ipynb").read_text())
    streams = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("name")]
    assert not [o for o in streams if o["name"] == "stderr"]  # not in the page


def test_rendering_again_from_the_cache_leaves_the_results_as_committed(demo_project):
    """`make book` on a fresh clone executes every chapter from its committed cache: the run
    record and each figure's provenance stay those of the run that computed the results (a
    clean commit), and the new run's record goes to the run folder."""
    import os
    import subprocess

    env = dict(os.environ)

    def git(*args):
        subprocess.run(["git", *args], cwd=demo_project, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "0")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "code")
    assert cli("run", "demo", "--device", "cpu", env=env).returncode == 0
    results = demo_project / "results"
    tracked = [
        results / "smoke/demo/run.json",
        results / "smoke/figures/demo/provenance/moments.json",
    ]
    first = [p.read_bytes() for p in tracked]
    provenance = json.loads(tracked[1].read_text())
    assert "+" not in provenance["commit"] and provenance["commit"] != "unknown"
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "results")
    assert cli("run", "demo", "--device", "cpu", env=env).returncode == 0
    assert [p.read_bytes() for p in tracked] == first
    again = json.loads((results / "smoke/demo/.run/last-run.json").read_text())
    assert again["tasks"]["computed"] == 0
    # a run with other results (the profile's sample size changed, not committed) writes them
    profiles = demo_project / "data/profiles/demo.yaml"
    profiles.write_text(profiles.read_text().replace("n: 50", "n: 60"))
    assert cli("run", "demo", "--device", "cpu", env=env).returncode == 0
    run = json.loads(tracked[0].read_text())
    assert run["tasks"]["computed"] == 3
    assert json.loads(tracked[1].read_text())["commit"].endswith("+ changes")


def test_the_run_record_says_what_its_commit_is():
    """The run record's commit executed the page; where it read results from the cache, the
    record says that their commits are in the figures' provenance (a reader met three hashes
    on the way, none saying what it was)."""
    from datetime import UTC, datetime

    from implicit_bias.core.tools.runner import run_record_markdown

    def record(cached: int) -> str:
        tasks = {"computed": 3 - cached, "cached": cached, "failed": 0}
        return run_record_markdown("paper", "cpu", 1.0, tasks, 2.0, datetime.now(UTC))

    assert "which executed this page; the results it read from the cache" in record(2)
    assert "which executed this page |" in record(0)
