"""A chapter's reproduction record: its record sections on a page of their own."""

from __future__ import annotations

import json

import pytest

from implicit_bias.core.site.record_page import (
    RecordError,
    chapter_without_record,
    record_notebook,
    record_ranges,
    write_record_pages,
)


def md(text: str, *tags: str) -> dict:
    return {"cell_type": "markdown", "metadata": {"tags": list(tags)}, "source": text}


def code(text: str, *tags: str, outputs=()) -> dict:
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": text,
            "outputs": list(outputs)}  # fmt: skip


def chapter() -> dict:
    markdown_out = {"output_type": "display_data", "data": {"text/markdown": "{cite}`ch-b`"}}
    return {
        "metadata": {"papermill": {"parameters": {"profile": "smoke"}}},
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": [
            md("# A chapter (Someone, 2022)\n\nThe paper {cite}`ch-paper`."),
            code("x = 1"),
            md("## Against the authors\n\nTheir code {cite}`ch-code,ch-paper`.", "record-start"),
            code("display(table)", outputs=[markdown_out]),
            md("### Their data\n\nWords."),
            md("## Claims", "record-end"),
            code("report"),
            md("## References\n\n```{bibliography}\n:keyprefix: ch-\n```"),
        ],
    }


def sources(nb: dict) -> list[str]:
    return [cell["source"] for cell in nb["cells"]]


def test_the_chapter_page_links_its_record_where_the_sections_were():
    page = chapter_without_record(chapter(), "ch")
    assert sources(page)[:2] == sources(chapter())[:2]
    assert sources(page)[3:] == sources(chapter())[5:]  # the claims and references stay
    link = sources(page)[2]
    assert "{doc}`/book/records/ch`" in link
    assert "\n* Against the authors\n  * Their data" in link  # its sections, nested


def test_the_record_page_has_a_title_the_sections_and_its_own_bibliography():
    record = record_notebook(chapter(), "ch")
    texts = sources(record)
    assert texts[0].startswith("# A chapter \N{EM DASH} the reproduction record\n")
    assert "{doc}`/book/chapters/ch`" in texts[0]
    cited = "{cite}`ch-record-code,ch-record-paper`"
    assert texts[1] == f"## Against the authors\n\nTheir code {cited}."
    assert record["cells"][2]["outputs"][0]["data"]["text/markdown"] == "{cite}`ch-record-b`"
    assert texts[2:4] == ["display(table)", "### Their data\n\nWords."]
    assert ":keyprefix: ch-record-" in texts[-1]
    assert record["cells"][0]["id"] and record["cells"][-1]["id"]  # nbformat 4.5: cells have ids
    assert record["metadata"] == chapter()["metadata"]  # the run it shows
    assert chapter()["cells"][2]["source"].endswith("{cite}`ch-code,ch-paper`.")  # not changed


def test_a_chapter_without_record_sections_is_left_alone():
    nb = {**chapter(), "cells": [md("# T"), code("x")]}
    assert chapter_without_record(nb, "ch") is None and record_notebook(nb, "ch") is None


def test_a_record_section_runs_to_the_end_without_an_end_tag():
    cells = [md("# T"), md("## R", "record-start"), code("x")]
    assert record_ranges(cells) == [(1, 3)]


@pytest.mark.parametrize(
    "cells, error",
    [
        ([md("## C", "record-end")], "without a record-start"),
        ([md("## A", "record-start"), md("## B", "record-start")], "inside the record section"),
        ([code("x", "record-start")], "starts with a markdown cell"),
        ([md("## A", "record-start", "record-end")], "tagged both"),
    ],
)
def test_record_tags_that_delimit_no_section_are_a_clear_error(cells, error):
    with pytest.raises(RecordError, match=error):
        record_ranges(cells)


def test_record_pages_are_written_once_and_removed_with_their_sections(tmp_path):
    executed = tmp_path / "book" / "chapters"
    executed.mkdir(parents=True)
    (executed / "ch.ipynb").write_text(json.dumps(chapter()))
    (executed / "other.ipynb").write_text(json.dumps({**chapter(), "cells": [md("# T")]}))
    stale = tmp_path / "book" / "records" / "other.ipynb"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    written = write_record_pages(tmp_path, ["ch", "other", "not_executed"])
    target = tmp_path / "book" / "records" / "ch.ipynb"
    assert written == [target] and not stale.exists()
    assert json.loads(target.read_text()) == record_notebook(chapter(), "ch")
    assert write_record_pages(tmp_path, ["ch"]) == []  # unchanged: not written again


def test_claims_tables_fold_whatever_columns_they_carry():
    from implicit_bias.core.site.website import fold_tables

    for table in ("<table class='claims-table'>", "<table class='claims-table with-columns'>"):
        page = f"<body>{table}<tr id='claim-a'><td>a</td></tr></table></body>"
        assert "<details class='claims-fold'><summary>" in fold_tables(page), table


def test_the_record_page_links_to_the_chapter_source():
    from implicit_bias.core.site.website import retarget_source_links

    page = (
        'href="https://github.com/o/r/edit/main/./book/records/gln_norm.ipynb" '
        'href="https://colab.research.google.com/github/o/r/blob/main/./book/records/x.ipynb"'
    )
    assert retarget_source_links(page) == (
        'href="https://github.com/o/r/edit/main/notebooks/gln_norm.md" '
        'href="https://colab.research.google.com/github/o/r/blob/main/colab/x.ipynb"'
    )
