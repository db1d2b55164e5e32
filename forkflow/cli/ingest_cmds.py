"""`forkflow plan`, `forkflow ingest`, `forkflow demo` (`forkflow conflicts` is in conflict_cmds.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, console, err_console, print_json
from forkflow.cli.progress import PhaseBar, progress_bar
from forkflow.conflicts import records as crecords
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
from forkflow.ledger.headline import Headline, headline_lines
from forkflow.ledger.merges import MERGE, intake_of
from forkflow.ledger.report import headline_of, stored_conflicts
from forkflow.render import (
    exit_code,
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
    head = _headline_after(ctx) if mode is Mode.LAND else None
    if json_out:
        print_json(report_json(report) | {"exit_code": code, "open_conflicts": open_conflicts}
                   | ({"headline": head.to_json()} if head is not None else {}))
    else:
        render_report(console, report)
        render_l1_runs(report)
        if head is not None:  # what `forkflow status` says now: holds do not move the point (docs/ledger.md)
            for label, text in headline_lines(head.to_json()):
                console.print(f"{label}: {escape(text)}", soft_wrap=True, highlight=False)
        render_exit(console, code)
    return code


def _headline_after(ctx: Context) -> Headline:
    """Days behind after the run, read by the same rule as `forkflow status` (the recorded
    ingestion point the report prints counts forkflow's holds too)."""
    ledger = wiring.ledger(ctx)
    return headline_of(ledger, ctx.config, conflicts=stored_conflicts(ctx.store, ctx.fork_id),
                       fork_point_date=ctx.repo.commit_date(ledger.fork_point))


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
    app.command()(demo)
