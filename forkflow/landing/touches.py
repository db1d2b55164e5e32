"""What each commit touches (files and symbols), read in-process from the object database."""
from __future__ import annotations

import json
from pathlib import Path

from forkflow.git.diffs import DiffReader, FileDiff
from forkflow.planning.model import EMPTY_TOUCH, Touch
from forkflow.planning.symbols import Definition, definitions, header_symbol, line_owners, symbols_at

TOUCH_VERSION = 2
MAX_SYMBOL_FILES = 200  # a commit touching more files than this is known file by file only


class TouchReader:
    """Computes `Touch` values of commits; caches definitions per blob."""

    def __init__(self, path: Path | str) -> None:
        self.diffs = DiffReader(path)
        self._owners: dict[str, dict[int, str] | None] = {}

    def _owners_of(self, path: str, oid: str) -> dict[int, str] | None:
        key = f"{oid}:{path.rsplit('.', 1)[-1]}"
        if key not in self._owners:
            data = self.diffs.blob(oid)
            defs: list[Definition] | None = None
            if data is not None:
                defs = definitions(path, data)
            self._owners[key] = line_owners(defs) if defs is not None else None
        return self._owners[key]

    def touch(self, sha: str) -> Touch:
        """Files and symbols a commit changes against its first parent."""
        patches = self.diffs.first_parent_diff(sha)
        if patches is None:
            return EMPTY_TOUCH
        files: set[str] = set()
        symbols: set[str] = set()
        parsed: set[str] = set()
        with_symbols = len(patches) <= MAX_SYMBOL_FILES
        for patch in patches:
            paths = {patch.old_path, patch.new_path}
            files |= paths
            if not with_symbols or patch.is_binary:
                continue
            found = self._patch_symbols(patch)
            if found is not None:
                symbols |= found
                parsed |= paths
        return Touch(frozenset(files), frozenset(symbols), frozenset(parsed))

    def _patch_symbols(self, patch: FileDiff) -> set[str] | None:
        old_path, new_path = patch.old_path, patch.new_path
        zero = patch.old_blob is None
        old_owners = None if patch.old_blob is None else self._owners_of(old_path, patch.old_blob)
        new_zero = patch.new_blob is None
        new_owners = None if patch.new_blob is None else self._owners_of(new_path, patch.new_blob)
        if (old_owners is None and not zero) or (new_owners is None and not new_zero):
            # no parser for the language: fall back on hunk headers' function context
            return {header_symbol(new_path, h.rstrip("\n")) for h in patch.hunk_headers()} or None
        out: set[str] = set()
        for removed, added in patch.hunk_lines():
            # blank lines between definitions belong to no symbol worth a dependency
            old_lines = [n for n, text in removed if text.strip()]
            new_lines = [n for n, text in added if text.strip()]
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
