"""The L1 run that passed a landed commit, as a git note (`refs/notes/forkflow`).

A commit cannot name the run that validated it: the run validates that very commit, and a
message changed afterwards would be another commit, untested.  So the landed commit's trailers
say who settled its files (`Resolved-By:`, `Approved-By:`, written before L1), and the run that
passed it is attached after landing as a note: `L1-Run: 42 (passed: 118 tests)`.  `git log
--notes=forkflow` shows it; the commit page and `forkflow status --commits` read it back.
"""
from __future__ import annotations

from collections.abc import Sequence

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


def messages_and_notes(path: object, shas: Sequence[str]) -> dict[str, str]:
    """Each commit's message followed by its forkflow note (one `git log --no-walk`), for reading
    their provenance lines back (`forkflow status --commits`)."""
    wanted = sorted({s for s in shas if len(s) == 40 and all(c in "0123456789abcdef" for c in s)})
    if not wanted:
        return {}
    rc, out, _ = run_git_bytes("log", "--no-walk=unsorted", "--stdin", f"--notes={NOTES_REF}",
                               "--format=%H%x00%B%x00%N%x1e", cwd=str(path), check=False, timeout=300,
                               input="".join(f"{s}\n" for s in wanted).encode())
    if rc != 0:
        return {}
    found: dict[str, str] = {}
    for record in out.decode("utf-8", "replace").split("\x1e"):
        parts = record.strip("\n").split("\x00")
        if len(parts) == 3 and parts[0] in wanted:
            found[parts[0]] = parts[1] + ("\n" + parts[2] if parts[2].strip() else "")
    return found
