"""The conflicted regions of a stored conflict, as a person reads them.  [pure]

A stored conflict keeps the whole file with diff3 markers (`conflicts/classify.py`); a person
needs the regions: each with a few lines of context and its line numbers in that file, and beside
them only the hunks of the upstream commit's change and of the fork's own change that touch the
regions.  `conflicts show` and the dashboard's conflict page print these; `--full` keeps the file.

Everything here is pure but `three_way`, which reads the two diffs from git, and `on_tip`, which
picks the commit again onto the fork's tip when the fork's file changed since the conflict was kept.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from forkflow.conflicts.classify import BASE_LABEL, OURS_LABEL, THEIRS_LABEL, Region, parse_marked, regions
from forkflow.conflicts.records import ConflictInfo
from forkflow.git.repo import Repo
from forkflow.models import Sha

CONTEXT = 3  # lines shown before and after each region
BIG_HUNK = 40  # a hunk longer than this is cut to the lines near the regions
_OPEN, _BASE, _SEP, _CLOSE = (f"<<<<<<< {OURS_LABEL}", f"||||||| {BASE_LABEL}", "=======",
                              f">>>>>>> {THEIRS_LABEL}")

# the kind of each line of a marked file
CONTEXT_LINE, OPEN, OURS, BASE_MARK, BASE, SEP, THEIRS, CLOSE = (
    "context", "open", "ours", "base-marker", "base", "separator", "theirs", "close")
MARKERS = frozenset({OPEN, BASE_MARK, SEP, CLOSE})


@dataclass(frozen=True, slots=True)
class Line:
    no: int  # 1-based, in the marked file
    kind: str  # one of the kinds above
    text: str  # without its line end


@dataclass(frozen=True, slots=True)
class Span:
    """One region's place in the marked file: the lines of its `<<<<<<<` and `>>>>>>>`."""

    index: int  # 1-based
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Regions whose context lines touch, shown as one piece of the file."""

    spans: tuple[Span, ...]
    lines: tuple[Line, ...]

    @property
    def first(self) -> int:
        return self.lines[0].no

    @property
    def last(self) -> int:
        return self.lines[-1].no


def classify_lines(marked: str) -> list[Line] | None:
    """Every line of a marked file with its kind; None when the markers do not parse."""
    if parse_marked(marked) is None:
        return None
    out: list[Line] = []
    state = CONTEXT_LINE
    for no, raw in enumerate(marked.splitlines(), 1):
        if state == CONTEXT_LINE and raw == _OPEN:
            kind, state = OPEN, OURS
        elif state == OURS and raw == _BASE:
            kind, state = BASE_MARK, BASE
        elif state in (OURS, BASE) and raw == _SEP:
            kind, state = SEP, THEIRS
        elif state == THEIRS and raw == _CLOSE:
            kind, state = CLOSE, CONTEXT_LINE
        else:
            kind = state
        out.append(Line(no, kind, raw))
    return out


def spans(lines: Sequence[Line]) -> list[Span]:
    out: list[Span] = []
    start = 0
    for line in lines:
        if line.kind == OPEN:
            start = line.no
        elif line.kind == CLOSE:
            out.append(Span(len(out) + 1, start, line.no))
    return out


def excerpts(marked: str, context: int = CONTEXT) -> list[Excerpt]:
    """The regions of a marked file with `context` lines around each; regions whose context
    touches are one excerpt.  [] when the file has no regions or its markers do not parse."""
    lines = classify_lines(marked)
    if not lines:
        return []
    found = spans(lines)
    groups: list[list[Span]] = []
    for sp in found:
        if groups and sp.start - context <= groups[-1][-1].end + context + 1:
            groups[-1].append(sp)
        else:
            groups.append([sp])
    out = []
    for g in groups:
        lo, hi = max(1, g[0].start - context), min(len(lines), g[-1].end + context)
        out.append(Excerpt(tuple(g), tuple(lines[lo - 1:hi])))
    return out


def region_count(marked: str) -> int:
    segments = parse_marked(marked)
    return 0 if segments is None else len(regions(segments))


# -- the hunks of a diff near the regions -------------------------------------------------
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class Hunk:
    header: str  # the `@@ -a,b +c,d @@ ...` line
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[str, ...]  # each starts with ' ', '+', '-' or '\\'
    origin: int = 0  # the index of the diff's hunk this one is (a part of)

    @property
    def text(self) -> str:
        return "\n".join((self.header, *self.lines)) + "\n"


def parse_hunks(diff: str) -> list[Hunk]:
    """The hunks of a unified diff of one file (headers before the first `@@` are dropped)."""
    out: list[Hunk] = []
    header: str | None = None
    nums = (0, 0, 0, 0)
    body: list[str] = []
    for line in diff.splitlines():
        m = _HUNK.match(line)
        if m:
            if header is not None:
                out.append(Hunk(header, *nums, tuple(body)))
            header, body = line, []
            nums = (int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1))
        elif header is not None and line[:1] in (" ", "+", "-", "\\"):
            body.append(line)
        elif header is not None and line == "":
            body.append(" ")  # a context line that was an empty line with its space trimmed
    if header is not None:
        out.append(Hunk(header, *nums, tuple(body)))
    return out


def _telling(text: str) -> str | None:
    """A line worth matching on: stripped, with 3 or more visible characters and a letter or
    digit (a lone `}` or blank line is in every region and says nothing)."""
    t = text.strip()
    return t if len(t) >= 3 and any(c.isalnum() for c in t) else None


def _line_set(*texts: str) -> set[str]:
    return {t for text in texts for line in text.splitlines() if (t := _telling(line)) is not None}


def near_regions(diff: str, marked: str, side: str) -> tuple[list[Hunk], int]:
    """The hunks of `diff` (the upstream commit's change to the file, side="theirs", or the
    fork's own change since the fork point, side="ours") that touch a conflicted region: a line
    it adds is in that side of a region, or a line it removes is in a region's base.  Matched on
    the text, not on line numbers (the marked file holds both sides' other changes, so its
    numbers are neither side's).  Returns the hunks and how many the diff has in all."""
    hunks = parse_hunks(diff)
    segments = parse_marked(marked)
    found: list[Region] = regions(segments) if segments is not None else []
    added = _line_set(*(getattr(r, side) for r in found))
    removed = _line_set(*(r.base for r in found))
    keep: list[Hunk] = []
    for i, h in enumerate(hunks):
        keep += [replace(part, origin=i) for part in _trim(h, added, removed)]
    return keep, len(hunks)


def _touches(line: str, added: set[str], removed: set[str]) -> bool:
    t = _telling(line[1:])
    return t is not None and (line.startswith("+") and t in added or line.startswith("-") and t in removed)


def _trim(h: Hunk, added: set[str], removed: set[str], context: int = CONTEXT) -> list[Hunk]:
    """The parts of `h` within `context` lines of a line that touches a region, each a hunk of its
    own with its line numbers (a fork that rewrote a README has one hunk of 1,200 lines)."""
    hits = [i for i, line in enumerate(h.lines) if _touches(line, added, removed)]
    if not hits:
        return []
    wanted = sorted({j for i in hits for j in range(max(0, i - context), min(len(h.lines), i + context + 1))})
    runs: list[list[int]] = []
    for j in wanted:
        if runs and j == runs[-1][-1] + 1:
            runs[-1].append(j)
        else:
            runs.append([j])
    old_at, new_at = [], []  # the old and new line number at each line of the hunk
    o, n = h.old_start, h.new_start
    for line in h.lines:
        old_at.append(o)
        new_at.append(n)
        o += line[:1] in (" ", "-")
        n += line[:1] in (" ", "+")
    if len(h.lines) <= BIG_HUNK or len(runs) == 1 and len(runs[0]) == len(h.lines):
        return [h]
    out = []
    for run in runs:
        body = tuple(h.lines[j] for j in run)
        old_len = sum(1 for x in body if x[:1] in (" ", "-"))
        new_len = sum(1 for x in body if x[:1] in (" ", "+"))
        a, b = old_at[run[0]], new_at[run[0]]
        out.append(Hunk(f"@@ -{a},{old_len} +{b},{new_len} @@ (part of a {len(h.lines)}-line hunk)",
                        a, old_len, b, new_len, body))
    return out


# -- the whole view --------------------------------------------------------------------------
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True, slots=True)
class Change:
    """The hunks of one side's change to the conflicted file that touch the regions."""

    what: str  # "upstream abc123's change" / "the fork's change since the fork point def456" (to the file)
    hunks: tuple[Hunk, ...]
    total: int  # hunks in the whole diff
    available: bool = True  # False when git could not give the diff (a partial clone, a gone commit)

    @property
    def touched(self) -> int:
        """How many of the diff's hunks touch a region (a long one may be shown in parts)."""
        return len({h.origin for h in self.hunks})

    def to_json(self) -> dict[str, object]:
        return {"what": self.what, "hunks": [h.text for h in self.hunks], "total_hunks": self.total,
                "touching_hunks": self.touched, "available": self.available}


@dataclass(frozen=True, slots=True)
class ThreeWay:
    excerpts: tuple[Excerpt, ...]
    regions: int
    upstream: Change
    fork: Change
    fork_point: str

    def regions_json(self) -> list[dict[str, object]]:
        return [{"regions": [{"index": sp.index, "start": sp.start, "end": sp.end} for sp in e.spans],
                 "first": e.first, "last": e.last,
                 "lines": [{"no": ln.no, "kind": ln.kind, "text": ln.text} for ln in e.lines]}
                for e in self.excerpts]


def _diff(repo: Repo, a: str, b: str, path: str) -> str | None:
    if not (_SHA.match(a.removesuffix("^")) and _SHA.match(b)):
        return None
    out = repo.git("diff", "--no-color", "--no-ext-diff", "-U3", a, b, "--", path, check=False)
    return out


def three_way(repo: Repo, x: ConflictInfo, context: int = CONTEXT) -> ThreeWay:
    """The regions of `x` with context, the upstream commit's change to its file and the fork's
    own change since the fork point (each only the hunks that touch a region)."""
    fork_point = (repo.merge_base(x.base_sha, x.upstream_sha) or "") \
        if _SHA.match(x.base_sha) and _SHA.match(x.upstream_sha) else ""
    up = _diff(repo, f"{x.upstream_sha}^", x.upstream_sha, x.path)
    mine = _diff(repo, fork_point, x.base_sha, x.path) if fork_point else None
    up_hunks, up_total = near_regions(up or "", x.marked, "theirs")
    fork_hunks, fork_total = near_regions(mine or "", x.marked, "ours")
    return ThreeWay(
        tuple(excerpts(x.marked, context)), region_count(x.marked),
        Change(f"upstream {x.upstream_sha[:12]}'s change", tuple(up_hunks), up_total, up is not None),
        Change(f"the fork's change since the fork point {fork_point[:12] or '(unknown)'}",
               tuple(fork_hunks), fork_total, mine is not None),
        fork_point)


def on_tip(repo: Repo, x: ConflictInfo, tip: str) -> list[ConflictInfo] | None:
    """The conflicts of picking `x`'s upstream commit onto the fork's `tip` now, which is what
    the next `ingest` meets and what a person's resolution must be keyed on: [x] when the fork
    has not moved since it was kept (or git cannot say), [] when the commit now picks cleanly,
    else one per conflicted path (id 0 for a path not kept before), based on `tip`.  A conflict
    is kept on the tip its unit was picked onto; the units that land after it in the same ingest
    may change its file (fbtriton's llvm-hash.txt) or make other files conflict.  None when the
    pick cannot be made here (a partial clone): keep what was kept."""
    from forkflow.conflicts.bare import bare_case
    from forkflow.errors import GitError
    from forkflow.git.commits import ObjectError
    from forkflow.git.pick import MemoryPicker, MissingBlob, PickStatus

    if not (_SHA.match(tip) and _SHA.match(x.base_sha) and _SHA.match(x.upstream_sha)) or tip == x.base_sha:
        return [x]
    sha = Sha(x.upstream_sha)
    try:
        picker = MemoryPicker(repo.path)
        step = picker.pick(picker.commit_tree(tip), sha)
        if step.status in (PickStatus.APPLIED, PickStatus.EMPTY):
            return []
        if step.status is not PickStatus.CONFLICT:
            return None
        out = []
        for c in step.conflicts:
            case = bare_case(repo, picker, sha, c, origin=False)
            path = c.ours.path if c.ours is not None else c.path
            out.append(replace(x, id=x.id if path == x.path else 0, path=path, kind=case.kind.value,
                               base_sha=Sha(tip), key=case.key, marked=case.marked,
                               tried=x.tried if path == x.path else ()))
        return out
    except (MissingBlob, ObjectError, GitError, LookupError, OSError):
        return None
