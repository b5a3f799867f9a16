"""The object a chapter notebook works through: profile, device, sweeps, figures, claims."""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .engine import overrides
from .engine.paths import (
    chapter_results,
    claims_only,
    figures_dir,
    known_chapters,
    output_path,
    project_root,
    run_log_path,
    shown_path,
    write_atomic,
)
from .engine.paths import (
    chapters as chapters,  # the facade names the book's chapters too
)
from .engine.profiles import PROFILES, ProfileError, load_profiles_file
from .engine.sweep import (
    DASK_ENV,
    WARNINGS_ENV,
    CacheEntryError,
    FailedTask,
    SweepOutcome,
    TaskResult,
    route_warnings,
    sweep,
    task_hash,
)
from .verdicts import claims as claims_module

if TYPE_CHECKING:  # the runner imports this module and needs no pandas (0.3 s a run)
    import pandas as pd


def check_chapter(chapter: str) -> str:
    valid = known_chapters()
    if chapter not in valid:
        raise ValueError(f"unknown chapter {chapter!r}; valid: {', '.join(valid)}")
    return chapter


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ProfileError(f"unknown profile {profile!r}; valid: {', '.join(PROFILES)}")
    return profile


def profiles_file(chapter: str) -> Path:
    return project_root() / "data" / "profiles" / f"{chapter}.yaml"


def load_profile(chapter: str, profile: str, path: Path | None = None) -> dict:
    """The parameters of `profile` for `chapter`, validated: the whole file against
    `data/schemas/profiles.yaml` and the chapter's `data/schemas/profiles/<chapter>.yaml`, and
    both profiles with the same keys; a `ProfileError` lists every problem of the file.

    In a run with a custom profile (`--set`, or a profile file:
    `implicit_bias.core.engine.overrides`) the
    runner's copy of that profile, validated by the same schemas."""
    check_profile(profile)
    custom = None if path else overrides.active_profile_file(chapter)
    if custom is not None:
        return overrides.load_active_profile(custom, chapter, profile)[0]
    path = path or profiles_file(chapter)
    if not path.exists():
        raise ProfileError(
            f"no profiles file {path.name} for chapter {chapter!r}: create "
            f"data/profiles/{chapter}.yaml with the profiles {PROFILES}"
        )
    return load_profiles_file(path, chapter)[profile]


# Device nodes of a GPU driver (NVIDIA; AMD ROCm, which torch also calls "cuda"; WSL's GPU):
# where none exists, torch cannot see a GPU either.
GPU_DRIVER_NODES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def gpu_driver_present() -> bool:
    return any(os.path.exists(node) for node in GPU_DRIVER_NODES)


def device_name(device) -> str:
    """What `device.resolve_device(device)` names ("cpu", "cuda:0", ...), with its errors; the
    CPU, and `auto` on a machine with no GPU driver, are named without importing torch (2-3 s
    in every runner and kernel: a chapter that computes with numpy alone never needs it)."""
    name = str(device).strip().lower()
    if name == "cpu" or (name == "auto" and not gpu_driver_present()):
        return "cpu"
    from .engine.device import resolve_device

    return str(resolve_device(device))


class _SeedOnImport(importlib.abc.MetaPathFinder):
    """Seeds torch's global generator as soon as torch is first imported."""

    def __init__(self, seed: int):
        self.seed = seed

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once, and so that the lookup below finds the real torch
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_module, seed = spec.loader.exec_module, self.seed

        def exec_and_seed(module):
            exec_module(module)
            module.manual_seed(seed)

        spec.loader.exec_module = exec_and_seed  # type: ignore[method-assign]
        return spec


def seed_torch_when_imported(seed: int) -> None:
    """`torch.manual_seed(seed)` now if torch is loaded, else right after its first import."""
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
        return
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _SeedOnImport)]
    sys.meta_path.insert(0, _SeedOnImport(seed))


# columns a task records for its own bookkeeping, not data: never on a page or in a download
# (every run of the book says its device in its run record)
BOOKKEEPING = ("device",)


def _display_frame(frame: pd.DataFrame, key: str, text: str) -> None:
    """Display `frame` as the page shows it (`shown`), with the sentence the website lays it
    out by (`attrs[key]`: a table's caption, a download's `about`)."""
    frame = shown(frame)
    frame.attrs[key] = text
    try:
        from IPython.display import display
    except ImportError:
        return
    display(frame)


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as a page shows it: bookkeeping columns dropped, and a column whose cells are
    lists or dicts (a task's per-run values) spread into one column per entry ("gd err 1",
    "gd err 2", ...; "converged gd", ...), so no cell prints a Python list or dict."""
    import pandas as pd  # here: the runner imports this module without pandas

    frame = frame.drop(columns=[c for c in BOOKKEEPING if c in frame.columns])
    nested = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, (list, dict))).any()]
    if not nested:
        return frame.copy()
    spread = [frame.drop(columns=nested)]
    for column in nested:
        if frame[column].map(lambda v: isinstance(v, dict)).any():
            cells = frame[column].map(lambda v: v if isinstance(v, dict) else {"": v})
            wide = pd.DataFrame(cells.tolist(), index=frame.index)
            wide.columns = [f"{column} {k}".strip() for k in wide.columns]
        else:
            cells = frame[column].map(lambda v: v if isinstance(v, list) else [v])
            wide = pd.DataFrame(cells.tolist(), index=frame.index)
            wide.columns = [f"{column} {i + 1}" for i in range(wide.shape[1])]
        spread.append(wide)
    return pd.concat(spread, axis=1)


class Chapter:
    """Everything a chapter notebook needs, for one (chapter, profile, device) run.

    Creating it is the notebook's one set-up call: it validates the profile and claims,
    resolves the device, seeds torch, and (with `threads`) pins the notebook's own torch
    threads; task functions pin theirs through their `@task` declaration."""

    def __init__(
        self,
        chapter: str,
        profile: str = "smoke",
        device: str = "auto",
        refresh: bool = False,
        threads: int | None = None,
    ):
        self.chapter = check_chapter(chapter)
        self.profile = check_profile(profile)
        custom = overrides.active_profile_file(chapter)  # a run with --set or a profile file
        self.custom = custom is not None
        # profile_changes: the parameters a custom run changed (dotted key -> value)
        self.config, self.profile_changes = (
            overrides.load_active_profile(custom, chapter, profile)
            if custom
            else (load_profile(chapter, profile), {})
        )
        claims_module.load_claims(chapter)  # a malformed claims file fails before computing
        self.device_name = device_name(device)  # validated here; the CPU is named without torch
        self._device = None if isinstance(device, str) else device
        self.workers = self._workers_from_profile()  # checked here: a bad value fails at once
        self.refresh = bool(refresh)
        self.results_dir = chapter_results(profile, chapter)
        self.outcomes: list[SweepOutcome] = []
        self.commit = source_commit()
        self.run_log = run_log_path(profile, chapter)
        self.run_log.unlink(missing_ok=True)
        self.figures_shown = 0  # figures are numbered in the order the chapter shows them
        from .site.web_tables import install_long_tables

        install_long_tables()  # a long table shows as a CSV download and a preview
        if PROGRESS_ENV in os.environ:  # under the runner: warnings go to its terminal
            _log_warnings(self.run_log.with_name("warnings.log"))
        if threads is not None:
            import torch  # here: the runner imports this module and computes nothing

            torch.set_num_threads(threads)
        # now if torch is loaded; a chapter that computes with numpy alone never pays its import
        seed_torch_when_imported(0)

    @property
    def device(self):
        """This run's `torch.device` (torch is imported on first use)."""
        if self._device is None:
            from .engine.device import resolve_device

            self._device = resolve_device(self.device_name)
        return self._device

    def __repr__(self) -> str:
        return f"Chapter({self.chapter!r}, profile={self.profile!r}, device={self.device_name!r})"

    def profile_table(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{"parameter": k, "value": str(v)} for k, v in self.config.items()]
        return pd.DataFrame(rows).set_index("parameter")

    def show_profile(self):
        """Say, folded under one line ("How this page was run: the smoke profile"), which
        profile this page ran with and where its parameters are (the profile file in the
        repository; a custom run's changes listed); in a notebook, returns None (elsewhere, the
        parameters as a table)."""
        try:
            from IPython.display import HTML, display
        except ImportError:
            return self.profile_table()
        display(HTML(self.profile_fold()))
        return None

    def profile_fold(self) -> str:
        """`profile_prose` as HTML folded under a line that names the profile: machinery a
        reader opens when they want it, not a line under the verdict."""
        import html
        import re

        body = html.escape(self.profile_prose(), quote=False)  # its markdown, as HTML
        for pattern, tag in (
            (r"\*\*(.+?)\*\*", "strong"),
            (r"\*(.+?)\*", "em"),
            (r"`(.+?)`", "code"),
        ):
            body = re.sub(pattern, rf"<{tag}>\1</{tag}>", body)
        body = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r"<a href='\2'>\1</a>", body)
        custom = " (a custom run)" if self.custom else ""
        return (
            "<details class='profile-fold'><summary>How this page was run: the "
            f"{html.escape(self.profile)} profile{custom}</summary><p>{body}</p></details>"
        )

    def profile_prose(self) -> str:
        """The profile of this run as a reader reads it (markdown, no parameter dump)."""
        kind = {
            "paper": "the paper's own protocol (its data sizes, grids, seeds and step counts)",
            "smoke": "a reduced scale that runs on a laptop's CPU in minutes: its numbers "
            "check each claim's direction, not the paper's values",
        }.get(self.profile, "")
        path = f"data/profiles/{self.chapter}.yaml"
        url = repository_file_url(path)
        link = f"[{path}]({url})" if url else f"`{path}`"
        text = (
            f"This page was executed with the **{self.profile}** profile, {kind}. Its "
            f"{len(self.config)} parameters are in {link}; the book's *How to rerun* page "
            "shows how to change them."
        )
        if self.profile_changes:  # a custom run: say what it changed
            text += (
                " This custom run ran with overrides "
                + ", ".join(
                    f"`{key} = {json.dumps(value)}`" for key, value in self.profile_changes.items()
                )
                + "."
            )
        elif self.custom:
            text += " (A custom run: no parameter differs from the profile.)"
        return text

    def describe_device(self) -> str:
        """The GPU's model, or the CPU with torch's thread count (plain "CPU" while torch is
        not loaded: a chapter that computes with numpy alone)."""
        if self.device_name == "cpu" and "torch" not in sys.modules:
            return "CPU"
        from .engine.device import describe_device

        return describe_device(self.device)

    def _workers_from_profile(self) -> int:
        """Worker processes for this run's sweeps: the profile's `workers` (default 1); "auto"
        is one per CPU core on the CPU (tasks then use one torch thread each) and 1 on a GPU,
        which one process keeps busy."""
        setting = self.config.get("workers", 1)
        if setting == "auto":
            return (os.cpu_count() or 1) if self.device_name == "cpu" else 1
        if not isinstance(setting, int) or setting < 1:
            raise ProfileError(
                f"{self.chapter}/{self.profile}: workers must be a positive "
                f"integer or 'auto', got {setting!r}"
            )
        return setting

    def sweep(
        self,
        fn,
        tasks,
        name: str,
        desc: str | None = None,
        n_jobs: int | None = None,
        backend: str | None = None,
        cost=None,
    ) -> list[dict]:
        """Cached, resumable map of `fn` over `tasks` (see `implicit_bias.core.engine.sweep`);
        `cost` estimates a task's compute time, to start the longest first.

        Every task receives this run's device as `task["device"]` (part of its cache key: a
        CPU result is never served to a GPU run, nor the reverse). The backend is dask when
        `$IMPLICIT_BIAS_DASK_SCHEDULER` is set, joblib when n_jobs > 1 (default:
        `self.workers`), else serial. Failed tasks come back as `{"status": "error"}`, are
        reported under the cell and in the run record, and are computed again next run.
        """
        n_jobs = self.workers if n_jobs is None else n_jobs
        if backend is None:
            backend = (
                "dask" if os.environ.get(DASK_ENV) else ("joblib" if n_jobs != 1 else "serial")
            )
        tasks = [{**task, "device": self.device_name} for task in tasks]
        outcome = SweepOutcome(name)
        try:
            results = sweep(
                fn,
                tasks,
                self.results_dir / name,
                refresh=self.refresh,
                backend=backend,
                n_jobs=n_jobs,
                desc=desc or name,
                outcome=outcome,
                # under the runner, progress goes to its terminal bar, not into the page
                progress=PROGRESS_ENV not in os.environ,
                on_progress=_progress_writer(desc or name),
                cost=cost,
            )
        except CacheEntryError as err:  # one line, with the command that recomputes them
            # (only the entries named: a --refresh would compute every committed entry again)
            raise CacheEntryError(
                f"{err}; the command: python -m implicit_bias run {self.chapter} --profile "
                f"{self.profile}"
            ) from None
        self.outcomes.append(outcome)
        self._write_run_log()
        if outcome.errors:
            self._report_errors(outcome)
        folder = self.results_dir / name
        return [
            (
                FailedTask(r, f"task {_params(t)} of sweep {name!r}")
                if r.get("status") == "error"
                else TaskResult(r, shown_path(folder / f"{task_hash(t)}.json"))
            )
            if isinstance(r, dict)
            else r
            for r, t in zip(results, tasks)
        ]

    def _write_run_log(self) -> None:
        """What this run's sweeps did, for the runner: counts, errors, cache entries used."""
        self.run_log.parent.mkdir(parents=True, exist_ok=True)
        log = {
            "chapter": self.chapter,
            "profile": self.profile,
            "device": self.device_name,
            "sweeps": [o.to_json() for o in self.outcomes],
        }
        write_atomic(self.run_log, json.dumps(log, indent=1))

    def _report_errors(self, outcome: SweepOutcome) -> None:
        lines = [
            f"{len(outcome.errors)} of {outcome.total} tasks of sweep `{outcome.name}` "
            "failed; they are missing from what follows, the claims of this run are "
            "not checked, and they are computed again on the next run."
        ]
        for error in outcome.errors[:5]:
            params = {k: v for k, v in error["task"].items() if k != "device"}
            lines.append(f"- `{params}`: {error['error'].strip().splitlines()[-1]}")
        text = "\n".join(lines)  # the runner prints them in the terminal too
        try:
            from IPython.display import Markdown, display

            display(Markdown(text))
        except ImportError:
            print(text, file=sys.stderr)

    @property
    def failed_tasks(self) -> list[dict]:
        return [dict(error, sweep=o.name) for o in self.outcomes for error in o.errors]

    def save_figure(
        self,
        fig,
        fig_id: str,
        data,
        rtol: float = 1e-6,
        atol: float = 1e-9,
        sweeps: list[str] | tuple[str, ...] = (),
        claims: list[str] | tuple[str, ...] = (),
        drawn_by: str | None = None,
        caption: str | None = None,
    ) -> None:
        """Write the figure and its data (see `implicit_bias.core.site.plotting.save_figure`), show
        it numbered, with a caption (`caption`, else what its panels plot) and alt text (its
        panels in words), and its provenance under it: a download link for the data it plots,
        what drew it, the sweeps (and task functions) that computed it, the claims it checks
        (linked to their rows of the claims table) and the profile and commit."""
        known_sweeps = {o.name: o for o in self.outcomes}
        unknown = [s for s in sweeps if s not in known_sweeps]
        if unknown:
            raise ValueError(
                f"figure {fig_id!r}: no sweep {unknown} ran before it; this run's "
                f"sweeps: {', '.join(known_sweeps) or 'none'}"
            )
        all_claims = claims_module.load_claims(self.chapter)
        claim_ids = {c["id"] for c in all_claims}
        active = [c["id"] for c in all_claims if self.profile in c["profiles"]]
        unknown = [c for c in claims if c not in claim_ids]
        if unknown:
            raise ValueError(
                f"figure {fig_id!r}: no claim {unknown} in data/claims/{self.chapter}.yaml"
            )
        if claims_only():  # a check of the claims alone, into another results folder
            import matplotlib.pyplot as plt

            plt.close(fig)
            return
        from .site.plotting import save_figure  # matplotlib: only where figures are drawn

        png = save_figure(fig, self.chapter, fig_id, data, self.profile, rtol=rtol, atol=atol)
        tables = sorted(
            p
            for p in png.parent.glob(f"{fig_id}*.csv")
            if p.stem == fig_id or p.stem.startswith(f"{fig_id}__")
        )
        provenance = {
            "figure": fig_id,
            "data": [p.name for p in tables],
            # what the figure plots: a run that draws other numbers is a new provenance
            "data_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tables},
            "drawn_by": drawn_by
            or getattr(fig, "drawn_by", None)
            or f"notebooks/{self.chapter}.md, this cell",
            "sweeps": {s: known_sweeps[s].fn for s in sweeps},
            "claims": list(claims),
            "claims_in_table": [c for c in claims if c in active],
            "profile": self.profile,
            "commit": self.commit,
        }
        provenance = kept_or_written(
            figures_dir(self.profile, self.chapter) / "provenance" / f"{fig_id}.json", provenance
        )
        try:
            from IPython import get_ipython
            from IPython.display import HTML, display
        except ImportError:
            return
        if get_ipython() is None:
            return
        import matplotlib.pyplot as plt

        self.figures_shown += 1
        display(HTML(figure_html(png, self.figures_shown, fig_id, caption, fig, claims)))
        plt.close(fig)  # the figure, then its provenance under it
        display(HTML(provenance_html(provenance, png.parent)))

    def save_table(self, frame: pd.DataFrame, name: str) -> Path:
        """Write `frame` as the CSV `name` in this run's results folder, whole (and, under the
        runner, staged with the run's other outputs until it completes); returns its path."""
        if Path(name).name != name or not name.endswith(".csv"):
            raise ValueError(f"table {name!r}: a file name ending in .csv")
        path = self.results_dir / name
        write_atomic(output_path(path), frame.to_csv(index=False))
        return path

    def say(self, text: str) -> None:
        """Show `text`, a sentence of what this run found, as a paragraph of the page: its
        `$...$` maths typeset as in a figure's caption (`prose_html`), where a Markdown output
        would show the dollars (a chapter never prints: no `print()` line on a page)."""
        try:
            from IPython.display import HTML, display
        except ImportError:
            return
        display(HTML(f"<p class='run-sentence'>{prose_html(text)}</p>"))

    def table(self, frame: pd.DataFrame | pd.Series, caption: str) -> None:
        """Show `frame` as a table of the page under `caption`, a sentence saying what it holds
        (the website folds a table of more than a few rows under it): headers in words, numbers
        to a few significant digits (`core.site.web_tables.long_table_html`)."""
        if not caption.strip():
            raise ValueError("a table's caption says what it holds: it cannot be empty")
        _display_frame(frame.to_frame() if frame.ndim == 1 else frame, "caption", caption)

    def download(self, frame: pd.DataFrame, about: str) -> None:
        """Show `frame` as a download, not as a table on the page (a per-seed table, say): the
        sentence `about` (what its rows hold), a CSV of every row and a folded preview of the
        first rows (`core.site.web_tables.long_table_html`)."""
        _display_frame(frame, "about", about)

    def check_claims(
        self, metrics: dict, columns: dict[str, dict[str, str]] | None = None
    ) -> claims_module.ClaimsReport:
        """Decide every claim of this profile on `metrics`, display the claims table and write
        its report; `columns` adds the chapter's own columns ({name: {claim id: text}})."""
        return claims_module.check(
            self.chapter,
            metrics,
            self.profile,
            failed_tasks=self.failed_tasks,
            code={o.fn: o.fingerprint for o in self.outcomes},
            columns=columns,
        )


def _params(task: dict) -> dict:
    return {k: v for k, v in task.items() if k != "device"}


def repository_file_url(path: str) -> str | None:
    """The address of a file of the repository (`core.site.repository`), or None where the
    repository has no public address (or the project no `_config.yml`)."""
    from .site.repository import file_url

    try:
        return file_url(path)
    except OSError:
        return None


def clean_commit(commit) -> bool:
    """Whether `commit` names a commit of the repository as it was (not "+ changes")."""
    return isinstance(commit, str) and commit not in ("", "unknown") and "+" not in commit


def kept_or_written(path: Path, record: dict, volatile=("commit",)) -> dict:
    """Write `record` to `path` (under the runner, to its staging folder: `output_path`)
    unless the file already holds it but for the `volatile` keys
    and names a clean commit; returns the record in effect. Rendering committed results again
    from their cache (`make book` on a fresh clone) then leaves the tracked files as they are,
    and the provenance keeps naming the commit whose run produced them."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and clean_commit(old.get("commit")):
        strip = lambda r: {k: v for k, v in r.items() if k not in volatile}  # noqa: E731
        if strip(old) == strip(json.loads(json.dumps(record))):
            return old
    write_atomic(output_path(path), json.dumps(record, indent=1))
    return record


def source_commit() -> str:
    """The commit of the checkout (short hash, "+ changes" when files differ from it), or
    "unknown" outside a git checkout."""
    import subprocess

    root = project_root()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "lib",
                "notebooks",
                "data",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + (" + changes" if dirty else "")


def prose_html(text: str) -> str:
    """`text` escaped as HTML, its `$...$` as Sphinx writes inline math
    (`<span class="math notranslate nohighlight">\\(...\\)</span>`), which MathJax typesets
    inside an output cell; `\\$` is a dollar."""
    import html
    import re

    parts = re.split(r"(?<!\\)\$(.+?)(?<!\\)\$", text)
    return "".join(
        f'<span class="math notranslate nohighlight">\\({html.escape(part)}\\)</span>'
        if i % 2
        else html.escape(part.replace("\\$", "$"))
        for i, part in enumerate(parts)
    )


def figure_html(png: Path, number: int, fig_id: str, caption: str | None, fig, claims) -> str:
    """The figure as the page shows it: the saved PNG (inlined, so the notebook and the website
    show the same file) with alt text, numbered, with its caption.

    A written caption (`caption`) is prose: its `$...$` math becomes
    `<span class="math notranslate nohighlight">\\(...\\)</span>`, as Sphinx writes inline math,
    so MathJax typesets it inside the output cell (the notebook page's section is
    `mathjax_ignore`; the `math` class is processed), and a closing "Expected: ..." sentence (what
    the paper expects the figure to show, in the paper's name: the website sets this run's
    finding before it) is set on its own line (`figure-expectation`); the prose is marked
    `<span class='written-caption'>`.
    Without one, the caption says what the panels plot (`generated-caption`). The figure tag
    itself stays `<figure class='book-figure' id='figure-<id>'>`, right before its image, as
    `core.site.website.externalize` finds it; a figure of several panels adds their boxes in
    the PNG's pixels (`data-panel-boxes`: `figure_panels.geometry_boxes`), where the website
    cuts it for a phone.

    A second image follows the first: the figure drawn for a dark page
    (`core.site.dark_figure.dark_png`, class `figure-dark`), hidden here (`display:none`, so
    neither shown nor read out twice); the website shows it in dark mode instead of the light
    one (book.css). It recolours `fig`, so it is drawn last."""
    import base64
    import html

    from .site.dark_figure import dark_png
    from .site.figure_panels import geometry_boxes
    from .site.plotting import SAVE_DPI, alt_text, describe_panels
    from .site.verdict import EXPECTED

    esc = html.escape
    prose = prose_html

    if caption is None:
        kind = "generated-caption"
        panels = describe_panels(fig)
        text = "; ".join(p[0].upper() + p[1:] for p in panels) + "." if panels else fig_id
        if claims:
            text += f" Checks {', '.join(claims)}."
        body = esc(text)
    else:
        kind = "written-caption"
        if "Takeaway:" in caption:  # the paper's line is labelled as the paper's, not as a result
            raise ValueError(
                f"figure {fig_id}: its caption marks the paper's line 'Takeaway:'; write "
                f"'{EXPECTED}' (what the paper expects; the website adds what this run found)"
            )
        described, _, expected = caption.strip().partition(EXPECTED)
        body = prose(described.strip())
        if expected.strip():
            body += (
                f"<span class='figure-expectation'><br><em>{EXPECTED}</em> "
                f"{prose(expected.strip())}</span>"
            )
    alt = esc(alt_text(fig), quote=True)
    light = base64.b64encode(png.read_bytes()).decode()
    boxes = geometry_boxes(fig, SAVE_DPI)  # before the dark drawing recolours it
    dark = base64.b64encode(dark_png(fig, SAVE_DPI)).decode()
    cut = f" data-panel-boxes='{json.dumps(boxes, separators=(',', ':'))}'" if boxes else ""
    return (
        f"<figure class='book-figure' id='figure-{esc(fig_id)}'{cut}>"
        f"<img src='data:image/png;base64,{light}' class='figure-light' alt='{alt}' "
        "style='max-width:100%;height:auto'>"
        f"<img src='data:image/png;base64,{dark}' class='figure-dark' alt='{alt}' "
        "style='display:none;max-width:100%;height:auto'>"
        f"<figcaption><strong>Figure {number}.</strong> <span class='{kind}'>{body}</span>"
        "</figcaption></figure>"
    )


PROGRESS_ENV = "IMPLICIT_BIAS_PROGRESS"  # set by the runner: where sweeps report progress


def _log_warnings(path: Path) -> None:
    """Send Python warnings (a solver's "solution may be inaccurate", a deprecation) to `path`
    instead of the page, here and in the sweeps' worker processes (`WARNINGS_ENV`): the runner
    prints them in the terminal of whoever runs the chapter."""
    path.unlink(missing_ok=True)
    os.environ[WARNINGS_ENV] = str(path)
    route_warnings(path)


def _progress_writer(desc: str):
    """A callback writing the running sweep's counts to `$IMPLICIT_BIAS_PROGRESS` (at most
    twice a second, and at its end), for the runner's terminal progress bar; None outside it."""
    import time

    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return None
    last = [0.0]

    def write(outcome: SweepOutcome) -> None:
        done = outcome.cached + outcome.computed + len(outcome.errors)
        now = time.monotonic()
        if now - last[0] < 0.5 and done < outcome.total:
            return
        last[0] = now
        state = {
            "sweep": desc,
            "total": outcome.total,
            "done": done,
            "cached": outcome.cached,
            "failed": len(outcome.errors),
        }
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as handle:
            json.dump(state, handle)
        os.replace(tmp, path)

    return write


def provenance_html(provenance: dict, folder: Path) -> str:
    """The line under a figure: data download (inlined, so it works in the notebook and on
    the website alike), drawing code, sweeps, claims, profile and commit."""
    import base64
    import html

    esc = html.escape
    links = []
    for name in provenance["data"]:
        payload = base64.b64encode((folder / name).read_bytes()).decode()
        links.append(
            f"<a download='{esc(name)}' href='data:text/csv;base64,{payload}'>{esc(name)}</a>"
        )
    commit = provenance["commit"]
    source = esc(provenance["drawn_by"])
    if clean_commit(commit) and (base := repository_file_url("")):  # the repository's address
        path = provenance["drawn_by"].split(",")[0]
        source = f"<a href='{esc(base)}/blob/{esc(commit)}/{esc(path)}'>{source}</a>"
    sweeps = (
        ", ".join(
            f"<code>{esc(s)}</code> (<code>{esc(fn.split(':')[-1])}</code>)"
            for s, fn in provenance["sweeps"].items()
        )
        or "none (computed in the cell)"
    )
    in_table = provenance.get("claims_in_table", provenance["claims"])
    claims = (
        ", ".join(
            f"<a href='#claim-{esc(c)}'>{esc(c)}</a>"
            if c in in_table
            else f"{esc(c)} (checked at another profile)"
            for c in provenance["claims"]
        )
        or "none"
    )
    return (
        f"<p class='figure-provenance'><small>Data: {', '.join(links)} · "
        f"drawn by: {source} · computed by: {sweeps} · checks: {claims} · profile "
        f"<code>{esc(provenance['profile'])}</code>, data from the run at commit "
        f"<code>{esc(commit)}</code>"
        "</small></p>"
    )
