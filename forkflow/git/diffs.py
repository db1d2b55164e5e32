"""First-parent diffs of commits and blob contents, read in-process from the object database.

Callers see paths, blob ids, hunk headers and changed line numbers, never libgit2's objects;
hunk lines are read only when asked for (most files of a large commit never need them).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pygit2

_ZERO = b"\0" * 20  # the id of a side a delta does not have (an added or deleted file)


class FileDiff:
    """One file of a commit's diff against its first parent (zero lines of context)."""

    __slots__ = ("_patch", "old_path", "new_path", "old_blob", "new_blob", "is_binary")

    def __init__(self, patch: pygit2.Patch) -> None:
        delta = patch.delta
        self._patch = patch
        self.old_path: str = delta.old_file.path
        self.new_path: str = delta.new_file.path
        self.old_blob: str | None = None if delta.old_file.id.raw == _ZERO else str(delta.old_file.id)
        self.new_blob: str | None = None if delta.new_file.id.raw == _ZERO else str(delta.new_file.id)
        self.is_binary = bool(delta.is_binary)  # None (not known) reads as text

    def hunk_headers(self) -> list[str]:
        """Each hunk's `@@ ... @@ context` line, its newline kept."""
        return [h.header for h in self._patch.hunks]

    def hunk_lines(self) -> Iterator[tuple[list[tuple[int, str]], list[tuple[int, str]]]]:
        """Per hunk: the removed lines as (old line number, content), the added ones as (new line
        number, content)."""
        for h in self._patch.hunks:
            lines = h.lines
            yield ([(ln.old_lineno, ln.content) for ln in lines if ln.origin == "-"],
                   [(ln.new_lineno, ln.content) for ln in lines if ln.origin == "+"])


class DiffReader:
    """Reads commits' diffs and blobs of one repository."""

    def __init__(self, path: Path | str) -> None:
        self._repo = pygit2.Repository(str(path))

    def blob(self, oid: str) -> bytes | None:
        """The blob's content; None when `oid` names no blob here."""
        obj = self._repo.get(oid)
        return obj.data if isinstance(obj, pygit2.Blob) else None

    def first_parent_diff(self, sha: str) -> list[FileDiff] | None:
        """The files a commit changes against its first parent (against nothing for a root
        commit); None when `sha` names no commit here."""
        commit = self._repo.get(sha)
        if not isinstance(commit, pygit2.Commit):
            return None
        if commit.parents:
            diff = self._repo.diff(commit.parents[0].tree, commit.tree, context_lines=0)
        else:
            diff = commit.tree.diff_to_tree(context_lines=0, swap=True)
        return [FileDiff(p) for p in diff if p is not None]
