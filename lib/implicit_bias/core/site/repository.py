"""The book's public repository: its address is one value, `repository: url` of `_config.yml`.

Everything that links to the book's source reads it here: the website's repository, issue and
edit buttons and its Binder and Colab launch buttons (`source_buttons`, set by `website` when
the build starts), the `{repo}` role of the pages (`repo_role`), a chapter's profile link and a
figure's drawing-code link (`core.chapter`), the clone in the first cell of the Colab
notebooks (`colab`), CITATION.cff's `repository-code` (`citation_text`) and the citation on the
introduction (the `repository_address` substitution).

Until the book is published the address is empty, and then nothing links to the source: no
button, a `{repo}` path in code type, no address in the citation. A placeholder address (a
template's blank for the owner, example.com, ...) is an error, never a link
(`placeholder_links` finds one in any text; tests/core/test_repository.py runs it over the
sources and the built site).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from ..engine.paths import project_root

CONFIG = "_config.yml"
CITATION = "CITATION.cff"
SUBSTITUTION = "repository_address"  # `{{ repository_address }}` of the pages: `address_html`
TAG = "repository"  # a Sphinx tag set when the address is: ```{only} repository``` blocks

# A link to a placeholder: a reserved example host (RFC 2606), a template's blank in its host
# or path ("replace-with-...", "your-org"), or an owner that is a blank's name ("OWNER").
PLACEHOLDER_HOST = re.compile(r"(?:^|\.)(?:example\.(?:com|org|net)|example|invalid|test)$")
BLANK = re.compile(r"(?:replace[-_]?(?:with|me)|your[-_]|placeholder)[\w.-]*|x{3,}", re.I)
BLANK_OWNER = re.compile(r"owner|user(?:name)?|org(?:ani[sz]ation)?", re.I)
URL = re.compile(r"https?://[^\s\"'<>()\[\]`\\]+")


class RepositoryError(ValueError):
    """`repository: url` of `_config.yml` is not the address of a repository."""


def is_placeholder(url: str) -> bool:
    """Whether `url` names a placeholder host, or a placeholder segment of its host or path."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    path = [s for s in parts.path.split("/") if s]
    return (
        bool(PLACEHOLDER_HOST.search(host))
        or any(BLANK.fullmatch(s) for s in [*host.split("."), *path])
        or bool(path and BLANK_OWNER.fullmatch(path[0]))
    )


def placeholder_links(text: str) -> list[str]:
    """The links of `text` (http or https addresses) to a placeholder (`is_placeholder`)."""
    return [url for url in URL.findall(text) if is_placeholder(url.rstrip(".,;:"))]


def _config(root: Path | None) -> dict:
    import yaml

    return yaml.safe_load(((root or project_root()) / CONFIG).read_text()) or {}


def repository_url(root: Path | None = None) -> str | None:
    """The public repository's address (`repository: url` of `_config.yml`, no trailing
    slash), or None while it is empty. A placeholder or malformed address is a
    RepositoryError: the build and `make colab` stop on it rather than link to it."""
    url = str((_config(root).get("repository") or {}).get("url") or "").strip().rstrip("/")
    if not url:
        return None
    if not re.fullmatch(r"https://[\w.-]+\.[a-z]{2,}/[\w.-]+/[\w.-]+", url) or is_placeholder(url):
        raise RepositoryError(
            f"`repository: url` of {CONFIG} is {url!r}: set it to the address of the book's "
            'public repository (https://<host>/<owner>/<name>), or leave it empty ("") until '
            "there is one: then nothing links to the source"
        )
    return url


def repository_branch(root: Path | None = None) -> str:
    """The branch the links name (`repository: branch` of `_config.yml`; main)."""
    return str((_config(root).get("repository") or {}).get("branch") or "main")


def file_url(path: str, root: Path | None = None) -> str | None:
    """The address of `path` in the repository (a folder when it ends in /; the repository
    itself when empty), or None while the address is empty."""
    url = repository_url(root)
    return link(url, repository_branch(root), path) if url else None


def link(url: str, branch: str, path: str) -> str:
    """`path` (a file, a folder ending in /, or "" for the repository) of the repository at
    `url` on `branch`."""
    if not path.strip("/"):
        return url
    return f"{url}/{'tree' if path.endswith('/') else 'blob'}/{branch}/{path}"


# The theme's source buttons (sphinx-book-theme; Jupyter Book passes `html: use_*_button` and
# `launch_buttons` of _config.yml on as these): the repository, issue and edit buttons, and the
# launch providers that open a chapter from the repository.
BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button")
LAUNCHERS = ("binderhub_url", "jupyterhub_url", "colab_url", "jupyterlite_url", "thebe")


def source_buttons(options: dict | None, url: str | None) -> dict:
    """The theme's options with its source buttons as the address allows: with one, the
    repository, issue and edit buttons and the launch buttons of `launch_buttons`, all on
    `url`; without, none of them (the theme would otherwise link Jupyter Book's default
    repository, or fail)."""
    options = dict(options or {})
    launch = dict(options.get("launch_buttons") or {})
    if url:
        options.update({"repository_url": url, **dict.fromkeys(BUTTONS, True)})
    else:
        options.pop("repository_url", None)
        options.update(dict.fromkeys(BUTTONS, False))
        launch = {k: v for k, v in launch.items() if k not in LAUNCHERS}
    options["launch_buttons"] = launch
    return options


def repo_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """`{repo}`data/claims/x.yaml``: the path in code type, linked to it in the repository;
    `{repo}`the repository </>``: a title linked to the repository itself. Without an
    address, the same text unlinked."""
    from docutils import nodes

    config = inliner.document.settings.env.config
    theme = config.html_theme_options or {}
    url = str(theme.get("repository_url") or "").rstrip("/")  # source_buttons set it
    titled = re.fullmatch(r"(.+?)\s*<([^<>]*)>", text)
    shown = nodes.Text(titled.group(1)) if titled else nodes.literal(text, text)
    if not url:
        return [shown], []
    path = titled.group(2) if titled else text
    uri = link(url, str(theme.get("repository_branch") or "main"), path)
    reference = nodes.reference(rawtext, "", refuri=uri)
    reference += shown
    return [reference], []


def address_html(url: str | None) -> str:
    """The address as a citation shows it: in full, linked (raw HTML: the theme would write
    a link whose text is its GitHub address as "owner/name"); empty without one."""
    return f"<a class='reference external' href='{url}'>{url}</a>" if url else ""


def citation_text(text: str, url: str | None) -> str:
    """CITATION.cff's `text` with its `repository-code` the address: before `license`, or
    none without an address."""
    lines = [line for line in text.splitlines() if not line.startswith("repository-code:")]
    if url:
        at = next((k for k, line in enumerate(lines) if line.startswith("license:")), len(lines))
        lines.insert(at, f'repository-code: "{url}"')
    return "\n".join(lines) + "\n"


def citation_outdated(root: Path | None = None) -> bool:
    """Whether CITATION.cff's `repository-code` is not the address (`make colab` writes it)."""
    path = (root or project_root()) / CITATION
    text = path.read_text()
    return text != citation_text(text, repository_url(root))


def write_citation(root: Path | None = None) -> bool:
    """Give CITATION.cff the address as its `repository-code` (none without one); returns
    whether it changed."""
    path = (root or project_root()) / CITATION
    text = path.read_text()
    new = citation_text(text, repository_url(root))
    if new == text:
        return False
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(new)
    tmp.replace(path)
    return True
