"""`forkflow validate` as a list of steps: resolve, plan, check, run, judge, store.

    v = Validator.configured(repo, config, StoreRunJournal(store, fork_id))   # cli/, web/ and demo wire it
    outcome = validate(v, ValidateRequest(Tier.L1, "HEAD", changed_from="main"))
    outcome.status        # PASS | FAIL | INFRA;  outcome.exit_code: 0 | 1 | 4

Each step is a plain function: `resolve_revs`, `plan_suites`, `plan_selection`, `build_jobs`,
`judge_job` (saturation checks + parsing, pure apart from reading files) and `store_job`.
A run row (RUNNING) and its job rows (PENDING) are written before anything runs; each job is
stored in its own transaction as soon as it ends, so a crash or a dead Ray head loses nothing
already measured, and a run that could not finish is left INFRA, never RUNNING.

L2 metrics (contract with regression detection): each metric of a metrics report becomes one
`MetricPoint` (value, unit, better, samples, suite, run_id, `commit_date` = the rev's committer
date) written through the run journal (`forkflow.tiers.journal`); read them with `metric_series`.

Triage reruns failing tests with `rerun_tests(v, run_id, test_ids)`: a new run of the same
rev and tier, only those tests, `parent_run_id` set to the original run.
"""
from __future__ import annotations

import os
import secrets
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import MetricPoint, Sha
from forkflow.state import state_dir
from forkflow.tiers import records as q
from forkflow.tiers.reports import (
    TestOutcome,
    ParsedReport,
    TestResult,
    count_from_output,
    deselected_from_output,
    log_tail,
    parse_report,
)
from forkflow.tiers.runners.base import (
    Job,
    JobResult,
    JobState,
    Runner,
    RunnerOptions,
    make_runner,
)
from forkflow.tiers.saturation import Finding, Severity, SuiteEvidence, check_suite, path_drift, removed_suites
from forkflow.tiers.selection import (
    SelectionPlan,
    SuiteSelection,
    SuiteSpec,
    file_of,
    matches,
    node_id,
    run_everything,
    select,
)
from forkflow.tiers.journal import RunJournal, SuiteHistory
from forkflow.tiers.tiers import (
    ReportFormat,
    RunStatus,
    Suite,
    Tier,
    ValidationSettings,
    load_settings,
    load_suites,
    suites_of,
)
from forkflow.tiers.worktree import WorktreeCache

EXIT_CODES = {RunStatus.PASS: 0, RunStatus.FAIL: 1, RunStatus.INFRA: 4}
_BUILTINS = {"cd", "exec", "set", "export", ".", "source", "if", "for", "while", "(", "{", "[",
             "test", "true", "false", "echo", "exit", "ulimit", "umask", "env", "!", "case"}

Reporter = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Validator:
    """What validation works with: the fork's repository, its suites and `[validation]` settings,
    a run journal, and the folder runs write their logs and reports under."""

    repo: Repo
    suites: tuple[Suite, ...]
    settings: ValidationSettings
    journal: RunJournal
    runs_dir: Path

    @classmethod
    def configured(cls, repo: Repo, config: Config, journal: RunJournal) -> Validator:
        """The suites and settings of `config` (raises UserError on a bad `[[suite]]` or `[validation]`)."""
        return cls(repo, load_suites(config), load_settings(config), journal, state_dir(repo) / "runs")


@dataclass(frozen=True, slots=True)
class ValidateRequest:
    tier: Tier
    rev: str
    changed_from: str | None = None
    suites: tuple[str, ...] = ()          # --suite: only these
    runner: str | None = None             # None: [validation] runner
    ray_address: str | None = None
    trigger: str = "validate"
    parent_run_id: int | None = None
    l3_request_id: int | None = None
    forced: tuple[tuple[str, tuple[str, ...]], ...] = ()  # rerun: (suite, test ids; () = whole)


@dataclass(frozen=True, slots=True)
class SuiteReport:
    suite: str
    status: RunStatus
    message: str
    tests_ran: int
    tests_failed: int                 # tests the report shows failing (not the suite's findings)
    duration_s: float
    log_path: str
    findings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ValidationOutcome:
    run_id: int
    status: RunStatus
    rev: Sha
    tier: Tier
    summary: str
    suites: tuple[SuiteReport, ...]
    skipped: tuple[tuple[str, str], ...] = ()   # (suite, why selection skipped it)
    findings: tuple[str, ...] = ()             # run-level (a suite removed from the config)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 4)


# -- step 1: revisions ---------------------------------------------------------------------------

def resolve_revs(repo: Repo, rev: str, changed_from: str | None) -> tuple[Sha, Sha | None]:
    sha = repo.resolve(rev)
    if sha is None:
        raise UserError(f"--rev {rev!r} is not a commit in {repo.path}; pass a branch, tag or sha")
    base = None
    if changed_from is not None:
        base = repo.resolve(changed_from)
        if base is None:
            raise UserError(f"--changed-from {changed_from!r} is not a commit; pass a branch, tag or sha")
    return sha, base


# -- step 2: suites ------------------------------------------------------------------------------

def plan_suites(all_suites: Sequence[Suite], tier: Tier, only: Sequence[str]) -> tuple[Suite, ...]:
    """The tier's suites, narrowed by --suite; a name that is not there is a UserError."""
    of_tier = suites_of(tuple(all_suites), tier)
    if not only:
        if not of_tier:
            raise UserError(f"forkflow.toml declares no {tier.value} suite; add a [[suite]] with "
                            f"tier = \"{tier.value}\" (see docs/validation.md)")
        return of_tier
    by_name = {s.name: s for s in all_suites}
    out = []
    for name in only:
        s = by_name.get(name)
        if s is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise UserError(f"no suite named '{name}' in forkflow.toml (suites: {known})")
        if s.tier is not tier:
            raise UserError(f"suite '{name}' is {s.tier.value}, not {tier.value}; pass --tier {s.tier.value}")
        out.append(s)
    return tuple(out)


# -- step 3: selection ---------------------------------------------------------------------------

def plan_selection(v: Validator, suites: Sequence[Suite], sha: Sha, base: Sha | None,
                   forced: dict[str, tuple[str, ...]], budget: float, whole: bool = False,
                   drift: list[str] | None = None,
                   ) -> tuple[SelectionPlan, dict[str, int | None]]:
    """Which suites and tests run, and each suite's last green test count (saturation).

    `whole` (an explicit --suite): the suites run whole; the changed files are still recorded
    so the run teaches co-failure history.  `drift` collects a finding for each suite selection
    skipped whose paths drifted from its own test files (`saturation.path_drift`).
    """
    plan, last_green, known = _plan_selection(v, suites, sha, base, forced, budget, whole)
    if drift is not None:
        for sel in plan.suites:
            spec = next((s for s in suites if s.name == sel.suite), None)
            if sel.run or spec is None:
                continue
            files = {file_of(t) for t in known[sel.suite].known}
            drift += [f.message for f in path_drift(sel.suite, spec.paths, files, plan.changed_files,
                                                    lambda p, g: matches(p, g))]
    return plan, last_green


def _plan_selection(v: Validator, suites: Sequence[Suite], sha: Sha, base: Sha | None,
                    forced: dict[str, tuple[str, ...]], budget: float, whole: bool,
                    ) -> tuple[SelectionPlan, dict[str, int | None], dict[str, SuiteHistory]]:
    known = v.journal.suite_history([(s.name, s.can_select_tests) for s in suites])
    last_green = {s.name: known[s.name].last_green_ran for s in suites}
    specs = [SuiteSpec(s.name, s.paths, s.can_select_tests, known[s.name].known) for s in suites]
    recent = {n: h.recent_bad for n, h in known.items() if h.recent_bad is not None}
    narrow = base is not None and not whole and not forced
    history = v.journal.cofailures() if narrow else []
    if forced:
        return SelectionPlan((), tuple(
            SuiteSelection(n, True, tuple(node_id(t) for t in ids) or None, ids or None, ("rerun",))
            for n, ids in forced.items())), last_green, known
    if base is None:
        return run_everything(specs), last_green, known
    changed = sorted({f for files in v.repo.changed_files(
        [c.sha for c in v.repo.log(f"{base}..{sha}")]).values() for f in files})
    if whole:
        return SelectionPlan(tuple(changed), tuple(
            SuiteSelection(s.name, True, reasons=("named with --suite: runs whole",)) for s in specs)), \
            last_green, known
    return select(changed, specs, history, recent, budget=budget), last_green, known


# -- step 4: jobs --------------------------------------------------------------------------------

def check_command(suite: Suite, cwd: Path) -> None:
    """Refuse a suite whose program is missing or not executable, before anything runs."""
    try:
        words = shlex.split(suite.command)
    except ValueError as e:
        raise UserError(f"suite '{suite.name}': its command is not valid shell ({e}); fix "
                        f"suite.{suite.name}.command in forkflow.toml") from e
    words = [w for w in words if not ("=" in w and w.split("=", 1)[0].isidentifier())][:1]
    if not words or words[0] in _BUILTINS or "{" in words[0]:
        return
    prog = words[0]
    if "/" in prog:
        path = Path(prog) if Path(prog).is_absolute() else cwd / prog
        if not path.is_file():
            raise UserError(f"suite '{suite.name}': command '{prog}' does not exist in the work "
                            f"tree of this rev; fix suite.{suite.name}.command in forkflow.toml")
        if not os.access(path, os.X_OK):
            raise UserError(f"suite '{suite.name}': command '{prog}' is not executable; run "
                            f"`chmod +x {prog}` and commit it, or start the command with 'sh '")
    elif shutil.which(prog, path=dict(suite.env).get("PATH", os.environ.get("PATH"))) is None:
        raise UserError(f"suite '{suite.name}': command '{prog}' is not on PATH; install it or "
                        f"fix suite.{suite.name}.command in forkflow.toml")


@dataclass(frozen=True, slots=True)
class PlannedJob:
    suite: Suite
    selection: SuiteSelection
    job: Job
    report_path: str
    artifact_dir: str
    last_green_ran: int | None


def build_jobs(runs_dir: Path, suites: Sequence[Suite], plan: SelectionPlan, worktree: Path,
               sha: Sha, last_green: dict[str, int | None]) -> list[PlannedJob]:
    root = runs_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{sha[:10]}-{secrets.token_hex(3)}"
    out = []
    for i, suite in enumerate(suites):
        sel = plan.of(suite.name)
        if sel is None or not sel.run:
            continue
        d = root / suite.name
        artifacts = d / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        report = d / suite.report_file
        env = suite.job_env(sha, str(report), str(artifacts))
        tests = " ".join(shlex.quote(f) for f in sel.files) if sel.files is not None else None
        job = Job(job_id=i, name=suite.name, command=suite.command_for(str(report), str(artifacts), tests),
                  cwd=str(worktree), log_path=str(d / "log.txt"), timeout_s=suite.timeout_s,
                  resources=suite.resources, env=tuple(sorted(env.items())))
        out.append(PlannedJob(suite, sel, job, str(report), str(artifacts), last_green.get(suite.name)))
    return out


# -- step 5: judge one job -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JobJudgement:
    """One validation job judged: its stored finish and its tests' results (not bisection's
    `Judgement` of a revision)."""

    finish: q.JobFinish
    results: tuple[TestResult, ...]
    report: ParsedReport = field(default_factory=ParsedReport)


def judge_job(pj: PlannedJob, res: JobResult, shrink_tolerance: float) -> JobJudgement:
    """Parse the report and the log, run the saturation checks, and decide PASS/FAIL/INFRA."""
    suite = pj.suite
    infra = res.state is JobState.INFRA
    report = ParsedReport(problem="not run", exists=False) if infra else \
        parse_report(suite.report.value, Path(pj.report_path))
    own = None
    if not infra and suite.report is not ReportFormat.METRICS:
        own = count_from_output(Path(pj.job.log_path), suite.count_pattern)
    bad = report.count(TestOutcome.FAIL) + report.count(TestOutcome.ERROR)
    ev = SuiteEvidence(
        suite=suite.name, finished=not infra, timed_out=res.state is JobState.TIMEOUT,
        returncode=res.returncode, report_exists=report.exists, report_problem=report.problem,
        reported_total=report.total, reported_ran=report.ran, reported_bad=bad, own_count=own,
        expect_tests=suite.expect_tests, narrowed=pj.selection.narrowed,
        expect_selected=len(pj.selection.tests) if pj.selection.tests is not None else None,
        last_green_ran=pj.last_green_ran, shrink_tolerance=shrink_tolerance, runner_message=res.message,
        deselected=deselected_from_output(Path(pj.job.log_path)) if own is not None and report.ran == 0 else 0)
    findings = check_suite(ev)
    status = _status(findings, bad)
    message = "; ".join(f.message for f in findings)
    if res.message and res.message not in message:
        message = "; ".join(x for x in (message, res.message) if x)
    results = report.results
    if status != RunStatus.PASS:
        tail = log_tail(Path(pj.job.log_path), 2048)
        message = (message + ("\n--- log tail ---\n" + tail if tail else "")).strip()
        if bad == 0:  # no test to blame: one synthetic outcome carries the suite's failure
            results = results + (TestResult(f"[{suite.name}]", TestOutcome.ERROR, res.duration_s, message),)
    metrics = tuple(m.to_json() for m in report.metrics)
    finish = q.JobFinish(status=status, returncode=res.returncode, duration_s=res.duration_s,
                         message=message, tests_reported=report.total, tests_ran=report.ran,
                         tests_counted=own, findings=tuple(f.message for f in findings),
                         metrics=metrics, attempts=res.attempts)
    return JobJudgement(finish, results, report)


def _status(findings: Sequence[Finding], bad: int) -> RunStatus:
    if bad or any(f.severity is Severity.FAIL for f in findings):
        return RunStatus.FAIL
    if findings:
        return RunStatus.INFRA
    return RunStatus.PASS


# -- step 6: store -------------------------------------------------------------------------------

def store_job(journal: RunJournal, tier: Tier, sha: Sha, commit_date: int, run_id: int, job_row: int,
              pj: PlannedJob, j: JobJudgement) -> None:
    """One transaction: the job, its per-test outcomes and (L2) its metric points."""
    now = int(time.time())
    points = [MetricPoint(name=m.name, rev=sha, value=m.value, unit=m.unit, better=m.better,
                          samples=m.samples, suite=pj.suite.name, run_id=run_id,
                          measured_at=now, commit_date=commit_date, context=m.context)
              for m in j.report.metrics] if tier is Tier.L2 else []
    journal.job_finished(job_row, j.finish, j.results, points)


def _summary(reports: Sequence[SuiteReport], skipped: int, findings: Sequence[str]) -> str:
    """One line: suites by status, tests run and failed, then the findings apart from the tests
    (a suite can fail with every test passing: too few ran, no report, a timeout)."""
    counts = {st: sum(1 for r in reports if r.status == st)
              for st in (RunStatus.PASS, RunStatus.FAIL, RunStatus.INFRA)}
    ran = sum(r.tests_ran for r in reports)
    failed = sum(r.tests_failed for r in reports)
    parts = [f"{len(reports)} suite(s): {counts[RunStatus.PASS]} passed, {counts[RunStatus.FAIL]} failed, "
             f"{counts[RunStatus.INFRA]} infra", f"{ran} tests ran, {failed} failed"]
    if skipped:
        parts.append(f"{skipped} suite(s) not selected")
    found = [f for r in reports for f in r.findings] + list(findings)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        parts.append(f"{len(found)} finding(s): {found[0]}{more}")
    return "; ".join(parts)


def _run_status(reports: Sequence[SuiteReport], findings: Sequence[str]) -> RunStatus:
    if findings or any(r.status == RunStatus.FAIL for r in reports):
        return RunStatus.FAIL
    if any(r.status != RunStatus.PASS for r in reports):
        return RunStatus.INFRA
    return RunStatus.PASS


# -- the steps together --------------------------------------------------------------------------

def validate(v: Validator, req: ValidateRequest, reporter: Reporter | None = None) -> ValidationOutcome:
    """Validate one tier at one rev; see the module docstring."""
    say = reporter or (lambda _line: None)
    settings = v.settings
    all_suites = v.suites
    sha, base = resolve_revs(v.repo, req.rev, req.changed_from)
    suites = plan_suites(all_suites, req.tier, req.suites or tuple(n for n, _ in req.forced))
    run_findings: list[str] = []
    plan, last_green = plan_selection(v, suites, sha, base, dict(req.forced),
                                      settings.selection_budget, whole=bool(req.suites), drift=run_findings)
    inventory = tuple(s.name for s in suites_of(all_suites, req.tier))
    if not req.suites and not req.forced:
        green = v.journal.last_green_run(req.tier)
        if green is not None:
            run_findings += [f.message for f in removed_suites(inventory, green.inventory, settings.retired)]
    with WorktreeCache(v.repo).using(sha) as worktree:  # no other forkflow prunes it meanwhile
        for suite in suites:
            check_command(suite, worktree)
        planned = build_jobs(v.runs_dir, suites, plan, worktree, sha, last_green)
        runner_name = req.runner or settings.runner
        runner = make_runner(runner_name, RunnerOptions(jobs=settings.jobs,
                                                        address=req.ray_address or settings.ray_address))
        try:
            runner.check([p.job for p in planned])
            return _execute(v, req, runner, planned, plan, sha, base, inventory, run_findings,
                            settings.shrink_tolerance, say)
        finally:
            runner.close()


def _execute(v: Validator, req: ValidateRequest, runner: Runner, planned: list[PlannedJob],
             plan: SelectionPlan, sha: Sha, base: Sha | None, inventory: tuple[str, ...],
             run_findings: list[str], tolerance: float, say: Reporter) -> ValidationOutcome:
    commit_date = v.repo.commit_date(sha)
    selection_doc: dict[str, object] = {
        s.suite: {"run": s.run, "files": list(s.files) if s.files is not None else None,
                  "reasons": list(s.reasons)} for s in plan.suites}
    new_run = q.NewRun(req.tier, sha, base, runner.name, req.trigger, commit_date,
                       plan.changed_files, inventory, selection_doc, req.parent_run_id, req.l3_request_id)
    new_jobs = [q.NewJob(p.suite.name, p.job.command, p.job.log_path, p.report_path, p.artifact_dir,
                         p.selection.narrowed, p.selection.files, p.suite.expect_tests) for p in planned]
    run_id, job_rows = v.journal.run_started(new_run, new_jobs)
    by_job = {p.job.job_id: (p, row) for p, row in zip(planned, job_rows)}
    reports: dict[int, SuiteReport] = {}
    lock = threading.Lock()

    def on_done(res: JobResult) -> None:
        pj, row = by_job[res.job_id]
        j = judge_job(pj, res, tolerance)
        with lock:
            store_job(v.journal, req.tier, sha, commit_date, run_id, row, pj, j)
            reports[res.job_id] = SuiteReport(
                pj.suite.name, j.finish.status, j.finish.message, j.finish.tests_ran,
                sum(1 for r in j.report.results if r.outcome.bad), res.duration_s, pj.job.log_path,
                j.finish.findings)
        say(f"{pj.suite.name}: {j.finish.status} ({j.finish.tests_ran} tests, {res.duration_s:.1f}s)")

    try:
        runner.run([p.job for p in planned], on_done)
    finally:
        _close_run(v.journal, run_id, planned, job_rows, reports, plan, run_findings)
    ordered = tuple(reports[p.job.job_id] for p in planned if p.job.job_id in reports)
    skipped = tuple((s.suite, "; ".join(s.reasons)) for s in plan.suites if not s.run)
    status = _run_status(ordered, run_findings)
    return ValidationOutcome(run_id, status, sha, req.tier, _summary(ordered, len(skipped), run_findings),
                             ordered, skipped, tuple(run_findings))


def _close_run(journal: RunJournal, run_id: int, planned: list[PlannedJob], job_rows: list[int],
               reports: dict[int, SuiteReport], plan: SelectionPlan, run_findings: list[str]) -> None:
    """Finish the run row; jobs that never reported (interrupt, runner crash) become INFRA."""
    msg = "the run stopped before this job reported (interrupted or runner crashed)"
    lost = [(p, row) for p, row in zip(planned, job_rows) if p.job.job_id not in reports]
    for p, _row in lost:
        reports[p.job.job_id] = SuiteReport(p.suite.name, RunStatus.INFRA, msg, 0, 0, 0.0, p.job.log_path, (msg,))
    ordered = [reports[p.job.job_id] for p in planned]
    skipped = sum(1 for x in plan.suites if not x.run)
    journal.run_finished(run_id, [(row, q.JobFinish(RunStatus.INFRA, None, 0.0, msg, 0, 0, None, (msg,), (), 0))
                                  for _p, row in lost],
                         _run_status(ordered, run_findings), _summary(ordered, skipped, run_findings), run_findings)


def rerun_tests(v: Validator, run_id: int, test_ids: Sequence[str], runner: str | None = None,
                reporter: Reporter | None = None) -> ValidationOutcome:
    """Run only `test_ids` of run `run_id` again, at the same rev and tier (flakiness checks).

    A test id naming a whole suite's synthetic failure (`[suite]`) reruns that suite whole.
    """
    run = v.journal.run(run_id)
    if run is None:
        raise UserError(q.no_such_run(run_id))
    outcomes = v.journal.test_outcomes(run_id)
    suite_of = {o.test_id: o.suite for o in outcomes}
    forced: dict[str, list[str]] = {}
    whole: set[str] = set()
    for t in test_ids:
        if t not in suite_of:
            raise UserError(f"run {run_id} has no test {t!r}; pass test ids as stored for that run")
        if t == f"[{suite_of[t]}]":
            whole.add(suite_of[t])
        else:
            forced.setdefault(suite_of[t], []).append(t)
    plan = tuple((name, () if name in whole else tuple(forced[name]))
                 for name in sorted(whole | set(forced)))
    req = ValidateRequest(run.tier, run.rev, None, (), runner, trigger="rerun", parent_run_id=run_id,
                          l3_request_id=run.l3_request_id, forced=plan)
    return validate(v, req, reporter)
