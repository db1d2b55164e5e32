"""How landed fork commits were settled, read back from git: the `Resolved-By:` / `Approved-By:`
lines of their messages and the `L1-Run:` of their forkflow notes (conflicts/provenance.py,
git/notes.py), for `forkflow status --commits` and the commit page."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from forkflow.git.notes import messages_and_notes
from forkflow.ledger import trailers


def read_provenance(path: Path, fork_shas: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """Fork sha -> its (key, value) provenance lines, in one `git log`; commits without any are left out."""
    out: dict[str, list[tuple[str, str]]] = {}
    for sha, text in messages_and_notes(path, fork_shas).items():
        found = trailers.provenance(text)
        if found:
            out[sha] = found
    return out
