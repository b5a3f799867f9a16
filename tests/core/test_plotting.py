import json

import numpy as np
import pandas as pd
import pytest

from implicit_bias.core.site.plotting import (
    PALETTE,
    figure,
    legend_below,
    power_of_ten,
    save_figure,
)
from implicit_bias.core.site.regression import compare_figure, compare_tables, write_baselines


def make_figure(values):
    fig, ax = figure()
    ax.plot(values, marker="o")
    ax.set_xlabel("x")
    return fig


def test_style_is_pinned():
    import matplotlib as mpl

    figure()
    assert mpl.rcParams["font.family"] == ["DejaVu Sans"]
    assert mpl.rcParams["savefig.dpi"] == 200 and mpl.rcParams["figure.dpi"] == 100
    cycle = [c.lower().lstrip("#") for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]
    assert cycle == [c.lower().lstrip("#") for c in PALETTE]


def test_save_figure_writes_png_data_and_tolerances(demo_project):
    data = pd.DataFrame({"x": [0, 1, 2], "y": [0.0, 1.0, 4.0]})
    png = save_figure(make_figure(data["y"]), "demo", "fig1", data, "smoke", rtol=1e-3)
    folder = png.parent
    assert png.exists() and (folder / "fig1.csv").exists()
    meta = json.loads((folder / "fig1.json").read_text())
    assert meta["rtol"] == 1e-3 and meta["tables"] == ["fig1.csv"]
    save_figure(make_figure([1]), "demo", "fig2", {"a": data, "b": data}, "smoke")
    assert (folder / "fig2__a.csv").exists() and (folder / "fig2__b.csv").exists()
    with pytest.raises(TypeError):
        save_figure(make_figure([1]), "demo", "fig3", [1, 2], "smoke")
    with pytest.raises(ValueError):
        save_figure(make_figure([1]), "demo", "bad id!", data, "smoke")


def test_compare_tables_tolerances():
    a = pd.DataFrame({"x": [1.0, 2.0], "label": ["a", "b"]})
    assert compare_tables(a, a.copy(), 1e-6, 0) == []
    b = a.assign(x=[1.0, 2.0 + 1e-4])
    assert compare_tables(b, a, 1e-3, 0) == []
    assert "1 values differ" in compare_tables(b, a, 1e-6, 0)[0]
    assert "text values differ" in compare_tables(a.assign(label=["a", "c"]), a, 1, 1)[0]
    assert "rows" in compare_tables(a.iloc[:1], a, 1, 1)[0]
    assert "columns" in compare_tables(a[["x"]], a, 1, 1)[0]


def test_figure_regression_roundtrip(demo_project):
    data = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2.0})
    save_figure(make_figure(data["y"]), "demo", "fig", data, "smoke", rtol=1e-6)
    write_baselines("demo")
    assert compare_figure("demo", "fig") == []
    # a changed number fails the data comparison, a changed curve the image comparison
    changed = data.assign(y=data["y"] * 1.5)
    save_figure(make_figure(changed["y"]), "demo", "fig", changed, "smoke", rtol=1e-6)
    problems = compare_figure("demo", "fig")
    assert any("values differ" in p for p in problems)
    assert any("baseline image" in p for p in problems)
    # a figure of another size is reported as a problem, not raised
    fig = make_figure(data["y"])
    fig.set_size_inches(fig.get_figwidth() * 1.5, fig.get_figheight())
    save_figure(fig, "demo", "fig", data, "smoke", rtol=1e-6)
    problems = compare_figure("demo", "fig")
    assert problems and all("Image sizes do not match" in p for p in problems)


def test_a_figure_drawn_by_the_library_names_its_function():
    import pandas as pd

    from implicit_bias.chapters._template import figures
    from implicit_bias.core.site.plotting import figure

    frame = pd.DataFrame({"d": [4, 8], "seed": [0, 0], "rel_distance": [1e-9, 2e-9]})
    fig = figures.distance_to_min_norm(frame)
    assert fig.drawn_by == ("lib/implicit_bias/chapters/_template/figures.py, distance_to_min_norm")
    own, _ = figure()  # drawn here, outside the library: the notebook cell is named instead
    assert own.drawn_by is None


def test_a_row_of_more_than_two_panels_wraps_and_keeps_its_shape():
    from implicit_bias.core.site.plotting import MAX_WIDTH, legibility

    fig, axes = figure(1, 3, width=10.2, height=2.8)
    assert axes.shape == (1, 3) and tuple(fig.get_size_inches()) == (MAX_WIDTH, 5.6)
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes.ravel()})
    assert len(rows) == 2, "three panels on one row"
    assert legibility(fig)["panels"] == [0.5, 0.5, 0.5]
    fig, axes = figure(2, 5, width=15, height=6, sharey=True)
    assert axes.shape == (2, 5) and fig.get_size_inches()[1] == 3 * 6
    assert axes[1, 4].get_shared_y_axes().joined(axes[1, 4], axes[0, 0])
    fig, ax = figure(1, 1, width=12)
    assert fig.get_size_inches()[0] == MAX_WIDTH  # never wider than the page shows unscaled


def test_a_legend_over_data_is_counted_and_one_below_the_axes_is_not():
    from implicit_bias.core.site.plotting import legend_below, legend_overlaps

    fig, ax = figure()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="curve")
    ax.scatter([0.05, 0.9], [0.95, 0.1], label="points")
    ax.errorbar([0.1], [0.9], yerr=[0.01], label="a mean")
    ax.axhline(0.97, color="k", label="a level")  # across the axes: not data, never counted
    ax.legend(loc="upper left")
    assert legend_overlaps(fig) == 2  # the scatter point and the mean in the upper left
    ax.legend(loc="lower right")
    assert legend_overlaps(fig) == 1  # the other scatter point
    legend_below(ax)
    assert legend_overlaps(fig) == 0


def test_saving_raises_small_fonts_and_untangles_tick_labels(demo_project):
    from implicit_bias.core.site.plotting import MIN_FONT_PT, legibility
    from implicit_bias.core.site.website import png_legibility

    fig, ax = figure()
    ax.plot(np.arange(40), np.arange(40))
    ax.set_xticks(np.arange(40), [f"label {i}" for i in range(40)])
    ax.legend(["a series"], fontsize=6)
    before = legibility(fig)
    assert before["tick_overlaps"] > 0 and before["min_font_pt"] == 6
    png = save_figure(fig, "demo", "crowded", pd.DataFrame({"x": [1]}), "smoke")
    record = png_legibility(png.read_bytes())
    assert record["tick_overlaps"] == 0 and record["min_font_pt"] == MIN_FONT_PT
    assert record["pixel_width"] == 2 * 100 * record["width_in"]  # 2 pixels per CSS pixel


def _crowded(n: int, long: bool):
    fig, ax = figure()
    ax.plot(np.arange(n), np.arange(n))
    ax.set_xticks(
        np.arange(n), [f"label {i}" + ("xxxx" * (i % 3) if long else "") for i in range(n)]
    )
    ax.set_yticks(np.arange(n), [f"{i * 1000.5:g}" for i in range(n)])
    return fig, ax


def _kept(ax) -> tuple[list, list]:
    return [t.get_text() for t in ax.get_xticklabels()], [
        t.get_text() for t in ax.get_yticklabels()
    ]


@pytest.mark.parametrize(("n", "long"), [(40, False), (60, True)])
def test_thinning_keeps_the_smallest_k_at_which_no_labels_overlap(n, long):
    # `_thin` starts its search where the labels' present boxes say no pair overlaps, to save
    # a draw per k; its result must be the definition's, found by drawing every k from 2 up.
    import matplotlib.pyplot as plt

    from implicit_bias.core.site import plotting

    def exhaustive(ax, axis, renderer):
        labels = plotting._drawn_labels(ax, axis, renderer)
        ids = {id(t) for t in labels}
        ticks = [t for t in axis.get_major_ticks() if id(t.label1) in ids]
        locs, texts = [t.get_loc() for t in ticks], [t.label1.get_text() for t in ticks]
        for k in range(2, len(texts) + 1):
            axis.set_ticks(locs[::k], texts[::k])
            ax.figure.draw_without_rendering()
            if not plotting._axis_overlaps(ax, axis, renderer):
                return

    fast, ax_fast = _crowded(n, long)
    record = plotting.make_legible(fast)
    slow, ax_slow = _crowded(n, long)
    original, plotting._thin = plotting._thin, exhaustive
    try:
        reference = plotting.make_legible(slow)
    finally:
        plotting._thin = original
    kept_fast, kept_slow = _kept(ax_fast), _kept(ax_slow)
    plt.close(fast)
    plt.close(slow)
    assert kept_fast == kept_slow and record == reference
    assert record["tick_overlaps"] == 0 and len(kept_fast[0]) < n


@pytest.mark.parametrize(
    ("tex", "spoken"),
    [
        (r"$\langle x, \beta\rangle = 3.51$", "⟨ x, β⟩ = 3.51"),  # was "langle x, betarangle"
        (r"initialization $\times\epsilon$", "initialization ×ε"),  # was "timesepsilon"
        (r"$\|w\|_2^2$", "‖w‖₂²"),
        (r"min-$\ell_1$", "min-ℓ₁"),
        (r"$h_L^{-1}(t)$", "h_L⁻¹(t)"),
        (r"$|\beta_{GD} - \beta_Q|$", "|β_(GD) - β_Q|"),
        (r"$\mathrm{rank}(\bar X)$", "rank(X bar)"),
        # outside math an underscore is no subscript (was "wₜilde", "rankᵤpper_bound")
        ("||rho(t) - w_tilde|| / ||w_tilde||", "||rho(t) - w tilde|| / ||w tilde||"),
        ("rank_upper_bound of $u_{inf}$", "rank upper bound of u_(inf)"),
        ("costs $5", "costs $5"),
        ("Lemma 4: h_L^{-1} (dots: ODE)", "Lemma 4: h L⁻¹ (dots: ODE)"),
    ],
)
def test_axis_text_is_spoken_without_tex(tex, spoken):
    from implicit_bias.core.site.plotting import _clean

    assert _clean(tex) == spoken


def test_alt_text_of_a_tex_labelled_figure_has_no_markup():
    from implicit_bias.core.site.plotting import alt_text, figure

    fig, ax = figure()
    ax.plot([0, 1], [0, 1], label=r"$\langle x, \beta\rangle$")
    ax.set_xlabel(r"scale $\alpha$")
    ax.set_ylabel(r"$\|\beta_\infty - X^+ y\|$")
    ax.legend()
    text = alt_text(fig)
    assert "⟨ x, β⟩" in text and "scale α" in text and "‖β_∞ - X⁺ y‖" in text
    assert not set(text) & set("\\${}")


def test_texts_drawn_over_each_other_are_found_and_a_log_axis_minor_labels_cleared():
    """`text_overlaps` finds texts over each other (can fail: two texts, a log axis whose
    minor labels `3×10¹ 4×10¹` collide, as in a figure of the low-rank chapter) and
    `make_legible` clears the minor labels that collide; apart, nothing is found."""
    import matplotlib.pyplot as plt

    from implicit_bias.core.site.plotting import _drawn_labels, make_legible, text_overlaps

    fig, ax = figure()
    ax.text(0.5, 0.5, "hello world")
    ax.text(0.52, 0.5, "drawn over it")
    assert text_overlaps(fig) == [("hello world", "drawn over it")]
    fig, ax = figure()
    ax.text(0.1, 0.1, "apart")
    ax.text(0.6, 0.8, "from each other")
    assert text_overlaps(fig) == []
    fig, axes = figure(1, 2)
    x = np.linspace(6, 60, 50)
    axes[0, 0].loglog(x, 1 / x)
    assert any("10^{1}" in a and "10^{1}" in b for a, b in text_overlaps(fig))
    record = make_legible(fig)
    assert record["text_overlaps"] == 0 and text_overlaps(fig) == []
    # thinned, not dropped: an axis of less than a decade (no major label) keeps labels
    fig, axes = figure(1, 2)
    axes[0, 0].loglog(np.linspace(0.4, 0.8, 9), np.linspace(1, 2, 9))
    axes[0, 0].set_xlim(0.39, 0.81)
    make_legible(fig)
    renderer = fig.canvas.get_renderer()
    kept = [t.get_text() for t in _drawn_labels(axes[0, 0], axes[0, 0].xaxis, renderer, True)]
    assert kept and text_overlaps(fig) == []
    plt.close("all")


def test_turned_labels_apart_are_not_an_overlap_and_together_are():
    """A turned axis's labels, whose upright boxes overlap though the texts do not, are not
    counted; the same labels at one place are (can fail)."""
    import matplotlib.pyplot as plt

    from implicit_bias.core.site.plotting import make_legible, text_overlaps

    fig, ax = figure()
    ax.bar(range(6), range(1, 7))
    ax.set_xticks(range(6), [f"conv L={k} s0" for k in range(6)], rotation=45, ha="right")
    make_legible(fig)
    assert text_overlaps(fig) == []
    fig, ax = figure()
    ax.text(0.5, 0.5, "one label", rotation=45)
    ax.text(0.5, 0.5, "other label", rotation=45)
    assert len(text_overlaps(fig)) == 1
    plt.close("all")


@pytest.mark.parametrize(
    "value, words",
    [
        (1e-12, "10⁻¹²"),
        (1e-4, "10⁻⁴"),
        (2e6, "2 × 10⁶"),
        (-3e-5, "−3 × 10⁻⁵"),
        (9.999e5, "10⁶"),  # rounding carries into the next decade
        (0.25, "0.25"),
        (-4.0, "−4"),
        (1000.0, "1000"),
        (0.0, "0"),
    ],
)
def test_power_of_ten_writes_numbers_as_a_reader_does(value, words):
    assert power_of_ten(value) == words


def test_legend_below_puts_the_legend_under_the_panel():
    fig, ax = figure()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set_xlabel("x")
    legend_below(ax)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.y1 < ax.xaxis.label.get_window_extent(renderer).y0
