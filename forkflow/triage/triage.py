"""Triage a stored validation run: signatures, evidence from trunk, reruns, verdicts.

The edge around the pure core (`signature`, `classify`): it reads runs, jobs and per-test
outcomes through `forkflow.tiers.records`, streams job logs from disk, reruns failed tests
through `forkflow.tiers.validate.rerun_tests`, and stores failures, groups and verdicts.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forkflow.config import Config, config_error
from forkflow.context import Context
from forkflow.errors import UserError
from forkflow.tiers import records as tq
from forkflow.tiers.reports import TestOutcome
from forkflow.triage import records as ts
from forkflow.triage.classify import Evidence, FlakyPolicy, HistoryPoint, classify
from forkflow.triage.group import group_failures
from forkflow.triage.models import Classification, Diagnosis, Failure, FailureGroup
from forkflow.triage.signature import signature_of, signature_of_file

BAD = (TestOutcome.FAIL, TestOutcome.ERROR)

# One rerun of some failed tests of a run: test id -> passed?
Rerunner = Callable[[int, Sequence[str]], dict[str, bool]]


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


def tiers_rerunner(ctx: Context) -> Rerunner:
    """Rerun through validation (`rerun_tests`), then read the rerun's outcomes."""
    from forkflow.tiers.validate import rerun_tests

    def rerun(run_id: int, tests: Sequence[str]) -> dict[str, bool]:
        outcome = rerun_tests(ctx, run_id, list(tests))
        with ctx.store.session_scope() as s:
            got = {o.test_id: o.outcome for o in tq.test_outcomes(s, outcome.run_id)}
        return rerun_passes(tests, got)
    return rerun


def rerun_passes(tests: Sequence[str], got: dict[str, TestOutcome]) -> dict[str, bool]:
    """Which rerun tests passed; one missing from the rerun's report did not run, so it did not pass
    (issue 12: it was counted as passed when the rerun as a whole passed, making failures FLAKY)."""
    return {t: got.get(t) in (TestOutcome.PASS, TestOutcome.SKIP) for t in tests}


def _signature(message: str, log_path: str, synthetic: bool) -> Any:
    path = Path(log_path) if log_path else None
    if (synthetic or not message.strip()) and path is not None and path.is_file():
        return signature_of_file(path)
    return signature_of(message)


def failures_of_run(ctx: Context, run_id: int) -> list[Failure]:
    """The failures of a run with their signatures (computed once, then read from the store)."""
    with ctx.store.session_scope() as s:
        known = ts.stored_failures(s, run_id)
        if known is not None:
            return known
        jobs = {j.id: j for j in tq.jobs_of_run(s, run_id)}
        bad = tq.test_outcomes(s, run_id, bad_only=True)
    out = []
    for o in bad:
        job = jobs.get(o.job_id)
        sig = _signature(o.message, job.log_path if job else "", o.test_id.startswith("["))
        out.append(Failure(o.test_id, sig, run_id, o.suite))
    if out:
        with ctx.store.session_scope() as s:
            if ts.stored_failures(s, run_id) is None:  # another triage may have raced us
                ts.save_failures(s, ctx.fork_id, run_id, out)
    return out


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
                "reruns": list(v.reruns), "group": v.failure.signature.key,
                "kind": v.failure.signature.kind.value, "signature": v.failure.signature.text,
                "line": v.failure.signature.line, "excerpt": v.failure.signature.excerpt,
            } for v in self.verdicts],
            "groups": [{"key": g.key, "kind": g.kind.value, "signature": g.signature,
                        "tests": list(g.tests)} for g in self.groups],
        }


def _trunk_runs(s: Any, fid: int, run: tq.RunInfo) -> list[tq.RunInfo]:
    """The finished run of the fork base and the latest finished full trunk run of the tier."""
    done = (tq.PASS, tq.FAIL)
    out: list[tq.RunInfo] = []
    if run.base:
        base = [r for r in tq.runs_for_rev(s, fid, run.base, run.tier) if r.status in done]
        out += base[:1]
    for r in tq.latest_runs(s, fid, run.tier, limit=50):
        if r.id != run.id and r.base is None and r.parent_run_id is None and r.status in done \
                and r.rev != run.rev:
            out.append(r)
            break
    return list({r.id: r for r in out}.values())


def _history(ctx: Context, run: tq.RunInfo, tests: set[str], limit: int) -> dict[str, list[HistoryPoint]]:
    with ctx.store.session_scope() as s:
        runs = [r for r in tq.latest_runs(s, ctx.fork_id, run.tier, limit=limit)
                if r.id != run.id and r.parent_run_id != run.id and r.status in (tq.PASS, tq.FAIL)]
        outcomes = tq.outcomes_of_tests(s, [r.id for r in runs], tests)
    hist: dict[str, list[HistoryPoint]] = {t: [] for t in tests}
    for r in reversed(runs):  # oldest first
        if not outcomes[r.id]:
            continue
        keys = {f.test: f.signature.key for f in failures_of_run(ctx, r.id)} \
            if any(o.outcome in BAD for o in outcomes[r.id]) else {}
        for o in outcomes[r.id]:
            hist[o.test_id].append(HistoryPoint(r.rev, o.outcome not in BAD, keys.get(o.test_id)))
    return hist


def triage_run(ctx: Context, run_id: int, *, settings: TriageSettings | None = None,
               rerunner: Rerunner | None = None) -> TriageReport:
    """Classify every failure of run `run_id`; reruns failures unless `settings.reruns` is 0."""
    settings = settings or load_settings(ctx.config)
    with ctx.store.session_scope() as s:
        run = tq.get_run(s, run_id)
        if run is None or run.fork_id != ctx.fork_id:
            raise UserError(tq.no_such_run(run_id))
        if run.status == tq.RUNNING:
            raise UserError(f"run {run_id} is still running; triage it when it has finished")
        trunk = _trunk_runs(s, ctx.fork_id, run)
        infra_jobs = {j.id for j in tq.jobs_of_run(s, run_id) if j.status == tq.INFRA}
        infra_tests = frozenset(o.test_id for o in tq.test_outcomes(s, run_id, bad_only=True)
                                if o.job_id in infra_jobs)
    failures = failures_of_run(ctx, run_id)
    trunk_failures = frozenset((f.test, f.signature.key) for r in trunk for f in failures_of_run(ctx, r.id))
    ev = Evidence(trunk_failures=trunk_failures, infra_tests=infra_tests,
                  history=_history(ctx, run, {f.test for f in failures}, settings.history_runs))
    first = classify(failures, ev, settings.policy)
    suspects = [v.failure.test for v in first if v.classification in (Classification.NEW,
                                                                     Classification.FLAKY)]
    if suspects and settings.reruns:
        rerun = rerunner or tiers_rerunner(ctx)
        results: dict[str, list[bool]] = {t: [] for t in suspects}
        for _ in range(settings.reruns):
            for t, passed in rerun(run_id, sorted(set(suspects))).items():
                results.setdefault(t, []).append(passed)
        ev = Evidence(ev.trunk_failures, ev.infra_tests,
                      {t: tuple(v) for t, v in results.items()}, ev.history)
    verdicts = classify(failures, ev, settings.policy)
    with ctx.store.session_scope() as s:
        ts.save_verdicts(s, run_id, verdicts)
    return TriageReport(run, tuple(verdicts), tuple(group_failures(failures)),
                        tuple(r.id for r in trunk))


def blocking_failures(ctx: Context, run_id: int, *, rerunner: Rerunner | None = None) -> list[Diagnosis]:
    """The failures of run `run_id` that block its landing unit: only NEW ones.

    For the ingest gate: a failure already red on trunk (BROKEN_TRUNK), a flaky one or a runner
    fault does not block a unit that did not cause it.  Uses stored verdicts when there are.
    """
    with ctx.store.session_scope() as s:
        known = ts.stored_verdicts(s, run_id)
    if known is None:
        known = list(triage_run(ctx, run_id, rerunner=rerunner).verdicts)
    return [v for v in known if v.classification is Classification.NEW]
