"""The spread that float32 arithmetic puts into a chapter's figure data: the same smoke run in
float64 (`--set dtype=float64`) against its float32 figures (the smoke baselines), figure by
figure, and the tolerances `.ci/gpu-tolerances.yaml` derives from it for a float32 run on CUDA
compared with the committed float32 CPU results.

    python -m implicit_bias run gln_norm --profile smoke --device cpu --set dtype=float64
    python benchmarks/gpu_float32_spread.py gln_norm results/custom/<run>/smoke/figures/gln_norm

Rule: a figure whose float32 and float64 data agree exactly keeps its own tolerances (no entry).
Otherwise its entry is atol = ceil1(10 x the largest absolute deviation of any entry), and the
figure keeps its own rtol: the deviations are of error rates and of their standard errors over
seeds (a validation image that float32 classifies differently moves both by a fixed amount,
which is an absolute, not a relative, change; a relative rule on a standard error of a few
1e-3 would need rtol ~ 3, that is no check at all). Why it bounds float32 on CUDA against
float32 on a CPU: both differ from the float64 run by their own float32 round-off, of the size
measured here; the factor 10 covers two such differences and the GPU's reordered sums.
Writes benchmarks/results/gpu_float32_spread.md and prints the YAML entries.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))


def ceil1(x: float) -> float:
    """Round up to one significant digit."""
    if x <= 0:
        return 0.0
    exponent = math.floor(math.log10(x))
    return math.ceil(x / 10**exponent - 1e-12) * 10**exponent


def spread(float64: pd.DataFrame, float32: pd.DataFrame) -> tuple[float, float, str]:
    """(largest relative deviation of the entries away from zero (|value| >= max(1e-9, 1e-3 x
    the column's largest |value|)), largest absolute deviation of any entry, the column of the
    largest absolute one)."""
    rel_worst, abs_worst, where = 0.0, 0.0, ""
    if len(float64) != len(float32):
        return math.inf, math.inf, "row counts differ"
    for column in float32.columns:
        if column not in float64 or not pd.api.types.is_numeric_dtype(float32[column]):
            continue
        a = float64[column].to_numpy(float)
        b = float32[column].to_numpy(float)
        finite = np.isfinite(a) & np.isfinite(b)
        if not finite.any():
            continue
        scale = np.nanmax(np.abs(b[finite]))
        near = finite & (np.abs(b) < max(1e-9, 1e-3 * scale))
        far = finite & ~near
        if far.any():
            rel_worst = max(rel_worst, float(np.max(np.abs(a[far] - b[far]) / np.abs(b[far]))))
        deviation = float(np.max(np.abs(a[finite] - b[finite])))
        if deviation > abs_worst:
            abs_worst, where = deviation, column
    return rel_worst, abs_worst, where


def main(chapter: str, float64_dir: Path) -> None:
    from implicit_bias.core.site.regression import figure_baseline_dir

    rows, yaml_lines = [], [f"{chapter}:"]
    for meta_path in sorted(float64_dir.glob("*.json")):
        fig_id = meta_path.stem
        reference = figure_baseline_dir(chapter, fig_id)
        rel, abs_, where = 0.0, 0.0, ""
        for table in json.loads(meta_path.read_text())["tables"]:
            if not (reference / table).exists():
                continue
            r, a, w = spread(pd.read_csv(float64_dir / table), pd.read_csv(reference / table))
            if r > rel:
                rel, where = r, f"{table}:{w}"
            abs_ = max(abs_, a)
        atol = ceil1(10 * abs_)
        rows.append((fig_id, rel, abs_, where, atol))
        if atol:
            yaml_lines.append(
                f"  {fig_id}: {{atol: {atol:.1g}}}  # float32 vs float64 on CPU: largest "
                f"abs. dev {abs_:.2g} ({where}), largest rel. dev {rel:.2g}"
            )
    table = [
        f"# float32 spread of {chapter}'s figure data (smoke profile, CPU)",
        "",
        "The smoke run in float64 against the float32 smoke baselines (tests/baselines/), "
        "per figure; the rule is in benchmarks/gpu_float32_spread.py. atol for a float32 run "
        "on CUDA against the committed float32 CPU results: ceil1(10 x largest abs. dev); "
        "figures that agree exactly keep their own tolerances (-).",
        "",
        "| figure | largest rel. dev (away from 0) | largest abs. dev | where | atol |",
        "|---|---|---|---|---|",
    ]
    table += [
        f"| {f} | {r:.2g} | {a:.2g} | {w if a else '-'} | {f'{at:.1g}' if at else '-'} |"
        for f, r, a, w, at in rows
    ]
    out = ROOT / "benchmarks" / "results" / "gpu_float32_spread.md"
    out.write_text("\n".join(table) + "\n")
    print("\n".join(yaml_lines))
    print(f"written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], Path(sys.argv[2]))
