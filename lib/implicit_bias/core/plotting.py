"""One plotting style for the whole book, and figure output with its data for regression tests."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from .paths import figures_dir

STYLE = Path(__file__).with_name("implicit_bias.mplstyle")
# Okabe-Ito palette (colorblind-safe), in the style's cycle order.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
PANEL_WIDTH, PANEL_HEIGHT = 3.4, 2.8  # inches


def use_style() -> None:
    plt.style.use(str(STYLE))


def figure(
    nrows: int = 1,
    ncols: int = 1,
    width: float | None = None,
    height: float | None = None,
    **kwargs,
):
    """A new figure in the book's style: `fig, axes = figure(1, 2)`.

    The figure remembers the function that asked for it (`drawn_by`, e.g.
    `lib/implicit_bias/chapters/gln_norm/figures.py, fig2a`), which its provenance line shows."""
    use_style()
    size = (width or PANEL_WIDTH * ncols, height or PANEL_HEIGHT * nrows)
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=ncols * nrows == 1, **kwargs)
    fig.drawn_by = _caller()  # type: ignore[attr-defined]
    return fig, axes


def _caller() -> str | None:
    """`<path in the repository>, <function>` of the code that called `figure`, when that code
    is the library's (a notebook cell's drawing is described by the notebook)."""
    import sys

    frame = sys._getframe(2)
    path = Path(frame.f_code.co_filename).resolve()
    lib = Path(__file__).resolve().parents[2]  # .../lib
    if not path.is_relative_to(lib):
        return None
    return f"{path.relative_to(lib.parent).as_posix()}, {frame.f_code.co_name}"


def _clean(text: str) -> str:
    """Axis text without TeX markup, for words: `$\\|w\\|$` -> `|w|`."""
    import re

    text = text.replace("$", "").replace("\\mathrm", "").replace("\\|", "|")
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    return " ".join(re.sub(r"[{}]", "", text).split())  # one line: titles may break lines


def describe_panels(fig) -> list[str]:
    """One phrase per panel with content: its title, what it plots against what, its series."""
    phrases = []
    for ax in fig.get_axes():
        if not ax.has_data() and not ax.get_title():
            continue  # a colorbar or an empty slot
        if ax.get_label() == "<colorbar>":
            continue
        title, x, y = _clean(ax.get_title()), _clean(ax.get_xlabel()), _clean(ax.get_ylabel())
        phrase = title or "a panel"
        if x and y:
            phrase += f" ({y} against {x})"
        labels = [_clean(label) for label in ax.get_legend_handles_labels()[1]]
        labels = [label for label in labels if label and not label.startswith("_")]
        if labels:
            phrase += f", series: {', '.join(dict.fromkeys(labels))}"
        phrases.append(phrase)
    return phrases


def alt_text(fig) -> str:
    """The figure in words, for readers who cannot see it."""
    panels = describe_panels(fig)
    title = _clean(fig._suptitle.get_text()) if getattr(fig, "_suptitle", None) else ""
    head = f"{title}. " if title else ""
    if not panels:
        return head + "A figure."
    count = "One panel" if len(panels) == 1 else f"{len(panels)} panels"
    return f"{head}{count}: " + "; ".join(panels) + "."


def _frames(data) -> dict[str, pd.DataFrame]:
    if isinstance(data, pd.DataFrame):
        return {"": data}
    if isinstance(data, dict) and all(isinstance(v, pd.DataFrame) for v in data.values()):
        return {str(k): v for k, v in data.items()}
    raise TypeError("figure data must be a pandas DataFrame or a dict of DataFrames")


def save_figure(
    fig, chapter: str, fig_id: str, data, profile: str, rtol: float = 1e-6, atol: float = 1e-9
) -> Path:
    """Write `<fig_id>.png`, its data (`<fig_id>.csv`, or `<fig_id>__<name>.csv` for several
    tables) and `<fig_id>.json` (tolerances for the figure-regression test).

    Returns the PNG's path. The numbers plotted are the regression target; the PNG is compared
    too, with matplotlib's image comparison.
    """
    if not fig_id.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"figure id {fig_id!r}: use letters, digits, '_' and '-'")
    out = figures_dir(profile, chapter)
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    for name, frame in _frames(data).items():
        csv = out / (f"{fig_id}.csv" if not name else f"{fig_id}__{name}.csv")
        frame.to_csv(csv, index=False, float_format="%.10g")
        tables.append(csv.name)
    meta = {
        "chapter": chapter,
        "figure": fig_id,
        "profile": profile,
        "rtol": rtol,
        "atol": atol,
        "tables": tables,
    }
    (out / f"{fig_id}.json").write_text(json.dumps(meta, indent=2))
    png = out / f"{fig_id}.png"
    # Fixed metadata so identical figures give identical files.
    fig.savefig(png, metadata={"Software": None})
    return png
