"""Dependencies between upstream commits, and their overlap with the fork's own lines.  [pure]

An in-memory blame over the upstream range: walking the commits in upstream order, each file
keeps the spans of lines written by a commit of interest (a pending upstream commit, or the
fork's own change), in the coordinates of the file as it is after the last commit walked. A
commit depends on the commits that wrote the lines its hunks remove or lie next to (its
pre-image, with one line of context: git's merge conflicts on adjacent changes too). Linear in
the size of the diffs; no `git blame` (see issue 11).
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from bisect import bisect_right
from dataclasses import dataclass, field

from forkflow.models import Sha

FORK = Sha("fork")  # the owner of the lines the fork changed against the merge base
CONTEXT = 1  # lines of context a hunk reads around what it removes


@dataclass(frozen=True, slots=True)
class Hunk:
    """A zero-context hunk, as in `@@ -old_start,old_lines +new_start,new_lines @@`."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int

    def probe(self) -> tuple[int, int]:
        """The pre-image lines (inclusive) the hunk removes or lies next to."""
        if self.old_lines == 0:  # an insertion after line old_start
            return self.old_start, self.old_start + 1
        return self.old_start - CONTEXT, self.old_start + self.old_lines - 1 + CONTEXT

    def cut(self) -> tuple[int, int]:
        """(first line removed or insertion point, number of lines removed)."""
        return (self.old_start + 1 if self.old_lines == 0 else self.old_start), self.old_lines


@dataclass(frozen=True, slots=True)
class FileChange:
    """One path a commit changes; `hunks` is None when the content is not compared line by line
    (a binary file, or a blob this clone lacks): the whole file counts."""

    path: str
    hunks: tuple[Hunk, ...] | None
    added: bool = False
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class CommitShape:
    """What a commit changes, as far as dependencies go."""

    sha: Sha
    files: tuple[FileChange, ...]
    defines: frozenset[str] = frozenset()  # names of definitions its added lines introduce
    uses: frozenset[str] = frozenset()  # identifiers on its added lines (other than its own definitions)
    mentions: frozenset[str] = frozenset()  # every identifier on its added or removed lines
    missing: tuple[str, ...] = ()  # "blob <id> (<path>)" it could not read


class DepKind(str, enum.Enum):
    LINES = "lines"  # its hunks remove or lie next to lines the other commit wrote
    FILE = "file"  # both change a file compared as a whole (binary or unreadable)
    SYMBOL = "symbol"  # it uses a name the other commit defines
    REVERT = "revert"  # it reverts or relands the other commit


@dataclass(frozen=True, slots=True)
class Dependency:
    on: Sha
    kind: DepKind
    where: str  # "path:10-14", "path", or "name (path)"

    def describe(self) -> str:
        what = {DepKind.LINES: "lines", DepKind.FILE: "file", DepKind.SYMBOL: "symbol",
                DepKind.REVERT: "reverts"}[self.kind]
        return f"{self.on[:12]} ({what} {self.where})"

    def to_json(self) -> dict[str, str]:
        return {"on": self.on, "kind": self.kind.value, "where": self.where}


@dataclass
class _File:
    spans: list[tuple[int, int, Sha]] = field(default_factory=list)  # [start, end) owned lines
    whole: Sha | None = None  # the last commit that changed the file as a whole


@dataclass(frozen=True, slots=True)
class Trace:
    """The walk's findings for the commits of interest."""

    dependencies: dict[Sha, tuple[Dependency, ...]]
    fork_overlap: dict[Sha, str]  # sha -> "path:10-14" where its hunks meet the fork's own lines


class LineOwners:
    """Per file, which tracked commit wrote which lines (in the file's current coordinates)."""

    def __init__(self) -> None:
        self.files: dict[str, _File] = {}

    def apply(self, change: FileChange, owner: Sha | None) -> list[tuple[Sha, int, int]]:
        """Record `owner` writing `change`; returns (owner, first, last) of earlier tracked lines it reads.

        `owner=None` moves lines without tracking the new ones (a commit the fork already has)."""
        f = self.files.get(change.path)
        hits: list[tuple[Sha, int, int]] = []
        if f is None:
            f = self.files[change.path] = _File()
        if f.whole is not None:
            hits.append((f.whole, 0, 0))
        if change.hunks is None or change.deleted:
            hits += [(o, s, e - 1) for s, e, o in f.spans]
            f.spans = []
            f.whole = owner if change.hunks is None and not change.deleted else None
            if change.deleted:
                del self.files[change.path]
            return hits
        f.whole = None
        spans = f.spans
        starts = [s for s, _, _ in spans]
        for h in change.hunks:
            lo, hi = h.probe()
            i = bisect_right(starts, hi)  # spans never overlap: their ends ascend with their starts
            while i > 0 and spans[i - 1][1] - 1 >= lo:
                i -= 1
                s, e, o = spans[i]
                hits.append((o, max(s, lo), min(e - 1, hi)))
        f.spans = _cut(spans, sorted((*h.cut(), h.new_lines) for h in change.hunks), owner)
        if not f.spans and f.whole is None:
            del self.files[change.path]
        return hits

    def mark(self, change: FileChange, owner: Sha) -> None:
        """Own the pre-image lines of `change` (the fork's diff against the merge base) without moving any."""
        f = self.files.setdefault(change.path, _File())
        if change.hunks is None:
            f.whole = owner
            return
        for h in change.hunks:
            lo, hi = (h.old_start, h.old_start + 1) if h.old_lines == 0 else (h.old_start, h.old_start + h.old_lines - 1)
            f.spans.append((max(lo, 1), hi + 1, owner))
        f.spans.sort()
        merged: list[tuple[int, int, Sha]] = []  # an insertion's span may meet the next hunk's: one span
        for s, e, o in f.spans:
            if merged and s <= merged[-1][1] and o == merged[-1][2]:
                merged[-1] = (merged[-1][0], max(e, merged[-1][1]), o)
            else:
                merged.append((s, e, o))
        f.spans = merged


def _cut(spans: list[tuple[int, int, Sha]], cuts: Sequence[tuple[int, int, int]],
         owner: Sha | None) -> list[tuple[int, int, Sha]]:
    """Spans after the cuts (first line, lines removed, lines added), in ascending pre-image order,
    each of which puts `added` lines of `owner` where it removed lines.  One pass over the spans."""
    if not cuts:
        return spans
    first = bisect_right(spans, (cuts[0][0], cuts[0][0], "")) - 1  # spans wholly above every cut stay as they are
    while first >= 0 and spans[first][1] > cuts[0][0]:
        first -= 1
    out: list[tuple[int, int, Sha]] = spans[:first + 1]
    shift = 0
    it = iter(spans[first + 1:])
    cur = next(it, None)
    for at, removed, added in cuts:
        end = at + removed
        while cur is not None and cur[1] <= at:  # wholly above the cut
            out.append((cur[0] + shift, cur[1] + shift, cur[2]))
            cur = next(it, None)
        if cur is not None and cur[0] < at:  # runs into the cut: its top stays
            out.append((cur[0] + shift, at + shift, cur[2]))
            cur = (at, cur[1], cur[2])
        while cur is not None and cur[0] < end:  # inside what the cut removes
            if cur[1] > end:
                cur = (end, cur[1], cur[2])
                break
            cur = next(it, None)
        if owner is not None and added > 0:
            out.append((at + shift, at + shift + added, owner))
        shift += added - removed
    if cur is not None:
        out.append((cur[0] + shift, cur[1] + shift, cur[2]))
        out += [(s + shift, e + shift, o) for s, e, o in it] if shift else it
    return out


def _ranges(hits: Iterable[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for s, e in sorted(hits):
        if merged and s <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    text = ",".join(f"{s}" if s == e else f"{s}-{e}" for s, e in merged[:3])
    return text + (",..." if len(merged) > 3 else "")


def trace(shapes: Sequence[CommitShape], tracked: Iterable[Sha], fork: Sequence[FileChange] = (),
          reverts: Mapping[Sha, Sha] | None = None) -> Trace:
    """Walk `shapes` (every upstream commit after the fork point, in upstream order) and find, for
    each tracked (pending) commit, the earlier tracked commits it depends on and where it meets
    the fork's own lines.

    Args:
        shapes: upstream commits in order; the untracked ones (already in the fork) only move lines.
        tracked: the pending commits.
        fork: the fork's diff against the merge base (pre-image coordinates = the merge base's).
        reverts: pending sha -> the commit it reverts or relands (kept only when that one is earlier).
    """
    wanted = set(tracked)
    owners = LineOwners()
    for change in fork:
        owners.mark(change, FORK)
    names: dict[str, tuple[Sha, str]] = {}  # name -> (pending commit that introduced it, path)
    mentioned: set[str] = set()  # names any earlier commit's lines mention: not new when defined again
    deps: dict[Sha, tuple[Dependency, ...]] = {}
    overlap: dict[Sha, str] = {}
    seen: set[Sha] = set()
    for shape in shapes:
        mine = shape.sha in wanted
        found: dict[tuple[Sha, str], list[tuple[int, int]]] = {}
        whole: dict[tuple[Sha, str], None] = {}
        for change in shape.files:
            for o, s, e in owners.apply(change, shape.sha if mine else None):
                if not mine or o == shape.sha:
                    continue
                if s == 0 and e == 0 or change.hunks is None:
                    whole[(o, change.path)] = None
                else:
                    found.setdefault((o, change.path), []).append((s, e))
        if not mine:
            for name in shape.defines:
                names.pop(name, None)  # the fork has it already
            mentioned |= shape.mentions
            continue
        out: dict[tuple[Sha, DepKind, str], Dependency] = {}
        for (o, path), hits in found.items():
            if o == FORK:
                overlap.setdefault(shape.sha, f"{path}:{_ranges(hits)}")
            else:
                out.setdefault((o, DepKind.LINES, path), Dependency(o, DepKind.LINES, f"{path}:{_ranges(hits)}"))
        for o, path in whole:
            if o == FORK:
                overlap.setdefault(shape.sha, path)
            elif (o, DepKind.LINES, path) not in out:
                out[(o, DepKind.FILE, path)] = Dependency(o, DepKind.FILE, path)
        for name in sorted(shape.uses):
            hit = names.get(name)
            if hit is not None and hit[0] != shape.sha:
                out.setdefault((hit[0], DepKind.SYMBOL, name), Dependency(hit[0], DepKind.SYMBOL, f"{name} ({hit[1]})"))
        target = (reverts or {}).get(shape.sha)
        if target is not None and target in seen:  # a revert of a later commit would be a cycle
            out.setdefault((target, DepKind.REVERT, ""), Dependency(target, DepKind.REVERT, target[:12]))
        for name in shape.defines - mentioned:  # introduced here (or renamed to)
            names[name] = (shape.sha, _where(shape, name))
        mentioned |= shape.mentions
        seen.add(shape.sha)
        if out:
            deps[shape.sha] = tuple(sorted(out.values(), key=lambda d: (d.on, d.kind.value, d.where)))
    return Trace(deps, overlap)


def _where(shape: CommitShape, name: str) -> str:
    paths = [f.path for f in shape.files if not f.deleted]
    return paths[0] if len(paths) == 1 else f"{len(paths)} files"


def closure(deps: Mapping[Sha, Sequence[Dependency]], order: Sequence[Sha], held: Iterable[Sha]) -> dict[Sha, Dependency]:
    """Every commit that depends, transitively, on a held commit: sha -> its direct dependency on the way."""
    blocked = set(held)
    out: dict[Sha, Dependency] = {}
    for sha in order:
        if sha in blocked:
            continue
        for d in deps.get(sha, ()):
            if d.on in blocked:
                out[sha] = d
                blocked.add(sha)
                break
    return out
