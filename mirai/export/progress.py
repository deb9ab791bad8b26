"""Progress of a long build, shown the way the terminal can take it.

On a terminal, `BuildProgress` draws a line per stage with rich (a spinner and the elapsed time; a
bar and a count where the stage has a known number of steps, such as kernels to compile). Elsewhere
(a log, CI, a pipe) it writes one plain line per step, with the time since the build began. Disabled,
it writes nothing. rich is a well-kept library for exactly this, so mirai does not draw bars itself.

    >>> import io
    >>> log = io.StringIO()
    >>> with BuildProgress(stream=log) as progress:
    ...     with progress.stage("compile", total=2) as step:
    ...         step.advance("kernel a"); step.advance("kernel b")
    >>> [line.split("] ")[1] for line in log.getvalue().splitlines()]
    ['compile 1/2: kernel a', 'compile 2/2: kernel b']
"""

from __future__ import annotations

import contextlib
import sys
import time


class _Stage:
    def __init__(self, owner: BuildProgress, name: str, total: int | None, task):
        self.owner, self.name, self.total, self.task, self.done = owner, name, total, task, 0

    def advance(self, detail: str) -> None:
        self.done += 1
        count = f" {self.done}/{self.total}" if self.total else ""
        self.owner._update(self, f"{self.name}{count}: {detail}")


class BuildProgress:
    """What a build shows while it runs (see the module docstring)."""

    def __init__(self, enabled: bool = True, stream=None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self._rich = None
        if enabled and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._rich = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
            )

    def __enter__(self) -> BuildProgress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._rich is not None:
            self._rich.stop()

    @contextlib.contextmanager
    def stage(self, name: str, total: int | None = None):
        """A stage of the build; `total` steps if known (each `advance` is one)."""
        task = None
        if self._rich is not None:
            task = self._rich.add_task(name, total=total)
        elif self.enabled and total is None:
            self._line(name)  # a stage without steps: say when it starts
        stage = _Stage(self, name, total, task)
        try:
            yield stage
        finally:
            if self._rich is not None:
                self._rich.update(task, completed=total or 1, total=total or 1)

    def note(self, message: str) -> None:
        """A line that stays (the outcome of a stage)."""
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.console.print(message, highlight=False, markup=False)
        else:
            self._line(message)

    def _update(self, stage: _Stage, text: str) -> None:
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(stage.task, description=text, completed=stage.done)
        else:
            self._line(text)

    def _line(self, text: str) -> None:
        elapsed = time.perf_counter() - self.start
        print(f"[mirai {elapsed:6.1f}s] {text}", file=self.stream, flush=True)
