"""`SuiteTestProbe`: pass/fail of one test, run by its own suite's command, at any commit.

The suite comes from `[[suite]]` in forkflow.toml (`forkflow.tiers.tiers.Suite`).  At each
commit the probe runs the suite's command in a work tree of that commit, with `{tests}`
narrowed to the one test where the suite supports it (the node id a rerun would use), and
reads the test's outcome from the suite's own report.  A test that is not in the report
(renamed, not there yet) makes the commit untestable; a run that left no report is a crash,
retried by the bisector and skipped when it keeps crashing; exit 125 is a build break, as
with `git bisect run`.  A suite's whole-suite failure (test id `[suite]`) passes when the
command exits 0 with a readable report.
"""
from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

from forkflow.bisect.probes import UNTESTABLE_RC, Measurement, MeasureStatus, Worktrees
from forkflow.git.repo import Repo
from forkflow.models import Sha
from forkflow.process import run_shell
from forkflow.tiers.reports import ParsedReport, TestOutcome, parse_report
from forkflow.tiers.selection import node_id
from forkflow.tiers.tiers import ReportFormat, Suite


def suite_command(suite: Suite, test: str, report: str, artifacts: str) -> str:
    """The suite's command with its placeholders filled, narrowed to `test` where it can be."""
    whole = test == f"[{suite.name}]" or not suite.can_select_tests
    return suite.command_for(report, artifacts, None if whole else shlex.quote(node_id(test)))


def outcome_of_test(suite: Suite, test: str, report: ParsedReport, rc: int, tail: str) -> Measurement:
    """Whether `test` passed in one run of its suite.  [pure]"""
    if rc == UNTESTABLE_RC:
        return Measurement(MeasureStatus.UNTESTABLE, detail=f"exit 125: {tail}")
    if test == f"[{suite.name}]":
        return Measurement(MeasureStatus.OK, passed=rc == 0 and not report.problem,
                           detail=f"exit {rc}: {report.problem or tail}")
    found = [r for r in report.results if r.test_id == test]
    if found:
        bad = any(r.outcome in (TestOutcome.FAIL, TestOutcome.ERROR) for r in found)
        return Measurement(MeasureStatus.OK, passed=not bad, detail=f"exit {rc}: {found[0].outcome.value}")
    if not report.exists or not report.results:
        return Measurement(MeasureStatus.ERROR, detail=f"exit {rc}: {report.problem or 'no report'}; {tail}")
    return Measurement(MeasureStatus.UNTESTABLE, detail=f"test {test!r} is not in the suite's report here")


class SuiteTestProbe:
    """Measures one test of one suite at a commit: passed or failed (see the module docstring)."""

    def __init__(self, repo: Repo, suite: Suite, test: str) -> None:
        if suite.report is ReportFormat.METRICS and test != f"[{suite.name}]":
            raise ValueError("metrics suites have no per-test outcome; bisect their metric instead")
        self.repo = repo
        self.suite = suite
        self.test = test
        self.trees = Worktrees(repo)

    def measure(self, rev: Sha) -> Measurement:
        tree = self.trees.get(rev)
        if tree is None:
            return Measurement(MeasureStatus.UNTESTABLE, detail=f"cannot check out {rev[:12]}")
        work = Path(tempfile.mkdtemp(prefix="run-", dir=self.trees.root))
        report = work / self.suite.report_file
        artifacts = work / "artifacts"
        artifacts.mkdir()
        env = {**os.environ, **self.suite.job_env(rev, str(report), str(artifacts))}
        command = suite_command(self.suite, self.test, str(report), str(artifacts))
        done = run_shell(command, timeout=self.suite.timeout_s, cwd=tree, env=env)
        if done.timed_out or done.rc is None:
            return Measurement(MeasureStatus.ERROR, detail=f"timed out after {self.suite.timeout_s:g} s")
        stdout, stderr = done.text()
        tail = (stderr.strip() or stdout.strip()).splitlines()[-1:] or [""]
        return outcome_of_test(self.suite, self.test, parse_report(self.suite.report.value, report),
                            done.rc, tail[0][:200])

    def close(self) -> None:
        self.trees.close()
