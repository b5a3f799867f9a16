"""The website's finishing step, a Sphinx extension (`_config.yml`, `extra_extensions`).

An executed chapter shows each figure as an inlined PNG and links its data as an inlined CSV
(`data:` URIs), so the notebook alone shows and downloads everything. On the website that made
pages of megabytes (most of it CSV that nobody reads until they click). When the build ends,
every such figure and data link of a page is written as a file into `<page>_files/` beside the
page and referenced from there; a figure's image gets the width it is drawn for
(`plotting.DISPLAY_DPI` CSS pixels per figure inch, its PNG holding two pixels per CSS pixel)
and its legibility measurements (`plotting.legibility`, from the PNG) as `data-legibility`.
A figure drawn for dark mode as well (`dark_figure`) gets its image and phone pieces beside
the light ones (`<id>-dark.png`), marked for book.css to show one mode's.

Data tables too wide for the text column are laid out again to fit it (`web_tables`).

It also gives the pages the role `{repo}`path``: a file of the repository, linked to it where the
repository's address is set (`repository`), and the theme its source buttons as the address
allows.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path

from ..verdicts import tally
from . import claims_table, findings_page, record_page, repository, site_files, verdict
from .figure_panels import crop, cut_boxes, panel_boxes
from .plotting import DISPLAY_DPI, LEGIBILITY_KEY, SAVE_DPI
from .web_tables import fit_tables

FIGURE = re.compile(
    r"<figure class=(['\"])book-figure\1 id=(['\"])figure-([\w-]+)\2"
    r"(?: data-panel-boxes=(['\"])([\d,\[\] ]*)\4)?"
)
IMAGE = re.compile(r"<img src=(['\"])data:image/png;base64,([A-Za-z0-9+/=]+)\1")
DOWNLOAD = re.compile(
    r"<a download=(['\"])([\w.-]+)\1 href=(['\"])data:text/csv;base64,([A-Za-z0-9+/=]+)\3"
)


def png_legibility(data: bytes) -> dict:
    """The legibility record a PNG carries (empty for a PNG of other origin)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        record = json.loads(image.text.get(LEGIBILITY_KEY, "{}"))  # type: ignore[attr-defined]
        record.setdefault("pixel_width", image.width)
    return record


# A figure's smallest text shows at PHONE_TEXT_PX CSS px at least on a phone: an image whose
# text would show smaller in the column is given that much width (`--phone-min`; book.css),
# and scrolls sideways inside its figure.
PHONE_TEXT_PX = 9.0


def _img(src: str, record: dict, rest: str = "") -> str:
    """An img tag for a figure's image (or a piece of it) with its legibility record."""
    width = record["display_width_px"]
    phone = PHONE_TEXT_PX * 72 * record["width_in"] / record["min_font_pt"]
    attribute = html.escape(json.dumps(record), quote=True)
    # one style attribute: a second one (the notebook tag's own) would be dropped by the browser
    style = f"--phone-min: {phone:.0f}px"
    found = re.search(r"""\sstyle=(['"])(.*?)\1""", rest)
    if found:
        style += "; " + found.group(2)
        rest = rest[: found.start()] + rest[found.end() :]
    return (
        f"<img src='{src}' width='{width}' loading='lazy' style='{style}'"
        f" data-legibility='{attribute}'{rest}"
    )


def _image_tag(data: bytes, fig_id: str, folder: Path, rest: str = "") -> tuple[str, dict]:
    name = f"{fig_id}.png"
    (folder / name).write_bytes(data)
    record = png_legibility(data)
    width_in = record.get("width_in")
    width = round(width_in * DISPLAY_DPI) if width_in else round(record["pixel_width"] / 2)
    record.setdefault("width_in", width / DISPLAY_DPI)
    record.setdefault("min_font_pt", 9.0)
    record["display_width_px"] = width
    record["save_dpi"] = SAVE_DPI
    return _img(f"{folder.name}/{name}", record, rest), record


def phone_panels(
    data: bytes,
    fig_id: str,
    folder: Path,
    record: dict,
    alt: str,
    dark: bytes | None = None,
    mode: str = "",
    exact: list | None = None,
) -> str:
    """The figure's panels one under the other, for a phone (`figure_panels`), each a file
    beside the page linking to itself; empty where the figure does not cut. `dark`: the
    figure drawn for dark mode (the same layout), cut where its light image cuts, its pieces
    `<fig_id>-dark-panel<k>.png`. `mode`: a class of the panels' span (`figure-light`).
    `exact`: the panels' boxes as the figure was drawn (the figure tag's `data-panel-boxes`),
    cut by, where given, instead of the gutters found in the pixels."""
    from PIL import Image

    source, stem = (data, fig_id) if dark is None else (dark, f"{fig_id}-dark")
    image = Image.open(io.BytesIO(source))  # decoded once for all its pieces
    image.load()
    if exact:  # the light image's size (read from its header: nothing decoded)
        boxes = cut_boxes(exact, Image.open(io.BytesIO(data)).size)
    else:
        boxes = panel_boxes(data, record.get("panels") or [])
    tags = []
    for k, box in enumerate(boxes, 1):
        name = f"{stem}-panel{k}.png"
        if exact:
            own, others = exact[k - 1], exact[: k - 1] + exact[k:]
            (folder / name).write_bytes(crop(image, box, tuple(own), tuple(map(tuple, others))))
        else:
            (folder / name).write_bytes(crop(image, box))
        width_px = box[2] - box[0]
        piece = {
            "width_in": round(width_px / SAVE_DPI, 4),
            "min_font_pt": record["min_font_pt"],
            "panels": [1.0],
            "tick_overlaps": record.get("tick_overlaps", 0),
            "text_overlaps": record.get("text_overlaps"),
            "legend_overlaps": record.get("legend_overlaps"),
            "display_width_px": round(width_px * DISPLAY_DPI / SAVE_DPI),
            "save_dpi": SAVE_DPI,
            "piece": k,
        }
        said = alt if k == 1 else f"Panel {k} of {len(boxes)} of the figure"
        src = f"{folder.name}/{name}"
        rest = f" alt='{html.escape(said, quote=True)}'>"
        tags.append(f"<a class='figure-panel' href='{src}'>{_img(src, piece, rest)}</a>")
    classes = f"figure-panels {mode}".strip()
    return f"<span class='{classes}'>{''.join(tags)}</span>" if tags else ""


# The executed chapter `book/chapters/<id>.ipynb` (and its record page, `book/records/<id>.ipynb`:
# core.site.record_page) is built, not kept in the repository: the
# theme's edit and launch links go to its source, `notebooks/<id>.md` (Binder opens it as a
# notebook with jupytext), and Colab's to `colab/<id>.ipynb` (core.site.colab). Also `/./` (the
# theme's `path_to_book: .`) goes.
EXECUTED = re.compile(
    r"(https://[^\"'\s]*?/(?:edit|blob|tree)/[\w.-]+/|urlpath=lab/tree/)"
    r"(?:\./)?book/(?:chapters|records)/([\w-]+)\.ipynb"
)
COLAB = re.compile(
    r"(https://colab\.research\.google\.com/github/[^\"'\s]*?/blob/[\w.-]+/)"
    r"(?:\./)?book/(?:chapters|records)/([\w-]+)\.ipynb"
)


DATAFRAME_HEAD = re.compile(
    r"(<table[^>]*class=\"dataframe\"[^>]*>\s*<thead>)(.*?)(</thead>)", re.S
)
DATAFRAME_BODY = re.compile(
    r"(<table[^>]*class=\"dataframe\"[^>]*>\s*<thead>.*?</thead>\s*<tbody>)(.*?)(</tbody>)", re.S
)


def breakable_headers(text: str) -> str:
    """Let the column names of the chapters' data tables (pandas, snake_case) and their row
    labels break after an underscore (`<wbr>`), so a table of long names fits the column in
    fewer lines; the values (`td`) stay as they are."""

    def cells(match: re.Match) -> str:
        labels = re.sub(
            r"(<th[^>]*>)([^<]*)(</th>)",
            lambda c: c.group(1) + c.group(2).replace("_", "_<wbr>") + c.group(3),
            match.group(2),
        )
        return match.group(1) + labels + match.group(3)

    return DATAFRAME_BODY.sub(cells, DATAFRAME_HEAD.sub(cells, text))


# Pages written by the build (`status_page`), not kept in the repository: nothing to edit.
GENERATED_PAGES = ("book/status.md",)
EDIT_BUTTON = re.compile(
    r"<li><a href=\"[^\"]*/edit/[^\"]*?/([\w./-]+)\"[^>]*>.*?</a>\s*</li>", re.S
)


def drop_edit_of_generated(text: str) -> str:
    """No "Suggest edit" button on a generated page: its source is not in the repository."""
    return EDIT_BUTTON.sub(lambda m: "" if m.group(1) in GENERATED_PAGES else m.group(0), text)


def retarget_source_links(text: str) -> str:
    text = COLAB.sub(r"\1colab/\2.ipynb", text)
    text = EXECUTED.sub(r"\1notebooks/\2.md", text)
    return re.sub(r"(href=\"https://[^\"]*?)/\./", r"\1/", text)


# A row of a chapter's claims table (core.verdicts.claims) and its status badge; a claim link of a
# figure's provenance (core.chapter.provenance_html).
CLAIM_ROW = re.compile(
    r"<tr id='claim-([\w-]+)'>(?:(?!</tr>).)*?(<span class='claim-status [\w-]+'>[^<]*</span>)",
    re.S,
)
PROVENANCE = re.compile(r"<p class='figure-provenance'>.*?</p>", re.S)
PROVENANCE_CLAIM = re.compile(r"<a href='#claim-([\w-]+)'>[^<]*</a>(?! <span class='claim-status)")


def mark_claim_states(text: str) -> str:
    """After each claim link of a figure's provenance, the claim's status badge as the page's
    claims table shows it: the figure is saved before the chapter decides its claims, and the
    page is where both are known. A link marked already stays as it is."""
    states = {m.group(1): m.group(2) for m in CLAIM_ROW.finditer(text)}

    def mark(block: re.Match) -> str:
        return PROVENANCE_CLAIM.sub(
            lambda link: (
                link.group(0) + (f" {states[link.group(1)]}" if link.group(1) in states else "")
            ),
            block.group(0),
        )

    return PROVENANCE.sub(mark, text)


def executed_profile(chapter: str) -> str | None:
    """The profile the executed chapter `book/chapters/<chapter>.ipynb` ran with (papermill's
    record of its parameters), or None."""
    from ..engine.paths import project_root

    path = project_root() / "book" / "chapters" / f"{chapter}.ipynb"
    try:
        record = json.loads(path.read_text())["metadata"]["papermill"]["parameters"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record.get("profile")


def chapter_report(chapter: str) -> dict | None:
    """The claims report of the run a chapter's page shows (None: none on disk)."""
    from ..verdicts.claims import load_report

    profile = executed_profile(chapter)
    return load_report(chapter, profile) if profile else None


# Where a chapter's abstract ends: its first code cell (the set-up cell, whose input is folded)
FIRST_CELL = re.compile(r"<div class=\"cell(?: [\w-]+)*\"")
CLAIM_ROW_END = re.compile(r"(<tr id='claim-([\w-]+)'>.*?</tr>)(\s*<tr class='claim-why'>)?", re.S)


class VerdictMismatch(RuntimeError):
    """The claims report on disk is not the one the page's claims table shows."""


def add_verdict(text: str, report: dict | None) -> str:
    """Open a chapter page with its verdict box (`core.verdict`), after its abstract and
    before its first cell, and give each inconclusive row of its claims table a "why" fold
    (its interval against its region). `report` must be the report of the run the page shows:
    the states of its claims are checked against the page's table."""
    if not report or "claims-table" not in text or "class='verdict-box'" in text:
        return text
    shown = {
        m.group(1): badge.group(1)
        for m in CLAIM_ROW.finditer(text)
        if (badge := re.search(r">([^<]*)</span>$", m.group(2)))
    }
    stored = {row["id"]: tally.state(row) for row in report["claims"]}
    if shown != stored:
        differ = sorted(k for k in set(shown) | set(stored) if shown.get(k) != stored.get(k))
        raise VerdictMismatch(
            f"{report['chapter']}: the claims report on disk ({report['profile']} profile) is "
            f"not the page's claims table: {differ[:5]}; run the chapter again"
        )
    rows = {row["id"]: row for row in report["claims"]}

    def why(match: re.Match) -> str:
        row = rows.get(match.group(2))
        if match.group(3) or not row or row["status"] != "inconclusive":
            return match.group(0)
        fold = (
            "<tr class='claim-why'><td colspan='4'><details><summary>why: inconclusive"
            f"</summary><small>{html.escape(verdict.why_inconclusive(row))}</small></details>"
            "</td></tr>"
        )
        return match.group(1) + fold

    text = CLAIM_ROW_END.sub(why, text)
    first = FIRST_CELL.search(text)
    if first is None:
        return text
    return text[: first.start()] + verdict.verdict_html(report) + text[first.start() :]


INLINE_SCRIPT = re.compile(r"<script>[^<]*</script>")


def drop_repeated_scripts(text: str) -> str:
    """Keep the first of identical inline scripts: the launch buttons' set-up (sphinx-thebe)
    comes twice, and its second `const THEBE_JS_URL` is an error in every page's console."""
    seen: set[str] = set()

    def once(match: re.Match) -> str:
        if match.group(0) in seen:
            return ""
        seen.add(match.group(0))
        return match.group(0)

    return INLINE_SCRIPT.sub(once, text)


# A chapter page reads as a book: its claims table (the verdict box above says what it holds),
# its data tables of more than FOLD_ROWS rows, what a figure shows (what this run found and
# what the paper expects stay open) and its provenance fold, each under a line that says what
# it is; a link to a claim's row opens its fold (FOLD_SCRIPT; Chromium also does it by
# itself). The narrative says what they found.
FOLD_ROWS = 3  # a table of a few rows (a summary) stays open
# a written caption: what the figure shows, then what the paper expects (core.chapter.figure_html)
WRITTEN_CAPTION = re.compile(
    r"(<span class='written-caption'>)(.*?)(<span class='figure-expectation'>)", re.S
)
CLAIMS_TABLE = re.compile(r"<table class='claims-table(?: [\w-]+)*'>.*?</table>", re.S)
# a pandas table, with the column groups it was cut into (`web_tables.fit_table`): one fold
DATA_TABLE = re.compile(
    r"<table[^>]*class=\"dataframe[^\"]*\"[^>]*>.*?</table>"
    r"(?:\s*<table[^>]*class=\"dataframe book-column-group[^\"]*\"[^>]*>.*?</table>)*",
    re.S,
)
# a table's caption (`web_tables.long_table_html`): the last thing before its table
TABLE_CAPTION = re.compile(
    r"<p class='table-caption'>((?:(?!</p>).)*)</p>\s*(?:<div>\s*<style scoped>[^<]*</style>\s*)?$",
    re.S,
)
FOLDED_CAPTION = re.compile(
    r"<p class='table-caption'>((?:(?!</p>).)*)</p>(\s*(?:<div>\s*<style scoped>[^<]*</style>\s*)?"
    r"<details class='table-fold'><summary>\1</summary>)",
    re.S,
)
FOLD_SCRIPT = (
    "<script>(() => { const reveal = () => { const id = decodeURIComponent("
    "location.hash.slice(1)); const target = id && document.getElementById(id); if (!target)"
    " return; for (let d = target.closest('details'); d; d = d.parentElement.closest("
    "'details')) d.open = true; target.scrollIntoView(); };"
    " window.addEventListener('hashchange', reveal);"
    " window.addEventListener('DOMContentLoaded', reveal); })();</script>"
)


def fold_tables(text: str) -> str:
    """Fold a chapter page's claims table, its data tables of more than FOLD_ROWS rows, its
    figures' descriptions and provenance (once: a page the build did not rewrite is folded
    already)."""
    if FOLD_SCRIPT in text:
        return text

    def claims(match: re.Match) -> str:
        rows = match.group(0).count("<tr id='claim-")
        return (
            "<details class='claims-fold'><summary>Every claim of this chapter, one row each "
            f"({rows}): the paper's words, our value, the expectation and its state</summary>"
            f"{match.group(0)}</details>"
        )

    def data(match: re.Match) -> str:
        rows = match.group(0).partition("<tbody>")[2].partition("</tbody>")[0].count("<tr")
        before = match.string[: match.start()]
        if rows <= FOLD_ROWS or before.count("<details") > before.count("</details>"):
            return match.group(0)  # a summary stays open; a table in a fold is folded already
        # its line is the sentence the notebook wrote (`Chapter.table`), which moves into the
        # fold's summary; a table without one says its size, never its column ids
        said = TABLE_CAPTION.search(before[-2000:])
        what = said.group(1) if said else f"A table of {rows} rows"
        return f"<details class='table-fold'><summary>{what}</summary>{match.group(0)}</details>"

    def provenance(match: re.Match) -> str:
        return (
            "<details class='provenance-fold'><summary>Its data and how it was computed"
            f"</summary>{match.group(0)}</details>"
        )

    def caption(match: re.Match) -> str:
        described, takeaway = match.group(2), match.group(3)
        return (
            f"{match.group(1)}<details class='caption-fold'><summary>What it shows</summary>"
            f"{described}</details>{takeaway}"
        )

    text = DATA_TABLE.sub(data, CLAIMS_TABLE.sub(claims, text))
    text = FOLDED_CAPTION.sub(r"\2", text)  # said in the fold's summary: not twice
    text = PROVENANCE.sub(provenance, text)
    text = WRITTEN_CAPTION.sub(caption, text)
    return text.replace("</body>", FOLD_SCRIPT + "</body>", 1)


FIGURE_WITH_PROVENANCE = re.compile(
    r"(<figure class='book-figure'.*?)(</figcaption>)(.*?<p class='figure-provenance'>.*?</p>)",
    re.S,
)


def report_findings(text: str, report: dict | None) -> str:
    """Each figure's takeaway is what this run found of the claims it checks
    (`verdict.figure_run`, from the report the page shows), generated so it cannot contradict
    them; the caption's written line of what the paper expects ("Expected: ...") follows it."""
    if not report or "class='figure-run'" in text:
        return text
    rows = {row["id"]: row for row in report["claims"]}
    expected = f"<span class='figure-expectation'><br><em>{verdict.EXPECTED}</em>"

    def add(match: re.Match) -> str:
        ids = re.findall(r"<a href='#claim-([\w-]+)'>", match.group(3))
        found = verdict.figure_run([rows[i] for i in dict.fromkeys(ids) if i in rows])
        if not found:  # the written line is the paper's; the run decides nothing here
            if expected not in match.group(1):
                return match.group(0)
            found = "no claim is decided on this figure; it shows what the text around it uses."
        gloss = (  # where a reader meets "inconclusive", what it means is one click away
            f" <a href='{verdict.DECISION_PAGE}'>(what inconclusive means)</a>"
            if found.startswith("inconclusive") or "; inconclusive" in found
            else ""
        )
        said = verdict.math_html(found)  # its quote's maths typeset (a claim's display form)
        note = f"<span class='figure-run'><br><em>This run:</em> {said}{gloss}</span>"
        # what this run found comes first; what the paper expects, written, follows
        head = match.group(1)
        if expected in head:  # inside the expectation's span: the fold of what a figure shows
            # (`fold_figure_descriptions`) ends where it starts, so the run's line stays open
            opening = "<span class='figure-expectation'>"
            head = head.replace(opening, opening + note, 1)
            return head + match.group(2) + match.group(3)
        return head + note + match.group(2) + match.group(3)

    return FIGURE_WITH_PROVENANCE.sub(add, text)


def _dark_image(text: str, at: int) -> tuple[bytes, str, int] | None:
    """The figure drawn for dark mode (`core.chapter.figure_html`), an inlined image of class
    `figure-dark` right at `at` (after the light one): its PNG, the rest of its tag (its
    class, alt text and style, no longer hidden: book.css shows it in dark mode) and its end."""
    second = IMAGE.match(text, at)
    if second is None or "class='figure-dark'" not in text[second.end() : second.end() + 40]:
        return None
    end = text.index(">", second.end()) + 1
    rest = text[second.end() : end].replace("display:none;", "")
    return base64.b64decode(second.group(2)), rest, end


def externalize(page: Path) -> int:
    """Write the inlined figures and data of `page` into `<page stem>_files/` and reference
    them from there (and `retarget_source_links`, `breakable_headers`, `web_tables.fit_tables`,
    `mark_claim_states`, and on a chapter page `add_verdict` and `claims_table.rewrite`);
    returns the number of files written."""
    text = site_files.drop_thebe(page.read_text())
    text = drop_edit_of_generated(drop_repeated_scripts(text))
    text = mark_claim_states(retarget_source_links(text))
    if page.parent.name == "chapters":
        report = chapter_report(page.stem)
        text = report_findings(add_verdict(text, report), report)
        text = claims_table.rewrite(text, report)
    text, _ = fit_tables(breakable_headers(text))
    if page.parent.name in ("chapters", Path(record_page.RECORDS).name):
        text = fold_tables(text)
    if "data:image/png;base64," not in text and "data:text/csv;base64," not in text:
        page.write_text(text)
        return 0
    folder = page.with_name(f"{page.stem}_files")
    folder.mkdir(exist_ok=True)
    written = 0
    pieces, last = [], 0
    for figure in FIGURE.finditer(text):
        image = IMAGE.search(text, figure.end())
        if image is None or image.start() - figure.end() > 20:  # not the figure's own image
            continue
        # the image links to itself, full size: a phone's reader taps it to zoom
        end = text.index(">", image.end()) + 1  # the img tag's end (its alt text is escaped)
        fig_id = figure.group(3)
        exact = json.loads(figure.group(5)) if figure.group(5) else None
        src = f"{folder.name}/{fig_id}.png"
        data = base64.b64decode(image.group(2))
        tag, record = _image_tag(data, fig_id, folder, text[image.end() : end])
        alt = re.search(r"alt=(['\"])(.*?)\1", text[image.end() : end], re.S)
        alt_text = html.unescape(alt.group(2)) if alt else ""
        dark = _dark_image(text, end)
        mode = " figure-light" if dark else ""
        pieces += [
            text[last : image.start()],
            f"<a class='figure-full{mode}' href='{src}'>",
            tag,
            "</a>",
            phone_panels(data, fig_id, folder, record, alt_text, mode=mode.strip(), exact=exact),
        ]
        last = end
        if dark:
            data_dark, rest, last = dark
            dark_src = f"{folder.name}/{fig_id}-dark.png"
            (folder / f"{fig_id}-dark.png").write_bytes(data_dark)
            pieces += [
                f"<a class='figure-full figure-dark' href='{dark_src}'>",
                _img(dark_src, record, rest),
                "</a>",
                phone_panels(
                    data, fig_id, folder, record, alt_text, data_dark, "figure-dark", exact
                ),
            ]
            written += 1
        written += 1
    text = "".join(pieces) + text[last:]

    def data_link(match: re.Match) -> str:
        nonlocal written
        name = match.group(2)
        (folder / name).write_bytes(base64.b64decode(match.group(4)))
        written += 1
        return f"<a download='{name}' href='{folder.name}/{name}'"

    page.write_text(DOWNLOAD.sub(data_link, text))
    return written


def externalize_site(outdir: Path) -> int:
    """`externalize` every page of a built site; returns the number of files written."""
    return sum(
        externalize(page)
        for page in sorted(Path(outdir).rglob("*.html"))
        if "_static" not in page.parts
    )


def site_size(outdir: Path) -> dict:
    """Bytes of the built site: all of it, its pages, and the largest page."""
    files = [p for p in Path(outdir).rglob("*") if p.is_file()]
    pages = {p: p.stat().st_size for p in files if p.suffix == ".html"}
    largest = max(pages, key=pages.__getitem__) if pages else None
    return {
        "total": sum(p.stat().st_size for p in files),
        "pages": sum(pages.values()),
        "largest_page": str(largest.relative_to(outdir)) if largest else None,
        "largest_page_bytes": pages[largest] if largest else 0,
    }


# Tags that already say how a cell's input shows; every other code cell of a chapter gets
# `hide-input`: its code folds under a "Show code" toggle, its output stays (myst-nb).
SHOWN_BY_TAG = {"hide-input", "hide-cell", "remove-input", "remove-cell", "full-width"}


def fold_code(notebook: dict) -> int:
    """Tag every code cell of `notebook` (nbformat JSON) `hide-input` unless a tag of
    SHOWN_BY_TAG already decides; returns how many it tagged."""
    tagged = 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if not SHOWN_BY_TAG & set(tags):
            tags.append("hide-input")
            tagged += 1
    return tagged


def _source_read(app, docname: str, source: list) -> None:
    """A chapter's code cells fold by default (`fold_code`), whatever its notebook tags: the
    reader reads the narrative and the results, and opens the code where they want it. Its
    record sections are on its record page (`record_page`), which folds its code too."""
    paged = docname.startswith(("book/chapters/", f"{record_page.RECORDS}/"))
    if not paged or not source[0].lstrip().startswith("{"):
        return
    notebook = json.loads(source[0])
    if docname.startswith("book/chapters/"):
        notebook = record_page.chapter_without_record(notebook, docname.split("/")[-1]) or notebook
    fold_code(notebook)
    source[0] = json.dumps(notebook)


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        externalize_site(Path(app.outdir))
        site_files.trim_static(Path(app.outdir))


def toc_chapters() -> list[str]:
    """The chapters of `_toc.yml`, in its order (the sidebar's)."""
    import yaml

    from ..engine.paths import project_root

    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            path = str(node.get("file", ""))
            if path.startswith("book/chapters/"):
                found.append(path.removeprefix("book/chapters/"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((project_root() / "_toc.yml").read_text()))
    return found


def chapter_counts() -> dict[str, str]:
    """`counts_<chapter>`: the book's one count (`verdicts.tally`) of each chapter's claims in
    the run its page shows, and `counts_book` of every chapter's together, as MyST
    substitutions for the introduction and the decision page."""
    out = {}
    for chapter in toc_chapters():
        report = chapter_report(chapter)
        out[f"counts_{chapter}"] = (
            f"{verdict.counts_text(report['claims'])} ({report['profile']} profile)"
            if report and report.get("claims")
            else "not executed yet"
        )
    reports = [r for r in map(chapter_report, toc_chapters()) if r and r.get("claims")]
    profiles = sorted({str(r["profile"]) for r in reports})
    out["counts_book"] = (
        f"{verdict.counts_text([row for r in reports for row in r['claims']])} "
        f"({' and '.join(profiles)} profile{'s' if len(profiles) > 1 else ''})"
        if reports
        else "no chapter executed yet"
    )
    confirmed = [  # a second registered stage is a registered decision too
        row
        for r in reports
        for row in r["claims"]
        if row.get("stage") in ("confirmatory", tally.SECOND_STAGE)
    ]
    out["counts_confirmatory"] = verdict.counts_text(confirmed) if confirmed else "none yet"
    out["false_passes"] = tally.multiplicity_text(confirmed)
    return out


def _config_inited(app, config) -> None:
    from ..engine.paths import project_root

    # before sphinx-external-toc reads `_toc.yml` (priority 900), which lists the record pages
    record_page.write_record_pages(project_root(), toc_chapters())
    findings_page.write_findings_pages(project_root(), toc_chapters(), chapter_report)
    config.myst_substitutions = {**chapter_counts(), **(config.myst_substitutions or {})}
    # the source's address, one value (core.site.repository): the theme's source buttons and
    # the `{repo}` role link it where it is set; the pages' `{only} repository` blocks show then
    url = repository.repository_url(project_root())
    config.html_theme_options = repository.source_buttons(config.html_theme_options, url)
    # no copies of the executed notebooks (a third of the site) and no download button that
    # linked them: a chapter's notebook is in the repository, and opens on Binder or Colab
    config.html_copy_source = False
    config.html_theme_options = {**config.html_theme_options, "use_download_button": False}
    config.myst_substitutions[repository.SUBSTITUTION] = repository.address_html(url)
    if url:
        app.tags.add(repository.TAG)
    # the theme's light/dark switch starts from "auto" on a first visit (its template leaves
    # the mode empty, which its script logs as an error: "Got invalid theme mode")
    config.html_context = {"default_mode": "auto", **(config.html_context or {})}


# A box of the article that scrolls sideways (a wide table, a figure kept legible on a phone,
# a code block) says so: the class `book-scrolls` while its content is wider than it, which
# book.css shows as "scroll sideways →" above the content (set again when the window
# resizes, when a fold opens, a table in a closed fold having no width, and once MathJax has
# set the formulas). An inline formula is marked only when the formula MathJax drew is wider
# than the room its line gives it (its span is at most the line's width): its scrollWidth
# also counts MathJax's hidden copy for screen readers, wider than the drawing by up to 20
# px, which had marked half the formulas that fit (212 of 448 on tensor_networks at 1280 px).
# A cue takes room, which can push a box beside it past its line: marked again until nothing
# is added (three passes at most); a box once marked stays so until the layout starts afresh
# (load, resize), so a cue never flips back and forth.
SCROLL_CUE_SCRIPT = (
    "(() => { const boxes = () => document.querySelectorAll('article div.output,"
    " article .pst-scrollable-table-container, article figure.book-figure,"
    " article div.highlight pre, article .table-wrapper, article span.math');"
    " const wide = (e) => { if (e.matches('span.math')) { const f ="
    " e.querySelector('mjx-container'); return !!f && f.getBoundingClientRect().width >"
    " e.clientWidth + 1; } return getComputedStyle(e).overflowX !== 'visible'"
    " && e.scrollWidth > e.clientWidth + 1; };"
    " const mark = (fresh) => { if (fresh === true) boxes().forEach(e =>"
    " e.classList.remove('book-scrolls'));"
    " for (let pass = 0; pass < 3; pass += 1) { let added = 0; for (const e of boxes()) {"
    " if (!e.classList.contains('book-scrolls') && wide(e)) {"
    " e.classList.add('book-scrolls'); added += 1; } } if (!added) break; } };"
    " window.bookMarkScrollers = mark;"
    " window.addEventListener('load', () => { mark(true); const m = window.MathJax;"
    " if (m && m.startup && m.startup.promise) m.startup.promise.then(() => mark(true)); });"
    " window.addEventListener('resize', () => mark(true));"
    " document.addEventListener('toggle', mark, true);"
    " document.addEventListener('DOMContentLoaded', mark); })();"
)


def setup(app):
    app.add_role("repo", repository.repo_role)
    app.add_js_file(None, body=SCROLL_CUE_SCRIPT)
    app.connect("config-inited", _config_inited)
    app.connect("source-read", _source_read)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
