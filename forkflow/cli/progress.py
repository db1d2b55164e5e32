"""The progress bar of long commands (plan, ingest, replay): one shape, on the console given."""
from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress_bar(console: Console, disable: bool = False) -> Progress:
    """A transient bar: description, bar, done/total, elapsed time."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=disable)


class PhaseBar:
    """A reporter's bar: one task whose description names the current phase."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("starting", total=None)

    def phase(self, text: str) -> None:
        self.progress.update(self.task, description=text)
