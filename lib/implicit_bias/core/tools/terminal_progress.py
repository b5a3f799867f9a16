"""The progress bar a chapter's run draws in the runner's terminal."""

from __future__ import annotations

import json
from pathlib import Path

from ..chapter import PROGRESS_ENV

BARS_ENV = "IMPLICIT_BIAS_PROGRESS_BARS"


def without_progress_bars() -> None:
    """For a process that executes chapters beside others (`run --jobs`): one line per chapter
    in the terminal, not several bars drawn over each other."""
    import os

    os.environ[BARS_ENV] = "0"


class TerminalProgress:
    """While a chapter executes, a progress bar in the runner's terminal: the running sweep,
    its tasks done (read from the cache, computed, failed) and the time left. The kernel's
    sweeps report to a file (`$IMPLICIT_BIAS_PROGRESS`); a thread here draws it. Nothing is
    drawn when stderr is not a terminal (CI logs, tests)."""

    def __init__(self, chapter: str, path: Path, interval: float = 0.5):
        import os
        import sys
        import threading

        self.chapter, self.path, self.interval = chapter, path, interval
        path.unlink(missing_ok=True)
        self._previous = os.environ.get(PROGRESS_ENV)
        os.environ[PROGRESS_ENV] = str(path)  # the kernel inherits it
        self._stop = threading.Event()
        self._thread = None
        if sys.stderr.isatty() and os.environ.get(BARS_ENV, "1") != "0":
            self._thread = threading.Thread(target=self._draw, daemon=True)
            self._thread.start()

    def _draw(self) -> None:
        from tqdm import tqdm

        bar, sweep_name = None, None
        while not self._stop.wait(self.interval):
            try:
                state = json.loads(self.path.read_text())
            except (OSError, ValueError):
                continue
            if state["sweep"] != sweep_name:
                if bar is not None:
                    bar.close()
                sweep_name = state["sweep"]
                bar = tqdm(total=state["total"], desc=f"{self.chapter}: {sweep_name}", unit="task")
            if bar is None:
                continue  # this sweep is drawn and done
            bar.n = state["done"]
            bar.set_postfix(cached=state["cached"], failed=state["failed"], refresh=False)
            bar.refresh()
            if state["done"] >= state["total"]:
                bar.close()  # one line per finished sweep stays in the terminal
                bar = None
        if bar is not None:
            bar.close()

    def close(self) -> None:
        import os

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._previous is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = self._previous
