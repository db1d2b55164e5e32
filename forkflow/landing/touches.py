"""What each commit touches (files and symbols), read in-process from the object database."""
from __future__ import annotations

import json
from pathlib import Path

import pygit2

from forkflow.planning.model import EMPTY_TOUCH, Touch
from forkflow.planning.symbols import Definition, definitions, header_symbol, line_owners, symbols_at

TOUCH_VERSION = 2
MAX_SYMBOL_FILES = 200  # a commit touching more files than this is known file by file only


class TouchReader:
    """Computes `Touch` values of commits; caches definitions per blob."""

    def __init__(self, path: Path | str) -> None:
        self.repo = pygit2.Repository(str(path))
        self._owners: dict[str, dict[int, str] | None] = {}

    def _owners_of(self, path: str, oid: pygit2.Oid) -> dict[int, str] | None:
        key = f"{oid}:{path.rsplit('.', 1)[-1]}"
        if key not in self._owners:
            blob = self.repo.get(oid)
            defs: list[Definition] | None = None
            if isinstance(blob, pygit2.Blob):
                defs = definitions(path, blob.data)
            self._owners[key] = line_owners(defs) if defs is not None else None
        return self._owners[key]

    def touch(self, sha: str) -> Touch:
        """Files and symbols a commit changes against its first parent."""
        commit = self.repo.get(sha)
        if not isinstance(commit, pygit2.Commit):
            return EMPTY_TOUCH
        if commit.parents:
            diff = self.repo.diff(commit.parents[0].tree, commit.tree, context_lines=0)
        else:
            diff = commit.tree.diff_to_tree(context_lines=0, swap=True)
        files: set[str] = set()
        symbols: set[str] = set()
        parsed: set[str] = set()
        patches = list(diff)
        with_symbols = len(patches) <= MAX_SYMBOL_FILES
        for patch in patches:
            delta = patch.delta
            paths = {delta.old_file.path, delta.new_file.path}
            files |= paths
            if not with_symbols or delta.is_binary:
                continue
            found = self._patch_symbols(patch)
            if found is not None:
                symbols |= found
                parsed |= paths
        return Touch(frozenset(files), frozenset(symbols), frozenset(parsed))

    def _patch_symbols(self, patch: pygit2.Patch) -> set[str] | None:
        delta = patch.delta
        old_path, new_path = delta.old_file.path, delta.new_file.path
        zero = delta.old_file.id.raw == b"\0" * 20
        old_owners = None if zero else self._owners_of(old_path, delta.old_file.id)
        new_zero = delta.new_file.id.raw == b"\0" * 20
        new_owners = None if new_zero else self._owners_of(new_path, delta.new_file.id)
        if (old_owners is None and not zero) or (new_owners is None and not new_zero):
            # no parser for the language: fall back on hunk headers' function context
            return {header_symbol(new_path, h.header.rstrip("\n")) for h in patch.hunks} or None
        out: set[str] = set()
        for h in patch.hunks:
            # blank lines between definitions belong to no symbol worth a dependency
            old_lines = [ln.old_lineno for ln in h.lines if ln.origin == "-" and ln.content.strip()]
            new_lines = [ln.new_lineno for ln in h.lines if ln.origin == "+" and ln.content.strip()]
            if old_owners is not None:
                out |= symbols_at(old_path, old_owners, old_lines)
            if new_owners is not None:
                out |= symbols_at(new_path, new_owners, new_lines)
        return out


def touch_to_json(t: Touch) -> str:
    return json.dumps({"f": sorted(t.files), "s": sorted(t.symbols), "p": sorted(t.parsed)},
                      separators=(",", ":"))


def touch_from_json(text: str) -> Touch:
    d = json.loads(text)
    return Touch(frozenset(d["f"]), frozenset(d["s"]), frozenset(d["p"]))
