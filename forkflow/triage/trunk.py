"""Trunk health: what is red on fork main now, since when, and the culprit where one is known.

A red test's culprit comes from its stored pass/fail bisection over the range from the last
green run to the first red one (`forkflow trunk --bisect`, see `forkflow.triage.culprits`):
the fork commit, its landing unit, and the upstream commit (down to one inside a bundle) with
its PR.  Without one, a range of exactly one commit names that commit; a bisection that found
the failure flaky, or no difference between the ends, names nobody.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from forkflow.bisect.bisector import Status
from forkflow.regress.records import BisectionRecord
from forkflow.tiers import records as tq
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.triage.models import Failure

if TYPE_CHECKING:
    from forkflow.git.repo import Repo
    from forkflow.triage.journal import TriageJournal
    from forkflow.triage.triage import Triager


def red_test_metric(suite: str, test: str) -> str:
    """The name a red test's pass/fail bisection is stored under.  [pure]"""
    return f"test:{suite}:{test}"


@dataclass(frozen=True, slots=True)
class TrunkCulprit:
    """Who turned a test red: the fork commit (its landing unit), the upstream commit, its PR."""

    fork_sha: str
    unit_subject: str
    upstream_sha: str | None = None
    upstream_subject: str = ""
    pr: int | None = None
    source: str = "bisection"     # "bisection" | "single-commit" (the only commit in the range)
    bisection_id: int | None = None
    confidence: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"fork_commit": self.fork_sha, "landing_unit": self.fork_sha,
                "unit_subject": self.unit_subject, "upstream_commit": self.upstream_sha,
                "upstream_subject": self.upstream_subject, "pr": self.pr, "source": self.source,
                "bisection": self.bisection_id, "confidence": self.confidence}

    @property
    def line(self) -> str:
        """One line for people: `abc123456789 Cherry-pick 3 ... -> upstream def456789012 Fix x (PR #12)`."""
        text = f"{self.fork_sha[:12]} {self.unit_subject}".rstrip()
        if self.upstream_sha and self.upstream_subject != self.unit_subject:
            text += f" -> upstream {self.upstream_sha[:12]} {self.upstream_subject}".rstrip()
        elif self.upstream_sha:
            text += f" (upstream {self.upstream_sha[:12]})"
        return text + (f" (PR #{self.pr})" if self.pr and f"#{self.pr}" not in text else "")


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
    culprit: str | None = None  # "sha subject (upstream sha, PR #n)" when known
    culprit_detail: TrunkCulprit | None = None
    bisection: BisectionRecord | None = None  # the stored bisection of this streak's range

    def to_dict(self) -> dict[str, Any]:
        f = self.failure
        b = self.bisection
        return {"test": f.test, "suite": f.job, "tier": self.tier, "group": f.signature.key,
                "kind": f.signature.kind.value, "signature": f.signature.text,
                "since_run": self.since_run_id, "since_rev": self.since_rev,
                "runs_red": self.runs_red, "last_green_rev": self.last_green_rev,
                "culprit": self.culprit,
                "culprit_detail": self.culprit_detail.to_dict() if self.culprit_detail else None,
                "bisection": None if b is None else {
                    "id": b.id, "status": b.status, "message": b.message, "confidence": b.confidence,
                    "rounds": b.rounds, "measurements": b.measurements}}


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


def trunk_runs(journal: TriageJournal, tier: Tier, limit: int = 30) -> list[TrunkRun]:
    """Finished full runs of fork commits (no base, no rerun), newest first."""
    from forkflow.triage.triage import failures_of_run

    runs = [r for r in journal.latest_runs(tier, limit * 3)
            if r.base is None and r.parent_run_id is None and r.status in (RunStatus.PASS, RunStatus.FAIL)]
    return [TrunkRun(r.id, r.rev, tier.value, tuple(failures_of_run(journal, r.id)))
            for r in runs[:limit]]


def _single_commit(repo: Repo, item: RedItem) -> TrunkCulprit | None:
    """The one commit between the last green and the first red run, when there is only one."""
    if item.last_green_rev is None or item.last_green_rev == item.since_rev:
        return None
    commits = repo.log(f"{item.last_green_rev}..{item.since_rev}", first_parent=True)
    if len(commits) == 1:
        return TrunkCulprit(commits[0].sha, commits[0].subject, source="single-commit")
    return None


def _from_bisection(repo: Repo, b: BisectionRecord) -> TrunkCulprit | None:
    if b.status != Status.FOUND or not b.culprit_fork_sha:
        return None
    fork_sha = b.culprit_fork_sha
    unit = repo.log("-1", fork_sha, reverse=False) if repo.resolve(fork_sha) else []
    unit_subject = unit[0].subject if unit else b.subject
    return TrunkCulprit(fork_sha, unit_subject, b.culprit_upstream_sha,
                        b.subject if b.culprit_upstream_sha else "", b.culprit_pr, "bisection", b.id, b.confidence)


def with_culprits(t: Triager, items: list[RedItem]) -> list[RedItem]:
    """Each item with its stored bisection and culprit (see the module docstring)."""
    stored = [None if i.last_green_rev is None else t.journal.latest_bisection(
        red_test_metric(i.failure.job, i.failure.test), i.last_green_rev, i.since_rev) for i in items]
    out = []
    for i, b in zip(items, stored):
        c = _from_bisection(t.repo, b) if b is not None else _single_commit(t.repo, i)
        out.append(replace(i, culprit=c.line if c else None, culprit_detail=c, bisection=b))
    return out


def trunk_health(t: Triager, limit: int = 30) -> list[RedItem]:
    """What is red on fork main now, per tier, with since-when and culprit."""
    out: list[RedItem] = []
    for tier in (Tier.L1, Tier.L2):  # L3 runs are manual, not trunk health
        out += with_culprits(t, red_streaks(trunk_runs(t.journal, tier, limit)))
    return out
