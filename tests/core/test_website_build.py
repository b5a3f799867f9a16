"""The website's finishing step: inlined figures and data become files beside the page."""

import base64
import json
import re

import pandas as pd
from PIL import Image

from implicit_bias.core.site.plotting import figure, save_figure
from implicit_bias.core.site.website import externalize, site_size


def test_a_page_gets_its_figures_and_data_as_files(demo_project, tmp_path):
    fig, axes = figure(1, 2)
    for ax in axes.ravel():
        ax.plot([0, 1], [1, 0])
    png = save_figure(fig, "demo", "fig1", pd.DataFrame({"x": [1.5]}), "smoke")
    image = base64.b64encode(png.read_bytes()).decode()
    csv = base64.b64encode(b"x\n1.5\n").decode()
    page = tmp_path / "chapter.html"
    page.write_text(
        f"<p><figure class='book-figure' id='figure-fig1'><img src='data:image/png;base64,"
        f"{image}' alt='two panels' style='max-width:100%;height:auto'></figure>"
        f"<a download='fig1.csv' href='data:text/csv;base64,{csv}'>fig1.csv</a></p>"
    )
    assert externalize(page) == 2
    text = page.read_text()
    assert "base64" not in text
    assert (tmp_path / "chapter_files" / "fig1.png").read_bytes() == png.read_bytes()
    assert (tmp_path / "chapter_files" / "fig1.csv").read_text() == "x\n1.5\n"
    assert (
        "<a class='figure-full' href='chapter_files/fig1.png'><img src='chapter_files/fig1.png'"
        in text
    )
    assert "width='740'" in text and re.search(r"<img [^>]*></a><span", text)
    # one style attribute a tag, the notebook's own kept in it (a second one is dropped)
    tags = re.findall(r"<img [^>]*>", text)
    assert tags and all(t.count(" style=") == 1 for t in tags), tags[0][:300]
    assert "max-width:100%" in tags[0] and "--phone-min" in tags[0]
    # for a phone, its two panels one under the other, each a file linking to itself
    panels = re.findall(r"<a class='figure-panel' href='([^']+)'><img src='\1' width='(\d+)'", text)
    assert [src for src, _ in panels] == [f"chapter_files/fig1-panel{k}.png" for k in (1, 2)]
    assert all(300 < int(width) < 400 for _, width in panels), panels
    assert all((tmp_path / src).is_file() for src, _ in panels)
    assert "href='chapter_files/fig1.csv'" in text
    record = json.loads(text.split("data-legibility='")[1].split("'")[0].replace("&quot;", '"'))
    assert record["panels"] == [0.5, 0.5] and record["display_width_px"] == 740
    assert externalize(page) == 0  # nothing left inline
    size = site_size(tmp_path)
    assert size["largest_page"] == "chapter.html" and size["total"] > size["pages"]


def test_edit_and_launch_links_go_to_the_chapter_source():
    from implicit_bias.core.site.website import retarget_source_links

    page = (
        'href="https://github.com/o/r/edit/main/./book/chapters/gln_norm.ipynb" '
        'href="https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/./book/chapters/x.ipynb" '
        'href="https://github.com/o/r/edit/main/./book/intro.md" '
        'href="https://colab.research.google.com/github/o/r/blob/main/./book/chapters/x.ipynb" '
        'href="../../_sources/book/chapters/gln_norm.ipynb"'
    )
    assert retarget_source_links(page) == (
        'href="https://github.com/o/r/edit/main/notebooks/gln_norm.md" '
        'href="https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/notebooks/x.md" '
        'href="https://github.com/o/r/edit/main/book/intro.md" '
        'href="https://colab.research.google.com/github/o/r/blob/main/colab/x.ipynb" '
        'href="../../_sources/book/chapters/gln_norm.ipynb"'  # the download stays
    )


def test_data_table_headers_break_after_underscores():
    from implicit_bias.core.site.website import breakable_headers

    table = (
        '<table border="1" class="dataframe">\n  <thead>\n    <tr>\n      <th></th>\n'
        "      <th>acs_max_rounds</th>\n    </tr>\n  </thead>\n  <tbody><tr><th>row_1</th>"
        "<td>a_b</td></tr></tbody></table>"
    )
    out = breakable_headers(table)
    assert "<th>acs_<wbr>max_<wbr>rounds</th>" in out
    assert "<th>row_<wbr>1</th><td>a_b</td>" in out  # a row label breaks, a value does not
    assert breakable_headers("<table><thead><th>a_b</th></thead></table>").count("wbr") == 0


def test_figure_provenance_shows_the_state_of_each_claim_it_checks():
    from implicit_bias.core.site.website import mark_claim_states

    table = (
        "<table class='claims-table'><tr id='claim-a_b'><td><b>a_b</b></td><td>1</td><td>&lt; 2"
        "</td><td><span class='claim-status status-pass'>pass</span></td></tr>"
        "<tr id='claim-c'><td>c</td><td>3</td><td>&lt; 2</td>"
        "<td><span class='claim-status status-known-deviation'>known deviation</span></td></tr>"
        "</table>"
    )
    provenance = (
        "<p class='figure-provenance'><small>checks: <a href='#claim-a_b'>a_b</a>, "
        "<a href='#claim-c'>c</a>, <a href='#claim-gone'>gone</a>, d (checked at another "
        "profile)</small></p>"
    )
    marked = mark_claim_states(provenance + table)
    assert marked == (
        "<p class='figure-provenance'><small>checks: <a href='#claim-a_b'>a_b</a> "
        "<span class='claim-status status-pass'>pass</span>, <a href='#claim-c'>c</a> "
        "<span class='claim-status status-known-deviation'>known deviation</span>, "
        "<a href='#claim-gone'>gone</a>, d (checked at another profile)</small></p>" + table
    )
    assert mark_claim_states(marked) == marked  # a page built again is marked once
    assert mark_claim_states(table + "<a href='#claim-a_b'>a_b</a>") == (
        table + "<a href='#claim-a_b'>a_b</a>"  # only the provenance's links
    )


def test_a_figure_is_cut_into_its_panels_at_its_gutters():
    """Two panels side by side, a one-panel figure with a legend beside its axes, and a plain
    one-panel figure (not cut); the grid says how many columns to look for."""
    import io

    from PIL import Image

    from implicit_bias.core.site.figure_panels import panel_boxes

    def png(fig) -> bytes:
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=200)
        return out.getvalue()

    fig, axes = figure(1, 2)
    for ax in axes.ravel():
        ax.plot([0, 1], [1, 0])
        ax.set_title("a panel")
    two = panel_boxes(png(fig), [0.5, 0.5])
    assert len(two) == 2 and two[0][2] <= two[1][0]  # side by side, not overlapping
    fig, ax = figure(1, 1, width=6.4)
    ax.plot([0, 1], [1, 0], label="a series with a long name")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    beside = panel_boxes(png(fig), [1.0])
    assert len(beside) == 2 and beside[1][2] - beside[1][0] < beside[0][2] - beside[0][0]
    fig, ax = figure()
    ax.plot([0, 1], [1, 0])
    assert panel_boxes(png(fig), [1.0]) == []  # 3.7 in fits a phone
    assert Image.open(io.BytesIO(png(fig))).width < 920


def test_a_figure_drawn_for_dark_mode_becomes_files_shown_in_dark_mode(demo_project, tmp_path):
    """The second image of a figure (`core.chapter.figure_html`: drawn for the dark page) is
    written beside the light one, linked to itself, no longer hidden inline (book.css shows
    one image a mode, by its class), with its pieces for a phone cut where the light one's are."""
    from implicit_bias.core.site.dark_figure import dark_png
    from implicit_bias.core.site.plotting import SAVE_DPI

    fig, axes = figure(1, 2)
    for ax in axes.ravel():
        ax.plot([0, 1], [1, 0])
    png = save_figure(fig, "demo", "fig1", pd.DataFrame({"x": [1.5]}), "smoke")
    dark = dark_png(fig, SAVE_DPI)
    light64, dark64 = (base64.b64encode(b).decode() for b in (png.read_bytes(), dark))
    page = tmp_path / "chapter.html"
    page.write_text(
        f"<figure class='book-figure' id='figure-fig1'><img src='data:image/png;base64,{light64}'"
        " class='figure-light' alt='two panels' style='max-width:100%;height:auto'>"
        f"<img src='data:image/png;base64,{dark64}' class='figure-dark' alt='two panels'"
        " style='display:none;max-width:100%;height:auto'><figcaption>x</figcaption></figure>"
    )
    assert externalize(page) == 2
    text, files = page.read_text(), tmp_path / "chapter_files"
    assert (files / "fig1-dark.png").read_bytes() == dark and "base64" not in text
    assert "<a class='figure-full figure-light' href='chapter_files/fig1.png'>" in text
    dark_tag = re.search(
        r"<a class='figure-full figure-dark' href='chapter_files/fig1-dark.png'>"
        r"<img src='chapter_files/fig1-dark.png'([^>]*)></a>",
        text,
    )
    assert dark_tag and "alt='two panels'" in dark_tag.group(1)
    assert "display:none" not in text and "data-legibility=" in dark_tag.group(1)
    spans = re.findall(r"<span class='figure-panels (figure-\w+)'>(.*?)</span>", text)
    assert [mode for mode, _ in spans] == ["figure-light", "figure-dark"]
    pieces = [re.findall(r"href='chapter_files/([^']+)'", body) for _, body in spans]
    assert pieces == [
        ["fig1-panel1.png", "fig1-panel2.png"],
        ["fig1-dark-panel1.png", "fig1-dark-panel2.png"],
    ]
    for light_piece, dark_piece in zip(*pieces):
        with Image.open(files / light_piece) as a, Image.open(files / dark_piece) as b:
            assert a.size == b.size and b.getpixel((0, 0))[3] == 0  # its ground transparent
    assert text.index("id='figure-fig1'><a class='figure-full figure-light'") > 0


def _texts_cut(png: bytes, fig, pieces) -> list[str]:
    """The texts of `fig` (drawn as in `png`) that no piece holds whole, but for the title of
    the whole figure (left out of the pieces: the caption says it)."""
    import io

    import numpy as np
    from matplotlib.text import Text

    from implicit_bias.core.site.plotting import SAVE_DPI
    from implicit_bias.core.site.plotting import _drawn_labels as _drawn

    ink = np.asarray(Image.open(io.BytesIO(png)).convert("L")) < 250
    fig.set_dpi(SAVE_DPI)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    ticks = {t for ax in fig.axes for a in (ax.xaxis, ax.yaxis) for t in a.get_ticklabels()}
    drawn = {t for ax in fig.axes for a in (ax.xaxis, ax.yaxis) for t in _drawn(ax, a, renderer)}
    cut = []
    for text in fig.findobj(Text):
        if not (text.get_visible() and text.get_text().strip()):
            continue
        if text in ticks and text not in drawn:
            continue  # a tick label outside the axes' span, not drawn
        e = text.get_window_extent(renderer)
        box = (e.x0, renderer.height - e.y1, e.x1, renderer.height - e.y0)
        assert ink[int(box[1]) : int(box[3]) + 1, int(box[0]) : int(box[2]) + 1].any(), (text, box)
        whole = any(
            p[0] <= box[0] and p[1] <= box[1] and box[2] <= p[2] and box[3] <= p[3] for p in pieces
        )
        if not whole and text is not fig._suptitle:
            cut.append(text.get_text())
    return cut


def _two_panels_with_long_text():
    """Two panels, the left one's title reaching past its axes, the right one with a y label."""
    fig, axes = figure(1, 2)
    left, right = axes.ravel()
    for ax in (left, right):
        ax.plot([0, 1], [1, 0])
    left.set_title("a long title of the left panel reaching past its axes", loc="left")
    right.set_ylabel("the right panel's y label")
    return fig, left


def test_a_figure_is_cut_for_a_phone_where_its_panels_were_drawn():
    """A panel's long title reaching past its axes and its neighbour's y label, under a title
    of the whole figure: the boxes of the panels as drawn (`geometry_boxes`) keep every text
    whole in one piece; the gutters found in the pixels slice the title."""
    import io

    from implicit_bias.core.site.figure_panels import cut_boxes, geometry_boxes, panel_boxes
    from implicit_bias.core.site.plotting import SAVE_DPI

    fig, left = _two_panels_with_long_text()
    fig.suptitle("Theorem 2: gradient descent and gradient flow against argmin of Q")
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=SAVE_DPI)
    png = out.getvalue()
    size = Image.open(io.BytesIO(png)).size
    exact = geometry_boxes(fig, SAVE_DPI)
    assert len(exact) == 2 and exact[0][0] < exact[1][0]
    assert _texts_cut(png, fig, cut_boxes(exact, size)) == []
    guessed = panel_boxes(png, [0.5, 0.5])
    assert len(guessed) == 2 and _texts_cut(png, fig, guessed)
    fig.legend(left.get_lines(), ["a shared legend"], loc="outside lower center")
    # a legend of the whole figure below the panels is a piece of its own, after them
    assert len(geometry_boxes(fig, SAVE_DPI)) == 3


def test_the_website_cuts_a_figure_where_its_tag_says_its_panels_are(tmp_path):
    """`figure_html` puts the panels' boxes on the figure tag; `externalize` cuts the light and
    the dark image there (padded), not at the gutters its pixels show."""

    from implicit_bias.core.chapter import figure_html
    from implicit_bias.core.site.figure_panels import cut_boxes, geometry_boxes
    from implicit_bias.core.site.plotting import SAVE_DPI

    fig, left = _two_panels_with_long_text()
    png = tmp_path / "fig1.png"
    fig.savefig(png, format="png", dpi=SAVE_DPI)
    exact = geometry_boxes(fig, SAVE_DPI)
    page = tmp_path / "chapter.html"
    page.write_text(figure_html(png, 1, "fig1", "Two panels.", fig, []))
    assert f"data-panel-boxes='{json.dumps(exact, separators=(',', ':'))}'" in page.read_text()
    assert externalize(page) == 2
    with Image.open(png) as image:
        expected = [(x1 - x0, y1 - y0) for x0, y0, x1, y1 in cut_boxes(exact, image.size)]
    for stem in ("fig1", "fig1-dark"):
        sizes = []
        for k in (1, 2):
            with Image.open(tmp_path / "chapter_files" / f"{stem}-panel{k}.png") as piece:
                sizes.append(piece.size)
        assert sizes == expected
