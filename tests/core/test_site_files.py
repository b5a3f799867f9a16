"""What the built site does without (core.site.site_files): the half-set thebe set-up, source
maps and message catalogues."""

from __future__ import annotations

from implicit_bias.core.site.site_files import drop_thebe, trim_static

PAGE = """<head>
    <link rel="stylesheet" type="text/css" href="../_static/sphinx-thebe.css?v=4fa983c6" />
    <script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"; const a = 1</script>
    <script async="async" src="../_static/sphinx-thebe.js?v=c100c467"></script>
    <script src="../_static/keep.js"></script>
</head><body><p>text</p>
    <script type="text/x-thebe-config">
    { binderOptions: { repo: "binder-examples/jupyter-stacks-datascience" } }
    </script>
    <script>kernelName = 'python3'</script>
</body>"""


def test_pages_lose_the_thebe_set_up_and_keep_the_rest():
    page = drop_thebe(PAGE)
    assert "thebe" not in page.lower() and "binder-examples" not in page
    assert "keep.js" in page and "<p>text</p>" in page
    assert drop_thebe(page) == page


def test_static_files_no_page_reads_are_removed(tmp_path):
    static = tmp_path / "_static"
    (static / "scripts").mkdir(parents=True)
    (static / "locales" / "de").mkdir(parents=True)
    (static / "locales" / "de" / "sphinx.mo").write_bytes(b"x" * 10)
    (static / "scripts" / "theme.js").write_text("var a;\n//# sourceMappingURL=theme.js.map")
    (static / "scripts" / "theme.js.map").write_text("{}" * 50)
    (static / "sphinx-thebe.js").write_text("thebe")
    (static / "book.css").write_text("a {}")
    removed = trim_static(tmp_path)
    assert removed == 10 + 100 + 5
    assert sorted(p.name for p in static.rglob("*") if p.is_file()) == ["book.css", "theme.js"]
    assert (static / "scripts" / "theme.js").read_text() == "var a;"
