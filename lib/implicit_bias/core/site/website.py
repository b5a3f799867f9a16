"""The website's finishing step, a Sphinx extension (`_config.yml`, `extra_extensions`).

An executed chapter shows each figure as an inlined PNG and links its data as an inlined CSV
(`data:` URIs), so the notebook alone shows and downloads everything. On the website that made
pages of megabytes (most of it CSV that nobody reads until they click). When the build ends,
every such figure and data link of a page is written as a file into `<page>_files/` beside the
page and referenced from there; a figure's image gets the width it is drawn for
(`plotting.DISPLAY_DPI` CSS pixels per figure inch, its PNG holding two pixels per CSS pixel)
and its legibility measurements (`plotting.legibility`, from the PNG) as `data-legibility`.

Data tables too wide for the text column are laid out again to fit it (`web_tables`).

It also gives the pages the role `{repo}`path``: a file of the repository, linked to it.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path

from .plotting import DISPLAY_DPI, LEGIBILITY_KEY, SAVE_DPI
from .web_tables import fit_tables

FIGURE = re.compile(r"<figure class=(['\"])book-figure\1 id=(['\"])figure-([\w-]+)\2")
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


def _image_tag(match: re.Match, fig_id: str, folder: Path) -> str:
    data = base64.b64decode(match.group(2))
    name = f"{fig_id}.png"
    (folder / name).write_bytes(data)
    record = png_legibility(data)
    width_in = record.get("width_in")
    width = round(width_in * DISPLAY_DPI) if width_in else round(record["pixel_width"] / 2)
    record["display_width_px"] = width
    record["save_dpi"] = SAVE_DPI
    src = f"{folder.name}/{name}"
    attribute = html.escape(json.dumps(record), quote=True)
    return f"<img src='{src}' width='{width}' loading='lazy' data-legibility='{attribute}'"


# The executed chapter `book/chapters/<id>.ipynb` is built, not kept in the repository: the
# theme's edit and launch links go to its source, `notebooks/<id>.md` (Binder opens it as a
# notebook with jupytext), and Colab's to `colab/<id>.ipynb` (core.site.colab). Also `/./` (the
# theme's `path_to_book: .`) goes.
EXECUTED = re.compile(
    r"(https://[^\"'\s]*?/(?:edit|blob|tree)/[\w.-]+/|urlpath=lab/tree/)"
    r"(?:\./)?book/chapters/([\w-]+)\.ipynb"
)
COLAB = re.compile(
    r"(https://colab\.research\.google\.com/github/[^\"'\s]*?/blob/[\w.-]+/)"
    r"(?:\./)?book/chapters/([\w-]+)\.ipynb"
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


def externalize(page: Path) -> int:
    """Write the inlined figures and data of `page` into `<page stem>_files/` and reference
    them from there (and `retarget_source_links`, `breakable_headers`, `web_tables.fit_tables`,
    `mark_claim_states`); returns the number of files written."""
    text = mark_claim_states(retarget_source_links(page.read_text()))
    text, _ = fit_tables(breakable_headers(text))
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
        src = f"{folder.name}/{figure.group(3)}.png"
        pieces += [
            text[last : image.start()],
            f"<a class='figure-full' href='{src}'>",
            _image_tag(image, figure.group(3), folder),
            text[image.end() : end],
            "</a>",
        ]
        last = end
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


def _repository(config) -> str:
    return str((config.html_theme_options or {}).get("repository_url", "")).rstrip("/")


def repository_link(config, path: str) -> str:
    """The address of `path` of the repository (`repository: url, branch` of `_config.yml`,
    which Jupyter Book hands the theme as `repository_url` and `repository_branch`)."""
    options = config.html_theme_options or {}
    url, branch = _repository(config), options.get("repository_branch") or "main"
    kind = "tree" if path.endswith("/") else "blob"
    return f"{url}/{kind}/{branch}/{path}"


def _repo_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """`{repo}`data/claims/x.yaml``: the path in code type, linked to it in the repository;
    `{repo}`the repository </>``: a title linked to the repository itself."""
    from docutils import nodes

    config = inliner.document.settings.env.config
    titled = re.fullmatch(r"(.+?)\s*<([^<>]*)>", text)
    if titled:
        title, path = titled.groups()
        uri = repository_link(config, path) if path.strip("/") else _repository(config)
        return [nodes.reference(rawtext, title, refuri=uri)], []
    link = nodes.reference(rawtext, "", refuri=repository_link(config, text))
    link += nodes.literal(text, text)
    return [link], []


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        externalize_site(Path(app.outdir))


def setup(app):
    app.add_role("repo", _repo_role)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
