"""Citations, without building the book: every key a chapter cites is in book/references.bib,
every entry can be found (title, year and a DOI, arXiv id or URL), and every chapter cites the
paper it reproduces in its introduction and ends with its own bibliography."""

from __future__ import annotations

import re

import jupytext
import pytest

from citations import (
    ARXIV_ID,
    CHAPTER_PAPERS,
    DOI,
    NOTEBOOKS,
    bib_entries,
    bibliographies,
    cite_keys,
)

CHAPTERS = sorted(p.stem for p in NOTEBOOKS.glob("*.md"))


def test_every_entry_has_a_title_a_year_and_a_doi_arxiv_id_or_url():
    entries = bib_entries()
    assert entries, "book/references.bib has no entries"
    problems = []
    for key, entry in entries.items():
        fields = {k.lower(): v.strip() for k, v in entry.fields.items()}
        if not fields.get("title"):
            problems.append(f"{key}: no title")
        if not re.fullmatch(r"(19|20)\d\d", fields.get("year", "")):
            problems.append(f"{key}: no four-digit year ({fields.get('year')!r})")
        if not entry.persons.get("author"):
            problems.append(f"{key}: no author")
        doi, url, eprint = fields.get("doi"), fields.get("url"), fields.get("eprint")
        if not (doi or url or eprint):
            problems.append(f"{key}: no DOI, arXiv id or URL")
        if doi and not DOI.match(doi):
            problems.append(f"{key}: malformed DOI {doi!r}")
        if url and not url.startswith(("https://", "http://")):
            problems.append(f"{key}: malformed URL {url!r}")
        if eprint and not (
            ARXIV_ID.match(eprint) and fields.get("archiveprefix", "arXiv").lower() == "arxiv"
        ):
            problems.append(f"{key}: eprint {eprint!r} is not an arXiv id")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_cited_key_is_in_the_bib_file(chapter):
    text = (NOTEBOOKS / f"{chapter}.md").read_text()
    entries = bib_entries()
    prefix = f"{chapter}-"
    keys = cite_keys(text)
    assert keys, f"{chapter} cites nothing"
    unprefixed = [k for k in keys if not k.startswith(prefix)]
    assert not unprefixed, (
        f"{chapter}: cite with the chapter's key prefix, {{cite}}`{prefix}<key>`: {unprefixed}"
    )
    missing = sorted({k[len(prefix) :] for k in keys} - set(entries))
    assert not missing, f"{chapter} cites keys that book/references.bib lacks: {missing}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_ends_with_its_own_bibliography(chapter):
    """One `{bibliography}` under a "References" heading, listing only what this chapter cites
    (the filter) under this chapter's key prefix (no duplicate citations across chapters)."""
    text = (NOTEBOOKS / f"{chapter}.md").read_text()
    found = bibliographies(text)
    assert len(found) == 1, f"{chapter}: {len(found)} bibliography directives, expected one"
    assert found[0].get("filter") == "docname in docnames", (chapter, found[0])
    assert found[0].get("keyprefix") == f"{chapter}-", (chapter, found[0])
    headings = re.findall(r"^#+ (.+)$", text[: text.index("```{bibliography}")], re.M)
    assert headings and headings[-1].strip() == "References", (chapter, headings[-1:])


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_cites_its_paper_in_its_introduction(chapter):
    assert chapter in CHAPTER_PAPERS, (
        f"{chapter}: set PAPER (its references.bib key) in "
        f"lib/implicit_bias/chapters/{chapter}/__init__.py"
    )
    paper = CHAPTER_PAPERS[chapter]
    assert paper in bib_entries(), f"{chapter}: its paper {paper!r} is not in references.bib"
    notebook = jupytext.read(NOTEBOOKS / f"{chapter}.md")
    introduction = []
    for cell in notebook.cells:  # the markdown before the first code cell
        if cell.cell_type == "code":
            break
        introduction.append(cell.source)
    assert f"{chapter}-{paper}" in cite_keys("\n".join(introduction)), (
        f"{chapter}: its introduction does not cite {{cite}}`{chapter}-{paper}`"
    )
