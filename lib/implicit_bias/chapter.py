"""The object a chapter notebook works through: profile, device, sweeps, figures, claims."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import torch
import yaml

from . import claims as claims_module
from .device import describe_device, resolve_device
from .paths import chapter_results, project_root
from .plotting import save_figure
from .sweep import DASK_ENV, sweep

PROFILES = claims_module.PROFILES


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
        walk(yaml.safe_load(toc.read_text()))
    return found


class ProfileError(ValueError):
    """A profile name or profiles file is invalid."""


def known_chapters() -> list[str]:
    """Chapters in the book, then any other notebook in `notebooks/` (being written)."""
    in_book = chapters()
    drafts = sorted(p.stem for p in (project_root() / "notebooks").glob("*.md"))
    return in_book + [c for c in drafts if c not in in_book]


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
    """The parameters of `profile` for `chapter`, validated (both profiles, same keys)."""
    check_profile(profile)
    path = path or profiles_file(chapter)
    if not path.exists():
        raise ProfileError(f"no profiles file for {chapter!r} at {path}")
    profiles = yaml.safe_load(path.read_text()) or {}
    missing = [p for p in PROFILES if p not in profiles]
    unknown = [p for p in profiles if p not in PROFILES]
    if missing or unknown:
        raise ProfileError(f"{path}: needs exactly the profiles {PROFILES} "
                           f"(missing {missing}, unknown {unknown})")
    keys = {p: set(profiles[p]) for p in PROFILES}
    if keys["smoke"] != keys["paper"]:
        raise ProfileError(f"{path}: smoke and paper must have the same keys; differ in "
                           f"{sorted(keys['smoke'] ^ keys['paper'])}")
    return dict(profiles[profile])


class Chapter:
    """Everything a chapter notebook needs, for one (chapter, profile, device) run."""

    def __init__(self, chapter: str, profile: str = "smoke", device: str = "auto",
                 refresh: bool = False):
        self.chapter = check_chapter(chapter)
        self.profile = check_profile(profile)
        self.config = load_profile(chapter, profile)
        self.device = resolve_device(device)
        self.workers = self._workers_from_profile()  # checked here: a bad value fails at once
        self.refresh = bool(refresh)
        self.results_dir = chapter_results(profile, chapter)
        torch.manual_seed(0)

    def __repr__(self) -> str:
        return (f"Chapter({self.chapter!r}, profile={self.profile!r}, "
                f"device={str(self.device)!r})")

    def profile_table(self) -> pd.DataFrame:
        rows = [{"parameter": k, "value": str(v)} for k, v in self.config.items()]
        return pd.DataFrame(rows).set_index("parameter")

    def show_profile(self):
        """Display the profile's parameters (in a notebook; returns the table elsewhere)."""
        table = self.profile_table()
        try:
            from IPython.display import Markdown, display

            display(Markdown(f"**Profile `{self.profile}`** on {describe_device(self.device)}"))
            display(table)
        except ImportError:
            pass
        return None

    def _workers_from_profile(self) -> int:
        """Worker processes for this run's sweeps: the profile's `workers` (default 1); "auto"
        is one per CPU core on the CPU (tasks then use one torch thread each) and 1 on a GPU,
        which one process keeps busy."""
        setting = self.config.get("workers", 1)
        if setting == "auto":
            return (os.cpu_count() or 1) if self.device.type == "cpu" else 1
        if not isinstance(setting, int) or setting < 1:
            raise ProfileError(f"{self.chapter}/{self.profile}: workers must be a positive "
                               f"integer or 'auto', got {setting!r}")
        return setting

    def sweep(self, fn, tasks, name: str, desc: str | None = None, n_jobs: int | None = None,
              backend: str | None = None) -> list[dict]:
        """Cached, resumable map of `fn` over `tasks` (see `implicit_bias.sweep`).

        The backend is dask when `$IMPLICIT_BIAS_DASK_SCHEDULER` is set, joblib when
        n_jobs > 1 (default: `self.workers`), else serial.
        """
        n_jobs = self.workers if n_jobs is None else n_jobs
        if backend is None:
            backend = "dask" if os.environ.get(DASK_ENV) else (
                "joblib" if n_jobs != 1 else "serial")
        return sweep(fn, tasks, self.results_dir / name, refresh=self.refresh,
                     backend=backend, n_jobs=n_jobs, desc=desc or name)

    def save_figure(self, fig, fig_id: str, data, rtol: float = 1e-6,
                    atol: float = 1e-9) -> Path:
        return save_figure(fig, self.chapter, fig_id, data, self.profile, rtol=rtol, atol=atol)

    def check_claims(self, metrics: dict) -> claims_module.ClaimsReport:
        return claims_module.check(self.chapter, metrics, self.profile)
