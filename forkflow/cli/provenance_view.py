"""`forkflow status --commits`: how each landed fork commit was settled, read back from git.

The `Resolved-By:` / `Approved-By:` lines of the landed commits' messages and the `L1-Run:` of their
forkflow notes (conflicts/provenance.py, git/notes.py), shown below the commit table and added to
each commit of `--json` as `provenance`."""
from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from forkflow.git.repo import Repo
from forkflow.ledger.provenance import read_provenance
from forkflow.models import Disposition, Ledger, LedgerEntry


def provenance_of(repo: Repo, ledger: Ledger, keep: Callable[[LedgerEntry], bool]) -> dict[str, list[tuple[str, str]]]:
    """Fork sha -> its (key, value) provenance lines, for the picked commits `keep` shows."""
    return read_provenance(repo.path, [s for e in ledger.entries if e.disposition is Disposition.PICKED and keep(e)
                                       for s in e.fork_shas])


def render_provenance(console: Console, found: dict[str, list[tuple[str, str]]]) -> None:
    if not found:
        return
    t = Table(title="how the landed commits were settled (git log --notes=forkflow shows the same)")
    for col in ("fork sha", "line", "value"):
        t.add_column(col, overflow="fold")
    for sha, lines in found.items():
        for key, value in lines:
            t.add_row(sha[:12], key, escape(value))
    console.print(t)
