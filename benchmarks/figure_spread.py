"""Measure how much each figure's data moves across CPU kernel types and thread counts, and
derive its figure-regression tolerances from that spread.

Run the smoke book once per configuration into separate results roots, e.g.

    IMPLICIT_BIAS_RESULTS=/tmp/spread/results-native python -m implicit_bias run --profile smoke
    OPENBLAS_CORETYPE=Prescott OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
        IMPLICIT_BIAS_RESULTS=/tmp/spread/results-prescott-1t python -m implicit_bias run ...

then compare every pair of runs, per figure, table and numeric column:

    python benchmarks/figure_spread.py /tmp/spread/results-* [--baselines tests/baselines]

The first folder is the reference (its typical magnitudes and current tolerances are shown);
a folder's label is its name without a leading `results-`. Writes
`benchmarks/results/figure_spread.csv` (one row per column), `figure_spread_figures.csv` and
`.md` (per figure: the spread, the derived tolerance, the largest PNG RMS difference between
runs against the book test's image tolerance; then the columns; with `--baselines`, which
baselines the reference run no longer matches under the derived tolerances).

The rule (also in CONTRIBUTING.md, "save_figure tolerances"): pool all pairs of runs and all
numeric entries of all tables of a figure. An entry is *near zero* when both runs give a
|value| below NEAR_ZERO_FRACTION (1e-3) of the largest |value| of its column, or below
NEAR_ZERO (1e-9): there the absolute error of the column (round-off, solver tolerance), not a
relative one, decides. Then

    rtol = ceil1(max(SAFETY * largest relative deviation of the other entries, RTOL_FLOOR))
    atol = ceil1(max(SAFETY * largest absolute deviation of the near-zero entries, ATOL_FLOOR))

with SAFETY = 10, the relative deviation of a pair |a - b| / max(|a|, |b|), ceil1 rounding up
to one significant digit, RTOL_FLOOR = 1e-8 (10 x the resolution of the CSV files, which keep
10 significant digits: one flipped last digit is a relative change of up to 1e-9) and
ATOL_FLOOR = 1e-12. A figure whose derived rtol exceeds TOO_LOOSE (1e-2) regresses little:
its data amplifies round-off and needs a robust form rather than a looser tolerance. A column
whose typical |value| is below the figure's atol is effectively unchecked; it is listed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

NEAR_ZERO = 1e-9
NEAR_ZERO_FRACTION = 1e-3
SAFETY = 10.0
RTOL_FLOOR = 1e-8
ATOL_FLOOR = 1e-12
TOO_LOOSE = 1e-2
PNG_RMS = (
    8.0  # implicit_bias.core.site.regression.PNG_RMS_TOLERANCE: the book test's image tolerance
)
OUT = Path(__file__).resolve().parent / "results" / "figure_spread"


def ceil1(x: float) -> float:
    """Round `x` > 0 up to one significant digit (3.2e-9 -> 4e-9, 3e-9 -> 3e-9)."""
    exponent = math.floor(math.log10(x))
    digit = math.ceil(round(x / 10.0**exponent, 9))
    if digit >= 10:
        digit, exponent = 1, exponent + 1
    return float(f"{digit}e{exponent}")


def derive_tolerance(max_rel: float, max_abs_near_zero: float) -> dict:
    """The rule: rtol/atol from the largest relative deviation (entries not near zero) and
    the largest absolute deviation of the near-zero entries."""
    return {
        "rtol": ceil1(max(SAFETY * max_rel, RTOL_FLOOR)),
        "atol": ceil1(max(SAFETY * max_abs_near_zero, ATOL_FLOOR)),
    }


def label(folder: Path) -> str:
    name = folder.name
    return name[len("results-") :] if name.startswith("results-") else name


def figures_of(root: Path, profile: str) -> dict[tuple[str, str], dict]:
    """{(chapter, figure): metadata JSON} of one results root."""
    found = {}
    for meta_path in sorted((root / profile / "figures").glob("*/*.json")):
        found[(meta_path.parent.name, meta_path.stem)] = json.loads(meta_path.read_text())
    return found


def column_deviation(a: np.ndarray, b: np.ndarray) -> dict:
    """Largest deviations between two runs' values of one numeric column."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    both = ~nan_a & ~nan_b
    a, b = a[both], b[both]
    diff = np.abs(a - b)
    scale = np.maximum(np.abs(a), np.abs(b))
    column_scale = float(scale.max()) if scale.size else 0.0
    near_zero = scale < max(NEAR_ZERO, NEAR_ZERO_FRACTION * column_scale)
    rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    return {
        "nan_mismatch": int((nan_a != nan_b).sum()),
        "max_abs_dev": float(diff.max()) if diff.size else 0.0,
        "max_rel_dev": float(rel[~near_zero].max()) if (~near_zero).any() else 0.0,
        "max_abs_dev_near_zero": float(diff[near_zero].max()) if near_zero.any() else 0.0,
        "n_near_zero": int(near_zero.sum()),
        "n_differ": int((diff > 0).sum()),
    }


def png_rms(a: Path, b: Path) -> float:
    """RMS difference of two PNGs on the 0-255 scale (as matplotlib's compare_images; inf
    when their sizes differ), computed without writing diff images."""
    from matplotlib.image import imread

    x, y = imread(a), imread(b)
    if x.shape != y.shape:
        return float("inf")
    x, y = (np.round(v * 255 if v.dtype.kind == "f" else v).astype(np.int16) for v in (x, y))
    return float(np.sqrt(np.mean((x[..., :3] - y[..., :3]).astype(float) ** 2)))


def image_spread(
    roots: list[Path], profile: str = "smoke", all_pairs: bool = True
) -> dict[tuple[str, str], float]:
    """{(chapter, figure): largest PNG RMS difference over the pairs of runs}."""
    pairs = (
        list(itertools.combinations(range(len(roots)), 2))
        if all_pairs
        else [(0, j) for j in range(1, len(roots))]
    )
    worst: dict[tuple[str, str], float] = {}
    for key in sorted(set().union(*(figures_of(r, profile) for r in roots))):
        paths = [r / profile / "figures" / key[0] / f"{key[1]}.png" for r in roots]
        for i, j in pairs:
            if paths[i].exists() and paths[j].exists():
                worst[key] = max(worst.get(key, 0.0), png_rms(paths[i], paths[j]))
    return worst


def measure(roots: list[Path], profile: str = "smoke", all_pairs: bool = True):
    """Per (chapter, figure, table, column): the largest deviation over pairs of runs.

    Returns (columns DataFrame, problems list): problems are figures or tables missing from a
    run, differing row counts or columns, and text columns that differ.
    """
    labels = [label(r) for r in roots]
    metas = [figures_of(r, profile) for r in roots]
    problems = []
    everything = sorted(set().union(*metas))
    for i, m in enumerate(metas):
        missing = [f"{c}/{f}" for c, f in everything if (c, f) not in m]
        if missing:
            problems.append(f"{labels[i]}: missing figures {', '.join(missing)}")
    pairs = (
        list(itertools.combinations(range(len(roots)), 2))
        if all_pairs
        else [(0, j) for j in range(1, len(roots))]
    )
    rows = []
    for chapter, fig in everything:
        meta = next(m[(chapter, fig)] for m in metas if (chapter, fig) in m)
        for table in meta["tables"]:
            frames = {}
            for i, root in enumerate(roots):
                path = root / profile / "figures" / chapter / table
                if path.exists():
                    frames[i] = pd.read_csv(path)
            if not frames:
                continue
            first = frames[min(frames)]
            stats: dict[str, dict] = {}
            for i, j in pairs:
                if i not in frames or j not in frames:
                    continue
                a_frame, b_frame = frames[i], frames[j]
                tag = f"{chapter}/{table} {labels[i]} vs {labels[j]}"
                if list(a_frame.columns) != list(b_frame.columns):
                    problems.append(f"{tag}: columns differ")
                    continue
                if len(a_frame) != len(b_frame):
                    problems.append(f"{tag}: {len(a_frame)} vs {len(b_frame)} rows")
                    continue
                for column in a_frame.columns:
                    a, b = a_frame[column], b_frame[column]
                    if not (pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b)):
                        if not a.astype(str).equals(b.astype(str)):
                            problems.append(f"{tag}: text column {column!r} differs")
                        continue
                    dev = column_deviation(a.to_numpy(float), b.to_numpy(float))
                    if dev["nan_mismatch"]:
                        problems.append(
                            f"{tag}: column {column!r}: NaN in one run only "
                            f"({dev['nan_mismatch']} values)"
                        )
                    worst = stats.setdefault(column, dict.fromkeys(dev, 0))
                    for key, value in dev.items():
                        worst[key] = max(worst[key], value)
            for column in first.columns:
                if column not in stats:
                    continue
                values = np.abs(first[column].to_numpy(float))
                values = values[np.isfinite(values) & (values > 0)]
                rows.append(
                    {
                        "chapter": chapter,
                        "figure": fig,
                        "table": table,
                        "column": column,
                        **{
                            k: stats[column][k]
                            for k in (
                                "max_abs_dev",
                                "max_rel_dev",
                                "max_abs_dev_near_zero",
                                "n_differ",
                                "n_near_zero",
                                "nan_mismatch",
                            )
                        },
                        "typical_magnitude": float(np.median(values)) if values.size else 0.0,
                        "rows": len(first),
                    }
                )
    columns = pd.DataFrame(
        rows,
        columns=[
            "chapter",
            "figure",
            "table",
            "column",
            "max_abs_dev",
            "max_rel_dev",
            "max_abs_dev_near_zero",
            "n_differ",
            "n_near_zero",
            "nan_mismatch",
            "typical_magnitude",
            "rows",
        ],
    )
    return columns, problems


def figure_tolerances(
    columns: pd.DataFrame, roots: list[Path], profile: str = "smoke", images: dict | None = None
) -> pd.DataFrame:
    """Per figure: the measured spread, the derived tolerance and the current one."""
    reference = figures_of(roots[0], profile)
    rows = []
    for (chapter, fig), group in columns.groupby(["chapter", "figure"], sort=True):
        max_rel = float(group["max_rel_dev"].max())
        max_abs_nz = float(group["max_abs_dev_near_zero"].max())
        derived = derive_tolerance(max_rel, max_abs_nz)
        worst = group.loc[group["max_rel_dev"].idxmax()]
        meta = reference.get((chapter, fig), {})
        rows.append(
            {
                "chapter": chapter,
                "figure": fig,
                "max_rel_dev": max_rel,
                "max_abs_dev_near_zero": max_abs_nz,
                "max_abs_dev": float(group["max_abs_dev"].max()),
                "widest_column": f"{worst['table']}:{worst['column']}" if max_rel > 0 else "",
                "exact_columns": int((group["max_abs_dev"] == 0).sum()),
                "numeric_columns": len(group),
                "rtol": derived["rtol"],
                "atol": derived["atol"],
                "current_rtol": meta.get("rtol"),
                "current_atol": meta.get("atol"),
                "too_loose": derived["rtol"] > TOO_LOOSE,
                "png_rms": (images or {}).get((chapter, fig), float("nan")),
                "unchecked_columns": " ".join(
                    f"{r.table}:{r.column}"
                    for r in group.itertuples()
                    if 0 < r.typical_magnitude < derived["atol"]
                ),
            }
        )
    return pd.DataFrame(rows)


def check_baselines(
    figures: pd.DataFrame, reference: Path, baselines: Path, profile: str = "smoke"
) -> dict[str, list[str]]:
    """{chapter/figure: problems} of the reference run against the baselines, each figure
    compared with its derived tolerance (as
    `implicit_bias.core.site.regression.compare_tables` does)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    from implicit_bias.core.site.regression import compare_tables

    failing = {}
    for row in figures.itertuples():
        base_meta = baselines / row.chapter / f"{row.figure}.json"
        if not base_meta.exists():
            failing[f"{row.chapter}/{row.figure}"] = ["no baseline"]
            continue
        problems = []
        for table in json.loads(base_meta.read_text())["tables"]:
            current = reference / profile / "figures" / row.chapter / table
            if not current.exists():
                problems.append(f"{table}: not produced")
                continue
            problems += [
                f"{table}: {p}"
                for p in compare_tables(
                    pd.read_csv(current),
                    pd.read_csv(baselines / row.chapter / table),
                    row.rtol,
                    row.atol,
                )
            ]
        if problems:
            failing[f"{row.chapter}/{row.figure}"] = problems
    return failing


def fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return "0" if x == 0 else f"{x:.2g}"


def write_markdown(
    path: Path,
    roots: list[Path],
    columns: pd.DataFrame,
    figures: pd.DataFrame,
    problems: list[str],
    all_pairs: bool,
    failing: dict | None,
    note: str = "",
) -> None:
    lines = [
        "# Figure-data spread across CPU kernel types and thread counts",
        "",
        f"Runs compared ({'all pairs' if all_pairs else 'each against the first'}): "
        + ", ".join(f"`{label(r)}`" for r in roots)
        + ".",
        "",
        f"Rule: near zero = both runs |value| < max({NEAR_ZERO:g}, "
        f"{NEAR_ZERO_FRACTION:g} x largest |value| of the column); rtol = ceil1(max("
        f"{SAFETY:g} x max relative deviation of the other entries, {RTOL_FLOOR:g})); "
        f"atol = ceil1(max({SAFETY:g} x max absolute deviation of the near-zero entries, "
        f"{ATOL_FLOOR:g})); flagged when rtol > {TOO_LOOSE:g}.",
        "",
        *[
            f"- `{label(r)}`: {(r / '.done').read_text().strip()}"
            for r in roots
            if (r / ".done").exists()
        ],
        "",
        *([note, ""] if note else []),
        "## Derived tolerances per figure",
        "",
        "| chapter | figure | max rel dev | max abs dev near 0 | widest column | exact "
        "columns | rtol | atol | current rtol | current atol | PNG RMS | columns below atol |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in figures.itertuples():
        flag = " **(too loose)**" if r.too_loose else ""
        png = fmt(r.png_rms) + (f" **(> {PNG_RMS:g})**" if r.png_rms > PNG_RMS else "")
        lines.append(
            f"| {r.chapter} | {r.figure} | {fmt(r.max_rel_dev)} | "
            f"{fmt(r.max_abs_dev_near_zero)} | {r.widest_column} | "
            f"{r.exact_columns}/{r.numeric_columns} | {r.rtol:g}{flag} | "
            f"{r.atol:g} | {fmt(r.current_rtol)} | {fmt(r.current_atol)} | "
            f"{png} | {r.unchecked_columns} |"
        )
    if failing is not None:
        lines += ["", "## Baselines the reference run no longer matches (derived tolerances)", ""]
        lines += [f"- `{k}`: {'; '.join(v)}" for k, v in sorted(failing.items())] or ["None."]
    lines += ["", "## Problems", ""] + ([f"- {p}" for p in problems] or ["None."])
    lines += [
        "",
        "## Per column",
        "",
        "| chapter | figure | table | column | max abs dev | max rel dev | max abs dev "
        "near 0 | values that differ | typical magnitude |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in columns.itertuples():
        lines.append(
            f"| {r.chapter} | {r.figure} | {r.table} | {r.column} | "
            f"{fmt(r.max_abs_dev)} | {fmt(r.max_rel_dev)} | "
            f"{fmt(r.max_abs_dev_near_zero)} | {r.n_differ}/{r.rows} | "
            f"{fmt(r.typical_magnitude)} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", type=Path, help="results roots (first: reference)")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument(
        "--against-first",
        action="store_true",
        help="compare each run with the first only (default: all pairs)",
    )
    parser.add_argument(
        "--baselines",
        type=Path,
        default=None,
        help="also list the figures whose baselines (e.g. tests/baselines) the "
        "reference run no longer matches under the derived tolerances",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="output path without suffix")
    parser.add_argument(
        "--note",
        default="",
        help="a paragraph for the report (e.g. what the configurations do not vary)",
    )
    args = parser.parse_args(argv)
    if len(args.roots) < 2:
        parser.error("need at least two results roots")
    all_pairs = not args.against_first
    columns, problems = measure(args.roots, args.profile, all_pairs)
    figures = figure_tolerances(
        columns, args.roots, args.profile, image_spread(args.roots, args.profile, all_pairs)
    )
    failing = (
        check_baselines(figures, args.roots[0], args.baselines, args.profile)
        if args.baselines
        else None
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    columns.to_csv(args.out.with_suffix(".csv"), index=False, float_format="%.3g")
    figures.to_csv(
        args.out.parent / f"{args.out.name}_figures.csv", index=False, float_format="%.3g"
    )
    write_markdown(
        args.out.with_suffix(".md"),
        args.roots,
        columns,
        figures,
        problems,
        all_pairs,
        failing,
        args.note,
    )
    with pd.option_context(
        "display.width", 200, "display.max_rows", 500, "display.float_format", "{:.2g}".format
    ):
        print(figures.drop(columns=["max_abs_dev"]).to_string(index=False))
    for r in figures[figures["png_rms"] > PNG_RMS].itertuples():
        print(
            f"problem: {r.chapter}/{r.figure}.png moves by RMS {r.png_rms:.1f} > {PNG_RMS:g} "
            "between runs"
        )
    for p in problems:
        print("problem:", p)
    if failing is not None:
        for key, value in sorted(failing.items()):
            print(f"baseline mismatch {key}: {value[0]}" + (" ..." if len(value) > 1 else ""))
    print(f"wrote {args.out.with_suffix('.csv')} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
