"""__title__

Frames and metrics. Every metric a claim names is written here by its literal
name, so `grep <metric>` finds where it is computed."""

from __future__ import annotations

import pandas as pd


def runs_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per run: its parameters and outcome."""
    rows = [
        {
            "d": t["d"],
            "seed": t["seed"],
            "status": r["status"],
            "steps": r.get("steps"),
            "rel_distance": r.get("rel_distance"),
            "residual": r.get("residual"),
        }
        for t, r in zip(tasks, results)
    ]
    return pd.DataFrame(rows)


def min_norm_metrics(frame: pd.DataFrame) -> dict:
    """Claims are checked on converged runs only; unconverged ones are counted. (A chapter's
    own metrics select runs with `core.verdicts.evidence.converged_runs` and hand claims
    `Value(x, dropped=n)`, or per-seed `Evidence` from `core.verdicts.decision` for comparisons.)"""
    converged = frame[frame["status"] == "ok"]
    return {
        "max_rel_distance_to_min_norm": float(converged["rel_distance"].max()),
        "unconverged_runs": int((frame["status"] != "ok").sum()),
    }
