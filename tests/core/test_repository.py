"""The book's public address, one value (`repository: url` of _config.yml;
implicit_bias.core.site.repository): no source file links to a placeholder, and every consumer
links the source where the address is set and nothing where it is empty."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
import yaml

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.site import colab, repository

ROOT = project_root()
URL = "https://github.com/someone/implicit-bias-book"


def tracked_texts() -> dict[str, str]:
    """The repository's text files (tracked, or new and not ignored), but the tests (whose
    checks spell placeholders on purpose): what the site, its downloads and the Colab and
    Binder links are made from."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    texts = {}
    for name in listed:
        path = ROOT / name
        if name.startswith("tests/") or not path.is_file():
            continue
        try:
            texts[name] = path.read_text()
        except UnicodeDecodeError:  # a PNG: no link in it
            continue
    return texts


def test_no_source_links_to_a_placeholder():
    texts = tracked_texts()
    assert {"_config.yml", "CITATION.cff", "book/intro.md"} <= set(texts)
    assert any(name.startswith("colab/") for name in texts)
    found = [
        f"{name}: {url}"
        for name, text in texts.items()
        for url in repository.placeholder_links(text)
    ]
    assert not found, "links to a placeholder:\n" + "\n".join(found)


def test_the_placeholder_check_can_fail():
    placeholders = [
        "https://github.com/REPLACE-WITH-OWNER/implicit-bias-book",
        "https://mybinder.org/v2/gh/REPLACE-WITH-OWNER/implicit-bias-book/main?urlpath=lab",
        "https://colab.research.google.com/github/your-org/implicit-bias-book/blob/main/x.ipynb",
        "https://github.com/OWNER/REPO",
        "https://example.com/implicit-bias-book",
        "https://docs.example.org/x",
        "https://site.invalid/page.html",
    ]
    text = " ".join(f"[{k}]({url})" for k, url in enumerate(placeholders))
    assert repository.placeholder_links(text) == placeholders
    real = (
        "https://github.com/paper-submissions/MaxMargin "
        "https://github.com/sflippl/implicit-bias-glns/tree/002054c8 "
        "https://mybinder.org https://numpy.org/doc/stable/user/index.html "
        "https://www.python.org/ https://colab.research.google.com"
    )
    assert repository.placeholder_links(real) == []


def project(tmp_path, url, citation=True) -> types.SimpleNamespace:
    """The project's _config.yml with `repository: url` = `url` in `tmp_path`, and a copy of
    its CITATION.cff (unless `citation` is false)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["repository"]["url"] = url
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    if citation:
        (tmp_path / "CITATION.cff").write_text((ROOT / "CITATION.cff").read_text())
    return types.SimpleNamespace(root=tmp_path)


def test_the_address_is_one_value_empty_or_a_repository(tmp_path):
    url = repository.repository_url()
    assert url is None or not repository.is_placeholder(url), url
    assert repository.repository_url(project(tmp_path, "").root) is None
    assert repository.repository_url(project(tmp_path, None).root) is None
    assert repository.repository_url(project(tmp_path, URL + "/").root) == URL
    assert repository.file_url("data/claims/x.yaml", tmp_path) == (
        f"{URL}/blob/main/data/claims/x.yaml"
    )
    assert repository.file_url("colab/", tmp_path) == f"{URL}/tree/main/colab/"
    assert repository.file_url("", tmp_path) == URL
    for wrong in (
        "https://github.com/REPLACE-WITH-OWNER/implicit-bias-book",
        "https://example.com/o/r",
        "github.com/o/r",
    ):
        with pytest.raises(repository.RepositoryError, match="repository: url"):
            repository.repository_url(project(tmp_path, wrong).root)
    assert repository.file_url("x", project(tmp_path, "").root) is None


def test_citation_cff_carries_the_address_where_it_is_set(tmp_path):
    assert not repository.citation_outdated(), "run `make colab`: CITATION.cff is not current"
    cff = (ROOT / "CITATION.cff").read_text()
    assert ("repository-code:" in cff) == (repository.repository_url() is not None)
    root = project(tmp_path, URL).root
    assert repository.citation_outdated(root)
    assert repository.write_citation(root) and not repository.citation_outdated(root)
    written = yaml.safe_load((root / "CITATION.cff").read_text())
    assert written["repository-code"] == URL and written["title"] == yaml.safe_load(cff)["title"]
    root = project(tmp_path, "", citation=False).root  # the address emptied: the field goes
    assert repository.write_citation(root) and "repository-code" not in (
        yaml.safe_load((root / "CITATION.cff").read_text())
    )


def test_the_theme_shows_source_buttons_only_with_an_address():
    options = {
        "repository_url": "",
        "path_to_docs": ".",
        "launch_buttons": {
            "notebook_interface": "jupyterlab",
            "binderhub_url": "https://mybinder.org",
            "colab_url": "https://colab.research.google.com",
        },
    }
    none = repository.source_buttons(options, None)
    assert "repository_url" not in none
    assert not any(none[b] for b in repository.BUTTONS)
    assert none["launch_buttons"] == {"notebook_interface": "jupyterlab"}
    some = repository.source_buttons(options, URL)
    assert some["repository_url"] == URL and all(some[b] for b in repository.BUTTONS)
    assert some["launch_buttons"] == options["launch_buttons"]
    assert options["repository_url"] == ""  # not changed in place


def role(text: str, url: str | None):
    """The `{repo}` role's nodes for `text` under a theme given the address `url`."""
    theme = repository.source_buttons({"repository_branch": "main"}, url)
    config = types.SimpleNamespace(html_theme_options=theme)
    env = types.SimpleNamespace(config=config)
    inliner = types.SimpleNamespace(
        document=types.SimpleNamespace(settings=types.SimpleNamespace(env=env))
    )
    nodes, messages = repository.repo_role("repo", f"{{repo}}`{text}`", text, 1, inliner)
    assert messages == [] and len(nodes) == 1
    return nodes[0]


def test_the_repo_role_links_only_with_an_address():
    from docutils import nodes

    path = role("data/claims/gln_norm.yaml", URL)
    assert isinstance(path, nodes.reference)
    assert path["refuri"] == f"{URL}/blob/main/data/claims/gln_norm.yaml"
    assert isinstance(path[0], nodes.literal) and path.astext() == "data/claims/gln_norm.yaml"
    assert role("its repository </>", URL)["refuri"] == URL
    plain = role("data/claims/gln_norm.yaml", None)  # code type, no link
    assert isinstance(plain, nodes.literal) and not list(plain.findall(nodes.reference))
    titled = role("its repository </>", None)
    assert isinstance(titled, nodes.Text) and titled.astext() == "its repository"


def test_a_chapter_links_its_profile_and_drawing_code_only_with_an_address(
    demo_project, monkeypatch
):
    from implicit_bias.core.chapter import provenance_html, repository_file_url

    provenance = {
        "data": [],
        "commit": "0123abc",
        "drawn_by": "lib/implicit_bias/chapters/demo/figures.py, fig1",
        "sweeps": {},
        "claims": [],
        "profile": "smoke",
    }
    project(demo_project, "")
    assert repository_file_url("data/profiles/demo.yaml") is None
    assert "href" not in provenance_html(provenance, demo_project)
    project(demo_project, URL)
    assert repository_file_url("data/profiles/demo.yaml") == (
        f"{URL}/blob/main/data/profiles/demo.yaml"
    )
    assert f"href='{URL}/blob/0123abc/lib/implicit_bias/chapters/demo/figures.py'" in (
        provenance_html(provenance, demo_project)
    )
    assert "href" not in provenance_html({**provenance, "commit": "0123abc+"}, demo_project)


@pytest.mark.parametrize("url", [None, URL])
def test_the_colab_setup_cell_clones_the_address_or_says_there_is_none(tmp_path, url, monkeypatch):
    """Its first cell, run as on Colab (google.colab imported, no clone yet): with an address
    it clones that; without one it stops with a message, cloning nothing."""
    chapter = "gln_norm"
    root = project(tmp_path, url or "").root
    (root / "notebooks").mkdir()
    source = (ROOT / "notebooks" / f"{chapter}.md").read_text()
    (root / "notebooks" / f"{chapter}.md").write_text(source)
    setup = json.loads(colab.colab_notebook(chapter, root))["cells"][0]["source"]
    assert f"REPOSITORY = {colab.python_literal(url)}  #" in "".join(setup)
    code = colab.SETUP.format(
        chapter=chapter,
        repository=colab.python_literal(repository.repository_url(root)),
        clone=f'"{tmp_path / "clone"}"',
    )
    ran = []

    def run(args, check):
        ran.append(args)
        raise SystemExit  # clone nothing here

    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        patched.setitem(sys.modules, "subprocess", types.SimpleNamespace(run=run))
        if url:
            with pytest.raises(SystemExit):
                exec(code, {})
        else:
            with pytest.raises(RuntimeError, match="no repository to clone"):
                exec(code, {})
    assert ran == (
        [["git", "clone", "-q", "--depth", "1", URL, str(tmp_path / "clone")]] if url else []
    )


def test_the_introduction_cites_the_book_with_its_address_where_it_is_set():
    intro = (ROOT / "book" / "intro.md").read_text()
    citation = intro[intro.index("> The implicit-bias-book contributors") :].split("\n\n")[0]
    assert citation.endswith(f"[software].\n> {{{{ {repository.SUBSTITUTION} }}}}"), citation
    assert repository.address_html(None) == ""
    assert repository.address_html(URL) == f"<a class='reference external' href='{URL}'>{URL}</a>"
