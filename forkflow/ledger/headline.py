"""The headline of a fork's standing: days behind, counted from what is landed or decided.

`status` (text and `--json`), the dashboard's overview, `history` snapshots and replay all show
this one value, made here.

A commit moves the ingestion point when it is

- landed: the fork has it (PICKED; a pick the fork backed out, REVERTED, is open again),
- nothing to take: SKIPPED as already applied (picking it changes nothing) or reverted upstream
  by its own revert,
- decided by a person: `forkflow decide`, a closed review, or the fork's own pick messages'
  Deferred / Skipped lists,
- decided by a rule the fork configured: `[ledger] opt_out` (named in `rules`).

A commit forkflow only holds (a conflict kept for a person, a chain link that waits behind one,
an L1 failure, a review still open: DEFERRED by forkflow itself) is open, exactly as a pending
one: it keeps the point where it is. `if_deferred_days` says where the point would be if a
person deferred every held commit.

The point is read by the rule the fork's own point is read with: on a fork that picks, the
newest upstream commit with at least `infer_threshold` of the commits up to it landed or decided
(`docs/ledger.md`); on a fork that merges, the merge base and what is landed or decided right
after it. Days are counted to upstream's tip, as is the oldest open commit's age.  [pure]
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from forkflow.ledger.classify import decider_of
from forkflow.models import Disposition, EvidenceKind, Ledger, LedgerEntry, PointInTime, Sha

DAY = 86_400.0
OPT_OUT_RULE = "[ledger] opt_out"


class Standing(str, Enum):
    """What one upstream commit means for the ingestion point."""

    LANDED = "landed"  # the fork has it, or taking it changes nothing
    DECIDED = "decided"  # a person decided it (decide, a review, the fork's own messages)
    RULE = "rule"  # a rule the fork configured decided it
    HELD = "held"  # forkflow holds it for a person: open
    PENDING = "pending"  # nobody looked at it yet: open

    @property
    def moves_point(self) -> bool:
        return self in (Standing.LANDED, Standing.DECIDED, Standing.RULE)


def standing_of(e: LedgerEntry) -> Standing:
    """Where one entry stands (module docstring)."""
    d = e.disposition
    if d is Disposition.PICKED:
        return Standing.LANDED
    if d in (Disposition.PENDING, Disposition.REVERTED):  # a pick backed out: the fork lacks it again
        return Standing.PENDING
    who = decider_of(e)
    if who == "opt-out":
        return Standing.RULE
    if who in ("upstream-revert",):
        return Standing.LANDED
    if who == "auto":  # forkflow's own record: a skip is an empty pick, a deferral a hold
        return Standing.LANDED if d is Disposition.SKIPPED else Standing.HELD
    return Standing.DECIDED  # person, message (or a decision with no evidence kept)


def rule_of(e: LedgerEntry) -> str:
    """The configured rule that decided a RULE entry."""
    return OPT_OUT_RULE if e.evidence and e.evidence[0].kind is EvidenceKind.OPT_OUT else "configured rule"


def _days(later: int, earlier: int) -> float:
    return round(max(0, later - earlier) / DAY, 2)


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Headline:
    """A fork's standing against upstream, side by side (module docstring)."""

    upstream_tip: PointInTime
    point: PointInTime  # the ingestion point: up to it, landed or decided
    rule: str  # how the point was read, in words
    days_behind: float
    open_commits: int  # not landed or decided: pending + held
    held: int  # of them, held by forkflow (conflicts, chains waiting, L1 failures, open reviews)
    backlog: int  # open commits at or before the point
    oldest_open: PointInTime | None
    oldest_open_days: float | None  # its age, counted to upstream's tip
    conflict_commits: int | None  # commits with an open conflict kept for a person (None: not known)
    conflict_files: int | None  # ... and their conflicted files
    if_deferred: PointInTime  # the point if a person deferred every held commit
    if_deferred_days: float
    rules: tuple[tuple[str, int], ...] = ()  # configured rules that decided commits, with counts

    def to_json(self) -> dict[str, Any]:
        def at(p: PointInTime | None) -> dict[str, Any] | None:
            return None if p is None else {"sha": p.sha, "date": iso(p.date)}

        return {
            "days_behind": self.days_behind,
            "point": at(self.point),
            "rule": self.rule,
            "open_commits": self.open_commits,
            "held_commits": self.held,
            "backlog_commits": self.backlog,
            "oldest_open": None if self.oldest_open is None else {
                **(at(self.oldest_open) or {}), "age_days": self.oldest_open_days},
            "open_conflicts": None if self.conflict_commits is None else {
                "commits": self.conflict_commits, "files": self.conflict_files},
            "if_deferred": {**(at(self.if_deferred) or {}), "days_behind": self.if_deferred_days},
            "rules": dict(self.rules),
        }

    def summary(self) -> list[tuple[str, str]]:
        return headline_lines(self.to_json())


def headline_lines(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines of a headline's JSON form, the same wherever it is printed."""
    oldest = doc.get("oldest_open")
    conflicts = doc.get("open_conflicts")
    deferred = doc["if_deferred"]
    rules = ", ".join(f"{name} ({n})" for name, n in doc.get("rules", {}).items())
    return [
        ("days behind upstream", f"{doc['days_behind']:g}"),
        ("oldest open commit", "none" if not oldest else
         f"{oldest['age_days']:g} days ({oldest['sha'][:12]}, {oldest['date'][:10]})"),
        ("open commits", f"{doc['open_commits']} ({doc['held_commits']} held by forkflow for a person)"),
        ("open conflicts", "-" if not conflicts else f"{conflicts['commits']} commits ({conflicts['files']} files)"),
        ("if deferred", f"{deferred['days_behind']:g} days (were the {doc['held_commits']} held commits deferred)"),
        ("counted", "landed, or decided by a person" + (f" or by a configured rule: {rules}" if rules else "")
         + f"; {doc['rule']}"),
    ]


def is_merge_ledger(ledger: Ledger) -> bool:
    """A merge fork's ledger lists upstream from the original fork point: its merge base is listed."""
    return any(e.commit.sha == ledger.fork_point for e in ledger.entries)


def headline(ledger: Ledger, *, threshold: float = 0.95, merging: bool | None = None,
             fork_point_date: int | None = None,
             conflicts: Iterable[tuple[str, str]] | None = None) -> Headline:
    """The headline of `ledger`.

    `threshold`: `[ledger] infer_threshold`. `merging`: the fork merges upstream (default: read
    from the ledger). `fork_point_date`: the fork point's date, where no commit has moved the
    point (default: the ledger's point when it is the fork point, else the oldest upstream
    commit's). `conflicts`: the open conflicts kept for a person, as (upstream sha, path)."""
    entries = ledger.entries
    merging = is_merge_ledger(ledger) if merging is None else merging
    standings = [standing_of(e) for e in entries]
    moved = [s.moves_point for s in standings]
    or_held = [s.moves_point or s is Standing.HELD for s in standings]
    base = _fork_point_at(ledger, fork_point_date)
    cut = _point(entries, moved, threshold, merging, ledger.fork_point)
    point = base if cut is None else PointInTime(entries[cut].commit.sha, entries[cut].commit.date)
    cut_held = _point(entries, or_held, threshold, merging, ledger.fork_point)
    if_deferred = base if cut_held is None else PointInTime(entries[cut_held].commit.sha, entries[cut_held].commit.date)
    open_idx = [i for i, s in enumerate(standings) if not s.moves_point]
    oldest = min(open_idx, key=lambda i: (entries[i].commit.date, i), default=None)
    tip = ledger.upstream_tip
    open_shas = {entries[i].commit.sha for i in open_idx}
    commits: int | None = None
    files: int | None = None
    if conflicts is not None:
        kept = {(sha, path) for sha, path in conflicts if sha in open_shas}
        commits, files = len({sha for sha, _ in kept}), len(kept)
    rules = Counter(rule_of(e) for e, s in zip(entries, standings) if s is Standing.RULE)
    how = ("merge base and what is landed or decided right after it" if merging else
           f"inferred: the newest upstream commit with {threshold:.0%} of the commits up to it landed or decided")
    return Headline(
        upstream_tip=tip,
        point=point,
        rule=how,
        days_behind=_days(tip.date, point.date),
        open_commits=len(open_idx),
        held=sum(1 for s in standings if s is Standing.HELD),
        backlog=sum(1 for i in open_idx if cut is not None and i <= cut),
        oldest_open=None if oldest is None else PointInTime(entries[oldest].commit.sha, entries[oldest].commit.date),
        oldest_open_days=None if oldest is None else _days(tip.date, entries[oldest].commit.date),
        conflict_commits=commits,
        conflict_files=files,
        if_deferred=if_deferred,
        if_deferred_days=_days(tip.date, if_deferred.date),
        rules=tuple(sorted(rules.items())),
    )


def _fork_point_at(ledger: Ledger, given: int | None) -> PointInTime:
    if given is not None:
        return PointInTime(ledger.fork_point, given)
    if ledger.ingestion_point.sha == ledger.fork_point:
        return ledger.ingestion_point
    first = ledger.entries[0].commit.date if ledger.entries else ledger.upstream_tip.date
    return PointInTime(ledger.fork_point, first)


def _point(entries: Sequence[LedgerEntry], moved: Sequence[bool], threshold: float, merging: bool,
           fork_point: Sha) -> int | None:
    """The index of the ingestion point in `entries`, or None (the fork point)."""
    if merging:  # the merge base and what is decided right after it, never before the merge base
        best: int | None = None
        for i, ok in enumerate(moved):
            if not ok:
                break
            best = i
        base = next((i for i, e in enumerate(entries) if e.commit.sha == fork_point), None)
        if base is not None and (best is None or best < base):
            return base
        return best
    best = None
    handled = 0
    for i, ok in enumerate(moved):
        if ok:
            handled += 1
            if handled >= threshold * (i + 1):
                best = i
    return best
