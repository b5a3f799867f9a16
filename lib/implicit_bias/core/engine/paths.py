"""Where the project's files live (the repository root, the chapters, results, figures,
claims)."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

RESULTS_ENV = "IMPLICIT_BIAS_RESULTS"


def project_root() -> Path:
    """The repository root: `$IMPLICIT_BIAS_ROOT`, else found from this file or the cwd."""
    env = os.environ.get("IMPLICIT_BIAS_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if (folder / "_toc.yml").exists() and (folder / "data").is_dir():
                return folder
    return Path.cwd().resolve()


def results_root() -> Path:
    """`$IMPLICIT_BIAS_RESULTS` as an absolute path (the runner exports it so: the kernel runs
    in the project root, where a relative one would name another folder), else `results/`."""
    env = os.environ.get(RESULTS_ENV)
    return Path(os.path.abspath(env)) if env else project_root() / "results"


class InputError(ValueError):
    """Bad input a user can mend (a name, a damaged or missing file): the command line prints
    it as one line and exits 2 (`core.tools.failures`)."""


class ResultsPathError(InputError):
    """`$IMPLICIT_BIAS_RESULTS` names something that is not a folder."""


CLAIMS_ONLY_ENV = "IMPLICIT_BIAS_CLAIMS_ONLY"


def claims_only() -> bool:
    """Whether `$IMPLICIT_BIAS_CLAIMS_ONLY=1` asks a run for its claims alone, drawing no figure
    (half of a chapter's time from the cache; for checks that read claims only). Only into
    another results folder (`$IMPLICIT_BIAS_RESULTS`): in the book's own, the run would
    replace the committed figures by none."""
    if os.environ.get(CLAIMS_ONLY_ENV) != "1":
        return False
    if results_root().resolve() == (project_root() / "results").resolve():
        raise ResultsPathError(
            f"{CLAIMS_ONLY_ENV}=1 draws no figure, so it runs only into another results folder "
            f"({RESULTS_ENV}): here it would replace the book's figures by none"
        )
    return True


def export_results_root() -> Path | None:
    """Make `$IMPLICIT_BIAS_RESULTS` absolute for every process started from here (kernels,
    workers), and check that it is a folder (or can become one); None when it is not set."""
    env = os.environ.get(RESULTS_ENV)
    if not env:
        return None
    root = Path(os.path.abspath(env))
    for folder in (root, *root.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ResultsPathError(
                    f"{RESULTS_ENV}={env!r}: {folder} is a file, not a folder; set it to a folder"
                )
            break
    os.environ[RESULTS_ENV] = str(root)
    return root


def chapter_results(profile: str, chapter: str) -> Path:
    return results_root() / profile / chapter


def figures_dir(profile: str, chapter: str) -> Path:
    return results_root() / profile / "figures" / chapter


def claims_results(profile: str) -> Path:
    return results_root() / profile / "claims"


RUN_ID_ENV = "IMPLICIT_BIAS_RUN_ID"


def run_dir(profile: str, chapter: str) -> Path:
    """The chapter's run folder, `results/<profile>/<chapter>/.run/`; under the runner, each
    run writes its own subfolder (`$IMPLICIT_BIAS_RUN_ID`), so two runs of one chapter never
    read each other's counts."""
    base = chapter_results(profile, chapter) / ".run"
    run_id = os.environ.get(RUN_ID_ENV)
    return base / run_id if run_id else base


def run_log_path(profile: str, chapter: str) -> Path:
    """What the chapter's sweeps did in the current run (written by `Chapter`, read by the
    runner): `<run_dir>/sweeps.json`."""
    return run_dir(profile, chapter) / "sweeps.json"


def publish_root() -> Path:
    """Where executed chapters are published: `book/chapters/`, or, for runs into another
    results folder (`$IMPLICIT_BIAS_RESULTS`), `<that folder>/book/`, never the book's."""
    env = os.environ.get(RESULTS_ENV)
    return results_root() / "book" if env else project_root() / "book" / "chapters"


def shown_path(path: Path) -> str:
    """A path as messages show it: relative to the repository when inside it."""
    path = Path(path)
    root = project_root()
    return (
        str(path.relative_to(root))
        if path.is_absolute() and path.is_relative_to(root)
        else str(path)
    )


def current_umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def chapters() -> list[str]:
    """Chapter ids in book order: the `book/chapters/<id>` entries of `_toc.yml`."""
    toc = project_root() / "_toc.yml"
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            entry = node.get("file")
            if isinstance(entry, str) and entry.startswith("book/chapters/"):
                found.append(Path(entry).stem)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    if toc.exists():
        try:
            walk(yaml.safe_load(toc.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{getattr(err, 'problem', None) or err}" + (
                f" at line {mark.line + 1}" if mark else ""
            )
            raise InputError(
                f"cannot read {toc}: {where} (not the YAML of a table of contents)"
            ) from None
    return found


def known_chapters() -> list[str]:
    """Chapters in the book, then any other notebook in `notebooks/` (being written)."""
    in_book = chapters()
    drafts = sorted(p.stem for p in (project_root() / "notebooks").glob("*.md"))
    return in_book + [c for c in drafts if c not in in_book]


# ---- writing files whole --------------------------------------------------------------------


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A temporary path beside `path` to write to; once the block ends without an error the
    file is flushed to disk and renamed onto `path` (readable as the umask allows), so a reader
    never finds a partial file under its final name. On an error (a full disk, Ctrl-C) the
    temporary file is removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; others may read results
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8) whole to `path`: see `atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)


def disk_full(err: BaseException) -> bool:
    """Whether `err` is the disk (or a quota) running out of space."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


# ---- a run's new files, staged beside the results until the run is complete ----------------

STAGE_ENV = "IMPLICIT_BIAS_STAGE"  # set by the runner: the run's staging folder


def output_path(path: Path | str) -> Path:
    """Where a run writes the result file `path` (a figure, its data, a claims report): in the
    runner's staging folder (`$IMPLICIT_BIAS_STAGE`, same relative path as under the results
    root) while a run is going, so that committed results are never opened for writing; the
    runner swaps the staged files into place once the run is complete and valid. Outside a run
    (a notebook opened by hand, a test) the path itself."""
    path = Path(path)
    stage = os.environ.get(STAGE_ENV)
    if not stage:
        return path
    try:
        return Path(stage) / Path(os.path.abspath(path)).relative_to(results_root())
    except ValueError:
        return path
