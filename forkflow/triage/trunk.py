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
    """One fork commit's test evidence in one tier: every finished run at it merged (full runs,
    gate runs, their reruns), each test at its newest outcome there."""

    id: int                                  # the newest run at this commit
    rev: str
    tier: str
    failures: tuple[Failure, ...]            # tests whose newest outcome here failed
    passed: frozenset[tuple[str, str]] = frozenset()   # (suite, test) whose newest outcome passed
    red_by: tuple[tuple[tuple[str, str], int], ...] = ()  # (suite, test) -> the run that made it red

    def tested(self) -> set[tuple[str, str]]:
        return {(f.job, f.test) for f in self.failures} | set(self.passed)


# A known-flaky failure red in this many trunk commits in a row is no longer taken for flaky:
# the evidence changed (a 30% flaky test does that once in about 400 nightlies).
FLAKY_STREAK_LIMIT = 5


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
    red_run_id: int = 0         # the run that made the newest red commit red
    red_rev: str = ""           # that commit (the tip, when the tip ran the test)
    flaky: str | None = None    # known flaky, and why (forkflow.triage.memory): nobody to hunt

    @property
    def bisectable(self) -> bool:
        """Can `forkflow trunk --bisect` search this failure's range?"""
        return (self.flaky is None and self.last_green_rev is not None
                and self.last_green_rev != self.since_rev
                and self.failure.signature.kind.value != "INFRA")

    def to_dict(self) -> dict[str, Any]:
        f = self.failure
        b = self.bisection
        return {"test": f.test, "suite": f.job, "tier": self.tier, "group": f.signature.key,
                "kind": f.signature.kind.value, "signature": f.signature.text,
                "since_run": self.since_run_id, "since_rev": self.since_rev,
                "runs_red": self.runs_red, "last_green_rev": self.last_green_rev,
                "red_run": self.red_run_id, "red_rev": self.red_rev, "flaky": self.flaky,
                "culprit": self.culprit,
                "culprit_detail": self.culprit_detail.to_dict() if self.culprit_detail else None,
                "bisection": None if b is None else {
                    "id": b.id, "status": b.status, "message": b.message, "confidence": b.confidence,
                    "rounds": b.rounds, "measurements": b.measurements}}


def red_streaks(runs: Sequence[TrunkRun]) -> list[RedItem]:
    """Every test whose newest outcome on trunk failed, with its streak of identical failures.  [pure]

    `runs` are one tier's trunk commits, newest first.  A commit where a test did not run (a
    narrowed gate run) says nothing about it: the streak goes on past it.  The last green commit
    is the newest older one where the test passed; a different failure there ends the streak
    with no green commit known.
    """
    out = []
    seen: set[tuple[str, str]] = set()
    tested = [r.tested() for r in runs]
    idents = [{(f.job, f.test, f.signature.key) for f in r.failures} for r in runs]
    for i, r in enumerate(runs):
        red_by = dict(r.red_by)
        for f in r.failures:
            tid = (f.job, f.test)
            if tid in seen:
                continue  # a newer commit ran it: that outcome is the truth
            ident = (f.job, f.test, f.signature.key)
            n, since, j = 1, i, i + 1
            while j < len(runs):
                if ident in idents[j]:
                    n, since = n + 1, j
                elif tid in tested[j]:
                    break
                j += 1
            green = runs[j].rev if j < len(runs) and tid in runs[j].passed else None
            since_red = dict(runs[since].red_by).get(tid, runs[since].id)
            out.append(RedItem(f, r.tier, since_red, runs[since].rev, n, green,
                               red_run_id=red_by.get(tid, r.id), red_rev=r.rev))
        seen |= tested[i]
    return sorted(out, key=lambda i: (-i.runs_red, i.failure.test))


def trunk_line(repo: Repo, branch: str, depth: int = 2000) -> list[str] | None:
    """The fork branch's first-parent commits, newest first; None when there is no such branch."""
    if not branch or repo.resolve(f"refs/heads/{branch}") is None:
        return None
    return repo.git("rev-list", "--first-parent", "-n", str(depth), f"refs/heads/{branch}").split()


def trunk_runs(journal: TriageJournal, tier: Tier, limit: int = 30,
               line: Sequence[str] | None = None) -> list[TrunkRun]:
    """One tier's trunk commits with what every finished run at them found, newest first.

    With `line` (the fork branch's first-parent commits, newest first) every run at one of them
    counts: full runs, L1 gate runs of the units that landed there and their reruns.  Without
    it, full runs of fork commits (no base) and their reruns.
    """
    from forkflow.triage.failures import failures_of_run

    done = (RunStatus.PASS, RunStatus.FAIL)
    runs = [r for r in journal.latest_runs(tier, limit * 20) if r.status in done]
    if line is not None:
        pos = {sha: n for n, sha in enumerate(line)}
        runs = [r for r in runs if r.rev in pos]
        order = sorted({r.rev for r in runs}, key=lambda rev: pos[rev])
    else:
        full = {r.id for r in runs if r.base is None and r.parent_run_id is None}
        runs = [r for r in runs if r.id in full or r.parent_run_id in full]
        order = list(dict.fromkeys(r.rev for r in sorted(runs, key=lambda r: -r.id)))
    order = order[:limit]
    by_rev: dict[str, list[tq.RunInfo]] = {}
    for r in sorted(runs, key=lambda r: r.id):
        by_rev.setdefault(r.rev, []).append(r)
    out = []
    for rev in order:
        state: dict[tuple[str, str], tuple[Failure | None, int]] = {}
        for r in by_rev[rev]:
            bad = {(f.job, f.test): f for f in failures_of_run(journal, r.id)}
            for o in journal.test_outcomes(r.id):
                tid = (o.suite, o.test_id)
                if tid in bad:
                    prev = state.get(tid)
                    state[tid] = (bad[tid], prev[1] if prev is not None and prev[0] is not None else r.id)
                elif o.outcome.value == "PASS":
                    state[tid] = (None, r.id)
        failures = tuple(f for f, _r in state.values() if f is not None)
        out.append(TrunkRun(by_rev[rev][-1].id, rev, tier.value, failures,
                            frozenset(t for t, (f, _r) in state.items() if f is None),
                            tuple((t, rid) for t, (f, rid) in state.items() if f is not None)))
    return out


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


def with_memory(t: Triager, items: list[RedItem]) -> list[RedItem]:
    """Each item marked when its failure is known flaky (forkflow.triage.memory), or when its
    stored bisection found it flaky; a streak of FLAKY_STREAK_LIMIT red commits clears that."""
    from forkflow.triage.memory import flaky_reasons

    known = flaky_reasons(t.journal, [(i.failure.test, i.failure.signature.key) for i in items],
                          limit=t.settings.history_runs, policy=t.settings.policy)
    out = []
    for i in items:
        why = known.get((i.failure.test, i.failure.signature.key))
        if why is None and i.bisection is not None and i.bisection.status in (Status.FLAKY, Status.NO_DIFFERENCE):
            # pass/fail: the failure did not come back where it was seen (no-difference: the test
            # passes at the first red commit), so it flipped there
            why = f"bisection {i.bisection.id} found it flaky: {i.bisection.message}"
        if why is not None and i.runs_red >= FLAKY_STREAK_LIMIT:
            why = None
        out.append(replace(i, flaky=why) if why is None else
                   replace(i, flaky=why, culprit=None, culprit_detail=None))
    return out


def trunk_health(t: Triager, limit: int = 30) -> list[RedItem]:
    """What is red on fork main now, per tier, with since-when, the run that made it red, whether
    it is known flaky, and the culprit."""
    line = trunk_line(t.repo, t.fork_branch)
    out: list[RedItem] = []
    for tier in (Tier.L1, Tier.L2):  # L3 runs are manual, not trunk health
        out += with_memory(t, with_culprits(t, red_streaks(trunk_runs(t.journal, tier, limit, line))))
    return out
