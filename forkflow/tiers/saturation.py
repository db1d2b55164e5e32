"""Saturation validation: a suite that silently did not run is a FAILURE, never a pass.

Pure.  `check_suite` looks at what one job left behind (`SuiteEvidence`) and returns every
`Finding`: a missing or empty or damaged report, fewer tests run than the inventory
(`expect_tests`) or markedly fewer than the suite's last green run, a non-zero exit with no
failing test, and the two independent counts disagreeing (the report's count against
forkflow's own count from the harness output), which is an INFRA alarm rather than a test
failure.  `removed_suites` catches a suite that ran in the tier's last green run but is gone
from forkflow.toml without being listed in `[validation] retired`.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


class Severity(str, enum.Enum):
    FAIL = "FAIL"
    INFRA = "INFRA"


class FindingKind(str, enum.Enum):
    DID_NOT_RUN = "did-not-run"
    NO_REPORT = "no-report"
    EMPTY_REPORT = "empty-report"
    DAMAGED_REPORT = "damaged-report"
    BELOW_INVENTORY = "below-inventory"
    SHRANK = "shrank"
    EXIT_CODE = "exit-code"
    COUNTS_DISAGREE = "counts-disagree"
    SUITE_REMOVED = "suite-removed"
    TIMEOUT = "timeout"
    PATH_DRIFT = "path-drift"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: FindingKind
    severity: Severity
    message: str


@dataclass(frozen=True, slots=True)
class SuiteEvidence:
    """What one job of a suite produced, as the saturation check needs it."""

    suite: str
    finished: bool              # the runner ran the command to its end (no runner fault)
    timed_out: bool
    returncode: int | None
    report_exists: bool
    report_problem: str         # from the parser: missing/empty/damaged; "" when fine
    reported_total: int         # tests (or metrics) the report lists
    reported_ran: int           # of those, not skipped
    reported_bad: int           # failed or errored
    own_count: int | None       # forkflow's own count from the output; None when unknown
    expect_tests: int | None    # the inventory; checked only when the whole suite ran
    narrowed: bool = False      # test selection ran only some tests
    expect_selected: int | None = None  # known tests in the selection, when narrowed
    last_green_ran: int | None = None   # tests run by the suite's last green full run
    shrink_tolerance: float = 0.1
    runner_message: str = ""
    deselected: int = 0         # tests the harness says it deselected (pytest -k / -m)


def _report_findings(ev: SuiteEvidence) -> list[Finding]:
    crashed = ev.returncode not in (0, None)
    hint = f" (exit code {ev.returncode}: it likely crashed before the first test)" if crashed else ""
    if ev.deselected and ev.reported_ran == 0:  # it ran, and its own selection left nothing
        hint = (f" (the output says {ev.deselected} deselected: the command's selection (-k, -m) left no "
                "test to run; fix the selection, or the tests it names)")
    if not ev.report_exists:
        return [Finding(FindingKind.NO_REPORT, Severity.FAIL, f"suite '{ev.suite}' wrote no report{hint}")]
    if ev.reported_total == 0 and ev.report_problem:
        kind = FindingKind.EMPTY_REPORT if "empty" in ev.report_problem or "no " in ev.report_problem \
            else FindingKind.DAMAGED_REPORT
        return [Finding(kind, Severity.FAIL, f"suite '{ev.suite}': {ev.report_problem}{hint}")]
    if ev.report_problem:
        return [Finding(FindingKind.DAMAGED_REPORT, Severity.FAIL, f"suite '{ev.suite}': {ev.report_problem}")]
    return []


def _count_findings(ev: SuiteEvidence) -> list[Finding]:
    out: list[Finding] = []
    tol = ev.shrink_tolerance
    if not ev.narrowed and ev.expect_tests is not None and ev.reported_ran < ev.expect_tests:
        out.append(Finding(FindingKind.BELOW_INVENTORY, Severity.FAIL,
                           f"suite '{ev.suite}' ran {ev.reported_ran} tests, fewer than the "
                           f"{ev.expect_tests} of its inventory (expect_tests)"))
    if not ev.narrowed and ev.last_green_ran and ev.reported_ran < ev.last_green_ran * (1 - tol):
        out.append(Finding(FindingKind.SHRANK, Severity.FAIL,
                           f"suite '{ev.suite}' ran {ev.reported_ran} tests, markedly fewer than "
                           f"the {ev.last_green_ran} of its last green run"))
    if ev.narrowed and ev.expect_selected and ev.reported_ran < ev.expect_selected * (1 - tol):
        out.append(Finding(FindingKind.SHRANK, Severity.FAIL,
                           f"suite '{ev.suite}' ran {ev.reported_ran} of the {ev.expect_selected} "
                           "selected tests"))
    if ev.own_count is not None and ev.own_count != ev.reported_total:
        out.append(Finding(FindingKind.COUNTS_DISAGREE, Severity.INFRA,
                           f"suite '{ev.suite}': the report lists {ev.reported_total} tests but the "
                           f"harness output counts {ev.own_count}; one collector is lying"))
    return out


def check_suite(ev: SuiteEvidence) -> list[Finding]:
    """Every reason not to trust this suite's result; empty when it ran whole and reported."""
    if not ev.finished:
        return [Finding(FindingKind.DID_NOT_RUN, Severity.INFRA,
                        f"suite '{ev.suite}' did not run: {ev.runner_message or 'runner fault'}")]
    out: list[Finding] = []
    if ev.timed_out:
        out.append(Finding(FindingKind.TIMEOUT, Severity.FAIL,
                           f"suite '{ev.suite}' timed out and was killed: {ev.runner_message}"))
    report = _report_findings(ev)
    out += report
    if not report:
        out += _count_findings(ev)
        if ev.returncode not in (0, None) and ev.reported_bad == 0 and not ev.timed_out:
            out.append(Finding(FindingKind.EXIT_CODE, Severity.FAIL,
                               f"suite '{ev.suite}' exited with code {ev.returncode} although its "
                               "report shows no failing test"))
    return out


def removed_suites(configured: Iterable[str], last_green: Iterable[str],
                   retired: Iterable[str]) -> list[Finding]:
    """Suites of the tier's last green run that forkflow.toml no longer has, unless retired."""
    gone = sorted(set(last_green) - set(configured) - set(retired))
    return [Finding(FindingKind.SUITE_REMOVED, Severity.FAIL,
                    f"suite '{name}' ran in this tier's last green run but is no longer in "
                    "forkflow.toml; restore it, or list it in [validation] retired = [...] if the "
                    "removal is intended") for name in gone]


def path_drift(suite: str, paths: Sequence[str], test_files: Iterable[str], changed: Iterable[str],
               matches: Callable[[str, Sequence[str]], bool]) -> list[Finding]:
    """A suite that selection skipped for a change, while its `paths` have drifted from its own
    test files: one of its test files changed, or its paths match none of them (a change to its
    tests can never select it).  `test_files` are the files of the tests it is known to have;
    `matches` is selection's glob test.  Silence by selection is a failure like any other."""
    if not paths:
        return []
    own = sorted(set(test_files))
    touched = [p for p in sorted(set(changed)) if p in own]
    if touched:
        return [Finding(FindingKind.PATH_DRIFT, Severity.FAIL,
                        f"suite '{suite}' was not selected although its own test file {touched[0]} changed: "
                        f"its paths ({', '.join(paths)}) do not cover its tests; add their folder to paths")]
    if own and not any(matches(f, paths) for f in own):
        return [Finding(FindingKind.PATH_DRIFT, Severity.FAIL,
                        f"suite '{suite}' was not selected, and its paths ({', '.join(paths)}) match none of "
                        f"its {len(own)} test files (e.g. {own[0]}): a change to its tests never selects "
                        "it; add their folder to paths")]
    return []
