"""Figure regression: compare a profile's figure data and images with committed baselines.

Baselines live in `tests/baselines/<chapter>/` (the smoke profile's CSV, JSON and PNG files,
copied by `make baselines`). Each figure's JSON holds its tolerances (`rtol`, `atol`) for the
numeric columns; non-numeric columns must match exactly; PNGs are compared with matplotlib's
image comparison (RMS tolerance).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from .paths import figures_dir, project_root

PNG_RMS_TOLERANCE = 8.0  # matplotlib's compare_images RMS (0-255 scale)


def baseline_dir(chapter: str) -> Path:
    return project_root() / "tests" / "baselines" / chapter


def compare_tables(current: pd.DataFrame, baseline: pd.DataFrame, rtol: float,
                   atol: float) -> list[str]:
    """Differences between two figure tables, as readable messages (empty: they agree)."""
    problems = []
    if list(current.columns) != list(baseline.columns):
        return [f"columns differ: {list(current.columns)} vs baseline {list(baseline.columns)}"]
    if len(current) != len(baseline):
        return [f"{len(current)} rows vs baseline {len(baseline)}"]
    for column in current.columns:
        a, b = current[column], baseline[column]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            a_values, b_values = a.to_numpy(float), b.to_numpy(float)
            close = np.isclose(a_values, b_values, rtol=rtol, atol=atol, equal_nan=True)
            if not close.all():
                worst = int(np.argmax(np.where(close, 0, np.abs(a_values - b_values))))
                problems.append(f"column {column!r}: {int((~close).sum())} values differ, e.g. "
                                f"row {worst}: {a_values[worst]!r} vs baseline "
                                f"{b_values[worst]!r} (rtol {rtol}, atol {atol})")
        elif not a.astype(str).equals(b.astype(str)):
            problems.append(f"column {column!r}: text values differ")
    return problems


def compare_figure(chapter: str, fig_id: str, profile: str = "smoke",
                   baseline: Path | None = None, images: bool = True) -> list[str]:
    """Compare one figure's data (and PNG) with its baseline; returns the problems found."""
    current_dir = figures_dir(profile, chapter)
    base_dir = baseline or baseline_dir(chapter)
    meta_path = base_dir / f"{fig_id}.json"
    if not (current_dir / f"{fig_id}.json").exists():
        return [f"{chapter}/{fig_id}: the chapter no longer produces this figure"]
    meta = json.loads(meta_path.read_text())
    problems = []
    current_meta = json.loads((current_dir / f"{fig_id}.json").read_text())
    if current_meta["tables"] != meta["tables"]:
        problems.append(f"tables differ: {current_meta['tables']} vs {meta['tables']}")
    for table in meta["tables"]:
        if not (current_dir / table).exists():
            problems.append(f"{table}: missing")
            continue
        diffs = compare_tables(pd.read_csv(current_dir / table), pd.read_csv(base_dir / table),
                               meta["rtol"], meta["atol"])
        problems += [f"{table}: {d}" for d in diffs]
    if images and (base_dir / f"{fig_id}.png").exists():
        from matplotlib.testing.compare import compare_images
        from matplotlib.testing.exceptions import ImageComparisonFailure

        try:
            result = compare_images(str(base_dir / f"{fig_id}.png"),
                                    str(current_dir / f"{fig_id}.png"),
                                    tol=PNG_RMS_TOLERANCE, in_decorator=True)
        except ImageComparisonFailure as exc:  # e.g. a different image size
            problems.append(f"{fig_id}.png differs from the baseline image: {exc}")
            result = None
        if result is not None:
            problems.append(f"{fig_id}.png differs from the baseline image: RMS "
                            f"{result['rms']:.2f} > {PNG_RMS_TOLERANCE}")
    return [f"{chapter}/{fig_id}: {p}" for p in problems]


def baseline_figures(chapter: str) -> list[str]:
    folder = baseline_dir(chapter)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []


def write_baselines(chapter: str, profile: str = "smoke") -> list[str]:
    """Copy the current figures of `chapter` into `tests/baselines/<chapter>/` (on purpose)."""
    source = figures_dir(profile, chapter)
    if not source.exists():
        raise FileNotFoundError(f"no figures for {chapter} at {source}: run the chapter first")
    target = baseline_dir(chapter)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    written = []
    for path in sorted(source.iterdir()):
        if path.suffix in (".csv", ".json", ".png"):
            shutil.copy2(path, target / path.name)
            written.append(path.name)
    return written


def largest_deviation(current: pd.DataFrame, reference: pd.DataFrame) -> float:
    """The largest relative difference |a - b| / max(|b|, 1e-12) over shared numeric columns."""
    worst = 0.0
    if len(current) != len(reference):
        return float("inf")
    for column in set(current.columns) & set(reference.columns):
        a, b = current[column], reference[column]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            a_values, b_values = a.to_numpy(float), b.to_numpy(float)
            both_nan = np.isnan(a_values) & np.isnan(b_values)
            rel = np.abs(a_values - b_values) / np.maximum(np.abs(b_values), 1e-12)
            rel = np.where(both_nan, 0.0, rel)
            if rel.size:
                worst = max(worst, float(np.nanmax(np.where(np.isnan(rel), np.inf, rel))))
    return worst


def compare_runs(chapter: str, reference_figures: Path, candidate_figures: Path,
                 tolerances: dict | None = None) -> dict:
    """Compare a chapter's regenerated figure data with a reference run (e.g. a GPU run of
    the paper profile against the committed `results/paper/`).

    `tolerances` maps figure ids (or "*") to {"rtol", "atol"}; otherwise each figure's own.
    Returns {"problems": [...], "largest_deviation": float, "figures": int}.
    """
    tolerances = tolerances or {}
    problems, worst, count = [], 0.0, 0
    for meta_path in sorted(reference_figures.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        fig_id = meta_path.stem
        count += 1
        tol = {**{"rtol": meta["rtol"], "atol": meta["atol"]}, **tolerances.get("*", {}),
               **tolerances.get(fig_id, {})}
        for table in meta["tables"]:
            candidate = candidate_figures / table
            if not candidate.exists():
                problems.append(f"{chapter}/{table}: not regenerated")
                continue
            current, reference = pd.read_csv(candidate), pd.read_csv(reference_figures / table)
            worst = max(worst, largest_deviation(current, reference))
            problems += [f"{chapter}/{table}: {p}" for p in
                         compare_tables(current, reference, tol["rtol"], tol["atol"])]
    return {"problems": problems, "largest_deviation": worst, "figures": count}
