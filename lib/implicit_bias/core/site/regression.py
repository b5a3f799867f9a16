"""Figure regression: compare a profile's figure data and images with committed baselines.

Baselines live in `tests/baselines/<chapter>/` (the smoke profile's CSV, JSON and PNG files,
copied by `make baselines`). Each figure's JSON holds its tolerances (`rtol`, `atol`) for the
numeric columns; non-numeric columns must match exactly; PNGs are compared with matplotlib's
image comparison (RMS tolerance). Every comparison can write a figure report
(`implicit_bias.core.site.figure_report`): baseline, new and difference images side by side, and the
values that moved.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..engine.paths import figures_dir, project_root, results_root
from .figure_report import PNG_RMS_TOLERANCE, FigureComparison, table_changes, write_report
from .figure_report import compare_figure as _compare

__all__ = [
    "PNG_RMS_TOLERANCE",
    "baseline_dir",
    "baseline_figures",
    "compare_figure",
    "compare_figure_report",
    "compare_runs",
    "compare_tables",
    "largest_deviation",
    "report_folder",
    "write_baselines",
    "write_report",
]


def baseline_dir(chapter: str) -> Path:
    return project_root() / "tests" / "baselines" / chapter


def cpu_vendor_id() -> str:
    """`GenuineIntel`, `AuthenticAMD`, ... (empty where /proc/cpuinfo cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def vendor_baseline_dir(chapter: str, vendor: str | None = None) -> Path:
    """Baselines of the figures whose data this CPU vendor computes differently under the
    pinned kernels, `tests/baselines/<chapter>/cpu-<vendor>/` (measured: an Intel Xeon and
    the AMD EPYC machines that drew the baselines round a few figures differently under the
    same pinned kernels; which library's dispatch causes it is not isolated)."""
    return baseline_dir(chapter) / f"cpu-{vendor if vendor is not None else cpu_vendor_id()}"


def data_vendor(chapter: str, profile: str = "smoke") -> str:
    """The CPU vendor that computed the cache entries a run of `chapter` read: the one vendor
    every entry records (`kernels.cpu`), else this CPU's (entries of several vendors, or none).
    The smoke cache is committed, so a run here may draw another vendor's data; its figures are
    regressed against that vendor's baselines."""
    from ..engine.sweep import committed_entries

    vendors = set()
    for _, _, entry in committed_entries(profile, [chapter]):
        kernels = entry.get("kernels") if isinstance(entry, dict) else None
        if isinstance(kernels, dict):
            cpu = kernels.get("cpu", "")
            vendors.add(cpu.split()[0] if cpu else "")
    return vendors.pop() if len(vendors) == 1 and "" not in vendors else cpu_vendor_id()


def figure_baseline_dir(chapter: str, fig_id: str, vendor: str | None = None) -> Path:
    """Where the baseline of one figure lives for data computed on `vendor` (default: this
    CPU's): the vendor's folder when it holds the figure, else the chapter's."""
    folder = vendor_baseline_dir(chapter, vendor)
    return folder if (folder / f"{fig_id}.json").exists() else baseline_dir(chapter)


def report_folder(name: str) -> Path:
    """Where figure reports go: `results/reports/<name>/` (never committed)."""
    return results_root() / "reports" / name


def compare_tables(
    current: pd.DataFrame, baseline: pd.DataFrame, rtol: float, atol: float
) -> list[str]:
    """Differences between two figure tables, as readable messages (empty: they agree)."""
    return table_changes(current, baseline, rtol, atol)[0]


def compare_figure_report(
    chapter: str,
    fig_id: str,
    profile: str = "smoke",
    baseline: Path | None = None,
    images: bool = True,
    report_dir: Path | None = None,
) -> FigureComparison:
    """Compare one figure of `profile`'s current run with its baseline (structured): the
    baseline of the CPU vendor that computed the run's data (`data_vendor`)."""
    return _compare(
        chapter,
        fig_id,
        baseline or figure_baseline_dir(chapter, fig_id, data_vendor(chapter, profile)),
        figures_dir(profile, chapter),
        report_dir,
        images=images,
    )


def compare_figure(
    chapter: str,
    fig_id: str,
    profile: str = "smoke",
    baseline: Path | None = None,
    images: bool = True,
    report_dir: Path | None = None,
) -> list[str]:
    """Compare one figure's data (and PNG) with its baseline; returns the problems found."""
    result = compare_figure_report(chapter, fig_id, profile, baseline, images, report_dir)
    return [f"{chapter}/{fig_id}: {p}" for p in result.problems]


def baseline_figures(chapter: str) -> list[str]:
    folder = baseline_dir(chapter)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []


def baseline_changes(
    chapter: str, profile: str = "smoke", report_dir: Path | None = None
) -> list[FigureComparison]:
    """What rewriting the baselines of `chapter` would change: one comparison per figure of
    the current run (a figure without a baseline is a change too)."""
    source = figures_dir(profile, chapter)
    if not source.exists():
        raise FileNotFoundError(
            f"no {profile} figures for {chapter}: run the chapter first "
            f"(python -m implicit_bias run {chapter})"
        )
    results = []
    for meta in sorted(source.glob("*.json")):
        vendor = data_vendor(chapter, profile)
        if not (figure_baseline_dir(chapter, meta.stem, vendor) / meta.name).exists():
            results.append(FigureComparison(chapter, meta.stem, ["new figure: no baseline"]))
            continue
        results.append(compare_figure_report(chapter, meta.stem, profile, report_dir=report_dir))
    return results


def write_baselines(
    chapter: str,
    profile: str = "smoke",
    figures: list[str] | None = None,
    this_cpu: bool = False,
) -> list[str]:
    """Copy the current figures of `chapter` into `tests/baselines/<chapter>/` (on purpose):
    the named `figures`, or all of them (a full rewrite also drops baselines of figures the
    chapter no longer produces). `this_cpu`: into the folder of the CPU vendor that computed
    the run's data (`data_vendor`, this CPU's when the run computed it) instead, for the named
    figures only, whose data that vendor computes differently (measured; say so in the commit)."""
    if this_cpu and not figures:
        raise ValueError("a vendor's baselines are written figure by figure: name them")
    source = figures_dir(profile, chapter)
    if not source.exists():
        raise FileNotFoundError(f"no figures for {chapter} at {source}: run the chapter first")
    produced = sorted(p.stem for p in source.glob("*.json"))
    if figures is not None:
        unknown = sorted(set(figures) - set(produced))
        if unknown:
            raise ValueError(
                f"{chapter} produces no figure {unknown}; its figures: {', '.join(produced)}"
            )
    target = (
        vendor_baseline_dir(chapter, data_vendor(chapter, profile))
        if this_cpu
        else baseline_dir(chapter)
    )
    if figures is None and target.exists():  # the vendors' folders stay: written on purpose
        for old in target.iterdir():
            if old.is_file():
                old.unlink()
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source.iterdir()):
        stem = path.stem.split("__")[0]
        if path.suffix in (".csv", ".json", ".png") and (figures is None or stem in figures):
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


class ToleranceFileError(ValueError):
    """A tolerances file for `compare` that cannot be read as chapter -> figure -> tolerances."""


def load_figure_tolerances(path: Path) -> dict:
    """A `compare --tolerances` file: chapter -> figure id (or "*") -> {rtol, atol}, each a
    finite number >= 0; a `ToleranceFileError` naming the first problem."""
    import math

    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ToleranceFileError(f"tolerances file {path}: not valid YAML{where}") from None
    except OSError as err:
        raise ToleranceFileError(f"tolerances file {path}: {err.strerror}") from None
    data = {} if data is None else data
    shape = "chapter -> figure id (or '*') -> {rtol: number, atol: number}"
    if not isinstance(data, dict):
        raise ToleranceFileError(f"tolerances file {path}: expected a mapping {shape}")
    for chapter, figures in data.items():
        if not isinstance(figures, dict):
            raise ToleranceFileError(
                f"tolerances file {path}: {chapter}: expected a mapping of figures ({shape})"
            )
        for figure, tols in figures.items():
            if not isinstance(tols, dict) or set(tols) - {"rtol", "atol"}:
                raise ToleranceFileError(
                    f"tolerances file {path}: {chapter}.{figure}: expected {{rtol, atol}}"
                )
            for key, value in tols.items():
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not ok or not math.isfinite(value) or value < 0:
                    raise ToleranceFileError(
                        f"tolerances file {path}: {chapter}.{figure}.{key}: got {value!r}, "
                        "expected a number >= 0 (write 1.0e-6, not 1e-6: YAML reads that as text)"
                    )
    return data


def compare_runs(
    chapter: str,
    reference_figures: Path,
    candidate_figures: Path,
    tolerances: dict | None = None,
    report_dir: Path | None = None,
) -> dict:
    """Compare a chapter's regenerated figures with a reference run (e.g. a GPU run of the
    paper profile against the committed `results/paper/`).

    `tolerances` maps figure ids (or "*") to {"rtol", "atol"}; otherwise each figure's own.
    Returns {"problems": [...], "largest_deviation": float, "figures": int, "comparisons":
    [FigureComparison]} (the comparisons feed the figure report).
    """
    tolerances = tolerances or {}
    problems, worst, comparisons = [], 0.0, []
    for meta_path in sorted(reference_figures.glob("*.json")):
        fig_id = meta_path.stem
        override = {**tolerances.get("*", {}), **tolerances.get(fig_id, {})}
        result = _compare(
            chapter,
            fig_id,
            reference_figures,
            candidate_figures,
            report_dir,
            tolerances=override or None,
        )
        comparisons.append(result)
        problems += [f"{chapter}/{fig_id}: {p}" for p in result.problems]
        for table in json.loads(meta_path.read_text())["tables"]:
            if (candidate_figures / table).exists():
                worst = max(
                    worst,
                    largest_deviation(
                        pd.read_csv(candidate_figures / table),
                        pd.read_csv(reference_figures / table),
                    ),
                )
    return {
        "problems": problems,
        "largest_deviation": worst,
        "figures": len(comparisons),
        "comparisons": comparisons,
    }
