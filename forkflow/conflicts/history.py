"""Resolutions learnt from the fork's own past picks.  [pure]

forkflow records the resolutions it lands, but a fork that ran without it has settled conflicts
by hand for months: each pick commit holds the file its engineers wrote.  Replaying such a pick
(the upstream commit onto the pick's parent) gives the conflict regions; the pick's file gives
what the fork put in each.  A later conflict whose region has the same two sides (whitespace
aside, in any file: Triton keeps copies of code per backend) is settled the same way.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from forkflow.conflicts.case import ConflictCase, Example
from forkflow.conflicts.classify import ConflictKind, Region, Segment, extract_regions, regions

if TYPE_CHECKING:
    from forkflow.conflicts.trustbook import RuleBook

ANCHOR_LINES = 3  # clean lines each side of a region that must be found in the fork's file


def region_key(r: Region) -> str:
    """A region's identity: its two sides, whitespace aside (formatters differ between picks)."""
    h = hashlib.sha256()
    h.update(" ".join(r.ours.split()).encode("utf-8", "surrogateescape") + b"\0")
    h.update(" ".join(r.theirs.split()).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


class History:
    """Region key -> what the fork put there, with where it was learnt (fork commit, path)."""

    def __init__(self) -> None:
        self.regions: dict[str, tuple[str, str]] = {}
        # (path, the side that deleted it) -> how the fork settled a delete/modify of that path
        self.paths: dict[tuple[str, str], tuple[str, str]] = {}
        # (folder, the side that deleted) -> how the fork settled its newest delete/modify there
        self.folders: dict[tuple[str, str], tuple[str, str]] = {}
        self.by_path: dict[str, list[Example]] = {}  # examples for an agent, oldest first
        # each resolver rule's backtest on the same picks (conflicts/trust.py); None: not backtested
        self.book: RuleBook | None = None

    def examples(self, path: str, limit: int = 4, max_chars: int = 6_000) -> tuple[Example, ...]:
        """The newest regions the fork settled in this file, small enough to show an agent."""
        out: list[Example] = []
        for e in reversed(self.by_path.get(path, [])):
            if sum(len(x) for x in (e.base, e.ours, e.theirs, e.resolved)) <= max_chars:
                out.append(e)
            if len(out) == limit:
                break
        return tuple(out)

    def lookup(self, r: Region) -> tuple[str, str] | None:
        return self.regions.get(region_key(r))

    def settled_path(self, path: str, deleted_by: str) -> tuple[str, str, bool] | None:
        """How the fork settled a delete/modify of this path before: (kept: "delete" | "fork" |
        "upstream", where, False); else (the deletion, where, True) when its newest delete/modify
        by the same side in the same folder was deleted (upstream's CI workflows the fork does not
        run; keeping is not carried over to other files); None when neither."""
        found = self.paths.get((path, deleted_by))
        if found is not None:
            return found[0], found[1], False
        near = self.folders.get((folder(path), deleted_by))
        if near is not None and near[0] == "delete":
            return near[0], near[1], True
        return None

    def matching(self, case: ConflictCase) -> tuple[Example, ...]:
        """For each region of the case the fork settled before (in any file), how it did; the newest
        regions the fork settled in the same file follow, for an agent."""
        out: list[Example] = []
        for r in regions(case.segments):
            found = self.lookup(r)
            if found is not None:
                out.append(Example(found[1], case.path, r.base, r.ours, r.theirs, found[0]))
        return tuple(out) + tuple(e for e in self.examples(case.path) if e not in out)

    def __len__(self) -> int:
        return len(self.regions)


def folder(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def settled_regions(segments: Sequence[Segment], resolved: str) -> list[str | None]:
    """What the resolved file holds in each region; None for a region it cannot be told for.

    When the fork kept every clean line, the regions are exact; otherwise each region is found
    between its neighbouring clean lines, when those occur exactly once in the resolved file."""
    exact = extract_regions(segments, resolved)
    if exact is not None:
        return list(exact)
    out: list[str | None] = []
    for i, seg in enumerate(segments):
        if isinstance(seg, str):
            continue
        before = segments[i - 1] if i > 0 and isinstance(segments[i - 1], str) else ""
        after = segments[i + 1] if i + 1 < len(segments) and isinstance(segments[i + 1], str) else ""
        out.append(_between(resolved, _tail(str(before)), _head(str(after))))
    return out


def _tail(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[-ANCHOR_LINES:])


def _head(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:ANCHOR_LINES])


def _between(text: str, before: str, after: str) -> str | None:
    if not before.strip() or not after.strip():
        return None
    if text.count(before) != 1 or text.count(after) != 1:
        return None
    start = text.index(before) + len(before)
    end = text.index(after)
    return text[start:end] if start <= end else None


def learn(history: History, case: ConflictCase, fork: bytes | None, where: str = "") -> int:
    """Remember how the fork settled each region of a past conflict; returns how many were learnt."""
    if case.kind is ConflictKind.DELETE_MODIFY:
        deleted_by = case.deleted_by
        kept = "delete" if fork is None else "fork" if fork == case.ours else "upstream" if fork == case.theirs else ""
        if kept:
            history.paths[(case.path, deleted_by)] = (kept, where or case.path)
            history.folders[(folder(case.path), deleted_by)] = (kept, where or case.path)
        return int(bool(kept))
    if fork is None or not case.kind.is_text or not case.segments:
        return 0
    resolved = fork.decode("utf-8", "surrogateescape")
    n = 0
    for r, text in zip(regions(case.segments), settled_regions(case.segments, resolved)):
        if text is not None:
            history.regions[region_key(r)] = (text, where or case.path)
            history.by_path.setdefault(case.path, []).append(
                Example(where, case.path, r.base, r.ours, r.theirs, text))
            n += 1
    return n
