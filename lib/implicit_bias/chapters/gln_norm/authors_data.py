"""The GLN claims decided on the authors' own per-seed results, by the book's one rule.

The authors published the per-seed raw results behind their Figures 2 and 4
(data/reference/lippl2022/gln_per_seed.csv, 3 context seeds; its README gives the source).
`reference.reference_frame` reads them as `gln_frame` rows, so every statistic of the chapter
whose inputs they hold is computed on their numbers by the same function as on ours
(`analysis.gln_metrics` for Sec. 4.1 and C.1, `analysis.best_metrics` for Fig. 2c), and each
claim on it is decided by `core.claims.evaluate`, the book's rule (`core.decision`), with no
known deviation and no seed plan (both are about our runs): the verdict the paper's claim
gets on its own data.

What their tables do not cover has no verdict here: the ReLU side (relu.csv holds means over
seeds, no per-seed values), group sparsity (no solutions), the authors' SVM-RC construction,
finite-time training, and the checks that compare our runs with theirs. The `_authors_program`
variants of the SVM-L2 claims read the authors' SVM-L2, which is that program's output.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.site.claims_table import title
from implicit_bias.core.verdicts import claims as claims_module
from implicit_bias.core.verdicts.decision import Evidence
from implicit_bias.core.verdicts.tally import state

from .analysis import L2_STATISTICS, best_metrics, gln_metrics
from .reference import reference_frame

COLUMN = "on the authors' data"


def authors_metrics(root=None) -> dict:
    """The chapter's metrics computed on the authors' per-seed results (`root`: the folder of
    their tables, default data/reference/lippl2022), only those their results determine: per-
    seed evidence with at least two seeds, or a finite number."""
    frame = reference_frame(root)
    metrics = {**gln_metrics(frame), **best_metrics(frame, frame.iloc[:0])}
    # their published SVM-L2 is their program's (the README: column-major reshape), so the
    # claims on that program read the same numbers as the claims on SVM-L2
    for _, ours, variant in L2_STATISTICS:
        if ours in metrics:
            metrics[variant] = metrics[ours]
    return {name: value for name, value in metrics.items() if _determined(value)}


def _determined(value) -> bool:
    if isinstance(value, Evidence):
        return len(value.values) >= 2
    return isinstance(value, (int, float)) and math.isfinite(value)


def authors_verdicts(claims: list[dict], metrics: dict, profile: str = "paper") -> pd.DataFrame:
    """One row per claim (active at `profile`) whose metric `metrics` holds: the verdict the
    book's rule gives on it over all the authors' seeds, its estimate and 95% interval, and
    their number. The claim's known deviation and seed plan are statements about our runs
    and our seeds, and are left out."""
    rows = []
    for claim in claims:
        if profile not in claim["profiles"] or claim["metric"] not in metrics:
            continue
        ours_only = ("known_deviation", "seed_plan")
        plain = {k: v for k, v in claim.items() if k not in ours_only}
        row = claims_module.evaluate(plain, {claim["metric"]: metrics[claim["metric"]]}, profile)
        seeds = row["seeds"] or {}
        low, high = seeds.get("interval") or (None, None)
        rows.append(
            {
                "id": claim["id"],
                "status": row["status"],
                "estimate": row["value"],
                "low": low,
                "high": high,
                "seeds": seeds.get("n"),
            }
        )
    return pd.DataFrame(rows, columns=["id", "status", "estimate", "low", "high", "seeds"])


def verdicts(profile: str = "paper", root=None) -> pd.DataFrame:
    """`authors_verdicts` of the chapter's claims active at `profile`."""
    claims = claims_module.load_claims("gln_norm")
    return authors_verdicts(claims, authors_metrics(root), profile)


def verdict_text(row) -> str:
    """A verdict as the claims table shows it: status, estimate and interval."""
    return _verdict(row["status"], row["estimate"], row["low"], row["high"])


def claims_column(verdicts: pd.DataFrame) -> dict[str, dict[str, str]]:
    """The claims table's column "on the authors' data" ({claim id: text}) for
    `Chapter.check_claims(metrics, columns=...)`."""
    return {COLUMN: {row["id"]: verdict_text(row) for _, row in verdicts.iterrows()}}


REPORT_COLUMNS = ["id", "status", "estimate", "low", "high", "seeds", "state", "title", "evidence"]


def report_verdicts(rows: list[dict]) -> pd.DataFrame:
    """The rows of a claims report (`check`'s, or a stored report's "claims") in
    `authors_verdicts`' columns, with what the page says of each: its state in the badge's
    words (`tally.state`), its title in words (the claims table's, with where the paper says
    it) and its known deviation's evidence."""
    out = []
    for row in rows:
        low, high = (row.get("seeds") or {}).get("interval") or (None, None)
        where = f" ({row['where']})" if row.get("where") else ""
        out.append(
            {
                "id": row["id"],
                "status": row["status"],
                "estimate": row["value"],
                "low": low,
                "high": high,
                "seeds": (row.get("seeds") or {}).get("n"),
                "state": state(row),
                "title": title(row) + where,
                "evidence": row.get("evidence"),
            }
        )
    return pd.DataFrame(out, columns=REPORT_COLUMNS)


# A known deviation is the rule's "fail" on our runs, recorded; an unexpected pass its "pass".
OUTCOME = {claims_module.KNOWN: claims_module.FAIL, claims_module.UNEXPECTED: claims_module.PASS}

# The claims whose metric reads median-init inconsistencies, where the authors compared each
# SVM with a network other than the one whose error they report (the section on Fig. 2a, b).
MEDIAN_INIT_INCONSISTENCY = {
    "inconsistency_substantial",
    "inconsistency_below_uncorrelated",
    "inconsistency_svm_l2_higher",
    "inconsistency_svm_l2_higher_authors_program",
}
# The claims on SVM-L2 at H = 100, C = 4, where the authors' program has no unique minimizer
# (objective zero at the optimum) and their numbers are OSQP's (the section on the authors'
# SVM-L2).
MINIMIZER = {
    "c4_svm_l2_beats_svm_gln_at_100_units",
    "c4_svm_l2_beats_svm_gln_at_100_units_authors_program",
}
VARIANT = "_authors_program"


def _overlap(a, b) -> bool:
    return bool(a["low"] <= b["high"] and b["low"] <= a["high"])


def disagreements(ours: pd.DataFrame, theirs: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict on the book's runs (`ours`, from `report_verdicts`) differs
    from the verdict on the authors' data (`theirs`, from `authors_verdicts`): a known
    deviation counts as the fail it records. Each with both verdicts and why, as far as the
    chapter has found it (`why`: one of `program`, `median init`, `minimizer`, `seeds`,
    `evidence` (what the claim's known deviation records of our runs), or `not explained`),
    and, for the SVM-L2 claims, the verdict of our run of the authors' program (`variant`).
    `ours_state` and `variant_state` are the states the page shows (the badge's words);
    `title` names the claim in words (its id where `ours` has no title)."""
    mine = ours.set_index("id")
    rows = []
    for _, their in theirs.iterrows():
        if their["id"] not in mine.index:
            continue
        our = mine.loc[their["id"]]
        ours_outcome = OUTCOME.get(our["status"], our["status"])
        if ours_outcome == their["status"]:
            continue
        variant = their["id"] + VARIANT
        variant_status = variant_state = None
        if variant in mine.index:
            variant_status = OUTCOME.get(mine.loc[variant, "status"], mine.loc[variant, "status"])
            variant_state = _shown(mine.loc[variant])
        evidence = our.get("evidence")
        if variant_status == their["status"]:
            why = "program"
        elif their["id"] in MEDIAN_INIT_INCONSISTENCY:
            why = "median init"
        elif their["id"] in MINIMIZER:
            why = "minimizer"
        elif claims_module.INCONCLUSIVE in (ours_outcome, their["status"]) and _overlap(our, their):
            why = "seeds"
        elif isinstance(evidence, str) and evidence.strip():
            why = "evidence"
        else:
            why = "not explained"
        rows.append(
            {
                "id": their["id"],
                "title": our.get("title") or their["id"],
                "ours": our["status"],
                "ours_state": _shown(our),
                "ours_estimate": our["estimate"],
                "ours_low": our["low"],
                "ours_high": our["high"],
                "theirs": their["status"],
                "theirs_estimate": their["estimate"],
                "theirs_low": their["low"],
                "theirs_high": their["high"],
                "variant": variant_status if variant in mine.index else None,
                "variant_state": variant_state,
                "variant_estimate": mine.loc[variant, "estimate"]
                if variant in mine.index
                else None,
                "why": why,
                "evidence": evidence if why == "evidence" else None,
            }
        )
    return pd.DataFrame(rows)


def _shown(row) -> str:
    """A `report_verdicts` row's state as the page shows it (its status where it has none)."""
    shown = row.get("state")
    return str(shown) if isinstance(shown, str) and shown else str(row["status"])


WHY = {
    "program": (
        "their SVM-L2 is their program, which reshapes the predictor matrix in column-major "
        "order and so ties other coordinates than the paper's SVM-L2 (section on the "
        "authors' SVM-L2); with that program in SVM-L2's place our runs give {variant_state} "
        "({variant_estimate:.3g}), as their data does"
    ),
    "median init": (
        "their median-init inconsistencies compare each SVM with a reloaded GD network whose "
        "median cutoffs were redrawn at random, not the network whose error they report "
        "(section on Fig. 2a, b); ours compare with the trained network"
    ),
    "minimizer": (
        "at H = 100 the authors' program has no unique minimizer (its objective is zero at "
        "the optimum) and their numbers are those of the minimizer OSQP returned; neither the "
        "paper's SVM-L2 nor the minimum-norm minimizer of their program shows the effect "
        "(section on the authors' SVM-L2)"
    ),
    "seeds": (
        "the two intervals overlap: with 3 seeds a side (t with 2 degrees of freedom, "
        "4.3 standard errors each way) one side's interval clears the region's edge and the "
        "other's does not"
    ),
    "evidence": "none of the reasons above; what the claim's row records of our runs: {evidence}",
    "not explained": "not explained yet",
}


def _verdict(status, estimate, low, high) -> str:
    if low is None or pd.isna(low):
        return f"{status} ({estimate:.3g})"
    return f"{status} ({estimate:.3g}; 95% CI [{low:.3g}, {high:.3g}])"


def disagreements_markdown(table: pd.DataFrame) -> str:
    """`disagreements` as a list for the page: each claim in words, both verdicts with their
    numbers (ours in the state the claims table shows), and why."""
    if table.empty:
        return "The book's runs and the authors' data reach the same verdict on every claim."
    lines = []
    for _, r in table.iterrows():
        ours = _verdict(r["ours_state"], r["ours_estimate"], r["ours_low"], r["ours_high"])
        theirs = _verdict(r["theirs"], r["theirs_estimate"], r["theirs_low"], r["theirs_high"])
        why = WHY[r["why"]].format(
            variant_state=r["variant_state"],
            variant_estimate=r["variant_estimate"] or 0.0,
            evidence=" ".join(str(r.get("evidence") or "").split()),
        )
        why = why.rstrip(".")  # the line ends with its own full stop
        lines.append(f"- {r['title']}: ours {ours}; the authors' data {theirs}. Why: {why}.")
    return "\n".join(lines)


def committed_paper_rows() -> list[dict] | None:
    """The claims rows of the committed paper-profile report (results/paper/claims), or None."""
    path = project_root() / "results" / "paper" / "claims" / "gln_norm.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())["claims"]


def disagreements_text(profile: str, report: claims_module.ClaimsReport) -> str:
    """Where the book's paper-profile verdicts (this run's at the paper profile, else the
    committed report's) and the verdicts on the authors' data differ, and why, for the page."""
    rows = report.rows if profile == "paper" else committed_paper_rows()
    if rows is None:
        return "No committed paper-profile results to compare the authors' data with."
    return disagreements_markdown(disagreements(report_verdicts(rows), verdicts("paper")))
