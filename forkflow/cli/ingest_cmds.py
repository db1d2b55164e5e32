"""`forkflow plan`, `forkflow ingest`, `forkflow conflicts`, `forkflow demo`."""
from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, console, err_console, print_json, short
from forkflow.cli.progress import PhaseBar, progress_bar
from forkflow.conflicts import approval, guardrails
from forkflow.conflicts import records as crecords
from forkflow.conflicts.case import case_from_marked
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.settle import by_hand, has_file_resolution
from forkflow.conflicts.rules_view import proposal_diff, rule_rows, stored_or_backtested
from forkflow.context import Context, open_context
from forkflow import wiring
from forkflow.errors import UserError
from forkflow.landing.ingest import (
    IngestOptions,
    IngestReport,
    Mode,
    UnitResult,
)
from forkflow.landing.wired import ingest
from forkflow.landing.plan import make_plan, resolve_until
from forkflow.landing.settings import ingest_settings
from forkflow.ledger.merges import MERGE, intake_of
from forkflow.render import (
    conflict_owners,
    exit_code,
    render_conflicts,
    render_exit,
    render_plan,
    render_report,
)

UntilOpt = Annotated[str | None, typer.Option("--until", help="Plan only up to this upstream commit.")]
MaxBundleOpt = Annotated[int | None, typer.Option("--max-bundle", min=1,
                                                  help="Most commits in one bundle (default 50).")]


def plan(json_out: JsonOpt = False, until: UntilOpt = None, max_bundle: MaxBundleOpt = None,
         repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Route pending upstream commits into risk chains and low-risk bundles, with reasons."""
    ctx = open_context(repo, store)
    # progress on stderr, so that `plan --json > plan.json` stays clean (issue 12: 63 s of silence)
    with progress_bar(err_console) as bar:
        task = bar.add_task("reading the ledger", total=None)
        ledger = wiring.ledger(ctx)
        settings = ingest_settings(ctx.config)

        def step(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total or None)

        p = make_plan(ctx.repo, ctx.store, ledger, settings, until=resolve_until(ctx.repo, ledger, until),
                      max_bundle=max_bundle, progress=step)
    if json_out:
        print_json(p.to_json())
    else:
        render_plan(console, p, {e.commit.sha: e.commit.subject for e in ledger.entries})
    return 0


class _BarReporter(PhaseBar):
    def start_units(self, total: int) -> None:
        self.progress.update(self.task, description="landing units", total=total, completed=0)

    def unit_done(self, result: UnitResult) -> None:
        self.progress.update(self.task, advance=1, description=result.name[:40])


def ingest_cmd(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan and pick in memory; write nothing.")] = False,
    do_land: Annotated[bool, typer.Option("--land", help="Land units that pass L1 on the fork branch.")] = False,
    push: Annotated[bool, typer.Option("--push", help="Push the fork branch after landing.")] = False,
    max_units: Annotated[int | None, typer.Option("--max-units", min=1, help="Stop after N units.")] = None,
    until: UntilOpt = None, max_bundle: MaxBundleOpt = None,
    unit: Annotated[int | None, typer.Option("--unit", min=1, help="Re-run this stored unit (failed, waiting, "
                                             "conflict or not landed) on the current tip; lands it if L1 "
                                             "passes.")] = None,
    json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Pick pending upstream commits in memory, run L1 on each unit, and (with --land) land them."""
    if dry_run and (do_land or push or unit is not None):
        raise UserError("--dry-run writes nothing; drop --land/--push/--unit, or drop --dry-run")
    if unit is not None and (until is not None or max_units is not None or max_bundle is not None):
        raise UserError("--unit re-runs one stored unit as it was planned; drop --until/--max-units/--max-bundle")
    if push and not do_land and unit is None:
        raise UserError("--push pushes what --land landed; add --land")
    mode = Mode.DRY_RUN if dry_run else Mode.LAND if do_land else Mode.VALIDATE
    ctx = open_context(repo, store)
    if unit is None and intake_of(ctx.config) == MERGE:  # a fork that merges upstream: docs/ingest.md
        from forkflow.cli.merge_view import merge_ingest
        return merge_ingest(ctx, mode, until, push, json_out)
    options = IngestOptions(mode, push, max_units, until, max_bundle)
    with progress_bar(console, disable=json_out) as bar:
        if unit is not None:
            from forkflow.landing.wired import retry_unit

            report = retry_unit(ctx, unit, push=push, reporter=_BarReporter(bar))
        else:
            report = ingest(ctx, options, _BarReporter(bar))
    with ctx.store.session_scope() as s:
        open_conflicts = len(crecords.conflicts(s, ctx.fork_id, "open"))
    code = exit_code(report, open_conflicts)
    if json_out:
        print_json(report_json(report) | {"exit_code": code, "open_conflicts": open_conflicts})
    else:
        render_report(console, report)
        render_l1_runs(report)
        render_exit(console, code)
    return code


def report_json(r: IngestReport) -> dict[str, object]:
    return {
        "mode": r.mode.value, "base": r.base, "tip": r.tip, "ingestion_point": r.ingestion_point,
        "plan": r.plan.to_json(), "notes": list(r.notes),
        "units": [{"id": u.unit_id, "name": u.name, "kind": u.kind, "status": u.status.value, "summary": u.summary,
                   "picked": list(u.picked), "skipped": list(u.skipped), "deferred": list(u.deferred),
                   "failed": list(u.failed), "fork_sha": u.fork_sha, "resolved_by": u.resolved_by,
                   "held_back": u.held, "l1_run": u.l1_run}
                  for u in r.results],
        "held_back": [h.to_json() for h in r.held_back],
    }


def render_l1_runs(r: IngestReport) -> None:
    """The L1 run that gated each unit, by id: what `forkflow triage RUN` takes."""
    runs: dict[int, list[str]] = {}
    for u in r.results:
        if u.l1_run is not None:
            runs.setdefault(u.l1_run, []).append(f"{u.name} {u.status.value}")
    for run, units in runs.items():
        shown = ", ".join(units[:4]) + (f" +{len(units) - 4} more" if len(units) > 4 else "")
        console.print(f"L1 run {run}: {escape(shown)}; forkflow triage {run}", soft_wrap=True, highlight=False)


# -- conflicts ------------------------------------------------------------------
conflicts_app = typer.Typer(help="Conflicts no resolver settled, kept for a person.", no_args_is_help=False)


@conflicts_app.callback(invoke_without_command=True)
def conflicts_list(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Resolved ones too.")] = False,
    json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> None:
    """List open conflicts (`forkflow conflicts show ID` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    c = open_context(repo, store)
    with c.store.session_scope() as s:
        rows = crecords.conflicts(s, c.fork_id, None if all_ else "open")
        waiting = {x.id for x in rows if x.status == "open" and approval.proposal(s, c.fork_id, x) is not None}
    if json_out:
        owners = conflict_owners(c)
        print_json({"conflicts": [_conflict_json(x, with_text=False) | {"owner": owners(x.chain, [x.path]),
                                                                        "proposal_waiting": x.id in waiting}
                                  for x in rows]})
        return
    render_conflicts(console, rows, waiting, conflict_owners(c))


def _conflict_json(x: crecords.ConflictInfo, with_text: bool = True) -> dict[str, object]:
    d: dict[str, object] = {"id": x.id, "upstream_sha": x.upstream_sha, "subject": x.subject, "path": x.path,
                            "kind": x.kind, "chain": x.chain, "base": x.base_sha, "status": x.status,
                            "seen": x.seen, "tried": list(x.tried), "last_seen": x.last_seen.isoformat()}
    if with_text:
        d["conflicted"] = x.marked
    return d


def _get_conflict(repo: Path, store: str | None, cid: int) -> tuple[Context, crecords.ConflictInfo]:
    c = open_context(repo, store)
    with c.store.session_scope() as s:
        x = crecords.conflict(s, c.fork_id, cid)
    if x is None:
        raise UserError(f"no conflict with id {cid}; list them with `forkflow conflicts --all`")
    return c, x


MAX_ATTEMPTS_SHOWN = 10
MAX_RESOLUTION = 64 * 2**20  # bytes `conflicts resolve --file` reads at most


@conflicts_app.command("show")
def conflicts_show(cid: Annotated[int, typer.Argument(help="Conflict id from `forkflow conflicts`.")],
                   json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Print one conflict: the upstream commit, what each resolver said, the file with markers."""
    c, x = _get_conflict(repo, store, cid)
    with c.store.session_scope() as s:
        attempts = [a for a in crecords.attempts(s, c.fork_id, x.upstream_sha) if a.path == x.path]
    waiting = _waiting_proposal(c, x)
    record = _record(c, waiting.rule) if waiting is not None and waiting.rule else None
    if json_out:
        print_json(_conflict_json(x) | {"agent_attempts": [
            {"backend": a.backend, "outcome": a.outcome, "reason": a.reason, "duration_ms": a.duration_ms}
            for a in attempts]} | {"proposal": None if waiting is None else {
                "attempt_id": waiting.attempt_id, "hash": waiting.digest, "backend": waiting.backend,
                "rule": waiting.rule or None, "record": record, "diff": proposal_diff(x, waiting.content),
                "content": waiting.content}})
        return 0
    console.print(f"conflict {x.id} ({x.status}): {x.kind} in [bold]{escape(x.path)}[/]")
    console.print(f"upstream {x.upstream_sha}  {escape(x.subject)}")
    console.print(f"chain {escape(x.chain)}, picked onto {short(x.base_sha)}, seen {x.seen} time(s)")
    for line in x.tried:
        console.print(f"  tried {escape(line)}")
    if len(attempts) > MAX_ATTEMPTS_SHOWN:
        console.print(f"  agent: {len(attempts) - MAX_ATTEMPTS_SHOWN} earlier attempt(s) not shown (--json lists all)")
    for a in attempts[-MAX_ATTEMPTS_SHOWN:]:
        console.print(f"  agent attempt ({escape(a.backend)}, {a.duration_ms / 1000:.1f}s): {a.outcome}: "
                      f"{escape(a.reason)}")
    if x.marked:
        console.rule("conflicted file (fork | base | upstream)")
        console.out(x.marked, highlight=False)
    if waiting is not None and waiting.rule:
        console.rule(f"rule proposal #{waiting.attempt_id}, hash {waiting.digest}: read it before approving")
        console.print(f"rule {escape(waiting.rule)}", soft_wrap=True)
        console.print(f"its record on this fork: {escape(record or 'none')} (`forkflow conflicts rules`)", soft_wrap=True)
        console.rule("the proposal against the fork's file")
        console.out(proposal_diff(x, waiting.content) or "(the fork's file as it is)", highlight=False)
    elif waiting is not None:
        console.rule(f"agent proposal #{waiting.attempt_id} ({escape(waiting.backend)}), hash {waiting.digest}: "
                     "read it before approving")
        console.out(waiting.content, highlight=False)
    if waiting is not None:
        console.print(f"approve it (the next `forkflow ingest` picks it and runs L1): "
                      f"forkflow conflicts approve {x.id} --proposal {waiting.digest}", soft_wrap=True)
    if has_file_resolution(x):
        console.print(f"settle it: write the resolved file, then `forkflow conflicts resolve {x.id} --file FILE`")
    else:
        console.print(escape(f"settle it {by_hand(x, c.config.fork_branch)}"))
    # the fork may not want the commit at all (a revert of a change it never had, a version bump)
    console.print(f"or decide not to take it: forkflow decide {short(x.upstream_sha)} --skip|--wont-port|--defer "
                  "--reason TEXT", soft_wrap=True, highlight=False)
    return 0


@conflicts_app.command("resolve")
def conflicts_resolve(
    cid: Annotated[int, typer.Argument(help="Conflict id.")],
    file: Annotated[Path, typer.Option("--file", help="The resolved file.")],
    repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Record a person's resolution; the next `forkflow ingest` uses it (recorded resolutions)."""
    c, x = _get_conflict(repo, store, cid)
    if not has_file_resolution(x):
        raise UserError(f"conflict {x.id} is a {x.kind} conflict with no text regions, which --file cannot "
                        f"settle; settle it {by_hand(x, c.config.fork_branch)}")
    try:
        with file.open("rb") as f:  # capped: `--file /dev/zero` used to read without end
            data = f.read(MAX_RESOLUTION + 1)
    except OSError as e:
        raise UserError(f"cannot read {file} ({e.strerror}); pass the resolved file with --file") from e
    if len(data) > MAX_RESOLUTION:
        raise UserError(f"{file} is over {MAX_RESOLUTION // 2**20} MiB; pass the resolved file with --file")
    texts = resolution_regions(x, data)
    with c.store.session_scope() as s:
        crecords.save_resolution(s, x.key, x.path, texts, "person")
        crecords.set_conflict_status(s, x.id, "resolved")
    console.print(f"recorded; `forkflow ingest --land` will use it for {short(x.upstream_sha)} {escape(x.path)}")
    return 0


def _record(c: Context, rule: str) -> str:
    """The rule's record on this fork, as the last backtest stored it."""
    from forkflow.conflicts.rulebook import load_book

    with c.store.session_scope() as s:
        found = load_book(s, c.fork_id)
    return found[0].record(rule).describe() if found is not None else "not backtested yet"


@conflicts_app.command("rules")
def conflicts_rules(
    refresh: Annotated[bool, typer.Option("--refresh", help="Backtest again on the fork's past picks.")] = False,
    json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Each resolver rule's record on this fork (its past answers against the files the fork's
    engineers committed), and whether its answers land alone or wait for a person."""
    c = open_context(repo, store)
    book, when, settings = stored_or_backtested(c.repo, c.config, c.store, c.fork_id, refresh)
    rows = rule_rows(book, settings)
    if json_out:
        print_json({"min_precision": settings.min_precision, "min_cases": settings.min_cases,
                    "files": book.files, "computed_at": when.isoformat(), "rules": rows})
        return 0
    console.print(f"{book.files} past conflicted file(s) replayed ({when:%Y-%m-%d %H:%M} UTC); a rule's answer "
                  f"lands alone at >= {100 * settings.min_precision:g}% precision over >= {settings.min_cases} "
                  "cases (\\[trust] in forkflow.toml), else it is a proposal a person approves", soft_wrap=True)
    if not rows:
        console.print("no rule has answered on this fork's past picks yet: every rule proposes")
        return 0
    console.print(f"{'cases':>6} {'identical':>9} {'different':>9} {'precision':>9}  {'status':<9} rule", highlight=False)
    for r in rows:
        prec = "-" if r["precision"] is None else f"{100 * float(str(r['precision'])):.0f}%"
        console.print(f"{r['cases']:>6} {r['identical']:>9} {r['different']:>9} {prec:>9}  {r['status']:<9} "
                      f"{escape(str(r['rule']))}", highlight=False, soft_wrap=True)
    return 0


def _waiting_proposal(c: Context, x: crecords.ConflictInfo) -> approval.Proposal | None:
    if x.status != "open":
        return None
    with c.store.session_scope() as s:
        return approval.proposal(s, c.fork_id, x)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "unknown user"


@conflicts_app.command("approve")
def conflicts_approve(
    cid: Annotated[int, typer.Argument(help="Conflict id.")],
    proposal: Annotated[str | None, typer.Option(
        "--proposal", help="The proposal's hash, as `forkflow conflicts show ID` prints it.")] = None,
    repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Approve the agent's proposal for a conflict (read it in `forkflow conflicts show ID`); the
    next `forkflow ingest` picks with it and runs L1."""
    c = open_context(repo, store)
    with c.store.session_scope() as s:
        x, p = approval.approve(s, c.fork_id, cid, f"{_user()} (cli)", proposal)
    console.print(f"approved proposal {p.digest}; `forkflow ingest --land` will use it for "
                  f"{short(x.upstream_sha)} {escape(x.path)}")
    return 0


def resolution_regions(x: crecords.ConflictInfo, data: bytes) -> list[str]:
    """The resolved text of each region of a conflict, or a UserError naming the guardrail it fails
    (the same checks a resolver's proposal passes)."""
    case = case_from_marked(x.upstream_sha, x.subject, x.path, ConflictKind(x.kind), x.marked, x.key)
    assert case is not None, "has_file_resolution(x) first"
    verdict = guardrails.check(case, data)
    if not verdict.ok:
        raise UserError(f"refused: {verdict.reason} ({x.path}); start from `forkflow conflicts show {x.id}`, "
                        "edit only between the markers, remove them, and keep the file parsing")
    return list(verdict.regions)


# -- demo ------------------------------------------------------------------------
def demo(
    keep: Annotated[Path | None, typer.Option("--keep", help="Keep the sample in this folder to explore.")] = None,
    repo: Annotated[Path | None, typer.Option("--repo", help="Show status, plan and a dry run of an "
                                                             "existing fork instead (writes nothing to git).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Then open the dashboard on the result "
                                                        "(with a simulated year of nightly history).")] = False,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Dashboard port, with --serve.")] = 8040,
) -> int:
    """Generate a sample upstream and fork, then run init, status, plan and ingest --land on it."""
    from forkflow.demo import check_keep, run_demo, run_demo_on

    if repo is not None:
        if keep is not None or serve:
            raise UserError("--keep and --serve are for the generated sample; drop them when passing --repo")
        return run_demo_on(repo, console)
    check_keep(keep)
    if serve:
        import signal
        import sys

        from forkflow.web.serve import serve_demo

        # SIGTERM (a service manager, `kill`) must unwind like Ctrl-C, so the temporary sample is
        # removed; uvicorn re-raises the signal after its shutdown, which would kill us mid-cleanup
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        try:
            return serve_demo(keep, console, port=port)
        finally:
            signal.signal(signal.SIGTERM, previous)
    return run_demo(keep, console)


def register(app: typer.Typer) -> None:
    app.command()(plan)
    app.command("ingest")(ingest_cmd)
    app.add_typer(conflicts_app, name="conflicts")
    app.command()(demo)
