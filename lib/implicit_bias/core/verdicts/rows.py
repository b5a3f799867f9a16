"""A claim's row in words: its expectation, interval, seed plan and the HTML pieces of the claims
table (`claims.ClaimsReport`), kept apart from the rule that decides it."""

from __future__ import annotations

from . import planning, stages
from .planning import undecidable_text
from .tally import estimate_below_practical

INCONCLUSIVE = "inconclusive"


def expect_text(row: dict) -> str:
    """The expectation as the reader should read it: with its effect word, and the region the
    rule decides per-seed evidence on."""
    text = row["expect"]
    if row.get("effect"):
        text += f" ({row['effect']}, {row.get('unit')})"
    if row.get("region") and row["region"] != row["expect"]:
        text += f"; decided on: {row['region']}"
    if row.get("practical"):  # a significant difference wholly below it is not green
        text += f"; practical size {row['practical']:.3g}"
    return text


def resolution_bound(seeds: dict | None) -> bool:
    """Whether an interval is as wide as the resolution of the grid its metric is read on, not
    the seeds' spread: more seeds cannot narrow it (a finer grid would)."""
    if not seeds or not seeds.get("resolution") or seeds.get("interval") is None:
        return False
    low, high = seeds["interval"]
    return low is not None and (high - low) / 2 <= seeds["resolution"] * (1 + 1e-9)


def plan_summary(row: dict) -> str:
    """The seed plan's part of a row: the stage of its verdict, and the seeds an open claim
    would need."""
    parts = []
    if row.get("stage"):
        plan = row.get("seed_plan") or {}
        replacement = plan.get("replacement") or {}
        if plan.get("void") and replacement.get("void"):
            parts.append(
                f"{row['stage']} verdict; replacement plan void: {replacement['void']}; the "
                f"first plan was void: {plan['void']}"
            )
        elif plan.get("void") and plan.get("replacement"):
            parts.append(
                f"{row['stage']} verdict; replacement plan: "
                f"{plan['replacement']['new_seeds']} new seeds; the first plan was void: "
                f"{plan['void']}"
            )
        elif plan.get("void"):
            parts.append(f"{row['stage']} verdict; plan void: {plan['void']}")
        elif plan.get("borrowed_from"):  # an audit, on its claim's seeds (`stages`)
            parts.append(
                f"decided on the seeds of {plan['borrowed_from']}'s plan ({row['stage']} "
                "seeds), as the claim it audits; not a decision of its own"
            )
        else:
            parts.append(f"{row['stage']} verdict; plan: {plan.get('new_seeds')} new seeds")
    if stages.summary(row):
        parts.append(stages.summary(row))
    if estimate_below_practical(row):  # green by the interval, not by the estimate
        parts.append(
            f"the estimate lies below the practical size {row['practical']:.3g}: the pass rests "
            "on the interval reaching past it"
        )
    if undecidable_text(row) and not resolution_bound(row.get("seeds")):
        parts.append(undecidable_text(row))
    if row.get("status") == INCONCLUSIVE and row.get("seeds"):
        needs = row.get("needs_seeds")
        if resolution_bound(row["seeds"]):
            parts.append("the grid's resolution sets the interval: more seeds cannot decide it")
        elif needs:
            parts.append(f"a decision needs {needs} new seeds")
        elif row["seeds"].get("n") == 1:  # no spread to plan from
            parts.append("one usable seed: the seeds a decision needs are unknown until a second")
        else:
            parts.append(f"a decision needs more than {planning.SEARCH_SEEDS} new seeds")
    return "; ".join(parts)


def seeds_summary(seeds: dict | None) -> str:
    """One line for per-seed evidence: interval, test, degrees of freedom, detectable effect
    (for a statement about every run: how many runs lie outside its region, and the worst)."""
    if not seeds:
        return ""
    if seeds.get("scope") == "every_run":
        return (  # one value a seed (its worst run): the counts are of seeds
            f"every run decides: {seeds['outside']} of {seeds['runs']} seeds outside the "
            f"region at their worst run; worst {seeds['worst']:.3g}"
        )
    low, high = seeds["interval"]
    interval = "–" if low is None else f"[{low:.3g}, {high:.3g}]"
    df = "–" if seeds["df"] is None else f"{seeds['df']:.3g}"
    detect = "–" if seeds["detectable"] is None else f"{seeds['detectable']:.2g}"
    method = f" ({seeds['method']})" if seeds.get("method") else ""
    if seeds.get("method", "").startswith("t on the"):
        detect += " on that scale"
    return (
        f"95% CI {interval}{method}; {seeds['test']}, n = {seeds['n']}, df = {df}; "
        f"detectable {detect}" + identity_summary(seeds.get("identity"))
    )


def identity_summary(identity: dict | None) -> str:
    """An `exact` claim's check at the Monte Carlo's precision (`core.verdicts.identities`)."""
    if not identity:
        return ""
    k, resolved = identity["cells"], identity["resolved"]
    low, high = identity["interval"]
    return (
        f"; formula tested in {k} case{'s' if k != 1 else ''} at the {identity['level']:.4g} "
        f"level each: {len(resolved)} resolve a deviation"
        + (f" ({', '.join(resolved)})" if resolved else "")
        + f"; {'shown' if resolved else 'farthest from 0'}: {identity['farthest']}, "
        + (f"{identity['estimate']:+.3g} " if identity.get("estimate") is not None else "")
        + f"[{low:.3g}, {high:.3g}]"
        + confirmation_summary(identity.get("confirmation"))
    )


def confirmation_summary(confirmation: dict | None) -> str:
    """The second look of the screen-then-confirm rule (`identities.confirm`), per case."""
    if not confirmation:
        return ""
    parts = [
        f"{case}: {c['estimate']:+.2g} (standard error {c['se']:.2g}, at most "
        f"{c['required_se']:.2g} required), "
        + ("resolved again" if c["resolved"] else "no deviation resolved")
        for case, c in confirmation["cells"].items()
    ]
    verdict = "a false alarm" if confirmation.get("cause") else "the fail stands"
    return f"; confirmed on independent draws at the {confirmation['level']:.4g} level: " + (
        "; ".join(parts) + f": {verdict}"
    )


def _columns_html(row: dict, columns: list[str]) -> str:
    values = row.get("columns") or {}
    return "".join(
        f"<td class='claim-column'><small>{_escape(values.get(name) or '–')}</small></td>"
        for name in columns
    )


def _dropped_html(dropped) -> str:
    return f"<br><small>{dropped} unconverged run(s) left out</small>" if dropped else ""


def _bound_html(bound: dict | None) -> str:
    """Where the expectation's number comes from: the paper's words or the book's reason."""
    if not bound:
        return ""
    who = "the paper's" if bound["origin"] == "paper" else "the book's"
    return f"<br><small>number: {who}: {_escape(bound['why'])}</small>"


def _paper_html(value) -> str:
    return "" if value is None else f"<br><small>paper: {_fmt(value)}</small>"


def _small(text: str) -> str:
    return f"<br><small>{_escape(text)}</small>" if text else ""


def _seeds_html(seeds: dict | None) -> str:
    return f"<br><small>{_escape(seeds_summary(seeds))}</small>" if seeds else ""


def _maths(text) -> str:
    """Text whose `$...$` is maths (a claim's `display`, its `where`): the words escaped, the
    maths in the spans MathJax typesets on the page; text without a `$` as `_escape`."""
    import re

    parts = re.split(r"\$([^$]+)\$", str(text))
    return "".join(
        _escape(p)
        if i % 2 == 0
        else f'<span class="math notranslate nohighlight">\\({_escape(p)}\\)</span>'
        for i, p in enumerate(parts)
    )


def _escape(text) -> str:
    import html

    return html.escape(str(text)) if text is not None else ""


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return _escape(value)
