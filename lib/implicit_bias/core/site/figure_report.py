"""A figure-regression report a reviewer can look at.

Every figure comparison (the smoke baselines in the tests, `compare` of a regenerated run
against `results/paper/`, `baselines` before it rewrites anything) produces one self-contained
HTML page (images inlined, no JavaScript, no network) and a JSON summary with the same numbers,
in the style of pytest-mpl's summary report: per figure, the baseline, new and difference
images side by side with the RMS against its tolerance, and for the figure's data tables the
values that moved (old, new, relative change, tolerance); failing figures first, the passing
ones listed below. The comparison copies both images into the report's folder first, so
matplotlib's difference image lands there: nothing is ever written next to the compared files.
"""

from __future__ import annotations

import base64
import html
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

PNG_RMS_TOLERANCE = 8.0  # matplotlib's compare_images RMS (0-255 scale)
MAX_MOVED_SHOWN = 20


@dataclass
class FigureComparison:
    """One figure: its data tables against the reference's, and its image."""

    chapter: str
    figure: str
    problems: list[str] = field(default_factory=list)  # readable, plain numbers
    moved: list[dict] = field(default_factory=list)  # {table, row, column, old, new, ...}
    largest_relative_change: float = 0.0
    rms: float | None = None
    rms_tolerance: float = PNG_RMS_TOLERANCE
    images: dict[str, str] = field(default_factory=dict)  # role -> file in the report folder

    @property
    def ok(self) -> bool:
        return not self.problems


def _relative(old: float, new: float) -> float:
    if old == new or (np.isnan(old) and np.isnan(new)):
        return 0.0
    return abs(new - old) / max(abs(old), 1e-300)


def table_changes(
    current: pd.DataFrame, baseline: pd.DataFrame, rtol: float, atol: float
) -> tuple[list[str], list[dict], float]:
    """Problems (structure, or values beyond rtol/atol), every value that moved beyond the
    tolerance, and the largest relative change of any numeric value."""
    if sorted(current.columns) != sorted(baseline.columns):
        return (
            [f"columns differ: {list(current.columns)} vs baseline {list(baseline.columns)}"],
            [],
            float("inf"),
        )
    current = current[list(baseline.columns)]  # the order of columns carries no result
    if len(current) != len(baseline):
        return [f"{len(current)} rows vs baseline {len(baseline)}"], [], float("inf")
    problems: list[str] = []
    moved: list[dict] = []
    largest = 0.0
    for column in current.columns:
        a, b = current[column], baseline[column]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            new, old = a.to_numpy(float), b.to_numpy(float)
            close = np.isclose(new, old, rtol=rtol, atol=atol, equal_nan=True)
            for row in np.flatnonzero(~close):
                moved.append(
                    {
                        "row": int(row),
                        "column": str(column),
                        "old": float(old[row]),
                        "new": float(new[row]),
                        "relative_change": _relative(old[row], new[row]),
                        "rtol": rtol,
                        "atol": atol,
                    }
                )
            finite = ~(np.isnan(new) & np.isnan(old))
            if finite.any():
                largest = max(
                    largest, max(_relative(o, n) for o, n in zip(old[finite], new[finite]))
                )
            if not close.all():
                worst = max(
                    (m for m in moved if m["column"] == str(column)),
                    key=lambda m: abs(m["new"] - m["old"]),
                )
                problems.append(
                    f"column {column!r}: {int((~close).sum())} values differ, e.g. row "
                    f"{worst['row']}: {worst['new']:.10g} vs baseline {worst['old']:.10g} "
                    f"(relative change {worst['relative_change']:.3g}; rtol {rtol:g}, "
                    f"atol {atol:g})"
                )
        elif not a.astype(str).equals(b.astype(str)):
            rows = np.flatnonzero(a.astype(str).to_numpy() != b.astype(str).to_numpy())
            problems.append(
                f"column {column!r}: text values differ in {len(rows)} rows, e.g. "
                f"row {rows[0]}: {a.iloc[rows[0]]!s} vs baseline {b.iloc[rows[0]]!s}"
            )
    return problems, moved, largest


def compare_figure(
    chapter: str,
    fig_id: str,
    baseline_dir: Path,
    current_dir: Path,
    report_dir: Path | None = None,
    tolerances: dict | None = None,
    images: bool = True,
) -> FigureComparison:
    """Compare one figure of `current_dir` with `baseline_dir` (each holding `<fig>.json`,
    its CSV tables and `<fig>.png`). `tolerances` ({"rtol", "atol"}) override the
    baseline's own. Images are copied into `report_dir/<chapter>/` and compared there."""
    result = FigureComparison(chapter, fig_id)
    if not (current_dir / f"{fig_id}.json").exists():
        result.problems.append("the chapter no longer produces this figure")
        return result
    meta = json.loads((baseline_dir / f"{fig_id}.json").read_text())
    current_meta = json.loads((current_dir / f"{fig_id}.json").read_text())
    tol = {"rtol": meta["rtol"], "atol": meta["atol"], **(tolerances or {})}
    if current_meta["tables"] != meta["tables"]:
        result.problems.append(
            f"tables differ: {current_meta['tables']} vs baseline {meta['tables']}"
        )
    for table in meta["tables"]:
        if not (current_dir / table).exists():
            result.problems.append(f"{table}: missing")
            continue
        problems, moved, largest = table_changes(
            pd.read_csv(current_dir / table),
            pd.read_csv(baseline_dir / table),
            float(tol["rtol"]),
            float(tol["atol"]),
        )
        result.problems += [f"{table}: {p}" for p in problems]
        result.moved += [{"table": table, **m} for m in moved]
        result.largest_relative_change = max(result.largest_relative_change, largest)
    if (
        images
        and (baseline_dir / f"{fig_id}.png").exists()
        and (current_dir / f"{fig_id}.png").exists()
    ):
        _compare_images(
            result, baseline_dir / f"{fig_id}.png", current_dir / f"{fig_id}.png", report_dir
        )
    return result


def _compare_images(
    result: FigureComparison, baseline: Path, current: Path, report_dir: Path | None
) -> None:
    import tempfile

    from matplotlib.testing.compare import compare_images
    from matplotlib.testing.exceptions import ImageComparisonFailure

    folder = (report_dir / result.chapter) if report_dir else Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    expected = folder / f"{result.figure}-baseline.png"
    actual = folder / f"{result.figure}-new.png"
    shutil.copyfile(baseline, expected)
    shutil.copyfile(current, actual)
    result.images = {"baseline": expected.name, "new": actual.name}
    try:
        outcome = compare_images(
            str(expected), str(actual), tol=result.rms_tolerance, in_decorator=True
        )
    except ImageComparisonFailure as exc:  # e.g. a different image size
        result.problems.append(f"{result.figure}.png: {exc}")
        return
    if outcome is None:
        result.rms = 0.0 if expected.read_bytes() == actual.read_bytes() else None
        if result.rms is None:  # within tolerance: measure it anyway, for the report
            result.rms = _rms(expected, actual)
        return
    result.rms = float(outcome["rms"])
    diff = Path(str(outcome["diff"]))
    if diff.exists():
        result.images["difference"] = diff.name
    result.problems.append(
        f"{result.figure}.png differs from the baseline image: RMS "
        f"{result.rms:.2f} > {result.rms_tolerance}"
    )


def _rms(expected: Path, actual: Path) -> float | None:
    from matplotlib.image import imread

    a, b = imread(str(expected)), imread(str(actual))
    if a.shape != b.shape:
        return None
    return float(np.sqrt(np.mean(((a - b) * 255.0) ** 2)))


# ------------------------------------------------------------------------------------------
# The report


def _inline(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def write_report(results: list[FigureComparison], report_dir: Path, title: str) -> Path:
    """Write `index.html` (self-contained) and `summary.json` into `report_dir`; returns the
    HTML file's path."""
    report_dir.mkdir(parents=True, exist_ok=True)
    failing = [r for r in results if not r.ok]
    passing = [r for r in results if r.ok]
    summary = {
        "title": title,
        "figures": len(results),
        "failing": len(failing),
        "results": [{**asdict(r), "ok": r.ok} for r in failing + passing],
    }
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    esc = html.escape
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title><style>",
        "body{font-family:sans-serif;margin:1.5em;max-width:1400px}",
        "img{max-width:32%;border:1px solid #ccc;margin-right:.5%}",
        ".fail{color:#b00}.pass{color:#070}table{border-collapse:collapse;font-size:90%}",
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}",
        "figure{display:inline-block;width:32%;margin:0}figure img{max-width:100%}",
        "</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>{len(results)} figures compared: <b class='fail'>{len(failing)} failing</b>, "
        f"<b class='pass'>{len(passing)} passing</b>.</p>",
    ]
    for r in failing:
        folder = report_dir / r.chapter
        out.append(f"<h2 class='fail'>{esc(r.chapter)} / {esc(r.figure)}: fails</h2><ul>")
        out += [f"<li>{esc(p)}</li>" for p in r.problems]
        out.append("</ul>")
        if r.rms is not None:
            out.append(f"<p>image RMS {r.rms:.2f} (tolerance {r.rms_tolerance})</p>")
        for role in ("baseline", "new", "difference"):
            if role in r.images and (folder / r.images[role]).exists():
                out.append(
                    f"<figure><img src='{_inline(folder / r.images[role])}' "
                    f"alt='{role} image of {esc(r.figure)}'><figcaption>{role}"
                    "</figcaption></figure>"
                )
        if r.moved:
            out.append(
                "<table><tr><th>table</th><th>row</th><th>column</th><th>old</th>"
                "<th>new</th><th>relative change</th><th>rtol</th><th>atol</th></tr>"
            )
            for m in r.moved[:MAX_MOVED_SHOWN]:
                out.append(
                    f"<tr><td>{esc(m['table'])}</td><td>{m['row']}</td>"
                    f"<td>{esc(m['column'])}</td><td>{m['old']:.10g}</td>"
                    f"<td>{m['new']:.10g}</td><td>{m['relative_change']:.3g}</td>"
                    f"<td>{m['rtol']:g}</td><td>{m['atol']:g}</td></tr>"
                )
            out.append("</table>")
            if len(r.moved) > MAX_MOVED_SHOWN:
                out.append(
                    f"<p>... and {len(r.moved) - MAX_MOVED_SHOWN} more values "
                    "(all in summary.json)</p>"
                )
    if passing:
        out.append(
            "<h2 class='pass'>Passing</h2><table><tr><th>figure</th><th>largest "
            "relative change of its data</th><th>image RMS</th></tr>"
        )
        for r in passing:
            rms = "–" if r.rms is None else f"{r.rms:.2f}"
            out.append(
                f"<tr><td style='text-align:left'>{esc(r.chapter)} / {esc(r.figure)}"
                f"</td><td>{r.largest_relative_change:.3g}</td><td>{rms}</td></tr>"
            )
        out.append("</table>")
    out.append("</body></html>")
    path = report_dir / "index.html"
    path.write_text("\n".join(out))
    return path
