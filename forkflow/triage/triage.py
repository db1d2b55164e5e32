"""Triage a stored validation run: signatures, evidence from trunk, reruns, verdicts.

The edge around the pure core (`signature`, `classify`): it reads runs, jobs and per-test
outcomes through a triage journal (`forkflow.triage.journal`), streams job logs from disk,
reruns failed tests through the `Triager`'s rerunner (`tiers_rerunner`: validation's
`rerun_tests`), and records failures, groups and verdicts through the journal.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forkflow.config import Config, config_error
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.tiers import records as tq
from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.tiers import RunStatus, Suite
from forkflow.triage.classify import Evidence, FlakyPolicy, HistoryPoint, classify
from forkflow.triage.group import group_failures
from forkflow.triage.journal import Rerunner, TriageJournal
from forkflow.triage.failures import failures_of_run as failures_of_run  # re-exported: callers read it here
from forkflow.triage.models import Classification, Diagnosis, FailureGroup

if TYPE_CHECKING:
    from forkflow.tiers.validate import Validator

BAD = (TestOutcome.FAIL, TestOutcome.ERROR)


@dataclass(frozen=True, slots=True)
class TriageSettings:
    reruns: int = 3              # automatic reruns of each failure that is not INFRA/BROKEN_TRUNK
    min_clean_reruns: int = 3
    history_runs: int = 50       # earlier runs of the tier searched for flips
    close_after: int = 3         # green nightlies before a tracking issue closes
    sink: str = "markdown"

    @property
    def policy(self) -> FlakyPolicy:
        return FlakyPolicy(min_clean_reruns=self.min_clean_reruns)


def load_settings(config: Config) -> TriageSettings:
    """`[triage]` of forkflow.toml; bad values name their key and line."""
    raw = config.section("triage")
    text = config.text
    values: dict[str, Any] = {}
    for key in ("reruns", "min_clean_reruns", "history_runs", "close_after"):
        if key in raw:
            v = raw[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or (key == "close_after" and v < 1):
                raise config_error(config.path, text, f"triage.{key}",
                                   f"must be a {'positive' if key == 'close_after' else 'non-negative'} "
                                   f"integer, not {v!r}")
            values[key] = v
    if "sink" in raw:
        if raw["sink"] not in ("markdown", "github", "gitlab"):
            raise config_error(config.path, text, "triage.sink",
                               f"must be \"markdown\", \"github\" or \"gitlab\", not {raw['sink']!r}")
        values["sink"] = raw["sink"]
    return TriageSettings(**values)


@dataclass(frozen=True, slots=True)
class Triager:
    """What the triage stages work with: the fork's repository, its suites, a triage journal, the
    `[triage]` settings, and how failed tests are rerun (None: no reruns)."""

    repo: Repo
    suites: tuple[Suite, ...]
    journal: TriageJournal
    settings: TriageSettings = TriageSettings()
    rerunner: Rerunner | None = None
    fork_branch: str = ""        # `[fork] branch`: trunk health reads every run on its commits


def tiers_rerunner(validator: Validator) -> Rerunner:
    """Rerun through validation (`rerun_tests`), then read the rerun's outcomes."""
    from forkflow.tiers.validate import rerun_tests

    def rerun(run_id: int, tests: Sequence[str]) -> dict[str, bool]:
        outcome = rerun_tests(validator, run_id, list(tests))
        got = {o.test_id: o.outcome for o in validator.journal.test_outcomes(outcome.run_id)}
        return rerun_passes(tests, got)
    return rerun


def rerun_passes(tests: Sequence[str], got: dict[str, TestOutcome]) -> dict[str, bool]:
    """Which rerun tests passed; one missing from the rerun's report did not run, so it did not pass
    (it was counted as passed when the rerun as a whole passed, making failures FLAKY), and one
    skipped on the rerun did not pass either: a skip says nothing about the failure."""
    return {t: got.get(t) is TestOutcome.PASS for t in tests}


@dataclass(frozen=True, slots=True)
class TriageReport:
    run: tq.RunInfo
    verdicts: tuple[Diagnosis, ...]
    groups: tuple[FailureGroup, ...]
    compared_with: tuple[int, ...]   # the base / trunk runs whose failures count as BROKEN_TRUNK

    def of(self, c: Classification) -> list[Diagnosis]:
        return [v for v in self.verdicts if v.classification is c]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run.id, "rev": self.run.rev, "base": self.run.base,
            "tier": self.run.tier.value, "status": self.run.status,
            "compared_with": list(self.compared_with),
            "counts": {c.value: len(self.of(c)) for c in Classification},
            "failures": [{
                "test": v.failure.test, "suite": v.failure.job,
                "classification": v.classification.value, "reason": v.reason,
                "family": v.family.value if v.family else None, "action": v.action or None,
                "reruns": list(v.reruns), "group": v.failure.signature.key,
                "kind": v.failure.signature.kind.value, "signature": v.failure.signature.text,
                "line": v.failure.signature.line, "excerpt": v.failure.signature.excerpt,
            } for v in self.verdicts],
            "groups": [{"key": g.key, "kind": g.kind.value, "signature": g.signature,
                        "tests": list(g.tests)} for g in self.groups],
        }


def _trunk_runs(journal: TriageJournal, run: tq.RunInfo) -> list[tq.RunInfo]:
    """The finished run of the fork base and the latest finished full trunk run of the tier."""
    done = (RunStatus.PASS, RunStatus.FAIL)
    out: list[tq.RunInfo] = []
    if run.base:
        base = [r for r in journal.runs_for_rev(run.base, run.tier) if r.status in done]
        out += base[:1]
    for r in journal.latest_runs(run.tier, 50):
        if r.id != run.id and r.base is None and r.parent_run_id is None and r.status in done \
                and r.rev != run.rev:
            out.append(r)
            break
    return list({r.id: r for r in out}.values())


def _history(journal: TriageJournal, run: tq.RunInfo, tests: set[str], limit: int) -> dict[str, list[HistoryPoint]]:
    """The tests' outcomes in every tier's runs (reruns included), not this run's: one memory."""
    from forkflow.triage.memory import test_history

    return test_history(journal, tests, limit, exclude_run=run.id)


def triage_run(t: Triager, run_id: int, *, settings: TriageSettings | None = None,
               rerunner: Rerunner | None = None) -> TriageReport:
    """Classify every failure of run `run_id`; reruns failures unless `settings.reruns` is 0."""
    settings = settings or t.settings
    journal = t.journal
    run = journal.run(run_id)
    if run is None:
        raise UserError(tq.no_such_run(run_id))
    if run.status == RunStatus.RUNNING:
        raise UserError(f"run {run_id} is still running; triage it when it has finished")
    trunk = _trunk_runs(journal, run)
    infra_jobs = {j.id for j in journal.jobs_of_run(run_id) if j.status == RunStatus.INFRA}
    infra_tests = frozenset(o.test_id for o in journal.bad_outcomes(run_id) if o.job_id in infra_jobs)
    failures = failures_of_run(journal, run_id)
    trunk_failures = frozenset((f.test, f.signature.key) for r in trunk for f in failures_of_run(journal, r.id))
    history = _history(journal, run, {f.test for f in failures}, settings.history_runs)
    from forkflow.triage.memory import flaky_reasons

    known = flaky_reasons(journal, [(f.test, f.signature.key) for f in failures], history=history,
                          policy=settings.policy, exclude_run=run.id)
    ev = Evidence(trunk_failures=trunk_failures, infra_tests=infra_tests, history=history, known_flaky=known)
    first = classify(failures, ev, settings.policy)
    suspects = [v.failure.test for v in first if v.classification in (Classification.NEW,
                                                                     Classification.FLAKY)]
    rerun = rerunner or t.rerunner
    if suspects and settings.reruns and rerun is not None:
        results: dict[str, list[bool]] = {test: [] for test in suspects}
        for _ in range(settings.reruns):
            for test, passed in rerun(run_id, sorted(set(suspects))).items():
                results.setdefault(test, []).append(passed)
        ev = Evidence(ev.trunk_failures, ev.infra_tests,
                      {test: tuple(v) for test, v in results.items()}, ev.history, ev.known_flaky)
    verdicts = classify(failures, ev, settings.policy)
    journal.verdicts_found(run_id, verdicts)
    return TriageReport(run, tuple(verdicts), tuple(group_failures(failures)),
                        tuple(r.id for r in trunk))


def blocking_failures(t: Triager, run_id: int, *, rerunner: Rerunner | None = None) -> list[Diagnosis]:
    """The failures of run `run_id` that block its landing unit: only NEW ones.

    For the ingest gate: a failure already red on trunk (BROKEN_TRUNK), a flaky one or a runner
    fault does not block a unit that did not cause it.  Uses stored verdicts when there are.
    """
    known = t.journal.stored_verdicts(run_id)
    if known is None:
        known = list(triage_run(t, run_id, rerunner=rerunner).verdicts)
    return [v for v in known if v.classification is Classification.NEW]
