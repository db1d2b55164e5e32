"""First-parent diffs of commits and blob contents, read in-process from the object database.

Callers see paths, blob ids, hunk headers and changed line numbers, never libgit2's objects;
hunk lines are read only when asked for (most files of a large commit never need them).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

_ZERO = b"\0" * 20  # the id of a side a delta does not have (an added or deleted file)
_ZERO_HEX = "0" * 40
_DIFF_FLAGS = pygit2.enums.DiffOption.SKIP_BINARY_CHECK


@dataclass(frozen=True)
class FilePatch:
    """One file of a diff as zero-context patch text.  `data` is None for a binary file, a
    submodule, or a side whose blob this clone lacks; those blobs are named in `missing`
    as `blob <id> (<path>)`."""

    path: str
    added: bool
    deleted: bool
    data: bytes | None
    missing: tuple[str, ...] = ()


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

    def has_blob(self, oid: str) -> bool:
        """The object is in this clone (the all-zero id of an absent side counts as present)."""
        return oid == _ZERO_HEX or pygit2.Oid(hex=oid) in self._repo.odb

    def commit_patches(self, sha: str) -> Iterator[FilePatch] | None:
        """The files a commit changes against its first parent (against nothing for a root commit),
        read one by one; None when `sha` names no commit here."""
        commit = self._repo.get(sha)
        if not isinstance(commit, pygit2.Commit):
            return None
        new = commit.tree
        if commit.parents:
            return self._patches(commit.parents[0].tree.diff_to_tree(new, context_lines=0, flags=_DIFF_FLAGS))
        return self._patches(new.diff_to_tree(context_lines=0, swap=True, flags=_DIFF_FLAGS))

    def patches_between(self, old: str, new: str) -> Iterator[FilePatch] | None:
        """The files that differ between two commits' trees; None when either names no commit here."""
        a, b = self._repo.get(old), self._repo.get(new)
        if not isinstance(a, pygit2.Commit) or not isinstance(b, pygit2.Commit):
            return None
        return self._patches(a.tree.diff_to_tree(b.tree, context_lines=0, flags=_DIFF_FLAGS))

    def _patches(self, diff: pygit2.Diff) -> Iterator[FilePatch]:
        odb = self._repo.odb
        for i, delta in enumerate(diff.deltas):
            added = delta.old_file.id.raw == _ZERO
            deleted = delta.new_file.id.raw == _ZERO
            path = delta.old_file.path if deleted else delta.new_file.path
            absent = tuple(f"blob {f.id} ({f.path})" for f in (delta.old_file, delta.new_file)
                           if not (f.id.raw == _ZERO or f.id in odb))
            if absent or delta.new_file.mode == pygit2.enums.FileMode.COMMIT \
                    or delta.old_file.mode == pygit2.enums.FileMode.COMMIT:
                yield FilePatch(path, added, deleted, None, absent)
                continue
            try:
                patch = diff[i]
            except (KeyError, pygit2.GitError):
                yield FilePatch(path, added, deleted, None, (f"blob {delta.new_file.id} ({path})",))
                continue
            if patch is None or patch.delta.is_binary:
                yield FilePatch(path, added, deleted, None)
                continue
            yield FilePatch(path, added, deleted, patch.data)
