"""One plotting style for the whole book, and figure output with its data for regression tests."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..engine.paths import atomic_path, figures_dir, output_path, write_atomic
from .numbers import power_of_ten  # noqa: F401  (the figures' axes and labels use it from here)

STYLE = Path(__file__).with_name("implicit_bias.mplstyle")
# Okabe-Ito palette (colorblind-safe), in the style's cycle order.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# Legibility on the website. A figure inch is DISPLAY_DPI CSS pixels on the page (the website
# sets the image's width so; the PNG holds SAVE_DPI / DISPLAY_DPI = 2 pixels per CSS pixel for
# sharp text on high-density screens). MAX_WIDTH is the page's column at a 1280 px wide window
# (740 px: `book/_css/book.css` lets figures use the article's full width), so no figure is
# scaled down there and a font of MIN_FONT_PT points shows at MIN_FONT_PT * 100 / 96 >= 9 pt.
# Panels go at most MAX_COLUMNS to a row (each then at least 370 px wide); a figure asked for
# with more columns wraps them into further rows. Smaller fonts are raised to MIN_FONT_PT and
# overlapping tick labels are turned, when the figure is saved (`legibility` measures it all).
DISPLAY_DPI, SAVE_DPI = 100, 200
MAX_WIDTH = 7.4  # inches
MAX_COLUMNS = 2
PANEL_WIDTH, PANEL_HEIGHT = MAX_WIDTH / MAX_COLUMNS, 2.8  # inches: a panel, by default
MIN_FONT_PT = 9.0
LEGIBILITY_KEY = "implicit-bias-legibility"  # the PNG text chunk holding `legibility(fig)`


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

    `axes` has the shape asked for (a single Axes for one panel), but a row of more than
    MAX_COLUMNS panels is laid out over several rows of MAX_COLUMNS (the last one centred), and
    the figure is at most MAX_WIDTH wide: a figure of several columns spans it, with the
    height of a row as asked (`height / nrows`).

    The figure remembers the function that asked for it (`drawn_by`, e.g.
    `lib/implicit_bias/chapters/gln_norm/figures.py, fig2a`), which its provenance line shows."""
    use_style()
    row_height = (height or PANEL_HEIGHT * nrows) / nrows
    if ncols == 1:
        size = (min(width or PANEL_WIDTH, MAX_WIDTH), row_height * nrows)
    else:
        size = (MAX_WIDTH, row_height * nrows * -(-ncols // MAX_COLUMNS))
    if ncols <= MAX_COLUMNS:
        fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=ncols * nrows == 1, **kwargs)
    else:
        fig, axes = _wrapped(nrows, ncols, size, **kwargs)
    fig.drawn_by = _caller()  # type: ignore[attr-defined]
    return fig, axes


def _wrapped(nrows: int, ncols: int, size, sharex=False, sharey=False, subplot_kw=None):
    """`nrows` x `ncols` axes on rows of MAX_COLUMNS panels: each asked-for row becomes
    ceil(ncols / MAX_COLUMNS) rows, its last one centred (a grid of half-panel columns)."""
    import numpy as np

    per_row = -(-ncols // MAX_COLUMNS)
    fig = plt.figure(figsize=size)
    grid = fig.add_gridspec(nrows * per_row, 2 * MAX_COLUMNS)
    axes = np.empty((nrows, ncols), dtype=object)
    for i in range(nrows):
        for j in range(ncols):
            line, slot = divmod(j, MAX_COLUMNS)
            on_line = min(MAX_COLUMNS, ncols - line * MAX_COLUMNS)
            start = MAX_COLUMNS - on_line + 2 * slot
            share = {
                "sharex": axes[0, 0] if sharex and (i or j) else None,
                "sharey": axes[0, 0] if sharey and (i or j) else None,
            }
            axes[i, j] = fig.add_subplot(
                grid[i * per_row + line, start : start + 2], **share, **(subplot_kw or {})
            )
    return fig, axes


def legend_below(ax, ncol: int = 1, fontsize: float = 7, offset: float = 0.22, **kwargs) -> None:
    """The panel's legend under its axis label, where it covers no data (constrained layout
    makes room for it); `ncol` columns keep it no wider than its panel, `offset` (a fraction
    of the panel's height) clears tall tick labels."""
    ax.legend(
        fontsize=fontsize,
        loc="upper center",
        bbox_to_anchor=(0.5, -offset),
        ncol=ncol,
        frameon=False,
        **kwargs,
    )


def _caller() -> str | None:
    """`<path in the repository>, <function>` of the code that called `figure`, when that code
    is the library's (a notebook cell's drawing is described by the notebook)."""
    import sys

    frame = sys._getframe(2)
    path = Path(frame.f_code.co_filename).resolve()
    lib = Path(__file__).resolve().parents[3]  # .../lib
    if not path.is_relative_to(lib):
        return None
    return f"{path.relative_to(lib.parent).as_posix()}, {frame.f_code.co_name}"


# TeX commands of axis labels and titles, as a screen reader should speak them (Unicode it
# reads out), for alt text and generated captions; unknown commands lose their backslash.
TEX_WORDS = {
    **dict(
        zip(
            "alpha beta gamma delta epsilon varepsilon zeta eta theta kappa lambda mu nu xi pi "
            "rho sigma tau phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi "
            "Psi Omega".split(),
            "αβγδεεζηθκλμνξπρστφφχψωΓΔΘΛΞΠΣΦΨΩ",
        )
    ),
    "ell": "ℓ", "infty": "∞", "langle": "⟨", "rangle": "⟩", "times": "×", "cdot": "·",
    "circ": "∘", "star": "*", "ast": "*", "to": "→", "rightarrow": "→", "leq": "≤", "le": "≤",
    "geq": "≥", "ge": "≥", "approx": "≈", "sim": "~", "propto": "∝", "perp": "⊥",
    "top": "ᵀ", "partial": "∂", "nabla": "∇", "sum": "Σ", "int": "∫", "log": "log",
    "exp": "exp", "min": "min", "max": "max", "in": "∈", "pm": "±", "neq": "≠", "ne": "≠",
}  # fmt: skip
_SUPERSCRIPT = str.maketrans("0123456789+-=()niT*", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵀ*")
_SUBSCRIPT = str.maketrans("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")


def _script(body: str, table: dict, word: str) -> str:
    """A sub- or superscript in Unicode where every character has one, else in words."""
    mapped = body.translate(table)
    if all(a != b or a == "*" for a, b in zip(body, mapped)) and body:
        return mapped
    return f"{word}{body}" if len(body) == 1 else f"{word}({body})"


def _scripted(table: dict, mark: str):
    """A `re.sub` replacement writing the matched script (braced or one character)."""

    def replace(match) -> str:
        body = match[1] if match[1] is not None else match[2]
        return _script(body, table, mark)

    return replace


def _clean(text: str) -> str:
    """Axis text in words a screen reader speaks: TeX markup to Unicode, `$\\|w\\|_2^2$` ->
    `‖w‖₂²`, `$\\langle x, \\beta\\rangle$` -> `⟨x, β⟩` (never `betarangle`). Only math
    (between `$`) has subscripts: outside it an underscore is a space (`w_tilde` -> `w tilde`,
    never `wₜilde`), as matplotlib draws it literally; a caret is still a superscript."""
    parts = text.split("$")
    if len(parts) % 2 == 0:  # an unpaired $ is a dollar sign
        parts[-2:] = ["$".join(parts[-2:])]
    spoken = [_clean_math(p) if i % 2 else _clean_plain(p) for i, p in enumerate(parts)]
    return " ".join("".join(spoken).split())  # one line: titles may break lines


def _clean_plain(text: str) -> str:
    """Text outside math: an underscore is a space; a caret, as in `h_L^{-1}`, a superscript."""
    import re

    text = text.replace("_", " ")
    return re.sub(r"\^(?:\{([^{}]*)\}|(\S))", _scripted(_SUPERSCRIPT, "^"), text)


def _clean_math(text: str) -> str:
    """The TeX of one math span in Unicode and words."""
    import re

    text = text.replace("\\|", "‖").replace("\\!", "").replace("\\,", " ")
    text = re.sub(r"\\(?:mathrm|mathbf|mathit|mathcal|text|operatorname)\s*", "", text)
    text = re.sub(r"\\(hat|tilde|bar)\s*\{?([A-Za-z])\}?", r"\2 \1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: TEX_WORDS.get(m[1], m[1]), text)
    for mark, table in (("^", _SUPERSCRIPT), ("_", _SUBSCRIPT)):
        text = re.sub(re.escape(mark) + r"(?:\{([^{}]*)\}|(.))", _scripted(table, mark), text)
    return re.sub(r"[{}]", "", text)


def describe_panels(fig) -> list[str]:
    """One phrase per panel with content: its title, what it plots against what, its series."""
    phrases = []
    for ax in fig.get_axes():
        if not ax.has_data() and not ax.get_title():
            continue  # a colorbar or an empty slot
        if ax.get_label() == "<colorbar>":
            continue
        title, x, y = _clean(ax.get_title()), _clean(ax.get_xlabel()), _clean(ax.get_ylabel())
        if title:
            phrase = f"{title} ({y} against {x})" if x and y else title
        else:  # no title: what it plots says what it is
            phrase = f"{y} against {x}" if x and y else "a panel"
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

    Each file is written whole (a temporary file renamed into place); under the runner, into
    the run's staging folder (`engine.paths.output_path`), which it swaps into place once the run is
    complete. Returns the PNG's path (where it was written). The numbers plotted are the
    regression target; the PNG is compared too, with matplotlib's image comparison.
    """
    if not fig_id.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"figure id {fig_id!r}: use letters, digits, '_' and '-'")
    # under the runner: the run's staging folder, swapped into place when the run completes
    out = output_path(figures_dir(profile, chapter))
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    for name, frame in _frames(data).items():
        csv = out / (f"{fig_id}.csv" if not name else f"{fig_id}__{name}.csv")
        write_atomic(csv, frame.to_csv(index=False, float_format="%.10g"))
        tables.append(csv.name)
    meta = {
        "chapter": chapter,
        "figure": fig_id,
        "profile": profile,
        "rtol": rtol,
        "atol": atol,
        "tables": tables,
    }
    write_atomic(out / f"{fig_id}.json", json.dumps(meta, indent=2))
    png = out / f"{fig_id}.png"
    measured = make_legible(fig)
    # Fixed metadata so identical figures give identical files; the legibility measurements
    # travel in the PNG, for the website (`implicit_bias.core.site.website`) and its test.
    with atomic_path(png) as tmp:
        fig.savefig(
            tmp,
            format="png",
            dpi=SAVE_DPI,
            metadata={"Software": None, LEGIBILITY_KEY: json.dumps(measured)},
        )
    return png


def _texts(fig):
    """The visible, non-empty texts of the figure (tick labels, labels, titles, legends)."""
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _centre(box, horizontal: bool) -> float:
    return (box.x0 + box.x1) / 2 if horizontal else (box.y0 + box.y1) / 2


def _drawn_labels(ax, axis, renderer, minor: bool = False) -> list:
    """The tick labels of `axis` that are drawn (visible, not empty, inside the axes' span):
    its major labels, or with `minor` its minor ones (a log axis labels some: `2×10¹`)."""
    frame = ax.get_window_extent(renderer)
    horizontal = axis is ax.xaxis
    lo, hi = (frame.x0, frame.x1) if horizontal else (frame.y0, frame.y1)
    labels = [
        t
        for t in axis.get_ticklabels(minor=minor)
        if t.get_visible()
        and t.get_text().strip()
        and lo - 1 <= _centre(t.get_window_extent(renderer), horizontal) <= hi + 1
    ]
    return sorted(labels, key=lambda t: _centre(t.get_window_extent(renderer), horizontal))


def _overlapping_pairs(labels, boxes, turned_x: bool, renderer) -> int:
    """Pairs of neighbouring labels (in axis order, with their window boxes) that overlap.
    Turned labels of an x axis overlap when their anchors are closer, across the text's
    direction, than a line of text."""
    import math

    count = 0
    for (a, box_a), (b, box_b) in zip(zip(labels, boxes), zip(labels[1:], boxes[1:])):
        angle = a.get_rotation() % 180
        if turned_x and angle:
            lines = max(a.get_text().count("\n"), b.get_text().count("\n")) + 1
            height = 1.2 * lines * a.get_fontsize() * renderer.dpi / 72
            gap = abs(_centre(box_b, True) - _centre(box_a, True))
            count += int(gap * math.sin(math.radians(angle)) < height)
        else:
            count += int(box_a.overlaps(box_b))
    return count


def _axis_overlaps(ax, axis, renderer) -> int:
    """Pairs of neighbouring drawn tick labels of `axis` that overlap."""
    labels = _drawn_labels(ax, axis, renderer)
    boxes = [t.get_window_extent(renderer) for t in labels]
    return _overlapping_pairs(labels, boxes, axis is ax.xaxis, renderer)


def _tick_overlaps(ax, renderer) -> int:
    """How many pairs of neighbouring tick labels of `ax` overlap (x and y axes)."""
    return sum(_axis_overlaps(ax, axis, renderer) for axis in (ax.xaxis, ax.yaxis))


def _thin(ax, axis, renderer) -> None:
    """Keep every k-th tick label of `axis`, with the smallest k at which none overlap.

    Each k is judged on a drawn figure (thinning can move the layout), and a draw costs a
    constrained layout of the whole figure, so the search starts where the labels' present
    boxes say no kept pair overlaps and walks from there: down while a smaller k is clear
    too, up while it is not. Where overlaps fall with k, as spacing grows, that is the k the
    walk up from 2 finds, in two or three draws instead of one per k."""
    labels = _drawn_labels(ax, axis, renderer)
    drawn = {id(t) for t in labels}
    ticks = [tick for tick in axis.get_major_ticks() if id(tick.label1) in drawn]
    locs, texts = [tick.get_loc() for tick in ticks], [tick.label1.get_text() for tick in ticks]
    boxes = [t.get_window_extent(renderer) for t in labels]
    turned_x = axis is ax.xaxis
    ks = range(2, len(texts) + 1)
    if not ks:
        return
    guess = next(
        (k for k in ks if not _overlapping_pairs(labels[::k], boxes[::k], turned_x, renderer)),
        ks[-1],
    )

    def clear(k: int) -> bool:
        axis.set_ticks(locs[::k], texts[::k])
        ax.figure.draw_without_rendering()
        return not _axis_overlaps(ax, axis, renderer)

    k = guess
    if clear(k):
        while k > 2 and clear(k - 1):
            k -= 1
        if k > 2:
            clear(k)  # the walk stopped at a k - 1 that overlaps: draw the k chosen again
        return
    while k < ks[-1]:
        k += 1
        if clear(k):
            return


def _drawn_texts(fig, renderer) -> list:
    """Every text the figure draws: the drawn tick labels, major and minor, of each axis, and
    its other visible, non-empty texts (titles, axis labels, legends, annotations)."""
    ticks, every_tick_label = [], set()
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                every_tick_label |= {id(tick.label1), id(tick.label2)}
            for minor in (False, True):
                ticks += _drawn_labels(ax, axis, renderer, minor)
    # a tick label is drawn only where it lies on its axis (above), whatever its visibility
    return ticks + [t for t in _texts(fig) if id(t) not in every_tick_label]


OVERLAP_PX = 1.0  # boxes that share less than this, at the figure's dpi, touch and do not collide


def text_overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of texts the figure draws over each other (their boxes share more than OVERLAP_PX
    each way): tick labels, titles, axis labels, legends, annotations; as their texts."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    texts = _drawn_texts(fig, renderer)
    boxes = [t.get_window_extent(renderer) for t in texts]
    pairs = []
    for i, (a, box_a) in enumerate(zip(texts, boxes)):
        for b, box_b in zip(texts[i + 1 :], boxes[i + 1 :]):
            wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            high = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if wide > OVERLAP_PX and high > OVERLAP_PX and not _parallel_apart(a, b, renderer):
                pairs.append((a.get_text(), b.get_text()))
    return pairs


def legend_overlaps(fig, drawn: bool = False) -> int:
    """How many of the axes' own data points a legend drawn inside them hides: the vertices
    of lines plotted in data coordinates (a curve, an errorbar's markers) and the points of
    scatter plots, whose display position falls within a legend's box. Lines drawn across
    the axes (`axhline`, `axvline`: not in data coordinates) and images do not count. `drawn`:
    the figure was just drawn (a further draw would move a constrained layout again)."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    renderer = fig.canvas.get_renderer()
    if not drawn:
        fig.draw_without_rendering()
    hidden = 0
    for ax in fig.get_axes():
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        frame = ax.get_window_extent(renderer)
        if box.x1 <= frame.x0 or box.x0 >= frame.x1 or box.y1 <= frame.y0 or box.y0 >= frame.y1:
            continue  # beside or below the axes: it covers none of their data
        lines = [c for c in ax.get_children() if isinstance(c, Line2D) and c.get_visible()]
        points = [
            line.get_transform().transform(line.get_xydata())
            for line in lines
            if line.get_transform() == ax.transData
        ] + [
            c.get_offset_transform().transform(c.get_offsets())
            for c in ax.collections
            if isinstance(c, PathCollection) and c.get_visible() and np.size(c.get_offsets())
        ]
        for xy in points:
            x, y = xy[np.isfinite(xy).all(axis=1)].T
            hidden += int(((x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)).sum())
    return hidden


def _parallel_apart(a, b, renderer) -> bool:
    """Whether two texts turned by the same slant angle (a turned axis's labels, 45 degrees),
    whose upright boxes overlap, lie on lines of text apart: their centres further apart,
    across the text's direction, than a line of the taller one."""
    import math

    angle = a.get_rotation() % 180
    if angle % 90 == 0 or abs(angle - b.get_rotation() % 180) > 1e-6:
        return False
    box_a, box_b = a.get_window_extent(renderer), b.get_window_extent(renderer)
    dx = (box_b.x0 + box_b.x1 - box_a.x0 - box_a.x1) / 2
    dy = (box_b.y0 + box_b.y1 - box_a.y0 - box_a.y1) / 2
    across = abs(-dx * math.sin(math.radians(angle)) + dy * math.cos(math.radians(angle)))
    lines = max(a.get_text().count("\n"), b.get_text().count("\n")) + 1
    size = max(a.get_fontsize(), b.get_fontsize())
    return across >= 1.2 * lines * size * renderer.dpi / 72


def legibility(fig) -> dict:
    """What the website test checks: the figure's width (inches), the smallest font (points),
    the panels' widths as fractions of the figure (the grid slot of each panel, colorbars
    left out), the number of overlapping neighbouring tick labels and of pairs of any texts
    drawn over each other (`text_overlaps`) and of data points under a legend
    (`legend_overlaps`)."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    slots = {}
    for ax in fig.get_axes():
        spec = ax.get_subplotspec()
        if spec is None or ax.get_label() == "<colorbar>":
            continue
        top = spec.get_topmost_subplotspec()  # twin axes share their panel's slot
        key = (id(top.get_gridspec()), top.rowspan.start, top.colspan.start)
        slots[key] = round(len(top.colspan) / top.get_gridspec().ncols, 4)
    panels = list(slots.values())
    return {
        "width_in": round(float(fig.get_figwidth()), 4),
        "min_font_pt": min((float(t.get_fontsize()) for t in _texts(fig)), default=MIN_FONT_PT),
        "panels": panels,
        "tick_overlaps": int(sum(_tick_overlaps(ax, renderer) for ax in fig.get_axes())),
        "text_overlaps": len(text_overlaps(fig)),
        "legend_overlaps": legend_overlaps(fig, drawn=True),  # text_overlaps drew it
    }


def make_legible(fig) -> dict:
    """Raise every font below MIN_FONT_PT to it; where neighbouring tick labels overlap, turn
    the x labels by 45 degrees, thin the minor labels of an axis where they collide, then
    keep every k-th label (the smallest k at which none overlap); returns `legibility`."""

    for text in _texts(fig):
        if text.get_fontsize() < MIN_FONT_PT:
            text.set_fontsize(MIN_FONT_PT)
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    for ax in fig.get_axes():
        if _axis_overlaps(ax, ax.xaxis, renderer):
            for label in ax.get_xticklabels():
                label.set_rotation(45)
                label.set_horizontalalignment("right")
                label.set_rotation_mode("anchor")
            fig.draw_without_rendering()
        for axis in (ax.xaxis, ax.yaxis):
            if _minor_collide(ax, axis, renderer):  # a log axis's `2×10¹ 3×10¹ 4×10¹`
                _thin_minor(ax, axis, renderer)
            if _axis_overlaps(ax, axis, renderer):
                _thin(ax, axis, renderer)
    return legibility(fig)


def _thin_minor(ax, axis, renderer) -> None:
    """Keep every k-th drawn minor label of `axis` (a log axis labels some where it spans
    less than a few decades), the smallest k at which none collides with another label; none
    where every k collides. An axis of less than a decade has no major label: its minor
    labels are all it has, so they are thinned, never all dropped at once."""
    from matplotlib.ticker import FuncFormatter

    position = 0 if axis is ax.xaxis else 1
    labels = _drawn_labels(ax, axis, renderer, minor=True)
    shown = [(t.get_position()[position], t.get_text()) for t in labels]
    for k in range(2, len(shown) + 2):
        kept = shown[::k] if k <= len(shown) else []

        def label(x, _pos, kept=kept) -> str:
            return next((text for at, text in kept if abs(at - x) <= 1e-9 * max(1, abs(x))), "")

        axis.set_minor_formatter(FuncFormatter(label))
        ax.figure.draw_without_rendering()
        if not _minor_collide(ax, axis, renderer):
            return


def _minor_collide(ax, axis, renderer) -> bool:
    """Whether a drawn minor tick label of `axis` overlaps another tick label of it."""
    minor = _drawn_labels(ax, axis, renderer, minor=True)
    if not minor:
        return False
    labels = sorted(
        _drawn_labels(ax, axis, renderer) + minor,
        key=lambda t: _centre(t.get_window_extent(renderer), axis is ax.xaxis),
    )
    boxes = [t.get_window_extent(renderer) for t in labels]
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
