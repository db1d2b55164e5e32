"""Trunk health: what is red on fork main now, since when, and the culprit where one is known."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forkflow.context import Context
from forkflow.tiers import queries as tq
from forkflow.tiers.tiers import Tier
from forkflow.triage.models import Failure


@dataclass(frozen=True, slots=True)
class TrunkRun:
    id: int
    rev: str
    tier: str
    failures: tuple[Failure, ...]


@dataclass(frozen=True, slots=True)
class RedItem:
    failure: Failure            # as seen in the newest run
    tier: str
    since_run_id: int           # the first run of the current red streak
    since_rev: str
    runs_red: int
    last_green_rev: str | None  # the run before the streak, when history reaches it
    culprit: str | None = None  # "sha subject" when known

    def to_dict(self) -> dict[str, Any]:
        f = self.failure
        return {"test": f.test, "suite": f.job, "tier": self.tier, "group": f.signature.key,
                "kind": f.signature.kind.value, "signature": f.signature.text,
                "since_run": self.since_run_id, "since_rev": self.since_rev,
                "runs_red": self.runs_red, "last_green_rev": self.last_green_rev,
                "culprit": self.culprit}


def red_streaks(runs: Sequence[TrunkRun]) -> list[RedItem]:
    """Failures of the newest run, each with its streak of identical failures.  [pure]

    `runs` are one tier's trunk runs, newest first.
    """
    if not runs:
        return []
    sets = [{(f.test, f.signature.key) for f in r.failures} for r in runs]
    out = []
    for f in runs[0].failures:
        ident = (f.test, f.signature.key)
        n = 1
        while n < len(runs) and ident in sets[n]:
            n += 1
        green = runs[n].rev if n < len(runs) else None
        out.append(RedItem(f, runs[0].tier, runs[n - 1].id, runs[n - 1].rev, n, green))
    return sorted(out, key=lambda i: (-i.runs_red, i.failure.test))


def trunk_runs(ctx: Context, tier: Tier, limit: int = 30) -> list[TrunkRun]:
    """Finished full runs of fork commits (no base, no rerun), newest first."""
    from forkflow.triage.triage import failures_of_run

    with ctx.store.session_scope() as s:
        runs = [r for r in tq.latest_runs(s, ctx.fork_id, tier, limit=limit * 3)
                if r.base is None and r.parent_run_id is None and r.status in (tq.PASS, tq.FAIL)]
    return [TrunkRun(r.id, r.rev, tier.value, tuple(failures_of_run(ctx, r.id)))
            for r in runs[:limit]]


def _culprit(ctx: Context, item: RedItem) -> str | None:
    """The one commit between the last green and the first red run, when there is only one."""
    if item.last_green_rev is None or item.last_green_rev == item.since_rev:
        return None
    commits = ctx.repo.log(f"{item.last_green_rev}..{item.since_rev}", first_parent=True)
    if len(commits) == 1:
        return f"{commits[0].sha[:12]} {commits[0].subject}"
    return None


def with_culprits(ctx: Context, items: list[RedItem]) -> list[RedItem]:
    return [RedItem(i.failure, i.tier, i.since_run_id, i.since_rev, i.runs_red, i.last_green_rev,
                    _culprit(ctx, i)) for i in items]


def trunk_health(ctx: Context, limit: int = 30) -> list[RedItem]:
    """What is red on fork main now, per tier, with since-when and culprit."""
    out: list[RedItem] = []
    for tier in (Tier.L1, Tier.L2):  # L3 runs are manual, not trunk health
        out += with_culprits(ctx, red_streaks(trunk_runs(ctx, tier, limit)))
    return out
