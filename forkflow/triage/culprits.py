"""Culprits of red trunk tests: a pass/fail bisection with the test's own suite command.

`bisect_test` bisects one test of one suite between a good and a bad fork commit, first over
the landing units and then inside a guilty bundle (`forkflow.bisect.workflow.bisect_fork` in
pass/fail mode, each failure rerun so that a flaky test misleads nobody), and stores the
result under `red_test_metric(suite, test)`.  `bisect_red` does that for every test red on
trunk now, over the range from its last green run to its first red one; `forkflow trunk` then
reads the stored result (`forkflow.triage.trunk.with_culprits`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from forkflow.bisect.bisector import Mode, Reporter, Status
from forkflow.bisect.testprobe import SuiteTestProbe
from forkflow.bisect.verdict import VerdictPolicy
from forkflow.bisect.workflow import BisectReport, bisect_fork
from forkflow.errors import UserError
from forkflow.tiers.tiers import ReportFormat, Suite
from forkflow.triage.models import FailureKind
from forkflow.triage.triage import Triager
from forkflow.triage.trunk import RedItem, red_test_metric, trunk_health


def find_suite(t: Triager, test: str, suite: str | None = None) -> Suite:
    """The suite that runs `test`: the one named, else the one whose stored runs have it."""
    suites = {s.name: s for s in t.suites}
    if suite is not None:
        if suite not in suites:
            raise UserError(f"no suite {suite!r} in forkflow.toml (suites: {', '.join(sorted(suites)) or 'none'});"
                            " pass --suite with one of them")
        return suites[suite]
    found = [n for n in t.journal.suites_of_test(test) if n in suites]
    if len(found) == 1:
        return suites[found[0]]
    if not found:
        raise UserError(f"no stored run has a test {test!r}; pass the test id as `forkflow trunk --json` "
                        "shows it, and --suite NAME")
    raise UserError(f"test {test!r} is in suites {', '.join(found)}; pass --suite NAME")


def bisect_test(t: Triager, suite: Suite, test: str, good: str, bad: str, *,
                policy: VerdictPolicy = VerdictPolicy(), parallel: int = 1,
                reporter: Reporter | None = None) -> tuple[BisectReport, int]:
    """Bisect where `test` of `suite` turned red between `good` and `bad`; store it; (report, id)."""
    if suite.report is ReportFormat.METRICS and test != f"[{suite.name}]":
        raise UserError(f"suite {suite.name!r} reports metrics, not tests; bisect the metric with "
                        f"`forkflow bisect --metric {test}`")
    probe = SuiteTestProbe(t.repo, suite, test)
    try:
        report = bisect_fork(t.repo, red_test_metric(suite.name, test), good, bad, probe, reporter,
                             mode=Mode.PASS_FAIL, policy=policy, parallel=parallel)
    finally:
        probe.close()
    doc = report.to_dict() | {"suite": suite.name, "test": test}
    return report, t.journal.bisection_done(doc)


@dataclass(frozen=True, slots=True)
class RedBisection:
    """What `forkflow trunk --bisect` did about one red test."""

    item: RedItem
    bisected: bool
    reason: str                        # why not, or the bisection's one-line message
    bisection_id: int | None = None
    status: Status | None = None
    report: BisectReport | None = None

    def to_dict(self) -> dict[str, Any]:
        f = self.item.failure
        return {"test": f.test, "suite": f.job, "good": self.item.last_green_rev, "bad": self.item.since_rev,
                "bisected": self.bisected, "reason": self.reason, "bisection": self.bisection_id,
                "status": self.status.value if self.status else None,
                "culprit": self.report.to_dict()["culprit"] if self.report else None}


def _why_not(item: RedItem, again: bool) -> str | None:
    """Why a red test is not bisected, or None when it should be."""
    if item.failure.signature.kind is FailureKind.INFRA:
        return "a runner fault, not a code change: nothing to bisect"
    if item.flaky is not None:
        return f"known flaky ({item.flaky}): no culprit to hunt"
    if item.last_green_rev is not None and item.last_green_rev == item.since_rev:
        return (f"it passed and failed at {item.since_rev[:12]} itself: flaky there, no range to bisect")
    if item.last_green_rev is None:
        return ("no green run in the stored history; bisect it by hand: forkflow bisect --test "
                f"'{item.failure.test}' --suite {item.failure.job} --good A --bad {item.since_rev[:12]}")
    if item.bisection is not None and not again:
        return f"already bisected (bisection {item.bisection.id}: {item.bisection.status}); --again redoes it"
    return None


def bisect_red(t: Triager, tests: Sequence[str] = (), *, again: bool = False,
               policy: VerdictPolicy = VerdictPolicy(), parallel: int = 1,
               reporter: Reporter | None = None,
               on_start: Callable[[RedItem], None] | None = None) -> list[RedBisection]:
    """Bisect each test red on trunk now (or only `tests`), from its last green to its first red run."""
    items = [i for i in trunk_health(t) if not tests or i.failure.test in tests]
    missing = sorted(set(tests) - {i.failure.test for i in items})
    if missing:
        raise UserError(f"test {missing[0]!r} is not red on fork main now; see `forkflow trunk` for what is")
    suites = {s.name: s for s in t.suites}
    out = []
    for item in items:
        why = _why_not(item, again)
        suite = suites.get(item.failure.job)
        if why is None and suite is None:
            why = f"suite {item.failure.job!r} is no longer in forkflow.toml"
        if why is not None or suite is None:
            out.append(RedBisection(item, False, why or ""))
            continue
        assert item.last_green_rev is not None
        if on_start is not None:
            on_start(item)
        try:
            report, bid = bisect_test(t, suite, item.failure.test, item.last_green_rev, item.since_rev,
                                      policy=policy, parallel=parallel, reporter=reporter)
        except UserError as e:  # the range no longer resolves (history rewritten): say so, go on
            out.append(RedBisection(item, False, str(e)))
            continue
        out.append(RedBisection(item, True, report.message, bid, report.status, report))
    return out
