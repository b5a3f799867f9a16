"""Website test: build the book, open every page in headless Chromium, check what a reader
sees: the page loads, every image exists, math is rendered, internal links resolve, every
figure is numbered with a caption and alt text, no page shows a path of the building machine, a
progress bar or a warning, the status page fits a laptop and a phone, and every chapter cites
its paper and ends with its bibliography."""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from implicit_bias.core.paths import project_root

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
    from implicit_bias.core.runner import write_status_page

    write_status_page()
    shutil.rmtree(HTML, ignore_errors=True)  # no stale pages from earlier builds
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("jupyter-book")),
            "build",
            str(ROOT),
            "-W",
            "-n",
            "--keep-going",
            "--builder",
            "html",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return HTML


@pytest.fixture(scope="session")
def server(built_site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.RequestHandlerClass.log_message = lambda *a, **k: None
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


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


def rendered_dom(url: str, tmp_path: Path) -> str:
    result = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def pages() -> list[str]:
    """Every content page (the root index.html is only a redirect to the intro)."""
    return sorted(
        str(p.relative_to(HTML))
        for p in HTML.rglob("*.html")
        if p.name not in ("search.html", "genindex.html", "index.html") and "_static" not in p.parts
    )


def local_target(page_url: str, ref: str, base: str) -> Path | None:
    """The file a same-site reference points to, or None for external references."""
    absolute = urljoin(page_url, ref)
    if not absolute.startswith(base):
        return None
    path = unquote(urlparse(absolute).path)[len(urlparse(base).path) :]
    target = HTML / path
    return target / "index.html" if target.is_dir() else target


def page_problems(server: str, page: str, tmp_path: Path) -> list[str]:
    url = server + page
    dom = rendered_dom(url, tmp_path)
    if "</html>" not in dom or len(dom) < 1000:
        return [f"{page}: did not load"]
    parser = PageParser()
    parser.feed(dom)
    problems = []
    missing_images = [
        src
        for src in parser.images
        if (t := local_target(url, src, server)) is not None and not t.exists()
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
        and (t := local_target(url, href.split("#")[0], server)) is not None
        and not t.exists()
    ]
    if broken:
        problems.append(f"{page}: broken internal links {broken}")
    return problems


def test_every_page_in_chromium(server, tmp_path):
    index = (HTML / "index.html").read_text()
    assert "book/intro.html" in index, "index.html does not lead to the introduction"
    all_pages = pages()
    assert "book/intro.html" in all_pages and len(all_pages) >= 3
    problems = [p for page in all_pages for p in page_problems(server, page, tmp_path)]
    assert not problems, "\n".join(problems)


def test_chapter_pages_show_figures_and_claims(built_site):
    """Every figure the chapter saved is shown numbered, with a caption and alt text."""
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.paths import figures_dir

    for chapter in chapters():
        page = (built_site / "book" / "chapters" / f"{chapter}.html").read_text()
        assert "claims-table" in page, f"{chapter}: no claims table"
        shown = re.findall(r"<figure class=.book-figure.(.*?)</figure>", page, re.S)
        saved = list(figures_dir("smoke", chapter).glob("*.json"))
        assert len(shown) == len(saved) > 0, f"{chapter}: {len(shown)} of {len(saved)} shown"
        for number, block in enumerate(shown, 1):
            assert re.search(r"<img[^>]+src=.data:image/png;base64,", block), (chapter, number)
            alt = re.search(r"alt=(['\"])(.*?)\1", block)
            assert alt and len(alt.group(2)) > 10, f"{chapter}: figure {number} has no alt text"
            caption = re.search(r"<figcaption>(.*?)</figcaption>", block, re.S)
            assert caption and f"Figure {number}." in caption.group(1), (chapter, number)


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


def overflow(page: Path, width: int, tmp_path: Path) -> dict:
    """Horizontal overflow of `page` in Chromium at `width` px: of the document, and of the
    widest table beyond its container (a script added to a copy of the page measures them)."""
    probe = page.with_name(f".probe-{width}-{page.name}")
    script = (
        "<script>window.addEventListener('load', () => {"
        "const doc = document.documentElement.scrollWidth - window.innerWidth;"
        "let table = 0; for (const t of document.querySelectorAll('table')) {"
        "table = Math.max(table, t.scrollWidth - t.parentElement.clientWidth); }"
        "document.body.setAttribute('data-overflow', doc + ',' + table); });</script>"
    )
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    try:
        result = subprocess.run(
            [
                chromium(),
                *CHROMIUM_FLAGS,
                f"--user-data-dir={tmp_path / f'profile-{width}'}",
                f"--window-size={width},900",
                "--virtual-time-budget=10000",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(r'data-overflow="(-?\d+),(-?\d+)"', result.stdout)
    assert found, result.stderr[-2000:]
    return {"document": int(found.group(1)), "table": int(found.group(2))}


@pytest.mark.parametrize("width", [1280, 390])
def test_the_status_page_fits_a_laptop_and_a_phone(built_site, width, tmp_path):
    """At 1280 px and at a phone's 390 px, the page is no wider than the screen and the
    status table's columns all fit (no column cut off or scrolled out of view)."""
    measured = overflow(built_site / "book" / "status.html", width, tmp_path)
    assert measured["document"] <= 0, f"the page is {measured['document']} px too wide"
    assert measured["table"] <= 0, f"a table is {measured['table']} px wider than its column"


def test_every_figure_shows_its_provenance(built_site):
    """Under each figure: its data to download, what drew it, the sweeps behind it, the
    claims it checks (each link lands on its row of the claims table), profile and commit."""
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.paths import figures_dir

    for chapter in chapters():
        page = (built_site / "book" / "chapters" / f"{chapter}.html").read_text()
        blocks = re.findall(r"<p class=.figure-provenance.>(.*?)</p>", page, re.S)
        figures = list(figures_dir("smoke", chapter).glob("*.json"))
        assert len(blocks) == len(figures), f"{chapter}: {len(blocks)} of {len(figures)}"
        for block in blocks:
            for part in (
                'href="data:text/csv;base64,',
                "drawn by:",
                "computed by:",
                "checks:",
                "commit <code>",
            ):
                assert part in block.replace("'", '"'), f"{chapter}: {part} missing: {block}"
            for claim in re.findall(r"href=.#claim-([\w-]+)", block):
                assert f'id="claim-{claim}"' in page.replace("'", '"'), (chapter, claim)


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
