import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from implicit_bias.core.engine.fingerprint import fingerprint
from implicit_bias.core.engine.sweep import (
    CACHED_ONLY_ENV,
    WARNINGS_ENV,
    NotCachedError,
    ResultCache,
    SweepOutcome,
    sweep,
    task_hash,
)
from sweep_tasks import cube, flaky, not_json, square, warns

TESTS = Path(__file__).resolve().parents[1]  # where sweep_tasks.py lives


def test_results_in_task_order_and_cached(tmp_path):
    tasks = [{"x": x} for x in range(5)]
    first = sweep(square, tasks, tmp_path, progress=False)
    assert [r["y"] for r in first] == [0, 1, 4, 9, 16]
    assert all(r["status"] == "ok" for r in first)
    assert len(list(tmp_path.glob("*.json"))) == 5
    log = tmp_path / "log"
    log.mkdir()
    again = sweep(
        square, [{**t, "log": str(log)} for t in tasks[:2]] + tasks, tmp_path, progress=False
    )
    assert len(list(log.iterdir())) == 2  # only the two new tasks ran
    assert [r["y"] for r in again[2:]] == [r["y"] for r in first]


def test_a_cached_only_sweep_reads_the_cache_and_computes_nothing(tmp_path, monkeypatch):
    tasks = [{"x": x} for x in range(3)]
    sweep(square, tasks[:2], tmp_path, progress=False)
    monkeypatch.setenv(CACHED_ONLY_ENV, "1")
    assert [r["y"] for r in sweep(square, tasks[:2], tmp_path, progress=False)] == [0, 1]
    with pytest.raises(NotCachedError, match="1 of the 3 tasks are not in the cache"):
        sweep(square, tasks, tmp_path, progress=False)
    assert len(list(tmp_path.glob("*.json"))) == 2  # the missing task was not computed


def test_task_hash_ignores_key_order():
    assert task_hash({"a": 1, "b": [1, 2]}) == task_hash({"b": [1, 2], "a": 1})
    assert task_hash({"a": 1}) != task_hash({"a": 2})


def test_failure_is_returned_not_raised_and_never_cached(tmp_path):
    outcome = SweepOutcome("demo")
    results = sweep(
        square, [{"x": 2, "fail": True}, {"x": 3}], tmp_path, progress=False, outcome=outcome
    )
    assert results[0]["status"] == "error" and "solver died" in results[0]["error"]
    assert results[1]["y"] == 9
    assert len(list(tmp_path.glob("*.json"))) == 1  # only the success is stored
    assert outcome.computed == 1 and len(outcome.errors) == 1
    assert outcome.errors[0]["task"] == {"x": 2, "fail": True}


def test_failed_task_is_retried_once_its_cause_is_fixed(tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    task = {"x": 1, "gate": str(gate)}
    assert sweep(flaky, [task], tmp_path / "c", progress=False)[0]["status"] == "error"
    gate.unlink()  # the data file arrives
    again = sweep(flaky, [task], tmp_path / "c", progress=False)[0]
    assert again["status"] == "ok" and again["y"] == 2


def test_corrupted_entry_is_recomputed(tmp_path):
    task = {"x": 7}
    sweep(square, [task], tmp_path, progress=False)
    path = ResultCache(tmp_path).path(task)
    path.write_text('{"task": {"x": 7}, "result": {"y": 4')  # truncated write
    assert ResultCache(tmp_path).get(task) is None
    assert sweep(square, [task], tmp_path, progress=False)[0]["y"] == 49
    assert json.loads(path.read_text())["result"]["y"] == 49


@pytest.mark.parametrize("edit", ["wrong shape", "edited value", "other schema", "old format"])
def test_well_formed_but_wrong_entry_is_recomputed(tmp_path, edit):
    task = {"x": 7}
    sweep(square, [task], tmp_path, progress=False)
    path = ResultCache(tmp_path).path(task)
    entry = json.loads(path.read_text())
    if edit == "wrong shape":
        entry["result"] = [49]
    elif edit == "edited value":
        entry["result"]["y"] = 50  # the checksum no longer matches
    elif edit == "other schema":
        entry["schema"] = 99
    else:
        entry = {"task": entry["task"], "result": entry["result"]}
    path.write_text(json.dumps(entry))
    cache = ResultCache(tmp_path, fingerprint(square))
    assert cache.get(task) is None
    assert sweep(square, [task], tmp_path, progress=False)[0]["y"] == 49
    assert cache.get(task)["y"] == 49


def test_results_of_other_code_are_not_served(tmp_path):
    task = {"x": 2}
    sweep(square, [task], tmp_path, progress=False)
    # the same cache folder, the same task, another function (a code change): recomputed
    assert sweep(cube, [task], tmp_path, progress=False)[0]["y"] == 8
    entry = json.loads(ResultCache(tmp_path).path(task).read_text())
    assert entry["fingerprint"] == fingerprint(cube) and entry["fn"].endswith(":cube")


def test_non_json_result_is_an_error_and_leaves_no_file(tmp_path):
    result = sweep(not_json, [{"x": 1}], tmp_path, progress=False)[0]
    assert result["status"] == "error" and "TypeError" in result["error"]
    assert list(tmp_path.iterdir()) in ([], [tmp_path / ".locks"])


LOCKED = """
import sys
sys.path.insert(0, {tests!r})
from implicit_bias.core.engine.sweep import sweep
from sweep_tasks import square
sweep(square, [{{"x": x, "sleep": 0.2, "log": {log!r}}} for x in range(6)], {cache!r},
      progress=False)
"""


def test_two_processes_never_compute_a_task_twice(tmp_path):
    log, cache = tmp_path / "log", tmp_path / "cache"
    log.mkdir()
    script = LOCKED.format(tests=str(TESTS), log=str(log), cache=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(2)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    ran = sorted(int(p.name.split(".")[0]) for p in log.iterdir())
    assert ran == list(range(6))  # each task once, whichever process got it


def test_refresh_recomputes(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    tasks = [{"x": 1, "log": str(log)}]
    sweep(square, tasks, tmp_path / "c", progress=False)
    sweep(square, tasks, tmp_path / "c", progress=False, refresh=True)
    assert len(list(log.iterdir())) == 2


def test_non_json_task_is_rejected(tmp_path):
    with pytest.raises(TypeError):
        sweep(square, [{"x": object()}], tmp_path, progress=False)


def test_unknown_backend(tmp_path):
    with pytest.raises(ValueError, match="valid: serial, joblib, dask"):
        sweep(square, [{"x": 1}], tmp_path, backend="slurm", progress=False)


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from implicit_bias.core.engine.sweep import sweep
from sweep_tasks import square
tasks = [{{"x": x, "sleep": 0.3, "log": {log!r}}} for x in range(12)]
sweep(square, tasks, {cache!r}, progress=False)
"""


def test_interrupted_sweep_resumes_with_only_missing_tasks(tmp_path):
    log, cache = tmp_path / "log", tmp_path / "cache"
    log.mkdir()
    script = SCRIPT.format(tests=str(TESTS), log=str(log), cache=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while len(list(cache.glob("*.json"))) < 5 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # killed half way, mid-task
    proc.wait()
    done_before = {json.loads(p.read_text())["task"]["x"] for p in cache.glob("*.json")}
    assert 5 <= len(done_before) < 12
    started_before = set(log.iterdir())
    subprocess.run([sys.executable, "-c", script], check=True)
    ran_again = {int(p.name.split(".")[0]) for p in set(log.iterdir()) - started_before}
    assert ran_again == set(range(12)) - done_before
    assert len(list(cache.glob("*.json"))) == 12


def test_cost_starts_the_longest_tasks_first_and_keeps_the_result_order(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    tasks = [{"x": x, "log": str(log)} for x in (3, 1, 4, 5, 2)]
    out = sweep(square, tasks, tmp_path / "cache", progress=False, cost=lambda t: t["x"])
    assert [r["y"] for r in out] == [9, 1, 16, 25, 4]
    started = sorted(log.iterdir(), key=lambda p: int(p.name.split(".")[2]))
    assert [int(p.name.split(".")[0]) for p in started] == [5, 4, 3, 2, 1]
    log2 = tmp_path / "log2"
    log2.mkdir()
    sweep(square, [{**t, "log": str(log2)} for t in tasks], tmp_path / "c2", progress=False)
    started = sorted(log2.iterdir(), key=lambda p: int(p.name.split(".")[2]))
    assert [int(p.name.split(".")[0]) for p in started] == [3, 1, 4, 5, 2]  # no cost: as given


def test_joblib_matches_serial(tmp_path):
    tasks = [{"x": x} for x in range(6)]
    serial = sweep(square, tasks, tmp_path / "a", progress=False)
    parallel = sweep(square, tasks, tmp_path / "b", backend="joblib", n_jobs=2, progress=False)
    assert [r["y"] for r in serial] == [r["y"] for r in parallel]


def test_warnings_of_worker_processes_go_to_the_chapters_log(tmp_path, monkeypatch):
    """Under the runner a chapter's warnings go to its log, not the page; a sweep's worker
    processes send theirs there too (their stderr reached the page)."""
    log = tmp_path / "warnings.log"
    monkeypatch.setenv(WARNINGS_ENV, str(log))
    tasks = [{"x": x} for x in range(4)]
    sweep(warns, tasks, tmp_path / "cache", backend="joblib", n_jobs=2, progress=False)
    text = log.read_text()
    assert all(f"solution {x} may be inaccurate" in text for x in range(4))


def test_dask_local_cluster_matches_local(tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    )
    tasks = [{"x": x} for x in range(6)]
    local = sweep(square, tasks, tmp_path / "a", progress=False)
    distributed = sweep(
        square, tasks, tmp_path / "b", backend="dask", scheduler="local", progress=False
    )
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in local]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in distributed]


def test_an_entry_of_moved_code_is_reused_and_relabelled(tmp_path):
    task = {"x": 4}
    sweep(square, [task], tmp_path, progress=False)
    path = ResultCache(tmp_path).path(task)
    assert json.loads(path.read_text())["fn"] == "sweep_tasks:square"
    # the same code (same fingerprint) now reached under another name: reused, relabelled
    cache = ResultCache(tmp_path, fingerprint(square))
    assert cache.get(task, fn=cube)["y"] == 16
    assert json.loads(path.read_text())["fn"] == "sweep_tasks:cube"


def test_a_fresh_result_is_what_a_cache_hit_returns(tmp_path):
    tasks = [{"x": 3}]
    fresh = sweep(square, tasks, tmp_path, progress=False)[0]
    cached = sweep(square, tasks, tmp_path, progress=False)[0]
    assert list(fresh) == list(cached) and fresh == cached


def test_entries_record_their_kernels_and_other_kernels_are_recomputed(tmp_path):
    from implicit_bias.core.engine.sweep import _checksum, current_kernels, kernels_problem

    task = {"x": 3}
    sweep(square, [task], tmp_path, progress=False)
    path = ResultCache(tmp_path).path(task)
    entry = json.loads(path.read_text())
    assert entry["kernels"] == current_kernels() and kernels_problem(entry) is None
    # an entry computed under other kernels is stale: not served, recomputed
    entry["kernels"] = {"state": "native (IMPLICIT_BIAS_NATIVE_KERNELS is set)", "cpu": "x"}
    entry["result"]["y"] = 10  # what those kernels computed, say
    entry["checksum"] = _checksum(entry)
    path.write_text(json.dumps(entry))
    cache = ResultCache(tmp_path, fingerprint(square))
    assert cache.read(task)[0] is None and "other kernels" in cache.read(task)[1]
    assert sweep(square, [task], tmp_path, progress=False)[0]["y"] == 9
    # an entry written before kernels were recorded is served as it is
    entry = json.loads(path.read_text())
    del entry["kernels"]
    entry["checksum"] = _checksum(entry)
    path.write_text(json.dumps(entry))
    assert cache.get(task)["y"] == 9


def test_a_pinned_entry_is_never_replaced_by_an_unpinned_result(tmp_path, monkeypatch):
    from implicit_bias.core.engine import kernels
    from implicit_bias.core.engine.sweep import _checksum

    task = {"x": 3}
    cache = ResultCache(tmp_path, fingerprint(square))
    monkeypatch.setenv(kernels.STATE, kernels.PINNED_STATE)
    cache.put(task, {"status": "ok", "y": 9}, square)
    pinned = cache.path(task).read_bytes()
    # a process without the pin (numpy loaded first): its result is not stored over the entry
    monkeypatch.setenv(kernels.STATE, "native (numpy loaded before implicit_bias)")
    assert cache.read(task)[0] is None  # not served to it either
    assert sweep(square, [task], tmp_path, progress=False)[0]["y"] == 9
    cache.put(task, {"status": "ok", "y": 10}, square)
    assert cache.path(task).read_bytes() == pinned
    # can fail: an unpinned entry, or a pinned one of other code, is replaced as before
    entry = json.loads(pinned)
    entry["fingerprint"] = "other code"
    entry["checksum"] = _checksum(entry)
    cache.path(task).write_text(json.dumps(entry))
    cache.put(task, {"status": "ok", "y": 10}, square)
    assert json.loads(cache.path(task).read_text())["result"]["y"] == 10
    cache.put(task, {"status": "ok", "y": 11}, square)  # native over native
    assert json.loads(cache.path(task).read_text())["result"]["y"] == 11
    monkeypatch.setenv(kernels.STATE, kernels.PINNED_STATE)  # pinned over native
    cache.put(task, {"status": "ok", "y": 9}, square)
    assert json.loads(cache.path(task).read_text())["kernels"]["state"] == kernels.PINNED_STATE


def test_stale_lists_committed_entries_of_other_kernels(tmp_path):
    from implicit_bias.core.engine.sweep import _checksum
    from implicit_bias.core.tools.verify import stale_entries

    folder = tmp_path / "paper" / "demo" / "squares"
    sweep(square, [{"x": 2}], folder, progress=False)
    assert stale_entries("paper", root=tmp_path) == []
    path = next(folder.glob("*.json"))
    entry = json.loads(path.read_text())
    entry["kernels"] = {"state": "native (a arm64 CPU)", "cpu": "y"}
    entry["checksum"] = _checksum(entry)
    path.write_text(json.dumps(entry))
    [item] = stale_entries("paper", root=tmp_path)
    assert "other kernels" in item["reason"]


def test_a_result_without_the_asked_key_names_its_entry():
    """An entry of valid checksum but another shape (code outside the fingerprint changed
    what the task returns) reaches the chapter with its file named, not as a bare KeyError."""
    import pickle

    from implicit_bias.core.engine.sweep import MissingResultKey, TaskResult

    result = TaskResult({"status": "ok", "x": 1.0}, "results/smoke/demo/runs/abc.json")
    assert (
        result["x"] == 1.0
        and result.get("y") is None
        and dict(result) == {"status": "ok", "x": 1.0}
    )
    with pytest.raises(MissingResultKey) as err:
        result["y"]
    message = str(err.value)
    assert "results/smoke/demo/runs/abc.json" in message and "'y'" in message
    assert "status, x" in message
    copy = pickle.loads(pickle.dumps(result))
    assert copy == result and copy.entry == result.entry
    assert json.loads(json.dumps(result)) == {"status": "ok", "x": 1.0}


def test_chapter_sweeps_hand_out_results_that_name_their_entries(demo_project):
    from implicit_bias.core.chapter import Chapter
    from implicit_bias.core.engine.sweep import MissingResultKey

    ch = Chapter("demo", profile="smoke", device="cpu")
    (result,) = ch.sweep(square, [{"x": 3}], name="squares")
    assert result["y"] == 9
    with pytest.raises(MissingResultKey, match=r"results/smoke/demo/squares/[0-9a-f]{64}\.json"):
        result["no_such_key"]


def test_entries_record_their_cpu_seconds_beside_wall_apart_from_the_result(tmp_path):
    from implicit_bias.core.engine.sweep import _checksum, entry_problem
    from implicit_bias.core.tools.runner import cached_task_cost

    task = {"x": 5}
    result = sweep(square, [task], tmp_path, progress=False)[0]
    path = ResultCache(tmp_path).path(task)
    entry = json.loads(path.read_text())
    timing = entry["timing"]
    assert set(timing) == {"wall_s", "cpu_s", "load"} and timing["cpu_s"] >= 0
    assert timing["wall_s"] == round(entry["result"]["seconds"], 3)
    assert "timing" not in result and "cpu_s" not in entry["result"]  # not a result
    tampered = {**entry, "timing": {**timing, "cpu_s": timing["cpu_s"] + 99}}
    assert entry_problem(tampered) == "checksum mismatch"  # the checksum covers it
    # an entry written before timings were recorded is served as it is, counted as wall only
    del entry["timing"]
    entry["checksum"] = _checksum(entry)
    path.write_text(json.dumps(entry))
    assert ResultCache(tmp_path, fingerprint(square)).get(task)["y"] == 25
    sweep(square, [{"x": 6}], tmp_path, progress=False)
    (tmp_path / "sub").mkdir()
    for p in tmp_path.glob("*.json"):
        p.rename(tmp_path / "sub" / p.name)
    cost = cached_task_cost(tmp_path)
    assert cost["entries"] == 2 and cost["entries_with_cpu"] == 1


def test_a_relabelled_entry_keeps_its_timing(tmp_path):
    task = {"x": 4}
    sweep(square, [task], tmp_path, progress=False)
    path = ResultCache(tmp_path).path(task)
    before = json.loads(path.read_text())["timing"]
    ResultCache(tmp_path, fingerprint(square)).get(task, fn=cube)
    after = json.loads(path.read_text())
    assert after["fn"] == "sweep_tasks:cube" and after["timing"] == before
