"""`figure_html`: a written caption is marked as written, its `$...$` math becomes Sphinx's
inline math (which MathJax typesets inside an output cell), its takeaway gets its own line;
a figure given no caption keeps the caption generated from its panels."""

from __future__ import annotations

import re

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from implicit_bias.core.chapter import figure_html  # noqa: E402


def drawn(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0], label="GD")
    ax.set_xlabel(r"initialization scale $\alpha$")
    ax.set_ylabel(r"$\|w\|_2^2$")
    ax.legend()
    png = tmp_path / "fig.png"
    fig.savefig(png)
    return fig, png


def test_a_written_caption_is_marked_and_its_math_is_inline_math(tmp_path):
    fig, png = drawn(tmp_path)
    caption = (
        r"The norm $\|w\|_2^2$ against $\alpha < 1$, mean of 5 seeds & a band. "
        "Expected: the norm shrinks with $\\alpha$."
    )
    page = figure_html(png, 3, "fig_x", caption, fig, ["some_claim"])
    plt.close(fig)
    assert page.startswith("<figure class='book-figure' id='figure-fig_x'><img src=")
    # then the figure drawn for dark mode, hidden here (the website shows it in dark mode)
    images = re.findall(r"<img src='data:image/png;base64,[^']+' class='(figure-\w+)' (.*?)>", page)
    assert [cls for cls, _ in images] == ["figure-light", "figure-dark"]
    assert images[0][1] == images[1][1].replace("display:none;", "")  # the same alt text
    assert "style='display:none;" in images[1][1] and "alt='" in images[0][1]
    assert "<figcaption><strong>Figure 3.</strong> <span class='written-caption'>" in page
    assert 'class="math notranslate nohighlight">\\(\\|w\\|_2^2\\)</span>' in page
    assert "\\(\\alpha &lt; 1\\)" in page and "seeds &amp; a band" in page  # escaped
    assert "<span class='figure-expectation'><br><em>Expected:</em> the norm shrinks with " in page
    caption_html = page.split("<figcaption>")[1]
    assert "$" not in caption_html and "some_claim" not in caption_html
    assert caption_html.count("Expected:") == 1


def test_no_caption_keeps_the_generated_one(tmp_path):
    fig, png = drawn(tmp_path)
    page = figure_html(png, 1, "fig_x", None, fig, ["some_claim"])
    plt.close(fig)
    assert "<span class='generated-caption'>" in page and "written-caption" not in page
    assert "‖w‖₂² against initialization scale α" in page
    assert "Checks some_claim." in page and "math notranslate" not in page


def test_an_escaped_dollar_stays_text(tmp_path):
    fig, png = drawn(tmp_path)
    page = figure_html(png, 1, "fig_x", r"Costs \$5 and $x$. Expected: cheap.", fig, [])
    plt.close(fig)
    assert "Costs $5 and <span class=" in page and "\\(x\\)</span>" in page


def test_a_caption_that_labels_the_papers_line_a_takeaway_is_refused(tmp_path):
    fig, png = drawn(tmp_path)
    with pytest.raises(ValueError, match="Expected:"):
        figure_html(png, 1, "fig_x", "The norm. Takeaway: it shrinks.", fig, [])
    plt.close(fig)
