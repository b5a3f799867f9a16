"""The book benchmark: a chapter from an empty cache, and the CSV it keeps."""

from __future__ import annotations

import csv
from pathlib import Path

from benchmark_modules import load

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    return load("bench_book")


def test_rows_replace_the_same_chapter_profile_and_device_and_keep_the_others(tmp_path):
    bench = _bench()
    out = tmp_path / "book.csv"
    row = dict(chapter="a", profile="smoke", device="cpu", wall_s=1.0, task_s=0.5, tasks=3)
    bench.write([row, dict(row, chapter="total")], out)
    bench.write([dict(row, wall_s=2.0), dict(row, chapter="b")], out)
    rows = list(csv.DictReader(out.open()))
    assert [(r["chapter"], r["wall_s"]) for r in rows] == [
        ("a", "2.0"),
        ("b", "1.0"),
        ("total", "3.0"),
    ]
    assert list(rows[0]) == bench.COLUMNS


def test_the_whole_book_row_is_not_counted_in_the_total(tmp_path):
    """`--together` times every chapter in one run: its row sits beside the chapters' rows and
    their `total`, which sums the chapters only."""
    bench = _bench()
    out = tmp_path / "book.csv"
    row = dict(chapter="a", profile="paper", device="cpu", wall_s=10.0, task_s=15.0, tasks=3)
    whole = dict(row, chapter=bench.TOGETHER.format(jobs=2), wall_s=8.0, task_s=15.0)
    bench.write([row, dict(row, chapter="b", wall_s=5.0), whole], out)
    rows = list(csv.DictReader(out.open()))
    assert [(r["chapter"], r["wall_s"]) for r in rows] == [
        ("a", "10.0"),
        ("b", "5.0"),
        ("total", "15.0"),
        ("whole book (run --jobs 2)", "8.0"),
    ]


def test_a_whole_book_row_alone_gets_no_total(tmp_path):
    """A `--together` run written to a new file: no chapter rows, so no `total` row (it failed
    on an empty sum)."""
    bench = _bench()
    out = tmp_path / "book.csv"
    whole = dict(
        chapter=bench.TOGETHER.format(jobs=2), profile="paper", device="cpu", wall_s=8.0, tasks=3
    )
    bench.write([whole], out)
    rows = list(csv.DictReader(out.open()))
    assert [(r["chapter"], r["wall_s"]) for r in rows] == [("whole book (run --jobs 2)", "8.0")]


def test_make_test_rows_are_not_counted_in_the_total(tmp_path):
    bench = _bench()
    out = tmp_path / "book.csv"
    row = dict(chapter="a", profile="suite", device="cpu", wall_s=10.0, task_s=15.0, tasks=3)
    timed = dict(row, chapter="make test (clean clone)", wall_s=700.0)
    bench.write([timed], out)
    assert [r["chapter"] for r in csv.DictReader(out.open())] == ["make test (clean clone)"]
    bench.write([row], out)
    totals = [r for r in csv.DictReader(out.open()) if r["chapter"] == "total"]
    assert [t["wall_s"] for t in totals] == ["10.0"]


def test_the_estimate_from_entries_sums_their_own_seconds_and_is_not_a_chapter(
    tmp_path, monkeypatch
):
    import json

    bench = _bench()
    for chapter, seconds in (("a", [1.5, 2.5]), ("b", [4.0])):
        folder = tmp_path / "results" / "paper" / chapter / "sweep"
        folder.mkdir(parents=True)
        for i, s in enumerate(seconds):
            entry = {"fn": "pkg.tasks:fit", "result": {"status": "ok", "seconds": s}}
            (folder / f"{i}.json").write_text(json.dumps(entry))
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)
    row = bench.from_entries("paper", ["a", "b"])
    assert (row["task_s"], row["tasks"], row["wall_s"]) == (8.0, 3, 4.0)
    out = tmp_path / "book.csv"
    bench.write([row, dict(row, chapter="c")], out)
    totals = [r for r in csv.DictReader(out.open()) if r["chapter"] == "total"]
    assert [r["task_s"] for r in totals] == ["8.0"]  # the chapter c alone, not the estimate


def test_cpu_seconds_are_summed_from_the_entries_that_record_them(tmp_path, monkeypatch):
    """An entry's `timing.cpu_s` is its task's CPU time; an older entry without it adds to
    `task_s` (its wall seconds) but not to `cpu_s`, and `cpu_tasks` says how many did."""
    import json

    bench = _bench()
    folder = tmp_path / "results" / "paper" / "a" / "sweep"
    folder.mkdir(parents=True)
    entries = [
        {"fn": "pkg.tasks:fit", "result": {"seconds": 3.0}, "timing": {"cpu_s": 1.25}},
        {"fn": "pkg.tasks:fit", "result": {"seconds": 2.0}, "timing": {"cpu_s": 0.75}},
        {"fn": "pkg.tasks:fit", "result": {"seconds": 5.0}},
    ]
    for i, entry in enumerate(entries):
        (folder / f"{i}.json").write_text(json.dumps(entry))
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    row = bench.from_entries("paper", ["a"])
    assert (row["task_s"], row["cpu_s"], row["cpu_tasks"], row["tasks"]) == (10.0, 2.0, 2, 3)
    out = tmp_path / "book.csv"
    bench.write([dict(row, chapter="a"), dict(row, chapter="b")], out)
    total = [r for r in csv.DictReader(out.open()) if r["chapter"] == "total"][0]
    assert (total["cpu_s"], total["cpu_tasks"]) == ("4.0", "4")
