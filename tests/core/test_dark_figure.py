"""The figure drawn for the website's dark mode (`core.site.dark_figure`): its texts read on the
dark page, its lines and marks stand out from it, the palette and the colormaps are kept, and
the image has the light one's size and layout."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from PIL import Image  # noqa: E402

from implicit_bias.core.site.dark_figure import (  # noqa: E402
    DARK_PAGE,
    GRAPHIC_CONTRAST,
    TEXT_CONTRAST,
    contrast,
    dark_png,
    on_dark,
)
from implicit_bias.core.site.plotting import (  # noqa: E402
    PALETTE,
    SAVE_DPI,
    figure,
    legend_below,
    make_legible,
)


def drawn():
    """A figure of what the chapters draw: the palette's lines (black among them), grey
    reference lines and a grey note, a legend, a heatmap with a colorbar, a white line on it,
    black contour lines, hollow markers; made legible and saved, as `save_figure` does."""
    fig, axes = figure(1, 2)
    ax, heat = np.ravel(axes)
    x = np.arange(10)
    for i, colour in enumerate(PALETTE):
        ax.plot(x, x * (i + 1), color=colour, label=f"series {i}")
    ax.plot(x, 30 + 0 * x, "s", color="k", mfc="none")
    ax.axhline(20, color="0.6", lw=0.8, ls=":")
    ax.annotate("a floor", (1, 20), color="0.4", fontsize=6)
    ax.set(title="lines", xlabel="step", ylabel="value")
    legend_below(ax, ncol=3)
    mesh = heat.pcolormesh(np.random.default_rng(0).random((6, 6)), cmap="viridis")
    fig.colorbar(mesh, ax=heat, label="error")
    heat.axvline(3, color="white", ls="--")
    grid = np.linspace(0, 6, 30)
    heat.contour(*np.meshgrid(grid, grid), np.subtract.outer(grid, grid), levels=[0], colors="k")
    heat.set(title="heatmap", xlabel="a", ylabel="b")
    make_legible(fig)
    light = io.BytesIO()
    fig.savefig(light, format="png", dpi=SAVE_DPI)
    return fig, mesh, light.getvalue()


def texts_below(fig, minimum: float = TEXT_CONTRAST) -> list[tuple[str, float]]:
    """The figure's visible texts whose colour has less than `minimum` contrast with the page."""
    found = []
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip():
            ratio = contrast(text.get_color())
            if ratio < minimum:
                found.append((text.get_text(), round(ratio, 2)))
    return found


def lines_below(fig, minimum: float = GRAPHIC_CONTRAST) -> list[tuple[str, float]]:
    """Its visible lines, tick marks and spines (not the grid, faint on purpose) of less than
    `minimum` contrast with the page."""
    grid = {id(t.gridline) for ax in fig.axes for t in ax.xaxis.get_major_ticks()}
    grid |= {id(t.gridline) for ax in fig.axes for t in ax.yaxis.get_major_ticks()}
    found = []
    for line in fig.findobj(Line2D):
        if line.get_visible() and id(line) not in grid and len(line.get_xdata()):
            if (ratio := contrast(line.get_color())) < minimum:
                found.append((line.get_label(), round(ratio, 2)))
    for ax in fig.axes:
        for name, spine in ax.spines.items():
            if spine.get_visible() and (ratio := contrast(spine.get_edgecolor())) < minimum:
                found.append((f"spine {name}", round(ratio, 2)))
    return found


def ink(png: bytes) -> np.ndarray:
    """Where the image draws something: not white (a light image), not transparent (a dark one)."""
    with Image.open(io.BytesIO(png)) as image:
        pixels = np.asarray(image.convert("RGBA"))
    if (pixels[..., 3] < 255).any():
        return pixels[..., 3] > 0
    return (pixels[..., :3] < 250).any(axis=2)


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


def test_the_dark_figure_reads_on_the_dark_page_and_keeps_its_colours_and_layout():
    fig, mesh, light = drawn()
    before = texts_below(fig), lines_below(fig)
    faces = mesh.get_facecolor().copy()
    laid_out = [ax.get_position().bounds for ax in fig.axes]
    dark = dark_png(fig, SAVE_DPI)
    # can fail: drawn for a white page, the texts and black lines are unreadable on the dark one
    assert len(before[0]) > 10 and ("series 7", 1.18) in before[1], before
    assert texts_below(fig) == [] and lines_below(fig) == []
    # the palette is kept where it reads (all but black); the heatmap keeps its colormap, the
    # white line on it stays white, black contour lines turn light
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    kept = [matplotlib.colors.to_hex(lines[f"series {i}"].get_color()) for i in range(7)]
    assert kept == [c.lower() for c in PALETTE[:7]]
    assert mesh.get_cmap().name == "viridis" and np.array_equal(mesh.get_facecolor(), faces)
    white = [line for line in fig.axes[1].get_lines() if line.get_linestyle() == "--"]
    assert matplotlib.colors.to_hex(white[0].get_color()) == "#ffffff"
    contour = fig.axes[1].collections[-1]
    assert contrast(contour.get_edgecolor()[0]) >= GRAPHIC_CONTRAST
    # the same layout (a second constrained layout moved the panels by up to 1 px: not
    # run), the same pixels drawn, on a transparent ground
    assert [ax.get_position().bounds for ax in fig.axes] == laid_out
    with Image.open(io.BytesIO(light)) as a, Image.open(io.BytesIO(dark)) as b:
        assert a.size == b.size and b.mode == "RGBA"
        assert np.asarray(b)[0, 0, 3] == 0
    assert overlap(ink(light), ink(dark)) > 0.9
    plt.close(fig)


def test_the_layout_check_can_fail():
    fig, _, light = drawn()
    moved = np.roll(ink(light), 12, axis=1)  # the same drawing 6 CSS px to the right
    assert overlap(ink(light), moved) < 0.9
    plt.close(fig)


@pytest.mark.parametrize(
    ("colour", "expected"),
    [("k", "#ced6dd"), ("white", "#ffffff"), ("#0072B2", "#0072b2"), ("#E69F00", "#e69f00")],
)
def test_greys_turn_over_and_colours_stay(colour, expected):
    assert matplotlib.colors.to_hex(on_dark(colour)) == expected


def test_a_ground_turns_dark_and_a_dark_colour_is_lightened():
    assert matplotlib.colors.to_hex(on_dark("white", ground=True)) == DARK_PAGE
    navy = on_dark("#000080")  # a dark colour that is no grey: kept in hue, made to read
    assert contrast(navy) >= GRAPHIC_CONTRAST > contrast("#000080")
    assert navy[2] > navy[0] and navy[2] > navy[1]
