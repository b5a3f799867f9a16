"""The book's citations, for the tests: which paper each chapter reproduces, the entries of
`book/references.bib`, and the `{cite}` keys and `{bibliography}` directives of a chapter source.

A chapter cites with its own key prefix, {cite}`<chapter>-<bib key>`, and ends with
```{bibliography}
:filter: docname in docnames
:keyprefix: <chapter>-
```
so that each chapter lists only what it cites and a work cited by several chapters (MNIST, cvxpy)
is not a duplicate citation across pages (Sphinx runs with -W)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "book" / "references.bib"
NOTEBOOKS = ROOT / "notebooks"


def chapter_papers() -> dict[str, str]:
    """The paper each chapter reproduces: `PAPER` (its key in book/references.bib) in the
    chapter's package, `lib/implicit_bias/chapters/<id>/__init__.py`."""
    import importlib

    papers = {}
    for notebook in sorted(NOTEBOOKS.glob("*.md")):
        try:
            package = importlib.import_module(f"implicit_bias.chapters.{notebook.stem}")
        except ImportError:
            continue
        if isinstance(getattr(package, "PAPER", None), str):
            papers[notebook.stem] = package.PAPER
    return papers


CHAPTER_PAPERS = chapter_papers()

# {cite}`a,b`, {cite:p}`a`, {cite:t}`a`, ... (sphinxcontrib-bibtex's roles, MyST syntax)
CITE_ROLE = re.compile(r"\{(?:cite|footcite)(?::[a-z]+)?\}`([^`]*)`")
BIBLIOGRAPHY = re.compile(r"^```\{bibliography\}[^\n]*\n(.*?)^```", re.S | re.M)
ARXIV_ID = re.compile(r"^\d{4}\.\d{4,5}(v\d+)?$")
DOI = re.compile(r"^10\.\d{4,9}/\S+$")


def bib_entries() -> dict:
    """key -> pybtex Entry (pybtex comes with sphinxcontrib-bibtex, which Jupyter Book uses)."""
    from pybtex.database import parse_file

    return dict(parse_file(str(BIB), bib_format="bibtex").entries)


def plain(text: str) -> str:
    """A title as comparable text: braces, case, punctuation and spacing removed."""
    return re.sub(r"[^0-9a-z]+", "", text.replace("{", "").replace("}", "").casefold())


def entry_links(entry) -> set[str]:
    """The links the bibliography style renders for an entry: URL, DOI and arXiv id."""
    fields = {k.lower(): v for k, v in entry.fields.items()}
    links = set()
    if fields.get("url"):
        links.add(fields["url"])
    if fields.get("doi"):
        links.add(f"https://doi.org/{fields['doi']}")
    if fields.get("eprint"):
        links.add(f"https://arxiv.org/abs/{fields['eprint']}")
    return links


def cite_keys(text: str) -> list[str]:
    """Every key cited in a chapter source, in order, with its chapter prefix."""
    return [
        key.strip() for group in CITE_ROLE.findall(text) for key in group.split(",") if key.strip()
    ]


def bibliographies(text: str) -> list[dict[str, str]]:
    """The options (`:filter:`, `:keyprefix:`, ...) of each bibliography directive."""
    found = []
    for body in BIBLIOGRAPHY.findall(text):
        options = {}
        for line in body.splitlines():
            match = re.match(r"^:(\w+):\s*(.*)$", line.strip())
            if match:
                options[match.group(1)] = match.group(2).strip()
        found.append(options)
    return found
