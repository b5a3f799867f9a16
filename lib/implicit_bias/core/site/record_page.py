"""A chapter's reproduction record: a page of its own, listed under the chapter, for the
sections that record its run cell by cell (per-cell comparisons with a paper's published
numbers, audits of the authors' code and data), so that the chapter's page reads as a book
(gln_norm's page was 42,345 px tall at 1280 px, smoke profile; a page is at most 25,000).

The notebook stays one notebook, executed once (in Jupyter and Colab it reads top to bottom):
its record sections run from a markdown cell tagged `record-start` to the next cell tagged
`record-end` (or the notebook's end). When the website is built, `write_record_pages` writes
those cells, under a title and with their own bibliography, as `book/records/<id>.ipynb`
(`_toc.yml` lists it under its chapter), and the chapter's page shows, in their place, a
paragraph that links there (`chapter_without_record`). Nothing is computed again: the record
page shows the outputs of the same run as its chapter's page.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

START, END = "record-start", "record-end"
RECORDS = "book/records"
CITE = re.compile(r"(\{cite(?::\w+)?\}`)([^`]*)(`)")
SECTION = re.compile(r"^(##|###)\s+(.+?)\s*$", re.M)
TITLE = re.compile(r"^#\s+(.+?)\s*$", re.M)


class RecordError(ValueError):
    """Record tags that do not delimit sections."""


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def record_ranges(cells: list[dict]) -> list[tuple[int, int]]:
    """The (first, past-last) indices of the record sections of a notebook's `cells`."""
    ranges, start = [], None
    for i, cell in enumerate(cells):
        tags = _tags(cell)
        if START in tags and END in tags:
            raise RecordError(f"cell {i} is tagged both {START} and {END}")
        if START in tags:
            if start is not None:
                raise RecordError(f"cell {i}: {START} inside the record section of cell {start}")
            if cell.get("cell_type") != "markdown":
                raise RecordError(f"cell {i}: a record section starts with a markdown cell")
            start = i
        elif END in tags:
            if start is None:
                raise RecordError(f"cell {i}: {END} without a {START} before it")
            ranges.append((start, i))
            start = None
    if start is not None:
        ranges.append((start, len(cells)))
    return ranges


def chapter_title(cells: list[dict]) -> str:
    for cell in cells:
        if cell.get("cell_type") == "markdown" and (found := TITLE.search(_text(cell["source"]))):
            return found.group(1)
    return ""


def record_doc(chapter: str) -> str:
    return f"/{RECORDS}/{chapter}"


def link_cell(chapter: str, sections: list[tuple[str, str]]) -> dict:
    """The paragraph that stands, on the chapter's page, where its record sections were."""
    listed = "".join(f"\n{'  ' * (len(level) - 2)}* {title}" for level, title in sections)
    text = (
        "**The reproduction record.** The sections that record this run cell by cell, and the "
        "audits that some of the claims below rest on, are on a page of their own, "
        f"{{doc}}`{record_doc(chapter)}`, with every per-cell table:{listed}"
    )
    return _markdown("record-link", text)


def _sections(cells: list[dict]) -> list[tuple[str, str]]:
    """(level, title) of the sections and subsections in `cells`."""
    return [
        (found.group(1), found.group(2))
        for cell in cells
        if cell.get("cell_type") == "markdown"
        for found in SECTION.finditer(_text(cell["source"]))
    ]


def chapter_without_record(notebook: dict, chapter: str) -> dict | None:
    """`notebook` (nbformat JSON) with its record sections replaced by `link_cell`, or None
    where it has none."""
    cells = notebook.get("cells", [])
    ranges = record_ranges(cells)
    if not ranges:
        return None
    moved = [cells[k] for a, b in ranges for k in range(a, b)]
    kept, last = [], 0
    for n, (a, b) in enumerate(ranges):
        kept += cells[last:a] + ([link_cell(chapter, _sections(moved))] if n == 0 else [])
        last = b
    return {**notebook, "cells": kept + cells[last:]}


def _own_citations(text: str, chapter: str) -> str:
    """Citations of the chapter's bibliography (`{cite}`<id>-key``) as citations of the
    record's own (`<id>-record-key`): one bibliography entry may not serve two pages."""

    def keys(match: re.Match) -> str:
        cited = re.sub(rf"(^|,\s*){re.escape(chapter)}-", rf"\g<1>{chapter}-record-", match[2])
        return match[1] + cited + match[3]

    return CITE.sub(keys, text)


def _cited(cell: dict, chapter: str) -> dict:
    cell = copy.deepcopy(cell)
    if cell.get("cell_type") == "markdown":
        cell["source"] = _own_citations(_text(cell["source"]), chapter)
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "text/markdown" in data:
            data["text/markdown"] = _own_citations(_text(data["text/markdown"]), chapter)
    return cell


def record_notebook(notebook: dict, chapter: str) -> dict | None:
    """The record page of a chapter's executed `notebook`: a title and what the page is, the
    record sections, and the bibliography of what they cite; None where it has none."""
    cells = notebook.get("cells", [])
    ranges = record_ranges(cells)
    if not ranges:
        return None
    moved = [_cited(cells[k], chapter) for a, b in ranges for k in range(a, b)]
    title = chapter_title(cells).split(" (")[0] or chapter
    opening = (
        f"# {title} \N{EM DASH} the reproduction record\n\n"
        f"These sections of the chapter {{doc}}`/book/chapters/{chapter}` record its run in "
        "detail: every per-cell table, and the audits that some of its claims rest on. The "
        "chapter's page opens with its verdict and ends with its claims table; this page shows "
        "the same run."
    )
    references = (
        "## References\n\n```{bibliography}\n:filter: docname in docnames\n"
        f":keyprefix: {chapter}-record-\n```"
    )
    cited = any(CITE.search(_text(c.get("source", ""))) for c in moved)
    head = _markdown("record-title", opening)
    tail = [_markdown("record-references", references)] if cited else []
    return {**notebook, "cells": [head, *moved, *tail]}


def _markdown(cell_id: str, text: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


def write_record_pages(root: Path, chapters: list[str]) -> list[Path]:
    """Write `book/records/<id>.ipynb` of each of `chapters` whose executed notebook
    (`book/chapters/<id>.ipynb`) has record sections (only where it changed: a build rereads
    a page whose file is newer), and remove the record of any other; returns those written."""
    from ..engine.paths import write_atomic

    folder, written = root / RECORDS, []
    for chapter in chapters:
        source = root / "book" / "chapters" / f"{chapter}.ipynb"
        target = folder / f"{chapter}.ipynb"
        try:
            record = record_notebook(json.loads(source.read_text()), chapter)
        except FileNotFoundError:
            record = None
        if record is None:
            target.unlink(missing_ok=True)
            continue
        text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        if not target.exists() or target.read_text() != text:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(target, text)
            written.append(target)
    return written
