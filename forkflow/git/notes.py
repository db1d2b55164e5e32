"""The L1 run that passed a landed commit, as a git note (`refs/notes/forkflow`).

A commit cannot name the run that validated it: the run validates that very commit, and a
message changed afterwards would be another commit, untested.  So the landed commit's trailers
say who settled its files (`Resolved-By:`, `Approved-By:`, written before L1), and the run that
passed it is attached after landing as a note: `L1-Run: 42 (passed: 118 tests)`.  `git log
--notes=forkflow` shows it; the commit page and `forkflow status --commits` read it back.
"""
from __future__ import annotations

from forkflow.git.run import run_git_bytes

NOTES_REF = "refs/notes/forkflow"


def add_note(path: object, sha: str, text: str) -> bool:
    """Attach `text` (the `L1-Run:` line the landing writes) to commit `sha` as its forkflow note;
    False when git refused (the landing stands either way: the store keeps the run too)."""
    rc, _, _ = run_git_bytes("-c", "user.name=forkflow", "-c", "user.email=forkflow@localhost", "notes",
                             f"--ref={NOTES_REF}", "add", "-f", "-m", text, sha, cwd=str(path), check=False, timeout=60)
    return rc == 0


def read_note(path: object, sha: str) -> str:
    """The forkflow note of `sha`, or "" when it has none."""
    rc, out, _ = run_git_bytes("notes", f"--ref={NOTES_REF}", "show", sha, cwd=str(path), check=False, timeout=60)
    return out.decode("utf-8", "replace") if rc == 0 else ""
