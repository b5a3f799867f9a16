"""`make html`'s build of the website, safe against an interrupted build.

Sphinx builds incrementally from its saved state (`_build/.doctrees`: the environment pickle,
one doctree per page) and writes the search index last. A build killed midway (SIGKILL, a full
disk) left that state half-written: the next build failed reading it, and the one after
rebuilt only the pages it took for changed, with a search index of those alone, which every
later build kept. So a build leaves a mark while it runs and removes it only when it succeeded;
a build that finds the mark clears the whole build state first and builds from scratch.

    python -m implicit_bias.core.tools.site_build -- jupyter-book build . --builder html
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

UNFINISHED = ".unfinished"  # in _build/: a build is running, or was killed


def clear_unfinished(build: Path) -> bool:
    """Remove `build`'s contents when the last build there did not finish; whether it did."""
    if not (build / UNFINISHED).exists():
        return False
    for entry in build.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return True


def build_site(root: Path, command: list[str]) -> int:
    """Run `command` (the website's builder) in `root` under the mark; its exit code."""
    build = root / "_build"
    if clear_unfinished(build):
        print(
            "the last website build did not finish: its state in _build/ was removed, this "
            "build starts from scratch",
            file=sys.stderr,
        )
    build.mkdir(exist_ok=True)
    (build / UNFINISHED).write_text(f"build started by process {os.getpid()}\n")
    code = subprocess.call(command, cwd=root)
    if code == 0:
        (build / UNFINISHED).unlink()
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    if not command:
        print("error: no build command (python -m ... -- jupyter-book build ...)", file=sys.stderr)
        return 2
    from ..engine.paths import project_root

    try:
        return build_site(project_root(), command)
    except KeyboardInterrupt:
        print("website build interrupted: the next build starts from scratch", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
