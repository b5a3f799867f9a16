"""A claim's words as a reader meets them: its free-text fields (`note`, `notes`, the known
deviation's `evidence`, the bound's `why`, `single_run`) are shown HTML-escaped, so their maths
must read as words or Unicode typography (‖β‖₁, ≤, ±, √n, x², w̃), never as ASCII notation
(`||beta||_1`, `<=`, `+/-`, `sqrt(n)`, `x^2`, `w_tilde`) and never as `$...$`, which nothing
typesets there. `measure`, `where` and `display` are typeset (`core.site.verdict.math_html`):
their `$...$` is maths, the words around it are held to the same rule. A snake_case name is
allowed where it names a thing of the code a reader can look up: a claim id, a metric, a
function of the library, or a file path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from implicit_bias.core.chapter import known_chapters
from implicit_bias.core.verdicts.claims import load_claims

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = known_chapters()

# ASCII maths: norm bars, comparison and arrow digraphs, a caret, sqrt, spelled-out
# Greek letters, a product written with "*" between two words; each alternative is notation no
# prose sentence of the book uses (a lone "<" or ">" before a number is ordinary typography).
ASCII_MATHS = re.compile(
    r"\|\||<=|>=|!=|\+/?-(?=\s?\d)|<->|->|=>|\^|\bsqrt\b|\binf\b|"
    r"\b(?:alpha|beta|gamma|delta|epsilon|eta|theta|kappa|lambda|mu|nu|rho|sigma|tau|phi|psi|"
    r"omega|zeta|xi)\b|\w \* \w|\w\*\w"
)
# a subscript written with an underscore after a Latin name (w_tilde, X_bar, k_ReLU); Greek
# with a subscript that Unicode lacks (σ_y) is typography, and code names are checked apart
SNAKE = re.compile(r"(?<![\w/.])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9{}]+)+(?![\w/]|\.py)")
DEF = re.compile(r"^\s*def (\w+)", re.M)


def code_names() -> set[str]:
    """Names a note may cite: every claim id and metric of every chapter, every function of
    the library."""
    names = set(CHAPTERS)
    for chapter in CHAPTERS:
        for claim in load_claims(chapter):
            names |= {claim["id"], claim["metric"]}
    for path in (ROOT / "lib" / "implicit_bias").rglob("*.py"):
        names |= set(DEF.findall(path.read_text()))
    return names


def free_texts(claim: dict):
    """(field, text) of each field a claim shows HTML-escaped."""
    for key in ("note", "single_run"):
        if claim.get(key):
            yield key, claim[key]
    for profile, text in (claim.get("notes") or {}).items():
        yield f"notes.{profile}", text
    if (claim.get("known_deviation") or {}).get("evidence"):
        yield "known_deviation.evidence", claim["known_deviation"]["evidence"]
    if (claim.get("bound") or {}).get("why"):
        yield "bound.why", claim["bound"]["why"]


def typeset_texts(claim: dict):
    """(field, text) of each field whose `$...$` is typeset, with its maths taken out; a quote
    is shown as it stands where the claim has no `display`."""
    for key in ("measure", "where", "display") + (() if claim.get("display") else ("quote",)):
        if claim.get(key):
            yield key, re.sub(r"\$[^$]+\$", " ", claim[key])


def text_problems(text: str, names: set[str], escaped: bool = True) -> list[str]:
    """The ASCII maths of one text (and a `$` where nothing typesets it)."""
    found = [m.group() for m in ASCII_MATHS.finditer(text)]
    found += [m.group() for m in SNAKE.finditer(text) if m.group() not in names]
    return found + (["$"] if escaped and "$" in text else [])


def claim_problems(claim: dict, names: set[str]) -> list[str]:
    problems = []
    for field, text in free_texts(claim):
        if found := text_problems(text, names):
            problems.append(f"{claim['id']} {field}: {found}")
    for field, text in typeset_texts(claim):
        if found := text_problems(text, names, escaped=False):
            problems.append(f"{claim['id']} {field}: {found}")
    return problems


@pytest.fixture(scope="module")
def names() -> set[str]:
    return code_names()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_claims_write_their_maths_for_a_reader(chapter, names):
    problems = [p for claim in load_claims(chapter) for p in claim_problems(claim, names)]
    assert not problems, f"{len(problems)} fields:\n" + "\n".join(problems[:40])


def test_the_text_check_finds_ascii_maths_and_spares_prose(names):
    claim = {"id": "c", "metric": "m", "note": "the norm ||beta||_1 of w_tilde is small"}
    assert claim_problems(claim, names) == ["c note: ['||', 'beta', '||', 'w_tilde']"]
    for ascii_text in (
        "x <= 1",
        "a band of +/-0.1",
        "+-1.5 points",
        "grows like sqrt(n)",
        "x^2",
        "t^-1",
        "s -> 0",
        "min ||b|| subject to X b = y",
        "2 * 10",
        "X_bar",
        "k_ReLU - k_GaLU",
        "alpha = 0.5",
        "the maths $x_1$ is not typeset here",
    ):
        assert text_problems(ascii_text, names), ascii_text
    prose = (
        "‖β‖₁ ≤ 0.01 ± 0.1 at √d, x², t⁻¹, σ_y = 0.5, Xᵀν*; W* is the truth; "
        "SVM-L2 within 1e-3 (p < 0.05, 3-22); 1.5-point band; -0.5 to +0.3; "
        "claim thm1_rank_within_bound, metric "
        "fig1_loss_log_log_slope, tests/models/test_galu.py, models/galu.py (rank_upper_bound)"
    )
    assert text_problems(prose, names) == []
    # in a typeset field the maths between dollars is maths, the words around it are not
    typeset = {"id": "c", "metric": "m", "measure": "the norm $\\|\\beta\\|_1$ over ||w||"}
    assert claim_problems(typeset, names) == ["c measure: ['||', '||']"]


# A control character in a claim's words is a YAML escape taken by mistake: in a double-quoted
# string `$\alpha$` reads as a bell character and "alpha" (`\a`), `\b`, `\f`, `\v` likewise.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def every_string(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from every_string(item)
    elif isinstance(value, list):
        for item in value:
            yield from every_string(item)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_claim_text_holds_a_control_character(chapter):
    bad = [
        (claim["id"], text[max(0, m.start() - 20) : m.end() + 20])
        for claim in load_claims(chapter)
        for text in every_string(claim)
        for m in CONTROL.finditer(text)
    ]
    assert not bad, f"{chapter}: YAML escapes taken as control characters: {bad}"


def test_a_double_quoted_latex_escape_is_caught():
    import yaml

    text = yaml.safe_load('note: "the scale $\\alpha$ and $\\beta$"')["note"]
    assert CONTROL.search(text), text
    assert not CONTROL.search(yaml.safe_load("note: 'the scale $\\alpha$'")["note"])
