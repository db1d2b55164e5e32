"""`forkflow init`, `forkflow status`, `forkflow history`."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress
from rich.table import Table

from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, console, print_json, short
from forkflow.cli.provenance_view import provenance_of, render_provenance
from forkflow.context import open_context
from forkflow import wiring
from forkflow.errors import UserError
from forkflow.ledger import records as ledger_records
from forkflow.ledger.history import backfill, record_snapshot
from forkflow.ledger.merges import intake_of
from forkflow.ledger.report import headline_of, snapshot_of, status_dict, stored_conflicts
from forkflow.models import Disposition, LedgerEntry
from forkflow.init import init_fork
from forkflow.render import render_init, render_status


def init(
    upstream: Annotated[str, typer.Option("--upstream", help="Remote name, URL or path of upstream.")],
    upstream_branch: Annotated[str, typer.Option(help="Upstream branch to follow.")] = "main",
    fork_branch: Annotated[str, typer.Option(help="The fork's own branch.")] = "main",
    store: StoreOpt = None,
    repo: RepoOpt = Path("."),
) -> int:
    """Write forkflow.toml and create the store (idempotent, non-interactive)."""
    r = init_fork(repo, upstream, upstream_branch, fork_branch, store)
    render_init(console, r, store)
    return 0


def status(
    json_out: JsonOpt = False,
    commits: Annotated[bool, typer.Option("--commits", help="One row per upstream commit.")] = False,
    only: Annotated[list[str] | None, typer.Option(
        "--only", help="With --commits: only these dispositions (PENDING, PICKED, SKIPPED, DEFERRED, "
        "REVERTED; repeat or comma-separate).")] = None,
    grep: Annotated[str | None, typer.Option(
        "--grep", help="With --commits: only commits whose subject or sha contains this (case-insensitive).")] = None,
    fetch: Annotated[bool, typer.Option("--fetch", help="Fetch upstream first.")] = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """How far behind upstream the fork is, and what is left (stores a history snapshot)."""
    wanted = _dispositions(only)
    commits = commits or wanted is not None or grep is not None
    ctx = open_context(repo, store)
    if fetch:
        ctx.repo.fetch(ctx.config.upstream_remote, ctx.config.upstream_branch)
    ledger = wiring.ledger(ctx)
    # days behind counts what is landed or decided, never what forkflow only holds (docs/ledger.md)
    head = headline_of(ledger, ctx.config, conflicts=stored_conflicts(ctx.store, ctx.fork_id),
                       fork_point_date=ctx.repo.commit_date(ledger.fork_point))
    record_snapshot(ctx.store, ctx.fork_id, snapshot_of(ledger, datetime.now(timezone.utc), "status", head))
    keep = _row_filter(wanted, grep)
    # landed on a clone's branch, not yet on the shared one: not decisions until pushed (docs/team.md)
    from forkflow.landing.shared import pending_summary  # the landing's modules read pygit2: not at start-up

    waiting, tips = pending_summary(ctx.store, ctx.fork_id)
    if json_out:
        doc = status_dict(ledger, with_commits=commits, head=head)
        doc["intake"] = intake_of(ctx.config)  # pick or merge: how the fork takes upstream (docs/ledger.md)
        doc["pending_push"] = {"decisions": waiting, "fork_commits": tips}
        if commits:
            settled = provenance_of(ctx.repo, ledger, keep)  # Resolved-By, Approved-By, L1-Run read back
            doc["commits"] = [c | {"provenance": [[k, v] for f in e.fork_shas for k, v in settled.get(f, [])]}
                              for c, e in zip(doc["commits"], ledger.entries) if keep(e)]
        print_json(doc)
    else:
        render_status(console, ledger, commits, keep, head)
        if commits:
            render_provenance(console, provenance_of(ctx.repo, ledger, keep))
        if waiting:
            console.print(f"pending push: {waiting} decision(s) of landings on a clone's {ctx.config.fork_branch} that the "
                          f"shared branch lacks (up to {tips[-1][:12]}); the next `forkflow ingest --land --push` pushes "
                          "them, or drops and re-plans them if the shared branch moved", soft_wrap=True, highlight=False)
    return 0


def _dispositions(only: list[str] | None) -> set[Disposition] | None:
    if not only:
        return None
    names = [n.strip().upper() for item in only for n in item.split(",") if n.strip()]
    bad = [n for n in names if n not in Disposition.__members__]
    if bad:
        raise UserError(f"--only {bad[0]} is not a disposition; use {', '.join(Disposition.__members__)}")
    return {Disposition[n] for n in names}


def _row_filter(wanted: set[Disposition] | None, grep: str | None) -> Callable[[LedgerEntry], bool]:
    needle = grep.lower() if grep else None

    def keep(e: LedgerEntry) -> bool:
        if wanted is not None and e.disposition not in wanted:
            return False
        return needle is None or needle in e.commit.subject.lower() or e.commit.sha.startswith(needle)
    return keep


def _parse_date(value: str) -> datetime:
    try:
        d = datetime.fromisoformat(value)
    except ValueError as e:
        raise UserError(f"--since {value!r} is not a date; use YYYY-MM-DD") from e
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def history(
    json_out: JsonOpt = False,
    do_backfill: Annotated[bool, typer.Option("--backfill", help="Rebuild the series from git history.")] = False,
    since: Annotated[str | None, typer.Option(help="Backfill start date, YYYY-MM-DD.")] = None,
    every: Annotated[str, typer.Option(help="Backfill step: day, week or month.")] = "week",
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """The stored series of days behind and backlog; --backfill reconstructs it from git."""
    ctx = open_context(repo, store)
    if do_backfill:
        if since is None:
            raise UserError("--backfill needs --since YYYY-MM-DD")
        start = _parse_date(since)
        with Progress(console=console, transient=True, disable=json_out) as bar:
            task = bar.add_task("backfilling", total=None)

            def step(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            backfill(ctx.repo, ctx.config, ctx.store, ctx.fork_id, start, every, progress=step)
    elif since is not None:
        raise UserError("--since only goes with --backfill")
    with ctx.store.session_scope() as s:
        series = ledger_records.snapshots(s, ctx.fork_id)
    if json_out:
        print_json({"series": [
            {"taken_at": p.taken_at.isoformat(), "source": p.source, "days_behind": p.days_behind,
             "backlog_commits": p.backlog, "fork_tip": p.fork_tip, "upstream_tip": p.upstream_tip,
             "ingestion_point": p.ingestion_point, "inferred": p.inferred, "counts": p.counts}
            for p in series]})
        return 0
    if not series:
        console.print("no history yet: run `forkflow status`, or `forkflow history --backfill --since YYYY-MM-DD`")
        return 0
    t = Table(title="days behind upstream and backlog")
    for col in ("when", "source", "days behind", "backlog", "ingestion point"):
        t.add_column(col)
    for p in series:
        t.add_row(p.taken_at.strftime("%Y-%m-%d %H:%M"), p.source, f"{p.days_behind:g}",
                  str(p.backlog), short(p.ingestion_point) + (" (inferred)" if p.inferred else ""))
    console.print(t)
    return 0


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(status)
    app.command()(history)
