"""What the book's pages say must be reachable by their readers: no mention of material only
the project had (its notes, its own copy of a paper, the machine it ran on), and no bare path
of the repository in a chapter's prose without a link (the `{repo}` role links it)."""

from __future__ import annotations

import re

import pytest

from implicit_bias.core.engine.paths import project_root

ROOT = project_root()
UNREACHABLE = re.compile(
    r"verified notes|our copy of the paper|our copy\b|project notes|project's notes"
    r"|Zen 5 machine|Zen machine|\.\./shared|seed files?",
    re.I,
)
# A path of the repository: a top-level folder of it, then a file or folder name.
REPO_PATH = re.compile(
    r"(?<![\w./`-])`?((?:tests|lib|benchmarks|data|results|notebooks)/[\w<>./-]+)"
)
LINKED = re.compile(r"\{repo\}`[^`]*`|\]\([^)]*\)|<https?://[^>]*>|https?://\S+")


def prose(text: str) -> str:
    """A MyST page without its code (code cells and fenced blocks) and front matter: what a
    reader sees as text. Removed lines are left empty, so line numbers are the file's."""
    blank = lambda m: "\n" * m.group(0).count("\n")  # noqa: E731
    text = re.sub(r"\A---\n.*?\n---\n", blank, text, flags=re.S)
    return re.sub(r"^(```|~~~).*?^\1[ \t]*$", blank, text, flags=re.S | re.M)


def problems(name: str, text: str, paths: bool) -> list[str]:
    found = []
    body = prose(text)
    for number, line in enumerate(body.splitlines(), 1):
        for match in UNREACHABLE.finditer(line):
            found.append(f"{name}:{number}: mentions {match.group(0)!r}")
        if paths:
            for match in REPO_PATH.finditer(LINKED.sub("", line)):
                found.append(f"{name}:{number}: bare repository path {match.group(1)!r}")
    return found


def pages() -> list[tuple[str, bool]]:
    """(page source, whether bare paths count): the chapters and the introduction; the
    rerun guides (how-to-rerun, cluster) name the paths of the reader's own clone."""
    chapters = [(p, True) for p in sorted((ROOT / "notebooks").glob("*.md"))]
    book = [(p, p.name == "intro.md") for p in sorted((ROOT / "book").glob("*.md"))]
    return [(str(p.relative_to(ROOT)), paths) for p, paths in chapters + book]


@pytest.mark.parametrize(("page", "paths"), pages())
def test_pages_mention_only_what_readers_can_reach(page, paths):
    found = problems(page, (ROOT / page).read_text(), paths)
    assert not found, "\n".join(found)


def test_the_scan_finds_what_it_looks_for():
    text = (
        "We use the project's verified notes.\nSee `tests/test_book.py` here.\n"
        "```python\nopen('lib/x.py')\n```\nLinked: {repo}`data/claims/x.yaml`, "
        "[the file](https://example.org/lib/y.py).\n"
    )
    found = problems("p", text, paths=True)
    assert any("verified notes" in f for f in found)
    assert any("tests/test_book.py" in f for f in found)
    assert not any("lib/x.py" in f or "data/claims" in f or "lib/y.py" in f for f in found)
    assert not any("tests/" in f for f in problems("p", text, paths=False))


def test_the_introduction_gives_the_citation_and_licence_of_citation_cff():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    intro = " ".join((ROOT / "book" / "intro.md").read_text().replace("\n>", " ").split())
    title = " ".join(cff["title"].split())
    assert title in intro.replace("*", ""), (
        "the introduction does not cite the book as CITATION.cff"
    )
    assert f"version {cff['version']}" in intro and cff["authors"][0]["name"] in intro
    assert "MIT" in intro and "CC BY 4.0" in intro and set(cff["license"]) == {"MIT", "CC-BY-4.0"}
    assert "{repo}`LICENSE`" in intro and "{repo}`CITATION.cff`" in intro


# A chapter's prose names a setting, a claim or a column in words: a program's identifier in
# code font (`adam_window`, `fig5_similar_at_large_dout`) is machinery; a file name or a
# command a reader types (`main.py`, `relu.csv`) is not. Development history ("an earlier
# version of this chapter ...", "an earlier measurement had put it at ...") belongs in
# CHANGELOG.md.
IDENTIFIER = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9*]+)+)`")
HISTORY = re.compile(
    r"\b(?:an|the) earlier (?:\w+ )?(?:version|measurement|run|draw)s?\b"
    r"|\bthe previous version\b|\bbefore (?:the )?claims were decided\b",
    re.I,
)


def machinery_in_prose(name: str, text: str) -> list[str]:
    found = []
    body = re.sub(r"\{\w+\}`[^`]*`", "", prose(text))  # roles ({repo}, {doc}, {cite}) link
    for number, line in enumerate(body.splitlines(), 1):
        for match in IDENTIFIER.finditer(line):
            found.append(f"{name}:{number}: identifier {match.group(0)} (say it in words)")
        for match in HISTORY.finditer(line):
            found.append(f"{name}:{number}: development history {match.group(0)!r}")
    return found


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "notebooks").glob("*.md")))
def test_chapters_name_settings_and_claims_in_words(page):
    found = machinery_in_prose(page, (ROOT / "notebooks" / page).read_text())
    assert not found, "\n".join(found)


def test_the_machinery_scan_can_fail():
    text = (
        "Every `adam_window` steps; claim `fig5_similar_at_large_dout` and `adam_*`.\n"
        "An earlier version of this chapter ran 500 digits.\n"
        "Their `main.py`, {repo}`data/claims/gln_norm.yaml` and `python -m implicit_bias`.\n"
        "```python\nch.sweep(tasks.fig2_task, runs)  # `fig2_task`\n```\n"
    )
    found = machinery_in_prose("p", text)
    assert [f.split(": ", 1)[1] for f in found] == [
        "identifier `adam_window` (say it in words)",
        "identifier `fig5_similar_at_large_dout` (say it in words)",
        "identifier `adam_*` (say it in words)",
        "development history 'An earlier version'",
    ]
    more = "(an earlier measurement\nhad put it at 19 hours; one seed before claims were decided)"
    assert [f.split(": ", 1)[1] for f in machinery_in_prose("p", more)] == [
        "development history 'an earlier measurement'",
        "development history 'before claims were decided'",
    ]


# A chapter's table says what it holds: `ch.table(frame, caption)` shows it under that sentence
# (the website folds a long one under it), `ch.download(frame, about)` as a CSV behind one. A
# bare `display(frame)` showed pandas' table with no sentence, and the website's fold then
# listed its column ids ("A table of 18 rows (seed, init, gd_error_step_0.4, …)").
BARE_DISPLAY = re.compile(r"^\s*display\((?!\s*(?:Markdown|HTML)\()", re.M)


def bare_tables(name: str, text: str) -> list[str]:
    code = "".join(
        block if block.startswith("```{code-cell}") else "\n" * block.count("\n")
        for block in re.split(r"(^```\{code-cell\}.*?^```[ \t]*$)", text, flags=re.S | re.M)
    )
    return [
        f"{name}:{code.count(chr(10), 0, m.start()) + 1}: a bare display() (ch.table with a "
        "caption, or ch.download)"
        for m in BARE_DISPLAY.finditer(code)
    ]


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "notebooks").glob("*.md")))
def test_chapters_show_tables_under_a_sentence(page):
    found = bare_tables(page, (ROOT / "notebooks" / page).read_text())
    assert not found, "\n".join(found)


def test_the_bare_table_scan_can_fail():
    text = (
        "Prose that says display(frame) is not code.\n"
        "```{code-cell} ipython3\ndisplay(frame)\nif x:\n    display(t.round(4))\n"
        "display(Markdown('a sentence'))\ndisplay(HTML('<p>a</p>'))\n"
        'ch.table(frame, "What it holds")\n```\n'
    )
    assert [f.split(": ", 1)[0] for f in bare_tables("p", text)] == ["p:3", "p:5"]


# A claim that does not hold is shown in its state's badge word ("does not reproduce",
# "erratum", "limit not reached", ...: core.verdicts.tally), which the chapter's prose uses
# too; "known deviation" is the claims file's field, not a word a reader meets on the page.
RETIRED_VERDICT = re.compile(r"\bknown\s+deviations?\b", re.I)


def retired_verdict_words(name: str, text: str) -> list[str]:
    body = prose(text)  # a match may span a line break, so the page is searched whole
    return [
        f"{name}:{body.count(chr(10), 0, m.start()) + 1}: {' '.join(m.group(0).split())!r} "
        "(say the row's state in the badge's word)"
        for m in RETIRED_VERDICT.finditer(body)
    ]


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "notebooks").glob("*.md")))
def test_chapters_say_verdicts_in_the_badges_words(page):
    found = retired_verdict_words(page, (ROOT / "notebooks" / page).read_text())
    assert not found, "\n".join(found)


def test_the_verdict_words_scan_can_fail():
    text = (
        "It fails (a known\ndeviation).\nKnown deviations and corrections.\n"
        "```python\nrow['status'] == 'known deviation'\n```\nIt does not reproduce.\n"
    )
    assert [f.split(": ", 1)[0] for f in retired_verdict_words("p", text)] == ["p:1", "p:3"]


# A chapter's title names its paper as the sidebar shows it: "(Authors, year)" at its end.
TITLE_CITATION = re.compile(r"^# .+ \((?:[A-Z][\w-]+(?:, | & | et al\.)?)+(?:, )?(?:\d{4})\)$")


def title_problems(name: str, text: str) -> list[str]:
    title = next((line for line in text.splitlines() if line.startswith("# ")), "")
    if not TITLE_CITATION.match(title):
        return [f"{name}: title {title!r} does not end with '(Authors, year)'"]
    return []


def test_every_chapter_title_names_its_authors_and_year():
    found = [
        p
        for path in sorted((ROOT / "notebooks").glob("*.md"))
        for p in title_problems(path.name, path.read_text())
    ]
    assert not found, "\n".join(found)


def test_the_title_check_can_fail():
    assert not title_problems("a", "# GaLU networks (Fiat, Malach & Shalev-Shwartz, 2018)")
    assert not title_problems("a", "# Max margin (Soudry et al., 2018)")
    assert title_problems("a", "# GaLU networks (Fiat, Malach & Shalev-Shwartz)")
    assert title_problems("a", "# Max margin (Soudry et al. 2018)")
    assert title_problems("a", "no title")


# A figure caption's written closing line, "Expected: ...", follows the run's own line ("This
# run: ...") on the website (core.site.website.report_findings): it must read as the paper's
# statement, never as this run's result. It names its source first (the paper, the authors,
# one of the paper's results) with a verb of saying.
TAKEAWAY_SOURCE = re.compile(
    r"^(?:the paper(?:'s [\w. ]+?)?|the authors|(?:Theorem|Lemma|Corollary|Corollaries|"
    r"Proposition|Section|Appendix|Eq\.) [\w.() -]+?|the Discussion)"
    r" (?:predict|report|find|expect|say|show|suggest|guarantee|state|bound|conclude|give)s?\b"
)


def takeaways(text: str) -> list[tuple[int, str]]:
    """(line, text) of each written expectation of a chapter source: the words after
    "Expected:" in a caption's string literals, up to the caption's end."""
    found, lines = [], text.splitlines()
    for number, line in enumerate(lines, 1):
        if "Expected:" not in line:
            continue
        words = [line.split("Expected:", 1)[1].rsplit('"', 1)[0]]
        rest = line.rstrip()
        for more in lines[number:]:
            if rest.endswith('"') is False:
                break
            literal = re.match(r'\s*[rf]?"(.*)"', more)
            if not literal:
                break
            words.append(literal.group(1))
            rest = more.rstrip()
        found.append((number, " ".join("".join(words).split())))
    return found


def takeaway_problems(name: str, text: str) -> list[str]:
    return [
        f"{name}:{number}: a takeaway that does not read as the paper's: {words[:70]!r}"
        for number, words in takeaways(text)
        if not TAKEAWAY_SOURCE.match(words)
    ]


def test_every_written_takeaway_reads_as_the_papers():
    found = [
        p
        for path in sorted((ROOT / "notebooks").glob("*.md"))
        for p in takeaway_problems(path.name, path.read_text())
    ]
    assert not found, "\n".join(found)


def test_the_takeaway_check_can_fail():
    good = 'caption=("A figure. Expected: the paper "\n    "predicts that it falls."))'
    assert takeaways(good) == [(1, "the paper predicts that it falls.")]
    assert not takeaway_problems("a", good)
    assert not takeaway_problems("a", 'c=("Expected: Theorem 3 predicts a fall."))')
    assert takeaway_problems("a", 'c=("Expected: the closed forms match the ODE."))')
    assert takeaway_problems("a", 'c=("Expected: by Theorem 3.1 it should fall."))')
