"""Shared fixtures: a copy of the demo project, and the chapters executed at the smoke profile."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

# Before any test module imports numpy or torch: the tests compute with the kernels the book
# pins (`implicit_bias.core.engine.kernels`), so a test's numbers are the same on every AVX2 CPU.
# Without
# it numpy kept its own AVX-512 loops here, and on a Zen 5 CPU the tensor chapter's Newton solve of
# Cor. 6 stopped at a KKT residual of 5e-10 instead of 1e-15 (its line search cannot resolve the
# last decrease), failing a test that an AVX2 machine passes.
import implicit_bias  # noqa: F401

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DEMO = TESTS / "fixtures" / "demo_project"


# `make test` runs the suite on three pytest-xdist workers (`-n 3`). The tests that execute the
# book's chapters, read what they wrote or build the website (the modules of BOOK_MODULES, whose
# tests use the smoke_chapter, smoke_book and built_site fixtures) share one session's smoke
# book, so one worker runs them in order while the others take the unit tests; every other test
# goes wherever a worker is free. (By module, in the controller, which sees test ids only:
# pytest-xdist's own `xdist_group` marks are lost under pytest 9.2, whose node ids xdist 3.8
# cannot suffix.)
BOOK_GROUP = "smoke-book"
BOOK_MODULES = {"tests/test_book.py", "tests/test_website.py"}


# The other workers take the longest tests first, so that the run ends on short ones: in the
# tests' own order the converged-evidence runs (20-36 s each) and the pinned recompute (52-100 s)
# came last (tests/test_c..., tests/test_r...), and one worker could still be on them when the
# rest were done. Wall seconds of the slowest tests in `make test` on the 2-core machine (node id
# prefixes; any other test counts as short, and a stale number only reorders).
LONG_TESTS = {
    "tests/test_recompute.py::test_committed_results_recompute_under_other_cpu_kernels": 70,
    "tests/core/test_kill_at_random.py::": 42,
    "tests/test_converged_evidence.py::test_no_claim_reads_an_unconverged_run[": 22,
    "tests/core/test_cluster.py::test_a_chapter_on_a_scheduler_with_two_worker_processes": 21,
    "tests/chapters/galu_expressivity/test_galu_expressivity_tasks.py::test_fig1_task_": 21,
    "tests/chapters/galu_expressivity/test_galu_expressivity_analysis.py::test_fig3_fig4_": 16,
    "tests/chapters/warped_imd/test_warped_imd_tasks.py::test_rk4_step_budget_": 15,
    "tests/core/test_runner.py::test_rendering_again_from_the_cache_": 15,
    "tests/core/test_status_page.py::test_the_committed_status_page_names_no_claim_by_id": 12,
}


def expected_seconds(scope: str) -> float:
    return next((s for prefix, s in LONG_TESTS.items() if scope.startswith(prefix)), 0.0)


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class BookGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return BOOK_GROUP if nodeid.split("::")[0] in BOOK_MODULES else nodeid

        def _assign_work_unit(self, node) -> None:
            """Before the first assignment: the book's group first (the largest scope: xdist
            orders scopes by size), then the other tests longest first (a stable sort: the
            rest keep their order)."""
            if not getattr(self, "_longest_first", False):
                queued = sorted(
                    self.workqueue.items(),
                    key=lambda item: (item[0] != BOOK_GROUP, -expected_seconds(item[0])),
                )
                self.workqueue.clear()
                self.workqueue.update(queued)
                self._longest_first = True
            super()._assign_work_unit(node)

    return BookGroupScheduling(config, log)


@pytest.fixture
def demo_project(tmp_path, monkeypatch):
    """A throwaway project root holding the demo chapter (its results land in tmp_path)."""
    root = tmp_path / "project"
    shutil.copytree(DEMO, root)
    monkeypatch.setenv("IMPLICIT_BIAS_ROOT", str(root))
    monkeypatch.delenv("IMPLICIT_BIAS_RESULTS", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), str(ROOT / "lib")]))
    monkeypatch.syspath_prepend(str(root))
    return root


def _demo_after_a_run(profile: str, base: Path) -> Path:
    """A copy of the demo project as `run demo --profile <profile> --device cpu` left it, made
    once under `base` (shared by the session's xdist workers: an flock makes one of them run it)
    and run in an environment of its own (no IMPLICIT_BIAS_ variable but the project root), as
    `demo_project` sets it."""
    import fcntl
    import subprocess

    folder = base / f"demo-after-a-{profile}-run"
    root, done = folder / "project", folder / "done"
    with open(base / f"demo-after-a-{profile}-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(DEMO, root)
            env = {k: v for k, v in os.environ.items() if not k.startswith("IMPLICIT_BIAS_")}
            env["IMPLICIT_BIAS_ROOT"] = str(root)
            env["PYTHONPATH"] = os.pathsep.join([str(root), str(ROOT / "lib")])
            run = [sys.executable, "-m", "implicit_bias", "run", "demo", "--profile", profile]
            result = subprocess.run(
                [*run, "--device", "cpu"], capture_output=True, text=True, env=env
            )
            assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
            done.write_text("")
    return root


@pytest.fixture
def ran_demo(demo_project, tmp_path_factory, worker_id):
    """`ran_demo(profile)` makes `demo_project` what a first, clean `run demo --profile
    <profile> --device cpu` in it leaves (that run's success asserted), for the tests that
    begin with one: a copy of one such run per test session, not a run (3 s of CPU) per test.
    The run writes no path of its project, so the copy is the run's outcome byte for byte."""
    base = tmp_path_factory.getbasetemp()
    if worker_id != "master":  # each xdist worker's base is in the session's own folder
        base = base.parent

    def ran(profile: str = "smoke") -> Path:
        shutil.copytree(_demo_after_a_run(profile, base), demo_project, dirs_exist_ok=True)
        return demo_project

    return ran


@pytest.fixture(scope="session")
def stale_smoke_entries():
    """The committed smoke cache's stale entries, listed before the smoke book runs (which
    recomputes them: `_smoke_runs` asks for this first), for
    `test_book.test_committed_smoke_cache_is_fresh`; in the one worker that runs the book (the
    other need not fingerprint every task function)."""
    from implicit_bias.core.tools.verify import stale_entries

    return stale_entries("smoke", root=ROOT / "results")


@pytest.fixture(scope="session")
def _smoke_runs(stale_smoke_entries):
    return {}


# Smoke wall times from the committed cache, each chapter alone on the 2-core machine
# (2026-12-08; s): the longest chapters start first.
SMOKE_SECONDS = {
    "gln_norm": 24,  # half of it the KKT check's two solves, computed at every render
    "separable_max_margin": 14,
    "tensor_networks": 14,
    "warped_imd": 12,
    "galu_expressivity": 12,
    "low_rank_invariants": 11,
    "untied_diagonal": 9,
    "deep_matrix_factorization": 8,
}


def _selected_chapters(session) -> list[str]:
    """The chapters the collected tests will execute at the smoke profile."""
    from implicit_bias.core.chapter import chapters

    wanted: set[str] = set()
    for item in session.items:
        names = getattr(item, "fixturenames", ())
        if "smoke_book" in names:
            return list(chapters())
        if "smoke_chapter" in names and hasattr(item, "callspec"):
            wanted.add(item.callspec.params.get("chapter"))
    return sorted(c for c in wanted if c)


def _run_smoke(chapter: str) -> dict:
    from implicit_bias.core.tools.runner import run_chapter

    return run_chapter(chapter, "smoke", "cpu")


def _run_in_parallel(chapters: list[str], runs: dict) -> None:
    """Execute `chapters` two at a time, each in its own process (chapters are independent and
    their tasks single-threaded, so two share a 2-core machine well), longest first."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(chapters, key=lambda c: -SMOKE_SECONDS.get(c, 60))
    print(f"\n[smoke book] executing {', '.join(order)}, two at a time", file=sys.stderr)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no state shared
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        for chapter, summary in zip(order, pool.map(_run_smoke, order)):
            runs[chapter] = summary
            print(
                f"[smoke book] {chapter}: ok={summary['ok']} {summary['seconds']} s",
                file=sys.stderr,
                flush=True,
            )


# The website's build (`jupyter-book build`, about 45 s on 2 cores) starts in the background as
# soon as the smoke book is rendered, where the session has website tests: it then runs while
# the book's own tests, which only read what the chapters wrote, take their turn in the same
# worker, instead of after them (`built_site` in tests/test_website.py waits for it).
SITE_HTML = ROOT / "_build" / "html"
_site_build: dict = {}


def _wants_site(session) -> bool:
    return any("built_site" in getattr(item, "fixturenames", ()) for item in session.items)


def start_site_build() -> None:
    """Write the status page and start building the site from the rendered book (once)."""
    import atexit
    import subprocess
    import tempfile

    from implicit_bias.core.site.status_page import write_status_page

    if _site_build:
        return
    write_status_page()
    shutil.rmtree(SITE_HTML, ignore_errors=True)  # no stale pages from earlier builds
    log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads would fill and stop it
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT)]
    process = subprocess.Popen(
        [*command, "-W", "-n", "--keep-going", "--builder", "html"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    atexit.register(process.kill)  # a session that ends before it is read (-x) stops it
    _site_build.update(log=log, process=process)


def finish_site_build() -> Path:
    """The built site (`_build/html`), once its build, started here if not yet, has ended."""
    start_site_build()
    code = _site_build["process"].wait()
    log = _site_build["log"]
    log.seek(0)
    assert code == 0, log.read()[-8000:]
    return SITE_HTML


@pytest.fixture
def smoke_chapter(_smoke_runs, chapter, request):
    """The run summary of `chapter` executed at the smoke profile on the CPU, once per test
    session and only for the chapters a selection asks for (`pytest -k gln_norm` runs one).
    The first use executes every chapter the session will need, two at a time, where the machine
    has two cores or more."""
    from implicit_bias.core.tools.runner import run_chapter

    if not _smoke_runs and (os.cpu_count() or 1) >= 2:
        selected = _selected_chapters(request.session)
        if len(selected) > 1:
            _run_in_parallel(selected, _smoke_runs)
            if _wants_site(request.session):  # then `selected` is the whole book
                start_site_build()
    if chapter not in _smoke_runs:
        print(f"\n[smoke book] executing {chapter} ...", file=sys.stderr, flush=True)
        _smoke_runs[chapter] = run_chapter(chapter, "smoke", "cpu")
        print(
            f"[smoke book] {chapter}: ok={_smoke_runs[chapter]['ok']} "
            f"{_smoke_runs[chapter]['seconds']} s",
            file=sys.stderr,
            flush=True,
        )
    return _smoke_runs[chapter]


@pytest.fixture(scope="session")
def smoke_book(_smoke_runs):
    """Every chapter of the book executed at the smoke profile (for the website test)."""
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.tools.runner import run_chapter

    missing = [c for c in chapters() if c not in _smoke_runs]
    if len(missing) > 1 and (os.cpu_count() or 1) >= 2:
        _run_in_parallel(missing, _smoke_runs)
    for chapter in chapters():
        if chapter not in _smoke_runs:
            _smoke_runs[chapter] = run_chapter(chapter, "smoke", "cpu")
    return _smoke_runs


@pytest.fixture(autouse=True)
def _close_figures():
    """Close the figures a test drew: a worker runs hundreds of tests, and pyplot keeps every
    open figure (it warns past 20, and the warning lands in the suite's summary)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
