"""Website test: build the book, open every page in headless Chromium, check what a reader
sees: the page loads, every image exists, math is rendered, internal links resolve, every
figure is numbered with a caption and alt text, no page shows a path of the building machine, a
progress bar or a warning, the status page fits a laptop and a phone, and every chapter cites
its paper and ends with its bibliography."""

from __future__ import annotations

import functools
import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.verdicts import tally
from reader_checks import (
    CLAIMS_TYPE,
    CLIPPING,
    CODE_FOLDED,
    CONSOLE,
    CONSOLE_HOOK,
    CONTRAST,
    DATA_TABLES,
    DISPLAY_MATH,
    INLINE_FORMULAS,
    LONG_TABLES,
    MID_WORD,
    OFF_SCREEN,
    OPEN_FOLDS,
    OVERVIEW_WORDS,
    PHONE_TEXT,
    PRINTED,
    VERDICT,
    claims_type_problems,
    clipping_problems,
    code_problems,
    console_problems,
    contrast_problems,
    display_math_problems,
    height_problems,
    inline_math_problems,
    machinery_problems,
    mid_word_problems,
    off_screen_problems,
    overview_word_problems,
    paper_claim_rows,
    phone_text_problems,
    table_problems,
    verdict_problems,
)

pytestmark = pytest.mark.website
ROOT = project_root()
HTML = ROOT / "_build" / "html"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("Chromium is not installed (make test installs it when run as root)")


@pytest.fixture(scope="session")
def built_site(smoke_book):
    """The site built from the smoke book: a build the smoke book's rendering started in the
    background (`conftest.start_site_build`), or one started now."""
    from conftest import finish_site_build

    assert finish_site_build() == HTML
    return HTML


class PageParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.links, self.mathjax, self.text = [], [], 0, []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        elif tag == "mjx-container":
            self.mathjax += 1
        if tag in ("script", "style", "pre", "code"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style", "pre", "code"):
            self._skip = max(0, self._skip - 1)

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def pages() -> list[str]:
    """Every content page (the root index.html is only a redirect to the intro)."""
    return sorted(
        str(p.relative_to(HTML))
        for p in HTML.rglob("*.html")
        if p.name not in ("search.html", "genindex.html", "index.html") and "_static" not in p.parts
    )


# Pages are opened from the built files; their links are resolved as if the site were served
# from SITE (a link the page's scripts made absolute names the file itself: file://...).
SITE = "https://site.invalid/"


def local_target(page_url: str, ref: str) -> Path | None:
    """The file a same-site reference points to, or None for external references."""
    if ref.startswith(HTML.as_uri() + "/"):
        ref = SITE + ref[len(HTML.as_uri()) + 1 :]
    absolute = urljoin(page_url, ref)
    if not absolute.startswith(SITE):
        return None
    path = unquote(urlparse(absolute).path)[len(urlparse(SITE).path) :]
    target = HTML / path
    return target / "index.html" if target.is_dir() else target


def page_problems(page: str, dom: str) -> list[str]:
    """What is wrong with `page` (relative to the site) as Chromium rendered it (`dom`)."""
    url = SITE + page
    if "</html>" not in dom or len(dom) < 1000:
        return [f"{page}: did not load"]
    parser = PageParser()
    parser.feed(dom)
    problems = []
    missing_images = [
        src for src in parser.images if (t := local_target(url, src)) is not None and not t.exists()
    ]
    if missing_images:
        problems.append(f"{page}: missing images {missing_images}")
    math_blocks = (HTML / page).read_text().count("math notranslate")
    if math_blocks and not parser.mathjax:
        problems.append(f"{page}: {math_blocks} math blocks but MathJax rendered none")
    text = "".join(parser.text)
    if "\\(" in text or "\\[" in text:
        problems.append(f"{page}: raw LaTeX left in the page")
    broken = [
        href
        for href in parser.links
        if not href.startswith(("mailto:", "javascript:", "#"))
        and (t := local_target(url, href.split("#")[0])) is not None
        and not t.exists()
    ]
    if broken:
        problems.append(f"{page}: broken internal links {broken}")
    return problems


def test_every_page_in_chromium(built_site, measured):
    index = (HTML / "index.html").read_text()
    assert "book/intro.html" in index, "index.html does not lead to the introduction"
    all_pages = pages()
    assert "book/intro.html" in all_pages and len(all_pages) >= 3
    problems = [p for page in all_pages for p in page_problems(page, measured(HTML / page)["dom"])]
    assert not problems, "\n".join(problems)


def test_the_page_check_finds_broken_links_missing_images_and_raw_tex():
    page = "book/intro.html"
    body = "<p>" + "filler " * 200 + "</p>"
    good = f"<html><body>{body}<a href='status.html'>s</a><img src='../index.html'></body></html>"
    assert page_problems(page, good) == []
    broken = good.replace("status.html", "no-such-page.html").replace("../index", "gone")
    assert len(page_problems(page, broken)) == 2
    assert "raw LaTeX" in page_problems(page, good.replace("filler", "\\(x\\)", 1))[0]
    assert "did not load" in page_problems(page, "<html>")[0]


def test_chapter_pages_show_figures_and_claims(built_site):
    """Every figure the chapter saved is shown numbered, with a caption and alt text."""
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.engine.paths import figures_dir

    for chapter in chapters():
        page = (built_site / "book" / "chapters" / f"{chapter}.html").read_text()
        assert "claims-table" in page, f"{chapter}: no claims table"
        shown = re.findall(r"<figure class=.book-figure.(.*?)</figure>", page, re.S)
        saved = list(figures_dir("smoke", chapter).glob("*.json"))
        assert len(shown) == len(saved) > 0, f"{chapter}: {len(shown)} of {len(saved)} shown"
        for number, block in enumerate(shown, 1):
            image = re.search(r"<img[^>]+src=.([\w./-]+\.png).", block)
            assert image, f"{chapter}: figure {number} is not a file beside the page"
            assert (built_site / "book" / "chapters" / image.group(1)).is_file(), image.group(1)
            alt = re.search(r"alt=(['\"])(.*?)\1", block)
            assert alt and len(alt.group(2)) > 10, f"{chapter}: figure {number} has no alt text"
            caption = re.search(r"<figcaption>(.*?)</figcaption>", block, re.S)
            assert caption and f"Figure {number}." in caption.group(1), (chapter, number)


# What stripped TeX leaves in words a screen reader speaks ("langle x, betarangle").
TEX_RESIDUE = re.compile(r"[\\$]|langle|rangle|mathrm|varepsilon|timesepsilon|\^\{|_\{")


def tex_residue(text: str) -> list[str]:
    return sorted({m.group(0) for m in TEX_RESIDUE.finditer(html.unescape(text))})


# A written caption's inline math as `core.chapter.figure_html` writes it (Sphinx's form):
# MathJax typesets it, so its TeX is allowed; TeX anywhere else in a caption is residue.
INLINE_MATH = re.compile(
    r"<span class=(['\"])math notranslate nohighlight\1>\\\(.*?\\\)</span>", re.S
)


def outside_math(text: str) -> str:
    return INLINE_MATH.sub(" ", text)


def test_alt_text_and_captions_carry_no_tex(built_site):
    """Alt text and generated captions are spoken: TeX becomes Unicode (core.site.plotting._clean).
    A written caption's TeX is allowed only inside its inline math, which MathJax typesets
    (`test_caption_math_is_typeset_by_mathjax`)."""
    problems = []
    for chapter in sorted((built_site / "book" / "chapters").glob("*.html")):
        page = chapter.read_text()
        texts = re.findall(r"<img[^>]+alt=(['\"])(.*?)\1", page) + [
            ("", c) for c in re.findall(r"<figcaption>(.*?)</figcaption>", page, re.S)
        ]
        for _, text in texts:
            bare = re.sub(r"<[^>]+>", "", outside_math(text))
            if tex_residue(bare):
                problems.append(f"{chapter.name}: {tex_residue(bare)} in {text[:120]!r}")
    assert not problems, "\n".join(problems[:20])


def test_the_tex_residue_scan_can_fail():
    assert tex_residue("mirror flow, langle x, betarangle = 3.51") == ["langle", "rangle"]
    assert tex_residue("initialization $\\times\\epsilon$") == ["$", "\\"]
    assert tex_residue("‖w‖₂², ⟨x, β⟩ = 3.51, ×ε") == []
    math = '<span class="math notranslate nohighlight">\\(\\|w\\|_2^2\\)</span>'
    assert tex_residue(outside_math(f"the norm {math} grows")) == []
    assert tex_residue(outside_math(f"the norm {math} grows like $\\alpha$")) == ["$", "\\"]
    assert tex_residue(outside_math(f"{math} against \\langle x\\rangle")) == [
        "\\",
        "langle",
        "rangle",
    ]


ABSOLUTE_PATHS = ("/home/", "/root/", "/tmp/", "/work/", "/Users/", "site-packages")


def leaks(text: str) -> list[str]:
    """What a reader must not see: a path repr, a path of the building machine."""
    found = [marker for marker in ("PosixPath(", str(ROOT)) if marker in text]
    return found + [p for p in ABSOLUTE_PATHS if p in text]


def test_pages_and_downloads_show_no_paths_progress_bars_or_warnings(built_site):
    """No path of the building machine, no path repr, no stderr block (progress bars and
    warnings go to the terminal) in any page or downloadable notebook."""
    problems = []
    for path in sorted(built_site.rglob("*")):
        if path.suffix not in (".html", ".ipynb") or "_static" in path.parts:
            continue
        text = path.read_text(errors="replace")
        problems += [f"{path.relative_to(built_site)}: {leak}" for leak in leaks(text)]
        if path.suffix == ".html" and "output stderr" in text:
            problems.append(f"{path.relative_to(built_site)}: a stderr block")
    assert not problems, "\n".join(problems[:30])


def test_the_leak_scan_finds_what_it_looks_for():
    assert leaks("PosixPath('/srv/x.png')") and leaks(f"saved {ROOT}/results/a.png")
    assert leaks("see /home/user/book") and not leaks("results/paper/figures/fig2a.png")


MIN_WINDOW_PX = 500  # Chromium's headless window is never narrower: it would lay out at 500


def probe(page: Path, width: int, tmp_path: Path, measure: str, dark: bool = False):
    """What the JavaScript `measure` (statements that set `result`) finds in `page` opened in
    Chromium at `width` px, once loaded: a script added to a copy of the page runs it and
    writes `result` as JSON into the page. `dark`: the theme's dark mode (as its switch sets
    it) with the browser's colour scheme dark too. A width below MIN_WINDOW_PX (a phone's)
    opens the page in an iframe of that width, which passes `result` up to the window."""
    return probe_with_dom(page, width, tmp_path, measure, dark)[0]


def _dark_theme_js(dark: bool) -> str:
    """dark: the theme's switch, with its colour transitions off, so that what is measured at
    once is the dark colours and not a transition's first frame (the light mode's: a search
    button measured black on the dark header in one run of several)."""
    return (
        "const still = document.createElement('style');"
        "still.textContent = '*, *::before, *::after { transition: none !important;"
        " animation: none !important; }';"
        "document.head.appendChild(still);"
        "document.documentElement.dataset.theme = 'dark';"
        "document.documentElement.dataset.mode = 'dark';"
        if dark
        else ""
    )


def _chromium_dump(opened: Path, width: int, tmp_path: Path, dark: bool, timeout: int) -> str:
    """The DOM Chromium renders of `opened` in a window `width` px wide (at least
    MIN_WINDOW_PX) and 900 tall."""
    return subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            *(["--force-dark-mode"] if dark else []),
            f"--user-data-dir={tmp_path / f'profile-{width}'}",
            f"--window-size={max(width, MIN_WINDOW_PX)},900",
            "--virtual-time-budget=10000",
            "--dump-dom",
            opened.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def probe_pages_with_dom(
    pages: list[Path], width: int, tmp_path: Path, measure: str, dark: bool = False
) -> dict:
    """`probe_with_dom` of every page of `pages` in one Chromium run: each page in an iframe
    `width` px wide and 900 tall, all stacked at the window's top left (so each is laid out and
    on screen as the window would show it alone), passing its result and DOM up. A Chromium
    start costs about a second, most of a page's measuring: the site's 14 pages at 1280 px took
    13 s instead of 24 s, with the same measures (a page's text nodes counted for contrast
    differ by 2 in 1,326 on one page, none measured low either way)."""
    theme, copies = _dark_theme_js(dark), []
    try:
        for i, page in enumerate(pages):
            copy = page.with_name(f".probe-{width}-{'dark-' if dark else ''}{page.name}")
            script = (
                "<script>window.addEventListener('load', () => { setTimeout(() => {"
                f"{theme} let result = null; {measure};"
                f"window.parent.postMessage(JSON.stringify({{page: {i}, result: result,"
                " dom: document.documentElement.outerHTML}), '*'); }, 500); });</script>"
            )
            text = page.read_text().replace("<head>", "<head>" + CONSOLE_HOOK, 1)
            copy.write_text(text.replace("</body>", script + "</body>"))
            copies.append(copy)
        frames = HTML / f".frames-{width}-{'dark' if dark else 'light'}.html"
        copies.append(frames)
        frames.write_text(
            "<!DOCTYPE html><html><body style='margin:0'>"
            + "".join(
                f"<iframe src='{copy.relative_to(HTML).as_posix()}' width='{width}'"
                " height='900' style='border:0; position:absolute; top:0; left:0'></iframe>"
                for copy in copies[:-1]
            )
            + "<script>const got = {}; window.addEventListener('message', e => {"
            " const m = JSON.parse(e.data); got[m.page] = m;"
            f" if (Object.keys(got).length === {len(pages)})"
            " document.body.setAttribute('data-probe', JSON.stringify(got)); });"
            "</script></body></html>"
        )
        result = _chromium_dump(frames, width, tmp_path, dark, timeout=300)
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)
    found = re.search(r'data-probe="([^"]*)"', result.stdout)
    assert found, result.stderr[-2000:]
    got = json.loads(html.unescape(found.group(1)))
    return {pages[int(i)]: (v["result"], v["dom"]) for i, v in got.items()}


def probe_with_dom(
    page: Path, width: int, tmp_path: Path, measure: str, dark: bool = False
) -> tuple:
    """`probe`'s result and the DOM Chromium rendered (of the page's frame at a phone's width)."""
    name = f".probe-{width}-{'dark-' if dark else ''}{page.name}"
    probe_page = page.with_name(name)
    theme = _dark_theme_js(dark)
    script = (
        "<script>window.addEventListener('load', () => { setTimeout(() => {"
        f"{theme} let result = null; {measure}; const found = JSON.stringify(result);"
        "document.body.setAttribute('data-probe', found);"
        "if (window.parent !== window) window.parent.postMessage(found, '*'); }, 500); });"
        "</script>"
    )
    text = page.read_text().replace("<head>", "<head>" + CONSOLE_HOOK, 1)
    probe_page.write_text(text.replace("</body>", script + "</body>"))
    opened = probe_page
    if width < MIN_WINDOW_PX:
        opened = page.with_name(f".frame-{name}")
        opened.write_text(
            "<!DOCTYPE html><html><body style='margin:0'>"
            f"<iframe src='{probe_page.name}' width='{width}' height='900' style='border:0'>"
            "</iframe><script>window.addEventListener('message', e =>"
            " document.body.setAttribute('data-probe', e.data));</script></body></html>"
        )
    try:
        result = _chromium_dump(opened, width, tmp_path, dark, timeout=120)
    finally:
        probe_page.unlink(missing_ok=True)
        opened.unlink(missing_ok=True)
    found = re.search(r'data-probe="([^"]*)"', result.stdout)
    assert found, result.stderr[-2000:]
    return json.loads(html.unescape(found.group(1))), result.stdout


def page_measures() -> dict[str, str]:
    """The measures (JavaScript, as `probe` takes them) the tests below read of a page."""
    return {
        # first what a reader sees as the page opens; then with every fold open but the code
        "height": "result = document.documentElement.scrollHeight",
        "code": CODE_FOLDED,
        "verdict": VERDICT,
        "open folds": OPEN_FOLDS,
        "overflow": OVERFLOW,
        "figures": FIGURE_SIZES,
        "figure modes": FIGURE_MODES,
        "phone figures": PHONE_FIGURES,
        "caption math": CAPTION_MATH,
        "tables": TABLE_FIT,
        "colours": COLOURS,
        "clipping": CLIPPING,
        "contrast": CONTRAST,
        "long tables": LONG_TABLES,
        "printed": PRINTED,
        "data tables": DATA_TABLES,
        "phone text": PHONE_TEXT,
        "console": CONSOLE,
        "mid word": MID_WORD,
        "display math": DISPLAY_MATH,
        "inline math": INLINE_FORMULAS,
        "overview words": OVERVIEW_WORDS,
        "claims type": CLAIMS_TYPE,
        "off screen": OFF_SCREEN,
    }


# The measures the tests read in dark mode and at the laptop widths besides 1280 px; every
# other request measures everything. Each measure runs on every page of a browser run, and the
# contrast walk over every text node is most of it: the chapters at 1366 px took 20 s instead
# of 37 with the clipping measure alone (2 loaded cores), dark mode 20 s instead of 37.
ONLY_AT = {"dark": ("contrast", "colours", "figure modes"), 960: ("clipping",), 1366: ("clipping",)}


def measures_at(width: int, dark: bool) -> dict[str, str]:
    """`page_measures`, less those no test reads at `width` px (or in dark mode)."""
    every = page_measures()
    only = ONLY_AT["dark"] if dark else ONLY_AT.get(width)
    return {name: every[name] for name in only} if only else every


def all_of(measures: dict[str, str]) -> str:
    """One measure that runs each of `measures` in its own scope: result[name] is its result,
    or {"probe error": message} where its script threw."""
    return "result = {};" + "".join(
        f"try {{ result[{json.dumps(name)}] = (() => {{ let result = null; {js}; return result;"
        f" }})(); }} catch (e) {{ result[{json.dumps(name)}] = {{'probe error': String(e)}}; }}"
        for name, js in measures.items()
    )


@pytest.fixture(scope="session")
def measured(built_site, tmp_path_factory):
    """`measured(page, width=1280, dark=False)`: the measures of `measures_at` on `page`
    opened in Chromium at `width` px (in the theme's dark mode with `dark`), and its rendered
    DOM ("dom"). The first request of a page at a width and mode measures every page of its
    folder at once, in one browser run (`probe_pages_with_dom`), shared by the tests that read
    them: tests ask for the chapters alone (at 960 and 1366 px) or for every page, folder by
    folder. (Two or three runs at once took longer on 2 cores.)"""
    profile, runs = tmp_path_factory.mktemp("chromium"), {}

    def measure(page: Path, width: int = 1280, dark: bool = False) -> dict:
        if (page, width, dark) not in runs:
            batch = sorted({page, *(HTML / p for p in pages() if (HTML / p).parent == page.parent)})
            measures = all_of(measures_at(width, dark))
            for each, (found, dom) in probe_pages_with_dom(
                batch, width, profile, measures, dark
            ).items():
                runs[each, width, dark] = {**found, "dom": dom}
        found = runs[page, width, dark]
        failed = {k: v for k, v in found.items() if isinstance(v, dict) and "probe error" in v}
        assert not failed, f"{page.name} at {width} px: {failed}"
        return found

    return measure


# Horizontal overflow of a page: of the document, and of the widest table beyond its container.
OVERFLOW = (
    "const doc = document.documentElement.scrollWidth - window.innerWidth;"
    "let table = 0; for (const t of document.querySelectorAll('table')) {"
    "table = Math.max(table, t.scrollWidth - t.parentElement.clientWidth); }"
    "result = {document: doc, table: table}"
)


STATUS_PAGE_PX = 4_000  # at 1280 px (it was 62,369 with every chapter's table open)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_status_page_fits_a_laptop_and_a_phone(built_site, width, measured):
    """At 1280 px and at a phone's 390 px, the page is no wider than the screen, the status
    table's columns all fit (no column cut off or scrolled out of view), no word of a row is
    cut mid-word, and no word or number of the overview is set on two lines."""
    measures = measured(built_site / "book" / "status.html", width)
    found = measures["overflow"]
    assert found["document"] <= 0, f"the page is {found['document']} px too wide"
    assert found["table"] <= 0, f"a table is {found['table']} px wider than its column"
    assert not mid_word_problems("status", measures["mid word"])
    assert not overview_word_problems("status", width, measures["overview words"])
    if width == 1280:  # read in two screens: each chapter's table folded under its line
        assert measures["height"] <= STATUS_PAGE_PX, f"the status page is {measures['height']} px"


def test_every_figure_shows_its_provenance(built_site):
    """Under each figure: its data to download, what drew it, the sweeps behind it, the
    claims it checks (each link lands on its row of the claims table, and shows the status that
    row shows), profile and commit."""
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.engine.paths import figures_dir

    for chapter in chapters():
        page = (built_site / "book" / "chapters" / f"{chapter}.html").read_text()
        blocks = re.findall(r"<p class=.figure-provenance.>(.*?)</p>", page, re.S)
        figures = list(figures_dir("smoke", chapter).glob("*.json"))
        assert len(blocks) == len(figures), f"{chapter}: {len(blocks)} of {len(figures)}"
        for block in blocks:
            for part in (
                f'href="{chapter}_files/',
                "drawn by:",
                "computed by:",
                "checks:",
                "commit <code>",
            ):
                assert part in block.replace("'", '"'), f"{chapter}: {part} missing: {block}"
            for claim in re.findall(r"href=.#claim-([\w-]+)", block):
                assert f'id="claim-{claim}"' in page.replace("'", '"'), (chapter, claim)
                # its state, as its row of the claims table shows it
                row = re.search(rf"<tr id=.claim-{claim}.>.*?</tr>", page, re.S).group(0)
                badge = re.search(r"<span class=.claim-status [\w-]+.>[^<]*</span>", row)
                assert f"{claim}</a> {badge.group(0)}" in block, (chapter, claim, block)


class BibliographyParser(HTMLParser):
    """The citations of a page (sphinxcontrib-bibtex's `span.bibtex-citation` links) and the
    entries of its bibliography (`div[role=doc-biblioentry]`: id, text, links, and whether it
    sits in the "References" section)."""

    def __init__(self):
        super().__init__()
        self.cited: list[str] = []
        self.entries: dict[str, dict] = {}
        self._sections: list[str | None] = []
        self._entry: dict | None = None
        self._entry_depth = 0
        self._in_citation = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self._sections.append(attrs.get("id"))
        if self._entry is not None:
            self._entry_depth += tag == "div"
            if tag == "a" and attrs.get("href"):
                self._entry["hrefs"].add(attrs["href"])
        elif tag == "div" and attrs.get("role") == "doc-biblioentry":
            self._entry = {
                "text": "",
                "hrefs": set(),
                "in_references": "references" in self._sections,
            }
            self.entries[attrs.get("id", "")] = self._entry
            self._entry_depth = 1
        if tag == "span" and "bibtex-citation" in (attrs.get("class") or "").split():
            self._in_citation += 1
        elif tag == "span" and self._in_citation:
            self._in_citation += 1
        if tag == "a" and self._in_citation and (attrs.get("href") or "").startswith("#"):
            self.cited.append(attrs["href"][1:])

    def handle_endtag(self, tag):
        if tag == "section" and self._sections:
            self._sections.pop()
        if self._entry is not None and tag == "div":
            self._entry_depth -= 1
            if self._entry_depth == 0:
                self._entry = None
        if tag == "span" and self._in_citation:
            self._in_citation -= 1

    def handle_data(self, data):
        if self._entry is not None:
            self._entry["text"] += data


def citation_problems(chapter: str, page: str) -> list[str]:
    """What is wrong with a chapter page's citations: no bibliography, a bibliography outside
    the "References" section, a citation without its entry or an entry nobody cites, or the
    chapter's own paper (found by its title and its DOI, arXiv or URL link) not cited."""
    from citations import CHAPTER_PAPERS, bib_entries, entry_links, plain

    parser = BibliographyParser()
    parser.feed(page)
    entries, cited = parser.entries, set(parser.cited)
    if not entries:
        return [f"{chapter}: no bibliography"]
    problems = [
        f"{chapter}: bibliography entry {e!r} is not in the References section"
        for e, v in entries.items()
        if not v["in_references"]
    ]
    if cited - set(entries):
        problems.append(f"{chapter}: citations without an entry: {sorted(cited - set(entries))}")
    if set(entries) - cited:
        problems.append(f"{chapter}: entries nobody cites: {sorted(set(entries) - cited)}")
    key = CHAPTER_PAPERS.get(chapter)
    if key is None:
        return problems + [f"{chapter}: name its paper in tests/citations.py CHAPTER_PAPERS"]
    paper = bib_entries()[key]
    title, links = plain(paper.fields["title"]), entry_links(paper)
    own = [e for e, v in entries.items() if title in plain(v["text"]) and links & v["hrefs"]]
    if not own:
        problems.append(f"{chapter}: its paper ({key}) is not in its bibliography")
    elif not set(own) & cited:
        problems.append(f"{chapter}: its paper ({key}) is listed but never cited")
    return problems


def test_every_chapter_cites_its_paper_and_ends_with_its_bibliography(built_site):
    from implicit_bias.core.chapter import chapters

    problems = [
        p
        for chapter in chapters()
        for p in citation_problems(
            chapter, (built_site / "book" / "chapters" / f"{chapter}.html").read_text()
        )
    ]
    assert not problems, "\n".join(problems)


def chapter_pages(site: Path) -> list[Path]:
    from implicit_bias.core.chapter import chapters

    return [site / "book" / "chapters" / f"{chapter}.html" for chapter in chapters()]


def record_pages(site: Path) -> list[Path]:
    """The chapters' reproduction records (core.site.record_page), pages of their own."""
    from implicit_bias.core.site.record_page import RECORDS

    return sorted(p for p in (site / RECORDS).glob("*.html") if not p.name.startswith("."))


FIGURE_SIZES = (
    "result = [...document.querySelectorAll('figure.book-figure img')]"
    ".filter(i => i.getClientRects().length).map(i => ["
    "i.getAttribute('src'), i.getBoundingClientRect().width, i.naturalWidth,"
    "JSON.parse(i.dataset.legibility || '{}')])"
)
MIN_PANEL_PX, MIN_FONT_PT = 350, 9.0


def legibility_problems(page: str, figures: list) -> tuple[list[str], list[tuple]]:
    """Figures of a page too small to read at the window measured: a panel narrower than
    MIN_PANEL_PX, a font below MIN_FONT_PT as shown (a figure inch is `shown / width_in` CSS
    px, a point 96 / 72 of them), an image of less than 2 pixels per CSS pixel, overlapping
    tick labels, texts drawn over each other (`plotting.text_overlaps`). Also returns
    (figure, narrowest panel px, smallest font pt) for the report."""
    problems, sizes = [], []
    for src, shown, natural, record in figures:
        name = f"{page}: {src}"
        if not record.get("panels"):
            problems.append(f"{name}: no legibility record")
            continue
        panel = min(record["panels"]) * shown
        font = record["min_font_pt"] * shown / (record["width_in"] * 96)
        sizes.append((name, round(panel), round(font, 2)))
        if panel < MIN_PANEL_PX:
            problems.append(f"{name}: a panel is {panel:.0f} px wide (< {MIN_PANEL_PX})")
        if font < MIN_FONT_PT:
            problems.append(f"{name}: a font shows at {font:.1f} pt (< {MIN_FONT_PT})")
        if natural < 2 * shown - 1:
            problems.append(f"{name}: {natural} px image shown {shown:.0f} px wide (not 2x)")
        if record["tick_overlaps"]:
            problems.append(f"{name}: {record['tick_overlaps']} overlapping tick labels")
        if record.get("text_overlaps") is None:  # drawn before texts were checked: draw again
            problems.append(f"{name}: no record of overlapping texts")
        elif record["text_overlaps"]:
            problems.append(
                f"{name}: {record['text_overlaps']} pairs of texts drawn over each other"
            )
        if record.get("legend_overlaps") is None:  # drawn before legends were checked
            problems.append(f"{name}: no record of legends over data")
        elif record["legend_overlaps"]:
            problems.append(f"{name}: a legend hides {record['legend_overlaps']} data points")
    return problems, sizes


def test_figures_are_legible_at_page_width(built_site, measured, capsys):
    """At a 1280 px window every figure's panels are at least 350 px wide, its smallest font
    shows at 9 pt or more, its image has 2 pixels per CSS pixel, no tick labels overlap, no
    text is drawn over another and no legend hides a data point."""
    problems, sizes = [], []
    for page in chapter_pages(built_site):
        found, shown = legibility_problems(page.name, measured(page)["figures"])
        problems, sizes = problems + found, sizes + shown
    assert sizes, "no figure measured"
    with capsys.disabled():  # in the test run's output, also when it passes
        print(
            f"\n{len(sizes)} figures at 1280 px: narrowest panel {min(s[1] for s in sizes)} px, "
            f"smallest font {min(s[2] for s in sizes)} pt"
        )
    assert not problems, "\n".join(problems)


def test_the_legibility_check_finds_small_figures():
    record = {"panels": [0.5, 0.5], "min_font_pt": 9.0, "width_in": 7.4, "tick_overlaps": 0}
    record["text_overlaps"] = record["legend_overlaps"] = 0
    assert legibility_problems("p", [("a.png", 740, 1480, record)])[0] == []
    for collided in (
        {**record, "text_overlaps": 1},
        {k: v for k, v in record.items() if k != "text_overlaps"},
        {**record, "legend_overlaps": 3},
        {k: v for k, v in record.items() if k != "legend_overlaps"},
    ):
        assert legibility_problems("p", [("a.png", 740, 1480, collided)])[0]
    shrunk = legibility_problems("p", [("a.png", 600, 1480, record)])[0]
    assert any("px wide" in p for p in shrunk) and any("pt" in p for p in shrunk)
    assert legibility_problems("p", [("a.png", 740, 740, record)])[0]  # 1x image
    crowded = {**record, "tick_overlaps": 2}
    assert legibility_problems("p", [("a.png", 740, 1480, crowded)])[0]


INLINE_DATA = re.compile(r"data:text/csv;base64,")


def test_pages_link_figure_data_as_files_and_report_the_site_size(built_site, capsys):
    """No page inlines a figure's data (it downloads from a file beside the page); prints the
    site's size (whole site, pages, largest page)."""
    from implicit_bias.core.site.website import site_size

    size = site_size(built_site)
    with capsys.disabled():  # in the test run's output, also when it passes
        print(
            f"\nsite: {size['total'] / 1e6:.1f} MB in all, pages {size['pages'] / 1e6:.1f} MB, "
            f"largest page {size['largest_page']} {size['largest_page_bytes'] / 1e6:.2f} MB"
        )
    inlined = [
        str(page.relative_to(built_site))
        for page in built_site.rglob("*.html")
        if INLINE_DATA.search(page.read_text())
    ]
    assert not inlined, f"pages inlining CSV data: {inlined}"
    assert size["largest_page_bytes"] < 1_000_000, size


def relative_luminance(rgb) -> float:
    def channel(c):
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg, bg) -> float:
    """WCAG contrast ratio of two sRGB colours."""
    a, b = sorted((relative_luminance(fg), relative_luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


# The colour of an element's text and of the first ancestor with an opaque background.
COLOURS = (
    "const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);"
    "const colours = el => { let e = el, bg = null; while (e) {"
    "const c = rgb(getComputedStyle(e).backgroundColor);"
    "if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) { bg = c; break; }"
    "e = e.parentElement; } return [rgb(getComputedStyle(el).color), bg || [255, 255, 255]]; };"
    "result = {};"
    "for (const [k, sel] of [['caption', 'figure.book-figure figcaption'],"
    "['provenance', 'p.figure-provenance small'], ['provenance link', 'p.figure-provenance a'],"
    "['provenance code', 'p.figure-provenance code'],"
    "['body', 'article p']]) {"
    "const el = document.querySelector(sel); if (el) result[k] = colours(el); }"
    "result.theme = document.documentElement.dataset.theme"
)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_captions_and_provenance_are_readable_in_both_modes(built_site, measured, dark, capsys):
    """In the theme's light and dark modes, caption and provenance text keep a WCAG contrast
    of at least 4.5 against their background (and the page really is in that mode)."""
    page = chapter_pages(built_site)[0]
    found = dict(measured(page, dark=dark)["colours"])
    assert (found.pop("theme") == "dark") == dark
    ratios = {k: round(contrast(fg, bg), 2) for k, (fg, bg) in found.items()}
    with capsys.disabled():  # in the test run's output, also when it passes
        print(f"\n{'dark' if dark else 'light'} mode contrast ({page.name}): {ratios}")
    page_dark = relative_luminance(found["body"][1]) < 0.1
    assert page_dark == dark, f"the page is not in {'dark' if dark else 'light'} mode: {found}"
    low = {k: r for k, r in ratios.items() if r < 4.5}
    assert not low and {"caption", "provenance"} <= set(ratios), (low, found)


def test_the_contrast_check_can_fail():
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21)
    assert contrast((40, 40, 40), (20, 20, 20)) < 4.5


def repository_url() -> str | None:
    """The book's public address (`repository: url` of _config.yml), None while it is empty."""
    from implicit_bias.core.site.repository import repository_url as configured

    return configured(ROOT)


# A link to the book's source that only an address makes: a launch button, an edit or issue
# button, or the repository Jupyter Book names when a book names none.
SOURCE_BUTTON = re.compile(
    r"mybinder\.org/|colab\.research\.google\.com/|/edit/[\w.-]+/|/issues/new"
    r"|executablebooks/jupyter-book"
)


def unaddressed_link_problems(page: str, hrefs: list[str]) -> list[str]:
    """With no address: the links of a page that lead to a source all the same (a button, or
    a link to a file of this repository on some host's `main`, as `{repo}` makes)."""
    return [
        f"{page}: a source link, but the book names no repository: {h}"
        for h in hrefs
        if SOURCE_BUTTON.search(h)
        or (
            (ours := re.match(r"https://[^/]+/[^/]+/[^/]+/(?:blob|tree)/main/(.+)", h))
            and in_repository(unquote(ours.group(1).split("#")[0]))
        )
    ]


SITE_TEXTS = (".html", ".ipynb", ".md", ".txt", ".yml", ".yaml", ".cff", ".json", ".csv")


def placeholder_problems(site: Path) -> tuple[list[str], int]:
    """The links to a placeholder (REPLACE-WITH-OWNER, example.com, ...) in the built site:
    its pages and the files it offers (sources, figure data), not the theme's `_static`; and
    how many files were read."""
    from implicit_bias.core.site.repository import placeholder_links

    problems, read = [], 0
    for path in sorted(site.rglob("*")):
        if "_static" in path.relative_to(site).parts or path.suffix not in SITE_TEXTS:
            continue
        if path.is_file():
            read += 1
            for url in placeholder_links(path.read_text(errors="replace")):
                problems.append(f"{path.relative_to(site)}: {url}")
    return problems, read


@functools.cache
def tracked_files() -> frozenset[str]:
    """The files of the repository (tracked, or new and not ignored: about to be committed)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return frozenset(listed.splitlines())


def in_repository(path: str) -> bool:
    """Whether `path` is a file, or a folder (ending in /) holding files, of the repository:
    not a built or ignored one (book/chapters/*.ipynb), not spelled with ./ segments."""
    if not path or path.startswith("./") or "/./" in path:
        return False
    if path.endswith("/"):
        return any(f.startswith(path) for f in tracked_files())
    return path in tracked_files()


def launch_prefixes(url: str) -> tuple[str, str]:
    """How Binder's and Colab's links into the repository `url` begin (a path follows)."""
    owner_repo = url.removeprefix("https://github.com/")
    return (
        f"https://mybinder.org/v2/gh/{owner_repo}/main?urlpath=lab/tree/",
        f"https://colab.research.google.com/github/{owner_repo}/blob/main/",
    )


def source_link_problems(page: str, hrefs: list[str], url: str) -> list[str]:
    """Links of a page into the repository (`url`, from _config.yml) that are malformed or
    name a file the repository does not have: the repository, issue, edit and Binder
    buttons and the `{repo}` links of the text."""
    binder, colab = launch_prefixes(url)
    problems = []
    for href in hrefs:
        if href == url or href.startswith(f"{url}/issues/new?"):
            continue
        if href.startswith(binder):
            path = href[len(binder) :]
        elif href.startswith(colab):
            path = href[len(colab) :]
        elif re.match(rf"{re.escape(url)}/(blob|tree|edit)/main/", href):
            path = href.split("/main/", 1)[1]
        elif "mybinder.org" in href or "colab." in href or href.startswith(url):
            problems.append(f"{page}: malformed link {href}")
            continue
        else:
            continue
        if not in_repository(unquote(path.split("#")[0])):
            problems.append(f"{page}: {href} names no file of the repository")
    return problems


def test_source_citation_and_launch_links_follow_the_address(built_site):
    """With the book's public address set: the intro links the repository, its citation
    (which gives the address) and licence; every chapter page has a repository, issue, edit,
    Binder and Colab button, the edit and Binder ones on its source (notebooks/<id>.md),
    Colab's on colab/<id>.ipynb; every link into the repository names a file it has. With it
    empty: no page has any of these buttons, and the intro names CITATION.cff and LICENSE as
    files (code type), unlinked."""
    from implicit_bias.core.chapter import chapters

    url = repository_url()
    problems, counted = [], 0
    intro = built_site / "book" / "intro.html"
    if url is None:
        for page in [built_site / name for name in pages()]:
            parser = PageParser()
            parser.feed(page.read_text())
            counted += len(parser.links)
            problems += unaddressed_link_problems(page.name, parser.links)
        text = intro.read_text()
        for name in ("CITATION.cff", "LICENSE"):
            if not re.search(
                rf"<code[^>]*><span class=\"pre\">{re.escape(name)}</span></code>", text
            ):
                problems.append(f"intro.html: {name} is not named")
        cited = text.split("[software].")[-1].split("</blockquote>")[0]
        if "[software]." not in text or "<a " in cited:
            problems.append("intro.html: the citation is not the book's, or links an address")
        assert counted and not problems, "\n".join(problems)
        return
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url), url
    for page in [intro, *chapter_pages(built_site)]:
        parser = PageParser()
        parser.feed(page.read_text())
        counted += len(parser.links)
        problems += source_link_problems(page.name, parser.links, url)
        links = set(parser.links)
        if url not in links or not any(h.startswith(f"{url}/issues/new?") for h in links):
            problems.append(f"{page.name}: no repository or issue button")
        if page.stem in chapters():
            for wanted in (
                f"{url}/edit/main/notebooks/{page.stem}.md",
                f"notebooks/{page.stem}.md",
            ):
                if not any(h.endswith(wanted) or h == wanted for h in links):
                    problems.append(f"{page.name}: no link to {wanted}")
            if not any("mybinder.org" in h for h in links):
                problems.append(f"{page.name}: no Binder button")
            if f"{launch_prefixes(url)[1]}colab/{page.stem}.ipynb" not in links:
                problems.append(f"{page.name}: no Colab button on colab/{page.stem}.ipynb")
        elif not {f"{url}/blob/main/LICENSE", f"{url}/blob/main/CITATION.cff"} <= links:
            problems.append(f"{page.name}: no link to LICENSE and CITATION.cff")
        elif url not in re.sub(r"<[^>]+>", "", page.read_text().split("[software].")[-1])[:200]:
            problems.append(f"{page.name}: the citation does not give the address")
    assert counted and not problems, "\n".join(problems)


def test_no_page_links_to_a_placeholder(built_site):
    problems, read = placeholder_problems(built_site)
    assert read > 10 and not problems, "\n".join(problems)


def test_the_source_link_check_can_fail():
    url = "https://github.com/o/r"
    good = [
        url,
        f"{url}/blob/main/LICENSE",
        f"{url}/issues/new?title=x",
        "https://colab.research.google.com/github/o/r/blob/main/colab/gln_norm.ipynb",
    ]
    assert source_link_problems("p", good, url) == []
    bad = [
        f"{url}/blob/main/no-such-file.txt",
        f"{url}/edit/main/./book/chapters/gln_norm.ipynb",
        "https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/book/chapters/x.ipynb",
        "https://colab.research.google.com/github/o/r/blob/main/x.ipynb",
    ]
    assert len(source_link_problems("p", bad, url)) == len(bad)
    elsewhere = [
        "https://github.com/paper-submissions/MaxMargin",
        "https://github.com/sflippl/implicit-bias-glns/tree/002054c8",
        "../_sources/book/chapters/gln_norm.ipynb",
    ]
    assert unaddressed_link_problems("p", elsewhere) == []
    buttons = [
        *bad[1:],
        "https://github.com/executablebooks/jupyter-book",
        f"{url}/issues/new?x",
        f"{url}/blob/main/LICENSE",
        f"{url}/tree/main/data/claims/",
    ]
    assert len(unaddressed_link_problems("p", buttons)) == len(buttons)


def test_the_placeholder_check_of_the_site_can_fail(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_static").mkdir()
    (tmp_path / "book" / "intro.html").write_text(
        '<a href="https://github.com/REPLACE-WITH-OWNER/implicit-bias-book">x</a>'
    )
    (tmp_path / "book" / "x.ipynb").write_text('"[data](https://example.com/x.yaml)"')
    (tmp_path / "_static" / "theme.js").write_text("// https://example.com/ a theme's comment")
    (tmp_path / "book" / "fine.html").write_text('<a href="https://mybinder.org">x</a>')
    problems, read = placeholder_problems(tmp_path)
    assert read == 3 and problems == [
        "book/intro.html: https://github.com/REPLACE-WITH-OWNER/implicit-bias-book",
        "book/x.ipynb: https://example.com/x.yaml",
    ]


def status_link_problems(status_html: str, page_text) -> tuple[list[str], int]:
    """Claim links of the status page's smoke section (the profile the test site is built
    with) that do not land on a row of the chapter's claims table; and how many were checked.
    `page_text(chapter)` returns a chapter page's HTML."""
    smoke = status_html[status_html.index('id="profile-smoke"') :]
    links = re.findall(r"href=.chapters/([\w-]+)\.html#claim-([\w-]+).", smoke)
    missing = [
        f"{chapter}#claim-{cid}"
        for chapter, cid in links
        if not re.search(rf"id=.claim-{re.escape(cid)}.", page_text(chapter))
    ]
    return missing, len(links)


def test_the_status_page_links_each_claim_to_its_row(built_site):
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.site.status_page import chapter_title

    status = (built_site / "book" / "status.html").read_text()
    pages = functools.cache(lambda c: (built_site / "book" / "chapters" / f"{c}.html").read_text())
    missing, checked = status_link_problems(status, pages)
    assert checked > 0 and not missing, missing[:10]
    for chapter in chapters():
        assert html.escape(chapter_title(chapter), quote=False) in status, chapter


def test_the_status_link_check_can_fail():
    status = '<section id="profile-smoke"><a href="chapters/c.html#claim-a_b">a_b</a>'
    assert status_link_problems(status, lambda c: "<tr id='claim-a_b'>") == ([], 1)
    assert status_link_problems(status, lambda c: "<tr id='claim-other'>") == (["c#claim-a_b"], 1)


# Every image a figure shows is measured by its own right edge, also inside a figure that
# scrolls sideways (book.css gives an image its legible width, `--phone-min`, and lets the
# figure scroll): measured by the scrolling box, tensor_networks' Fig. 5, 468 px wide at 390,
# passed while it ran 94 px past the screen. A figure is drawn to fit instead (at most about 5
# inches for one panel; wider ones are cut into panels for a phone: `figure_panels`).
PHONE_FIGURES = (
    "const width = document.documentElement.clientWidth;"
    "result = [...document.querySelectorAll('figure.book-figure img')]"
    ".filter(i => i.getClientRects().length).map(i => {"
    "const right = i.getBoundingClientRect().right; return ["
    "i.getAttribute('src'), Math.round(right - width),"
    "i.parentElement.tagName === 'A'"
    " && i.parentElement.getAttribute('href') === i.getAttribute('src')"
    "]; })"
)


def phone_problems(page: str, figures: list) -> list[str]:
    """Figures that stick out of a phone's screen, or do not open full size when tapped."""
    problems = []
    for src, beyond, linked in figures:
        if beyond > 1:
            problems.append(f"{page}: {src} sticks out {beyond} px beyond the screen")
        if not linked:
            problems.append(f"{page}: {src} does not link to its full-size image")
    return problems


def test_figures_fit_a_phone_and_open_full_size(built_site, measured):
    """At a phone's 390 px every figure fits the screen, and tapping it opens the full image."""
    problems, seen = [], 0
    for page in chapter_pages(built_site):
        figures = measured(page, PHONE_PX)["phone figures"]
        seen += len(figures)
        problems += phone_problems(page.name, figures)
    assert seen and not problems, "\n".join(problems)


def test_the_phone_check_can_fail():
    assert phone_problems("p", [("a.png", 0, True)]) == []
    assert len(phone_problems("p", [("a.png", 30, True), ("b.png", 0, False)])) == 2


def test_the_phone_measure_sees_an_image_past_the_screen_inside_a_scrolling_figure(tmp_path):
    """A synthetic page as book.css lays out a figure on a phone: the figure scrolls sideways
    and its image keeps a legible width wider than the screen (468 px, as tensor_networks' Fig.
    5 did). Its box fits; its image does not, and the measure says so; a narrow one fits."""
    page = tmp_path / "synthetic.html"
    figure = (
        "<figure class='book-figure' style='overflow-x: auto; margin: 0 16px'>"
        "<a href='{0}.png'><img src='{0}.png' width='{1}' style='min-width: {1}px; height: 20px;"
        " display: block'></a></figure>"
    )
    page.write_text(
        "<!DOCTYPE html><html><body style='margin: 0'><article>"
        + figure.format("wide", 468)
        + figure.format("narrow", 300)
        + "</article></body></html>"
    )
    found = probe(page, PHONE_PX, tmp_path, PHONE_FIGURES)
    beyond = {src: right for src, right, _ in found}
    assert beyond["wide.png"] == 16 + 468 - PHONE_PX and beyond["narrow.png"] < 0
    assert phone_problems("synthetic", found) == [
        f"synthetic: wide.png sticks out {16 + 468 - PHONE_PX} px beyond the screen"
    ]


# Written captions (`caption=` of `Chapter.save_figure`): prose that says what is plotted, then
# a one-line takeaway, as `core.chapter.figure_html` marks them; never the generated fallback.
TAKEAWAY_MAX_CHARS = 250  # one line of prose at the page's width, give or take
SNAKE_CASE = re.compile(r"\b[a-z0-9]+_[a-z0-9_]+\b")  # a claim id or a column name


def written_caption_problems(page: str) -> list[str]:
    """What the figures of a chapter page lack: a written caption (not the one generated from
    the axes), a description before its takeaway, and one takeaway of one line; no claim ids
    and no second figure number ("Figure 3. Fig. 2a: ...")."""
    problems = []
    blocks = re.findall(r"<figure class=.book-figure.(.*?)</figure>", page, re.S)
    for number, block in enumerate(blocks, 1):
        caption = re.search(r"<figcaption>(.*?)</figcaption>", block, re.S)
        if not caption or "<span class='written-caption'>" not in caption.group(1):
            problems.append(f"figure {number}: no written caption")
            continue
        text = caption.group(1)
        words = html.unescape(re.sub(r"<[^>]+>", "", outside_math(text)))
        # "This run: ..." (generated; core.site.website.report_findings), then "Expected: ..."
        # (the caption's written line of what the paper expects)
        label = "Expected:"
        if text.count(f"<em>{label}</em>") != 1 or words.count(label) != 1:
            problems.append(f"figure {number}: not one takeaway")
            continue
        described, takeaway = words.split(label)
        described, _, run = described.partition("This run:")
        if not run.strip():
            problems.append(f"figure {number}: the paper's takeaway without this run's")
        if len(run.strip()) > TAKEAWAY_MAX_CHARS:
            problems.append(f"figure {number}: what this run found is not one line: {run!r}")
        described = described.removeprefix(f"Figure {number}.").strip()
        if len(described) < 80:
            problems.append(f"figure {number}: says little of what it plots: {described!r}")
        if not takeaway.strip() or len(takeaway.strip()) > TAKEAWAY_MAX_CHARS:
            problems.append(f"figure {number}: takeaway not one line: {takeaway.strip()!r}")
        if SNAKE_CASE.search(words):
            problems.append(f"figure {number}: {SNAKE_CASE.findall(words)} in {words[:80]!r}")
        if re.match(r"(Fig\.|Figure) ?\d", described):
            problems.append(f"figure {number}: numbered twice: {described[:40]!r}")
    return problems


def run_findings_problems(page: str) -> list[str]:
    """Figures that check claims but do not say what this run found of them, or say that all
    reproduce where the claims table says otherwise."""
    states = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"<tr id=.claim-([\w-]+).>.*?<span class=.claim-status [\w-]+.>([^<]*)</span>",
            page,
            re.S,
        )
    }
    problems = []
    for number, (block, provenance) in enumerate(
        re.findall(
            r"(<figure class=.book-figure.*?</figure>).*?(<p class=.figure-provenance.>.*?</p>)",
            page,
            re.S,
        ),
        1,
    ):
        claims = re.findall(r"href=.#claim-([\w-]+).", provenance)
        # its words up to the paper's line (its quotes' maths are typeset: spans inside)
        run = re.search(r"<em>This run:</em> (.*?)(?:<br><em>Expected:|</figcaption>)", block, re.S)
        found = run and re.match(r"(.*)", re.sub(r"<[^>]+>", "", run.group(1)).strip())
        if claims and not found:
            problems.append(f"figure {number}: checks {len(claims)} claims, says nothing of them")
        elif (
            found
            # all hold: "both claims ... reproduce.", "the audit on this figure passes: ..."
            and re.match(
                r"(all \d+|both) [\w'() ]+ (reproduce|pass)\.|the [\w' ]+ (reproduces|passes):",
                found.group(1),
            )
            and any(
                str(state) not in found.group(1)
                and tally.PLURAL.get(str(state), str(state)) not in found.group(1)
                for state in {states.get(c) for c in claims} - {"pass"}
            )
        ):
            # a state other than pass among the figure's rows that its caption does not name
            problems.append(f"figure {number}: says all reproduce: {found.group(1)!r}")
    return problems


def test_every_figure_says_what_this_run_found_of_its_claims(built_site):
    problems = [
        f"{page.stem}: {p}"
        for page in chapter_pages(built_site)
        for p in run_findings_problems(page.read_text())
    ]
    assert not problems, "\n".join(problems)


def test_the_run_findings_check_can_fail():
    figure = "<figure class='book-figure'><figcaption>x{}</figcaption></figure>"
    provenance = "<p class='figure-provenance'>checks: <a href='#claim-a'>a</a></p>"
    row = (
        "<tr id='claim-a'><td>a</td><td><span class='claim-status status-{0}'>{0}</span></td></tr>"
    )
    said = "<span class='figure-run'><br><em>This run:</em> {}</span>"
    good = figure.format(said.format("the claim it checks reproduces: ours 1.")) + provenance
    assert run_findings_problems(good + row.format("pass")) == []
    assert "says nothing" in run_findings_problems(figure.format("") + provenance)[0]
    assert "says all" in run_findings_problems(good + row.format("inconclusive"))[0]
    # a caption that names the other rows' state is not saying that all reproduce
    named = (
        "the claim it checks reproduces: ours 1; of the book's own checks beside it, "
        "2 do not reproduce"
    )
    beside = figure.format(said.format(named)) + provenance
    failed = row.replace("status-{0}", "status-does-not-reproduce").format("does not reproduce")
    assert run_findings_problems(beside + failed) == []
    assert "says all" in run_findings_problems(beside + row.format("inconclusive"))[0]
    # a check of the book's own passes; the same check applies to its line
    passes = figure.format(
        said.format("the check of the book's own on this figure passes: ours 1.")
    )
    assert run_findings_problems(passes + provenance + row.format("pass")) == []
    assert "says all" in run_findings_problems(passes + provenance + row.format("inconclusive"))[0]


def test_every_figure_has_a_written_caption_with_this_runs_finding_and_the_papers(built_site):
    counts, problems = {}, []
    for page in chapter_pages(built_site):
        text = page.read_text()
        counts[page.stem] = len(re.findall(r"<figure class=.book-figure.", text))
        problems += [f"{page.stem}: {p}" for p in written_caption_problems(text)]
    assert sum(counts.values()) > 0, counts
    assert not problems, "\n".join(problems)


def test_the_written_caption_check_can_fail():
    math = '<span class="math notranslate nohighlight">\\(x_1\\)</span>'
    prose = f"Left: the error of {math} against the step size (log-log), mean of three seeds. "
    prose += "Right: its slope. "
    good = (
        "<figure class='book-figure' id='figure-a'><img src='a.png' alt='a'><figcaption>"
        f"<strong>Figure 1.</strong> <span class='written-caption'>{prose}"
        "<span class='figure-expectation'><span class='figure-run'><br><em>This run:</em> both "
        "claims it checks reproduce.</span><br><em>Expected:</em> the error falls.</span></span>"
        "</figcaption></figure>"
    )
    assert written_caption_problems(good) == []
    generated = good.replace("written-caption", "generated-caption")
    assert "no written caption" in written_caption_problems(generated)[0]
    no_takeaway = good.replace("<em>Expected:</em> the error falls.", "")
    assert "not one takeaway" in written_caption_problems(no_takeaway)[0]
    claim_id = good.replace("the error falls", "checks theorem1_gd_close")
    assert "theorem1_gd_close" in written_caption_problems(claim_id)[0]
    twice = good.replace("Left: the error", "Fig. 2a: the error")
    assert "numbered twice" in written_caption_problems(twice)[0]
    long_takeaway = good.replace("the error falls", "the error falls " * 30)
    assert "not one line" in written_caption_problems(long_takeaway)[0]
    # the paper's line alone, without this run's finding before it
    run = "<span class='figure-run'><br><em>This run:</em> both claims it checks reproduce.</span>"
    alone = good.replace(run, "")
    assert "without this run's" in written_caption_problems(alone)[0]


# In each figure caption of a page opened in Chromium: the inline math spans, the MathJax
# containers typeset in it, and its text outside them (where no TeX delimiter may be left).
CAPTION_MATH = (
    "result = []; for (const c of document.querySelectorAll('figure.book-figure figcaption')) {"
    "const bare = c.cloneNode(true);"
    "bare.querySelectorAll('mjx-container').forEach(m => m.remove());"
    "result.push([c.querySelectorAll('span.math').length,"
    " c.querySelectorAll('span.math mjx-container').length, bare.textContent]); }"
)


def caption_math_problems(found: list) -> list[str]:
    """`found`: [math spans, typeset containers, text outside them] per caption (CAPTION_MATH)."""
    problems = []
    for number, (spans, typeset, bare) in enumerate(found, 1):
        if typeset != spans:
            problems.append(f"figure {number}: {typeset} of {spans} math spans typeset")
        left = sorted({d for d in ("\\(", "\\)", "$", "\\") if d in bare})
        if left:
            problems.append(f"figure {number}: TeX left in the caption: {left} in {bare[:100]!r}")
    return problems


def test_caption_math_is_typeset_by_mathjax(built_site, measured, capsys):
    """Every written caption's inline math is typeset by MathJax in Chromium: one
    `mjx-container` per math span, and no TeX delimiter left in the caption's text."""
    problems, typeset = [], {}
    for page in chapter_pages(built_site):
        found = measured(page)["caption math"]
        typeset[page.stem] = sum(row[1] for row in found)
        problems += [f"{page.stem}: {p}" for p in caption_math_problems(found)]
    with capsys.disabled():
        print(f"\ncaption math typeset by MathJax: {typeset}")
    assert sum(typeset.values()) > 0, typeset
    assert not problems, "\n".join(problems)


def test_the_caption_math_check_can_fail():
    assert caption_math_problems([[2, 2, "Figure 1. The norm  grows."], [0, 0, "Figure 2."]]) == []
    assert "1 of 2 math spans" in caption_math_problems([[2, 1, "Figure 1."]])[0]
    assert "TeX left" in caption_math_problems([[1, 1, "Figure 1. \\(x\\) and $y$"]])[0]


# Every table of a chapter fits its column, at a laptop's 1280 px and at a phone's 390 px.
TABLE_FIT = (
    "const number = /^[-+]?((\\d+\\.?\\d*|\\.\\d+)([eE][-+]?\\d+)?%?|inf|nan|NaN|True|False)$/;"
    "const tables = [...document.querySelectorAll('article table')].map((t, i) => {"
    "const column = t.closest('.cell_output') || t.parentElement;"
    "const style = getComputedStyle(column);"
    "const room = column.clientWidth - parseFloat(style.paddingLeft)"
    " - parseFloat(style.paddingRight);"
    "let scrolls = false;"
    "for (let e = t.parentElement; e && e !== column.parentElement; e = e.parentElement) {"
    "const o = getComputedStyle(e).overflowX;"
    "if ((o === 'auto' || o === 'scroll') && e.clientWidth <= room + 1) scrolls = true; }"
    "const values = [...t.querySelectorAll('tbody td')]"
    ".map(c => c.textContent.trim().replace(/,/g, '')).filter(s => s);"
    "const row = t.querySelector('tbody tr') || t.querySelector('thead tr:last-child');"
    "const section = t.closest('section');"
    "const head = [...t.querySelectorAll('thead th, tbody tr:first-child th')]"
    ".map(h => h.textContent.trim()).filter(s => s).slice(0, 3).join(' | ');"
    "return {index: i, class: t.className, section: section ? section.id : '', head: head,"
    "overflow: Math.round(Math.max(t.scrollWidth, t.offsetWidth) - room),"
    "columns: row ? row.querySelectorAll('td, th').length : 0,"
    "numeric: values.length ? values.filter(s => number.test(s)).length / values.length : 0,"
    "scrolls: scrolls}; });"
    "result = {document: document.documentElement.scrollWidth - window.innerWidth,"
    "viewport: window.innerWidth, tables: tables}"
)
PHONE_PX = 390
SCROLL_MIN_COLUMNS, SCROLL_MIN_NUMERIC = 4, 0.5


def may_scroll(table: dict, width: int) -> bool:
    """The one exception to "every table fits its column": on a phone (below 600 px, where
    book.css switches to its phone layout) a genuinely wide numeric data table, a pandas
    table of at least SCROLL_MIN_COLUMNS columns (row labels included) of which at least
    SCROLL_MIN_NUMERIC of the values are numbers, may scroll sideways inside its own output
    box, never the page. Claims tables, tables of words and every table at 1280 px fit."""
    return (
        width < 600
        and "dataframe" in table["class"].split()
        and table["columns"] >= SCROLL_MIN_COLUMNS
        and table["numeric"] >= SCROLL_MIN_NUMERIC
        and table["scrolls"]
    )


def table_fit_problems(page: str, width: int, measured: dict) -> tuple[list[str], list[tuple]]:
    """What does not fit a page at `width` px: the page itself wider than the window, a table
    wider than its column (beyond `may_scroll`). Also returns (overflow px, table, scrolls by
    the rule) for every table wider than its column, for the report."""
    problems, wide = [], []
    if measured["viewport"] != width:
        problems.append(f"{page}: measured at {measured['viewport']} px, not {width}")
    if measured["document"] > 0:
        problems.append(f"{page} at {width} px: the page is {measured['document']} px too wide")
    for table in measured["tables"]:
        if table["overflow"] <= 0:
            continue
        name = f"{page} table {table['index']} (#{table['section']}: {table['head'][:50]})"
        allowed = may_scroll(table, width)
        wide.append((table["overflow"], name, allowed))
        if not allowed:
            problems.append(f"{name}: {table['overflow']} px wider than its column at {width} px")
    return problems, wide


@pytest.mark.parametrize("width", [1280, PHONE_PX])
def test_every_chapter_table_fits_a_laptop_and_a_phone(built_site, width, measured, capsys):
    """At 1280 px and at a phone's 390 px no chapter or record page is wider than the window,
    and every table (claims tables and the data tables) fits its column; the only exception is
    `may_scroll`'s, on a phone. The run prints, per chapter, the tables wider than their
    column and the worst of them."""
    problems, lines = [], []
    for page in chapter_pages(built_site) + record_pages(built_site):
        tables = measured(page, width)["tables"]
        found, wide = table_fit_problems(page.stem, width, tables)
        problems += found
        worst = max(wide, default=(0, "none", True))
        lines.append(
            f"  {page.stem}: page {max(tables['document'], 0)} px over, "
            f"{len(tables['tables'])} tables, {len(wide)} wider than their column "
            f"({sum(allowed for *_, allowed in wide)} scroll by the rule), worst {worst[0]} px"
            + (f": {worst[1]}" if wide else "")
        )
    with capsys.disabled():  # in the test run's output, also when it passes
        print(f"\ntables at {width} px:\n" + "\n".join(lines))
    assert not problems, "\n".join(problems)


def test_the_table_fit_check_can_fail(tmp_path):
    """A synthetic page: a wide numeric table in a scrolling output box, a wide table of words,
    a claims table of fixed width and a table that widens the page itself."""
    numbers = "".join(f"<td>{j * 1.234567:.6f}</td>" for j in range(30))
    words = "".join(f"<td>word_{j}_without_spaces</td>" for j in range(12))
    page = tmp_path / "synthetic.html"
    page.write_text(
        "<!DOCTYPE html><html><body><article><section id='s'>"
        "<div class='cell_output' style='width: 300px'><div class='output'"
        " style='overflow-x: auto'>"
        f"<table class='dataframe'><tbody><tr><th>0</th>{numbers}</tr></tbody></table>"
        f"<table class='dataframe'><tbody><tr><th>0</th>{words}</tr></tbody></table>"
        "</div></div><div class='cell_output' style='width: 300px'><div class='output'>"
        "<table class='claims-table' style='width: 700px'><tbody><tr><td>a</td></tr></tbody>"
        "</table></div></div></section></article></body></html>"
    )
    # measured as the site's pages are, together with other measures (`all_of`): one of them
    # throws, which `all_of` reports without losing the others
    thrown = "throw new Error('no such element')"
    for width in (1280, PHONE_PX):
        found = probe(page, width, tmp_path, all_of({"tables": TABLE_FIT, "thrown": thrown}))
        assert found["thrown"] == {"probe error": "Error: no such element"}
        measured = found["tables"]
        problems, wide = table_fit_problems("synthetic", width, measured)
        assert [t["overflow"] > 0 for t in measured["tables"]] == [True, True, True]
        numeric = [allowed for _, name, allowed in wide if "table 0" in name]
        assert numeric == [width == PHONE_PX]  # only the numeric table, only on a phone
        assert len(problems) == (3 if width == 1280 else 2) + (width == PHONE_PX)
    assert any("the page is" in p for p in problems)  # the unscrolled claims table, on a phone


# ---- a book a researcher reads (measures and checks: tests/reader_checks.py) -----
WIDE_WINDOWS = (960, 1280, 1366)


@pytest.mark.parametrize("width", WIDE_WINDOWS)
def test_no_figure_is_clipped(built_site, measured, width):
    """At a small laptop's 960 px, at 1280 and at 1366 px, no figure is cut off, by the window
    or by an output box that clips (the figures' margins once reached outside theirs)."""
    problems, seen = [], 0
    for page in chapter_pages(built_site):
        figures = measured(page, width)["clipping"]
        seen += len(figures)
        problems += clipping_problems(page.stem, width, figures)
    assert seen and not problems, "\n".join(problems[:20])


def test_every_text_is_readable_in_dark_mode(built_site, measured, capsys):
    """In the theme's dark mode, every text node of every page (tables, code, badges, captions)
    has a contrast of at least 4.5:1 against the background it is drawn on."""
    problems, checked = [], {}
    for page in pages():
        found = measured(HTML / page, dark=True)["contrast"]
        assert found["theme"] == "dark", page
        checked[page] = found["checked"]
        problems += contrast_problems(page, found)
    with capsys.disabled():
        print(f"\ndark mode: {sum(checked.values())} text nodes measured on {len(checked)} pages")
    assert not problems, "\n".join(problems)


def test_every_chapter_opens_with_its_verdict(built_site, measured):
    """After its abstract and before its first figure, each chapter shows its verdict: counts
    by state and 3-5 findings (fewer only where the chapter has fewer claims of the paper: the
    box shows the paper's claims), each linked to its row of the claims table."""
    problems = []
    for page in chapter_pages(built_site):
        claims = paper_claim_rows(page.read_text())
        problems += verdict_problems(page.stem, measured(page)["verdict"], claims)
    assert not problems, "\n".join(problems)


def test_chapters_fold_their_code_and_show_no_machinery(built_site, measured):
    """No code cell is open when a chapter page opens; no data table of more than 20 rows (a
    download instead), no printed line (a sentence instead), dict, DataFrame repr or message
    of the profile's branch; no data table with a snake_case header or a number of more than
    four significant digits (pandas' `3.777265e-16`)."""
    problems = []
    for page in chapter_pages(built_site) + record_pages(built_site):
        found = measured(page)
        problems += code_problems(page.stem, found["code"])
        problems += mid_word_problems(page.stem, found["mid word"])  # the state badges
        problems += machinery_problems(page.stem, found["long tables"], found["printed"])
        problems += table_problems(page.stem, found["data tables"])
    assert not problems, "\n".join(problems[:30])


def test_phone_figures_show_text_of_at_least_9_px(built_site, measured, capsys):
    """At a phone's 390 px, the smallest text of every figure shown is at least 9 CSS px."""
    problems, smallest = [], []
    for page in chapter_pages(built_site):
        found = measured(page, PHONE_PX)["phone text"]
        smallest += [px for _, px in found if px is not None]
        problems += phone_text_problems(page.stem, found)
        problems += mid_word_problems(page.stem, measured(page, PHONE_PX)["mid word"])
    with capsys.disabled():
        print(
            f"\n{len(smallest)} figure images at {PHONE_PX} px: smallest text "
            f"{min(smallest, default=0)} CSS px"
        )
    assert smallest and not problems, "\n".join(problems[:20])


def test_no_page_logs_a_console_error(built_site, measured):
    problems = [
        p for page in pages() for p in console_problems(page, measured(HTML / page)["console"])
    ]
    assert not problems, "\n".join(problems[:20])


def test_page_heights(built_site, measured, capsys):
    """Prints each chapter's height, and its record page's, at 1280 px: each is at most
    MAX_PAGE_PX (gln_norm was 65,062 px, 72 screens; its record page holds its per-cell
    tables and audits)."""
    pages = chapter_pages(built_site) + record_pages(built_site)
    heights = {f"{p.parent.name}/{p.stem}": measured(p)["height"] for p in pages}
    with capsys.disabled():
        print(f"\npage heights at 1280 px: {heights}")
    assert "records/gln_norm" in heights, "gln_norm's reproduction record was not built"
    assert not height_problems(heights), "\n".join(height_problems(heights))


@pytest.mark.parametrize("width", [1280, PHONE_PX])
def test_inline_maths_shows_a_scroll_cue_only_when_wider_than_its_line(built_site, measured, width):
    """An inline formula shows the scroll cue ("↔") only when it is wider than its line, and a
    formula without one is not clipped to its box (the theme's overflow hidden)."""
    shown = pages() if width == 1280 else chapter_pages(built_site) + record_pages(built_site)
    problems, seen = [], 0
    for page in shown:
        path = page if isinstance(page, Path) else HTML / page
        found = measured(path, width)["inline math"]
        seen += found["formulas"]
        problems += inline_math_problems(path.stem, width, found)
    assert seen and not problems, "\n".join(problems)


def test_the_inline_math_and_overview_checks_can_fail(tmp_path):
    """A synthetic page: a short formula with the cue, one clipped to its box, one wider than
    its line with the cue (allowed), and an overview whose narrow column breaks a number."""
    page = tmp_path / "synthetic.html"
    page.write_text(
        "<!DOCTYPE html><html><head><style>span.math { display: inline-flex; }"
        " .cue::before { content: '\\2194'; } .cut { overflow: hidden; }</style></head><body>"
        "<article><p style='width: 300px'>"
        "<span class='math cue'><mjx-container style='display:inline-block;width:40px'>"
        "x</mjx-container></span> and <span class='math cut'><mjx-container"
        " style='display:inline-block;width:40px'>y</mjx-container></span> and"
        " <span class='math cue' style='max-width:100%; overflow-x:auto'><mjx-container"
        " style='display:inline-block'><span style='display:inline-block;width:500px'>z</span>"
        "</mjx-container></span></p>"
        "<div class='status-overview'><table><tr><th>state</th></tr><tr><td><p"
        " style='width:1px; word-break:break-all'>16</p></td></tr></table></div>"
        "</article></body></html>"
    )
    found = probe(page, 1280, tmp_path, all_of({"m": INLINE_FORMULAS, "o": OVERVIEW_WORDS}))
    assert found["m"]["formulas"] == 3
    assert [text for text, *_ in found["m"]["needless"]] == ["x"]  # not the wide "z"
    assert found["m"]["clipped"] == ["y"]
    assert len(inline_math_problems("s", 1280, found["m"])) == 2
    assert found["o"] == ["16"] and overview_word_problems("s", 1280, found["o"])


@pytest.mark.parametrize("width", [1280, PHONE_PX])
def test_display_maths_fits_the_column(built_site, measured, width):
    """No display equation is wider than its column on a laptop or a phone (MathJax does not
    break a line: a long one is written over several)."""
    shown = pages() if width == 1280 else chapter_pages(built_site) + record_pages(built_site)
    problems, seen = [], 0
    for page in shown:
        path = page if isinstance(page, Path) else HTML / page
        equations = measured(path, width)["display math"]
        seen += len(equations)
        problems += display_math_problems(path.stem, width, equations)
    assert seen and not problems, "\n".join(problems)


def test_phone_claims_tables_set_the_claim_before_its_small_print(built_site, measured, capsys):
    """At a phone's 390 px, a claim's name, value and badge are no smaller than its quote and
    interval (they were 11.6, 11.6 and 9.8 px against 14.4 px)."""
    problems, sizes = [], {}
    for page in chapter_pages(built_site):
        found = measured(page, PHONE_PX)["claims type"]
        sizes[page.stem] = found
        problems += claims_type_problems(page.stem, found)
    with capsys.disabled():
        print(f"\nclaims table type at {PHONE_PX} px (CSS px): {sizes['gln_norm']}")
    assert all(sizes.values()) and not problems, "\n".join(problems)


def test_the_reader_checks_can_fail(tmp_path):
    """One synthetic page that breaks every rule above, measured as the site's pages are: a
    figure cut by its scrolling output box, pink text on a light panel, a second declaration
    of a constant, an unfolded code cell, a 25-row table, a printed dict; no verdict box."""
    rows = "".join(f"<tr><td>{i}</td></tr>" for i in range(25))
    page = tmp_path / "synthetic.html"
    page.write_text(
        "<!DOCTYPE html><html><head><script>const X = 1;</script><script>const X = 1;</script>"
        "</head><body style='background:#121212;color:#eee'><article><section id='s'>"
        "<div class='cell'><div class='cell_input'><pre>print(1)</pre></div>"
        "<div class='cell_output'><div class='output' style='overflow-x:auto;width:400px'>"
        "<figure class='book-figure'><img src='a.png' style='margin-left:-40px;width:420px;"
        'height:50px\' data-legibility=\'{"min_font_pt": 9, "width_in": 7.4}\'></figure>'
        "</div><pre>{'a': 1, 'b': 2}</pre></div></div>"
        "<p style='background:rgb(206,214,221);color:rgb(243,199,238)'>metric</p>"
        f"<table><tbody>{rows}</tbody></table>"
        "<table class='dataframe'><thead><tr><th></th><th>dist_l1</th><th>gap</th></tr></thead>"
        "<tbody><tr><th>run</th><td>3.777265e-16</td><td>0.5</td></tr></tbody></table>"
        "<div class='status-table'><table><tr><td style='width:120px;word-break:break-all'>"
        "<a>inconsistency of the predictors</a></td></tr></table></div>"
        "<table><tr><td style='width:96px;padding:0'><span class='claim-status' style='display:"
        "inline-block;max-width:100%;overflow-wrap:anywhere;padding:0 10px;font:bold 14px "
        "sans-serif'>inconclusive</span></td></tr></table>"
        "<div style='width:300px'><mjx-container display='true' style='display:block;"
        "overflow-x:auto'><span style='display:inline-block;width:500px'>x</span>"
        "</mjx-container></div>"
        "<table class='claims-table'><tr id='claim-a'><td><b style='font-size:11px'>a</b><br>"
        "<small style='font-size:14px'>words</small></td><td>0.1<br><small>CI</small></td>"
        "<td>e</td><td><span class='claim-status' style='font-size:9px'>pass</span></td></tr>"
        "</table><div style='height:26000px'></div>"
        "</section></article></body></html>"
    )
    found = probe(page, 1280, tmp_path, all_of(page_measures()))
    assert clipping_problems("s", 1280, found["clipping"])
    low = contrast_problems("s", found["contrast"])
    assert low and "metric" in low[0] and found["contrast"]["lowCount"] == 1
    assert any("already been declared" in m for m in console_problems("s", found["console"]))
    assert code_problems("s", found["code"])
    assert len(machinery_problems("s", found["long tables"], found["printed"])) == 2
    assert len(table_problems("s", found["data tables"])) == 2  # dist_l1; 3.777265e-16
    assert verdict_problems("s", found["verdict"], 10) == ["s: no verdict box"]
    assert phone_text_problems("s", found["phone text"])  # 9 pt at 420 of 740 px: 7.1 px
    assert mid_word_problems("s", found["mid word"])  # a word that fits, cut by break-all
    assert "inconclusive" in found["mid word"]  # a badge whose padding breaks a word its cell fits
    assert display_math_problems("s", 1280, found["display math"])  # 500 px in 300
    assert len(claims_type_problems("s", found["claims type"])) == 2  # the name and the badge
    assert height_problems({"s": found["height"]})  # 26,000 px and more


def test_the_verdict_machinery_and_phone_checks_can_fail():
    good = {
        "box": True,
        "figure": True,
        "before_figure": True,
        "findings": 4,
        "counts": 3,
        "linked": 4,
        "links": 4,
    }
    assert verdict_problems("c", good, 30) == []
    assert (
        "after the first figure" in verdict_problems("c", {**good, "before_figure": False}, 30)[0]
    )
    assert (
        "2 findings"
        in verdict_problems("c", {**good, "findings": 2, "linked": 2, "links": 2}, 30)[0]
    )
    assert verdict_problems("c", {**good, "findings": 2, "linked": 2, "links": 2}, 2) == []
    assert "link a row" in verdict_problems("c", {**good, "linked": 3}, 30)[0]
    printed = [
        "615 rows × 14 columns",
        "this run is the paper profile: see below",
        "[3 rows x 2 columns]",
        "method  status\nGD-GLN  ok  288\nName: runs, dtype: int64",
    ]
    assert len(machinery_problems("c", [], printed)) == 4
    assert machinery_problems("c", [], ["final cos = 0.99, margin ratio 1.0"]) == [
        "c: a printed line (say it in a sentence): 'final cos = 0.99, margin ratio 1.0'"
    ]
    assert machinery_problems("c", [], []) == []
    readable = [("s", ["", "dist l1", "Method", "run"], ["3.777e-16", "0.0001234", "GD_x", "12"])]
    assert table_problems("c", readable) == []
    raw = [("s", ["dist_l1", "seed"], ["0.982134", "3.777265e-16", "1.5e-05"])]
    assert table_problems("c", raw) == [
        "c (#s): snake_case headers ['dist_l1']",
        "c (#s): over 4 significant digits ['0.982134', '3.777265e-16']",
    ]
    assert phone_text_problems("c", [("a.png", 9.0), ("b.png", 8.9), ("c.png", None)]) == [
        "c: b.png: smallest text 8.9 CSS px (< 9.0)",
        "c: c.png: no legibility record",
    ]
    assert code_problems("c", {"cells": 3, "shown": 0}) == []
    assert display_math_problems("c", 390, [["x", 344, 343], ["y", 350, 343]]) == [
        "c at 390 px: an equation 350 px wide in a 343 px column: 'y'"
    ]
    fonts = {"name": 14.4, "value": 14.4, "badge": 12.24, "quote": 12.24, "interval": 12.24}
    assert claims_type_problems("c", fonts) == [] and claims_type_problems("c", None) == []
    upside_down = {**fonts, "name": 11.56, "value": 11.56, "badge": 9.83, "quote": 14.4}
    assert len(claims_type_problems("c", upside_down)) == 3
    assert height_problems({"a": 25_000, "b": 25_001}) == [
        "b: 25,001 px tall at 1280 px (at most 25,000)"
    ]


# ---- one count everywhere: the intro, the chapter's verdict box and claims footer, and the
# status page give the same numbers for each chapter (core.verdicts.tally) -------------------
COUNT_KINDS = r"claims? of the paper|checks? of the book's own|audits?"


def parse_counts(text: str) -> dict[str, dict[str, int]]:
    """{'claim' | 'check' | 'audit': {state: n}} from a count sentence as the pages write it
    ('54 claims of the paper: 32 pass, 3 erratum; 16 audits: 12 pass')."""
    text = html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\u2019", "'")
    out = {}
    for m in re.finditer(rf"(\d+) ({COUNT_KINDS}): ([^;.(]+)", text):
        found = re.findall(r"(\d+) ([a-z][a-z ]*[a-z])", m.group(3))
        # a state's plural words are its badge's (tally.PLURAL)
        singular = {many: one for one, many in tally.PLURAL.items()}
        states = {singular.get(s, s): int(n) for n, s in found}
        assert sum(states.values()) == int(m.group(1)), m.group(0)
        out[m.group(2).split()[0].rstrip("s")] = states
    return out


def box_counts(page: str) -> dict:
    """The counts of a chapter page's verdict box: its badges for the paper's claims, the
    sentence under them for what is counted apart."""
    box = re.search(r"<aside class='verdict-box'.*?</aside>", page, re.S)
    if not box:
        return {}
    title = re.search(r"<p class='verdict-title'>(.*?)</p>", box.group(0), re.S).group(1)
    states = re.findall(r">([^<>]+)</span> (\d+)", title)
    found = parse_counts(
        re.search(r"<p class='verdict-apart'>(.*?)</p>", box.group(0)).group(1)
        if "verdict-apart" in box.group(0)
        else ""
    )
    if states:
        found["claim"] = {s: int(n) for s, n in states}
    return found


def page_count_problems(chapter: str, intro: str, page: str, status: str) -> list[str]:
    """Where the four places that count a chapter's claims disagree."""
    row = re.search(
        rf"<tr[^>]*>(?:(?!</tr>).)*chapters/{chapter}\.html(?:(?!</tr>).)*</tr>", intro, re.S
    )
    footer = re.findall(
        r"</table>(?:\s*</details>)?\s*<p>(Paper|Smoke) profile: (.*?)</p>", page, re.S
    )
    profile = footer[-1][0].lower() if footer else "paper"  # the run the page shows
    section = re.search(rf'id="{profile}-{chapter}"(.*?)·', status, re.S)
    shown = {
        "intro": parse_counts(re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)[-1])
        if row
        else {},
        "verdict box": box_counts(page),
        "claims footer": parse_counts(footer[-1][1]) if footer else {},
        "status page": parse_counts(section.group(1)) if section else {},
    }
    first = shown["claims footer"]
    problems = [f"{chapter}: no counts in the {w}" for w, c in shown.items() if not c]
    problems += [
        f"{chapter}: the {w} counts {c}, the claims footer {first}"
        for w, c in shown.items()
        if c and first and c != first
    ]
    return problems


def test_every_page_gives_a_chapter_the_same_counts(built_site):
    from implicit_bias.core.chapter import chapters

    intro = (built_site / "book" / "intro.html").read_text()
    status = (built_site / "book" / "status.html").read_text()
    problems = []
    for chapter in chapters():
        page = (built_site / "book" / "chapters" / f"{chapter}.html").read_text()
        problems += page_count_problems(chapter, intro, page, status)
    assert not problems, "\n".join(problems)


def test_the_count_check_can_fail():
    sentence = "3 claims of the paper: 2 pass, 1 erratum; 1 audit: 1 pass"
    intro = f"<tr><td><a href='chapters/c.html'>C</a></td><td>{sentence} (paper profile)</td></tr>"
    box = (
        "<aside class='verdict-box'><p class='verdict-title'>x: 3 claims of the paper: "
        "<span>pass</span> 2 <span>erratum</span> 1</p>"
        "<p class='verdict-apart'>Counted apart: 1 audit: 1 pass.</p></aside>"
    )
    page = f"{box}<details><table></table></details>\n<p>Paper profile: {sentence}.</p>"
    status = f'<section id="paper-c"><h3>C</h3><p>{sentence} · read</p>'
    assert page_count_problems("c", intro, page, status) == []
    wrong = status.replace("2 pass, 1 erratum", "3 pass")
    assert page_count_problems("c", intro, page, wrong) == [
        "c: the status page counts {'claim': {'pass': 3}, 'audit': {'pass': 1}}, the claims "
        "footer {'claim': {'pass': 2, 'erratum': 1}, 'audit': {'pass': 1}}"
    ]
    assert page_count_problems("c", intro, page.replace("verdict-box", "x"), status) == [
        "c: no counts in the verdict box"
    ]
    # a count's plural ("2 errata") is its badge's state
    plural = sentence.replace("2 pass, 1 erratum", "1 pass, 2 errata")
    assert parse_counts(plural)["claim"] == {"pass": 1, "erratum": 2}


PHONE = 390


def test_nothing_runs_off_a_phone_screen(built_site, measured, capsys):
    """At a phone's 390 px, on every page, with every fold open: no element runs past the
    screen's edges, every box of the article that scrolls sideways shows a cue, and no box
    cuts off what it holds."""
    problems, off = [], {}
    for page in pages():
        found = measured(HTML / page, PHONE)["off screen"]
        assert found["width"] <= PHONE, f"{page}: laid out {found['width']} px wide"
        off[page] = len(found["off"])
        problems += off_screen_problems(page, PHONE, found)
    with capsys.disabled():
        print(
            f"\nat {PHONE} px: {sum(1 for n in off.values() if n)} of {len(off)} pages with an"
            f" element off screen, {sum(off.values())} elements"
        )
    assert not problems, "\n".join(problems[:20])


def test_the_off_screen_check_can_fail():
    assert not off_screen_problems("p", PHONE, {"width": 390, "off": [], "mute": [], "cut": []})
    found = {"width": 390, "off": [["img", 94]], "mute": ["div.output"], "cut": ["figure"]}
    assert len(off_screen_problems("p", PHONE, found)) == 3


# ---- dark mode: a figure is not a white slab ------------------------------------------------
# Its first figure alone shown (the rest of the page hidden, its background kept), pinned to
# the window's top (a headless screenshot does not follow a scroll), in the theme's dark mode;
# the screenshot's pixels that differ from the page's background are the figure's box, whose
# mean relative luminance must stay in the page's dark range (white is 1; the dark page's
# background about 0.01).
MAX_DARK_FIGURE_LUMINANCE = 0.2
SHOW_FIRST_FIGURE = (
    "const style = document.createElement('style'); style.textContent ="
    " 'body * { visibility: hidden !important; } img.shown { visibility: visible !important;"
    " position: fixed !important; top: 20px; left: 20px; z-index: 9999; }"
    " *, *::before, *::after { transition: none !important; }';"
    "document.head.appendChild(style);"
    "const img = [...document.querySelectorAll('figure.book-figure a.figure-full img')]"
    ".find(i => i.getClientRects().length);"  # the one its mode shows
    "if (img) { img.loading = 'eager'; img.classList.add('shown'); }"
)


def figure_luminances(pages: list[Path], tmp_path: Path, dark: bool) -> dict[Path, float]:
    """The mean relative luminance of the first figure's box on each of `pages` at 1280 px, in
    one Chromium run: each page in an iframe 1280 by 900, one under another in a window as tall
    as all of them, and the screenshot cut into their bands (a Chromium run per page took 40-46
    CPU-s for the test's 9 pages, this 34-39; the 9 luminances were the same to 4 digits)."""
    import numpy as np
    from PIL import Image

    theme = _dark_theme_js(dark) if dark else ""
    script = (
        f"<script>window.addEventListener('load', () => {{{theme} {SHOW_FIRST_FIGURE} }});</script>"
    )
    mode = "dark-" if dark else ""
    copies = [page.with_name(f".shot-{mode}{page.name}") for page in pages]
    frames = HTML / f".shots-{mode}1280.html"
    shot = tmp_path / f"{frames.stem}.png"
    try:
        for page, copy in zip(pages, copies):
            copy.write_text(page.read_text().replace("</body>", script + "</body>"))
        frames.write_text(
            "<!DOCTYPE html><html><body style='margin:0'>"
            + "".join(
                f"<iframe src='{copy.relative_to(HTML).as_posix()}' width='1280' height='900'"
                f" style='border:0; position:absolute; top:{900 * i}px; left:0'></iframe>"
                for i, copy in enumerate(copies)
            )
            + "</body></html>"
        )
        subprocess.run(
            [
                chromium(),
                *CHROMIUM_FLAGS,
                *(["--force-dark-mode"] if dark else []),
                f"--user-data-dir={tmp_path / 'profile-shot'}",
                f"--window-size=1280,{900 * len(pages)}",
                "--hide-scrollbars",
                "--virtual-time-budget=10000",
                f"--screenshot={shot}",
                frames.as_uri(),
            ],
            capture_output=True,
            timeout=300,
            check=False,
        )
    finally:
        for copy in [*copies, frames]:
            copy.unlink(missing_ok=True)
    with Image.open(shot) as image:
        bands = np.asarray(image.convert("RGB"), dtype=float)
    assert bands.shape[:2] == (900 * len(pages), 1280), f"a screenshot of {bands.shape[:2]}"
    found = {}
    for i, page in enumerate(pages):
        pixels = bands[900 * i : 900 * (i + 1)]
        colours, counts = np.unique(pixels[::31, ::31].reshape(-1, 3), axis=0, return_counts=True)
        background = colours[counts.argmax()]  # the page's, which fills most of the window
        ys, xs = np.nonzero(np.abs(pixels - background).max(axis=2) > 8)
        assert len(xs), f"{page.name}: no figure on screen"
        box = pixels[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1] / 255
        linear = np.where(box <= 0.03928, box / 12.92, ((box + 0.055) / 1.055) ** 2.4)
        found[page] = float((linear @ [0.2126, 0.7152, 0.0722]).mean())
    return found


# Each figure comes drawn for a white page and for the dark one (core.site.dark_figure); a
# mode shows its own image (the dark one's files end `-dark.png`, its phone pieces
# `-dark-panel<k>.png`) and hides the other (book.css), and no filter redraws it.
FIGURE_MODES = (
    "result = [...document.querySelectorAll('figure.book-figure')].map(f =>"
    " [...f.querySelectorAll('img')].filter(i => i.getClientRects().length)"
    ".map(i => [i.getAttribute('src'), getComputedStyle(i).filter]))"
)
DARK_IMAGE = re.compile(r"-dark(?:-panel\d+)?\.png$")


def figure_mode_problems(page: str, dark: bool, figures: list) -> list[str]:
    """Figures of `page` that show no image, or an image drawn for the other mode, or one
    redrawn by a CSS filter (the light image inverted was the dark mode's figure before)."""
    mode = "dark" if dark else "light"
    problems = []
    for number, shown in enumerate(figures, 1):
        if not shown:
            problems.append(f"{page}: figure {number} shows no image in {mode} mode")
        for src, drawn in shown:
            if bool(DARK_IMAGE.search(src)) != dark:
                problems.append(f"{page}: figure {number} shows {src} in {mode} mode")
            if drawn != "none":
                problems.append(f"{page}: figure {number}: {src} filtered ({drawn})")
    return problems


@pytest.mark.parametrize(
    ("width", "dark"),
    [(1280, False), (1280, True), (PHONE_PX, False)],
    ids=["light", "dark", "phone"],
)
def test_each_mode_shows_the_figure_drawn_for_it(built_site, measured, width, dark):
    """In light mode every figure shows its light image (on a phone its light pieces), in
    dark mode the image drawn for the dark page, unfiltered; never both."""
    problems, seen = [], 0
    for page in chapter_pages(built_site):
        figures = measured(page, width, dark=dark)["figure modes"]
        seen += len(figures)
        problems += figure_mode_problems(page.name, dark, figures)
    assert seen and not problems, "\n".join(problems[:20])


def test_the_figure_mode_check_can_fail():
    dark = [[["p_files/f-dark.png", "none"]]]
    assert figure_mode_problems("p", True, dark) == []
    assert figure_mode_problems("p", False, [[["p_files/f-panel1.png", "none"]]]) == []
    assert figure_mode_problems("p", False, dark)  # the dark image in light mode
    filtered = [[["p_files/f.png", "invert(0.88) hue-rotate(180deg)"]]]
    assert len(figure_mode_problems("p", True, filtered)) == 2  # light, and inverted
    assert figure_mode_problems("p", True, [[]])  # none shown


def test_dark_mode_figures_are_not_white_slabs(built_site, tmp_path, capsys):
    """In dark mode, each chapter's first figure is drawn dark (mean luminance of its box at
    most MAX_DARK_FIGURE_LUMINANCE); the same figure in light mode is the light slab this
    check would find (its can-fail companion, on the real page)."""
    dark = figure_luminances(chapter_pages(built_site), tmp_path, True)
    found = {page.stem: luminance for page, luminance in dark.items()}
    first = chapter_pages(built_site)[0]
    light = figure_luminances([first], tmp_path, False)[first]
    with capsys.disabled():
        print(
            f"\ndark-mode figure luminance: { ({k: round(v, 3) for k, v in found.items()}) };"
            f" light mode {light:.3f}"
        )
    assert light > MAX_DARK_FIGURE_LUMINANCE, "the luminance check cannot tell light from dark"
    bright = {k: round(v, 3) for k, v in found.items() if v > MAX_DARK_FIGURE_LUMINANCE}
    assert not bright, f"figures brighter than the dark page: {bright}"
