"""Values of a replay, the window's checks and the summary of its steps.  [pure]

A replay asks, for each step t of a window: where was the fork (its own record), and where
would it have been had forkflow run since the first step?  By default forkflow's state carries
from step to step: the fork's real new commits go on top of what forkflow had landed (see
`replay/carry.py`); with `independent`, each step starts from the fork as it really was at t.
"""
from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from typing import Any

from forkflow.errors import UserError

DAY = 86_400
_EVERY = re.compile(r"^\s*(\d+)?\s*(d|day|days|w|week|weeks|h|hour|hours)\s*$", re.IGNORECASE)
_UNITS = {"h": 3_600, "d": DAY, "w": 7 * DAY}
DEFAULT_GATE_NOTE = "no gate command: merge-ability only (no tests ran); pass --gate CMD to test each unit"


def parse_every(text: str) -> int:
    """`week`, `2w`, `3 days`, `12h` -> seconds; a UserError for anything else."""
    m = _EVERY.match(text)
    count = int(m.group(1)) if m and m.group(1) else 1
    if m is None or count < 1:
        raise UserError(f"--every {text!r} is not a duration; use day, week, 2w, 3d or 12h")
    return count * _UNITS[m.group(2)[0].lower()]


def parse_day(text: str, flag: str) -> int:
    """A `YYYY-MM-DD` date (or an ISO time) as unix seconds; a day means its end, 23:59:59 UTC."""
    try:
        if len(text) == 10:
            d = date.fromisoformat(text)
            return int(datetime(d.year, d.month, d.day, tzinfo=timezone.utc).timestamp()) + DAY - 1
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return int((t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp())
    except ValueError:
        raise UserError(f"{flag} {text!r} is not a date; use YYYY-MM-DD") from None


def step_times(since: int, until: int, every: int, *, now: int, fork_point_date: int) -> list[int]:
    """The times of the steps, since..until inclusive, or a UserError naming the bad bound."""
    if since > until:
        raise UserError(f"--since {iso_day(since)} is after --until {iso_day(until)}; swap them")
    if until > now:
        raise UserError(f"--until {iso_day(until)} is in the future (today is {iso_day(now)}); "
                        "pass a date up to today")
    if since < fork_point_date:
        raise UserError(f"--since {iso_day(since)} is before the fork point ({iso_day(fork_point_date)}); "
                        "pass a later date")
    out = list(range(since, until + 1, every))
    return out


def iso_day(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).date().isoformat()


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class State:
    """A fork's standing against upstream: what `forkflow status` says of it."""

    days_behind: float
    backlog: int
    pending: int
    open: int = 0  # not taken yet: pending + deferred (the backlog counts only those before the point)
    ingestion_point: str = ""
    inferred: bool = True
    # the rest of `status`'s headline (forkflow/ledger/headline.py), beside days behind
    held: int = 0  # commits forkflow holds for a person (conflicts, chains behind them, L1 failures)
    oldest_open_days: float | None = None  # the oldest commit not landed or decided, counted to upstream's tip
    conflict_commits: int | None = None  # commits with an open conflict (None: not known)
    conflict_files: int | None = None
    if_deferred_days: float | None = None  # days behind, were the held commits deferred


@dataclass(frozen=True, slots=True)
class Landed:
    """An upstream commit forkflow would land at a step, and what the fork really did with it."""

    sha: str
    subject: str
    outcome: str  # applied | resolved
    resolver: str = ""  # for resolved: trivial | recorded | agent
    fork_sha: str = ""  # the fork commit that really took it ("" = not taken as of the fork's current tip)
    taken_at: int = 0  # that commit's date
    same: str = ""  # patch-id | post-image | differs | conflict | "" (not taken)


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a replay: the real state at t, forkflow's work on it, the state after."""

    at: int
    fork_sha: str
    upstream_sha: str
    fork_date: int
    upstream_date: int
    real: State
    after: State
    landed: tuple[Landed, ...] = ()
    skipped: int = 0  # already applied: nothing to pick
    deferred: int = 0  # conflicts no resolver settled, or L1 failures
    waiting: int = 0  # chain links behind a deferred one
    units: int = 0
    seconds: float = 0.0
    cached: bool = False
    notes: tuple[str, ...] = ()
    # forkflow's fork after the step, measured by the rule the real state is measured by (the
    # ingestion point inferred from picks alone, deferrals not counted): like with like
    same_rule: State | None = None
    tip: str = ""  # forkflow's fork branch after the step (carried into the next one)
    fork_applied: int = 0  # carried: the fork's real commits of the step put on forkflow's state
    fork_forced: int = 0  # ... of them, ones whose conflicts were settled to the fork's own version
    fork_left_out: int = 0  # ... the fork's picks of commits forkflow had landed already
    # not taken by forkflow's branch at or before the real fork's own ingestion point: the real
    # backlog's twin (the same commits counted on both sides); -1 for a step stored without it
    backlog_at_real_point: int = -1
    stopped: str = ""  # why forkflow's ingest of the step stopped early (L1 failed on the fork tip)

    @property
    def after_same_rule(self) -> State:
        return self.same_rule or self.after

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["at_iso"] = iso(self.at)
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Step:
        d = {k: v for k, v in d.items() if k != "at_iso"}
        d["real"] = State(**d["real"])
        d["after"] = State(**d["after"])
        d["same_rule"] = State(**d["same_rule"]) if d.get("same_rule") else None
        d["landed"] = tuple(Landed(**x) for x in d["landed"])
        d["notes"] = tuple(d["notes"])
        return Step(**d)


@dataclass(frozen=True, slots=True)
class Summary:
    steps: int
    landed_commits: int  # distinct upstream commits forkflow would land (first step each)
    lag_saved_median: float | None
    lag_saved_p90: float | None
    lag_saved_count: int  # of them, taken by the fork within the window (lag known)
    not_taken: int  # landed by forkflow, not taken by the fork as of its current tip
    clean_compared: int  # landed cleanly and taken by the fork
    clean_same: int
    clean_kinds: dict[str, int]  # patch-id | post-image | differs | conflict (the fork resolved it on its base)
    resolved_compared: int  # the fork's hand-resolved picks forkflow also faced
    resolved_same: int
    resolved_by_forkflow: int  # ... of them, ones forkflow's resolvers settled (the rest it defers)
    max_days_behind_after: float
    steps_backlog_not_larger: int  # steps where forkflow's backlog <= the fork's real one
    # the same two, forkflow's fork measured by the real one's rule (see Step.same_rule)
    max_days_behind_same_rule: float = 0.0
    steps_backlog_not_larger_same_rule: int = 0
    steps_open_not_larger: int = 0  # steps where forkflow leaves no more commits untaken than the fork
    steps_backlog_at_real_point_not_larger: int = 0  # ... no more untaken at or before the fork's own point

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Report:
    since: int
    until: int
    every: int
    gate: str  # the gate command, or "" for merge-ability only
    steps: tuple[Step, ...]
    summary: Summary
    resolved_picks: tuple[dict[str, Any], ...] = ()  # per hand-resolved fork pick: what forkflow did
    notes: tuple[str, ...] = ()
    wall_seconds: float = 0.0
    independent: bool = False  # steps from the real fork each, not from forkflow's carried branch

    def to_json(self) -> dict[str, Any]:
        return {"since": iso_day(self.since), "until": iso_day(self.until), "every_seconds": self.every,
                "gate": self.gate or None, "steps_from": "real fork" if self.independent else "carried", "steps": [s.to_json() for s in self.steps],
                "summary": self.summary.to_json(), "resolved_picks": list(self.resolved_picks),
                "notes": list(self.notes), "wall_seconds": round(self.wall_seconds, 1)}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0..1) by linear interpolation, None for no values."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def first_landings(steps: Sequence[Step]) -> dict[str, tuple[Step, Landed]]:
    """Each upstream commit forkflow would land, at the first step that lands it."""
    out: dict[str, tuple[Step, Landed]] = {}
    for step in sorted(steps, key=lambda s: s.at):
        for x in step.landed:
            out.setdefault(x.sha, (step, x))
    return out


@dataclass(frozen=True, slots=True)
class ResolvedPick:
    """A fork pick that conflicted on its own parent: the fork resolved it by hand."""

    fork_sha: str
    upstream: tuple[str, ...]
    forkflow: str  # same | differs | unresolved (forkflow defers it to a person)

    def to_json(self) -> dict[str, Any]:
        return {"fork_sha": self.fork_sha, "upstream": list(self.upstream), "forkflow": self.forkflow}


def summarize(steps: Sequence[Step], resolved: Sequence[ResolvedPick] = ()) -> Summary:
    """Lag saved, agreement with the fork's own picks, and the goal checks, over all steps."""
    firsts = first_landings(steps)
    lags = [(x.taken_at - step.at) / DAY for step, x in firsts.values() if x.fork_sha and x.taken_at > step.at]
    compared = [x for _, x in firsts.values() if x.outcome == "applied" and x.fork_sha and x.same]
    return Summary(
        steps=len(steps),
        landed_commits=len(firsts),
        lag_saved_median=_round(statistics.median(lags)) if lags else None,
        lag_saved_p90=_round(percentile(lags, 0.9)),
        lag_saved_count=len(lags),
        not_taken=sum(1 for _, x in firsts.values() if not x.fork_sha),
        clean_compared=len(compared),
        clean_same=sum(1 for x in compared if x.same in ("patch-id", "post-image")),
        clean_kinds=dict(sorted(Counter(x.same for x in compared).items())),
        resolved_compared=len(resolved),
        resolved_same=sum(1 for r in resolved if r.forkflow == "same"),
        resolved_by_forkflow=sum(1 for r in resolved if r.forkflow != "unresolved"),
        max_days_behind_after=max((s.after.days_behind for s in steps), default=0.0),
        steps_backlog_not_larger=sum(1 for s in steps if s.after.backlog <= s.real.backlog),
        max_days_behind_same_rule=max((s.after_same_rule.days_behind for s in steps), default=0.0),
        steps_backlog_not_larger_same_rule=sum(1 for s in steps if s.after_same_rule.backlog <= s.real.backlog),
        steps_open_not_larger=sum(1 for s in steps if s.after.open <= s.real.open),
        steps_backlog_at_real_point_not_larger=sum(1 for s in steps
                                                   if 0 <= s.backlog_at_real_point <= s.real.backlog),
    )


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def every_text(seconds: int) -> str:
    if seconds % (7 * DAY) == 0:
        n = seconds // (7 * DAY)
        return "week" if n == 1 else f"{n} weeks"
    if seconds % DAY == 0:
        n = seconds // DAY
        return "day" if n == 1 else f"{n} days"
    return f"{seconds // 3600}h"
