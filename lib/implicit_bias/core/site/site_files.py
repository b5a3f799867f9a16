"""What the built site does not need: trimmed when the build ends (`website`).

- The theme's Live Code (thebe) set-up: the book launches no kernel in the page (no thebe
  button; Binder and Colab open a chapter where the repository's address is set), so the
  set-up's scripts, its configuration block (which named an unrelated example repository)
  and its files are removed rather than left half-set.
- Source maps of the theme's scripts and styles (a browser's developer tools read them; a
  reader never does) and the theme's message catalogues (`locales`: read when building, not
  by a page).
The executed notebooks' copies (`_sources/`) are not written at all (`html_copy_source`,
set in `website`), nor the theme's download button that linked them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

THEBE = re.compile(
    r"[ \t]*(?:<script>const THEBE_JS_URL[^<]*</script>"
    r"|<script[^>]*src=\"[^\"]*sphinx-thebe\.js[^\"]*\"[^>]*></script>"
    r"|<link[^>]*href=\"[^\"]*sphinx-thebe\.css[^\"]*\"[^>]*/?>"
    r"|<script type=\"text/x-thebe-config\">.*?</script>"
    r"|<script>kernelName = '[^']*'</script>)\n?",
    re.S,
)
SOURCE_MAP = re.compile(r"\n?/[/*][#@] sourceMappingURL=[^\n]*")


def drop_thebe(text: str) -> str:
    """A page without the thebe set-up (its scripts, its style and its configuration)."""
    return THEBE.sub("", text)


def trim_static(outdir: Path) -> int:
    """Remove from `outdir/_static` what no page uses; returns the bytes removed."""
    static = Path(outdir) / "_static"
    removed = 0
    doomed = [*static.rglob("*.map"), *static.glob("sphinx-thebe.*")]
    for path in doomed:
        removed += path.stat().st_size
        path.unlink()
    locales = static / "locales"
    if locales.is_dir():
        removed += sum(p.stat().st_size for p in locales.rglob("*") if p.is_file())
        shutil.rmtree(locales)
    for path in [*static.rglob("*.js"), *static.rglob("*.css")]:  # their maps are gone
        text = path.read_text(errors="surrogateescape")
        if "sourceMappingURL=" in text:
            path.write_text(SOURCE_MAP.sub("", text), errors="surrogateescape")
    return removed
