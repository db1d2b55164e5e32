"""`forkflow decide` (a person's skip / defer / won't-port) and `forkflow decisions` (the list)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, console, print_json, short
from forkflow.context import open_context
from forkflow import wiring
from forkflow.errors import UserError
from forkflow.ledger.decisions import decide as decide_commits
from forkflow.ledger.classify import decider_of
from forkflow.models import Decision


def decide(
    commits: Annotated[list[str], typer.Argument(help="Upstream SHAs (short ones too) or #PR numbers.")],
    skip: Annotated[bool, typer.Option("--skip", help="Not needed by the fork.")] = False,
    defer: Annotated[bool, typer.Option("--defer", help="Later: kept out of ingestion until --until.")] = False,
    wont_port: Annotated[bool, typer.Option("--wont-port", help="The fork will never take it.")] = False,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the decision: pending again.")] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why (shown in status and bundle messages).")] = "",
    until: Annotated[str | None, typer.Option("--until", help="With --defer: YYYY-MM-DD it lapses.")] = None,
    task: Annotated[str, typer.Option("--task", help="A task or issue URL that tracks it.")] = "",
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Record a person's decision on upstream commits; ingestion then plans around them."""
    chosen = [v for v, on in ((Decision.SKIP, skip), (Decision.DEFER, defer), (Decision.WONT_PORT, wont_port)) if on]
    if len(chosen) + int(clear) != 1:
        raise UserError("pass exactly one of --skip, --defer, --wont-port or --clear")
    verdict = chosen[0] if chosen else None
    ctx = open_context(repo, store)
    results = decide_commits(ctx.repo, ctx.config, ctx.store, ctx.fork_id, commits, verdict, reason, until, task)
    if json_out:
        print_json({"decisions": [
            {"sha": r.sha, "subject": r.subject, "cleared": r.decision is None,
             "verdict": r.decision.verdict.value if r.decision and r.decision.verdict else None,
             "disposition": r.decision.disposition.value if r.decision else "PENDING",
             "reason": r.decision.reason if r.decision else "", "until": r.decision.until if r.decision else None,
             "task": r.decision.task if r.decision else ""}
            for r in results]})
        return 0
    for r in results:
        what = "cleared (pending again)" if r.decision is None else r.decision.describe()
        console.print(f"{short(r.sha)}  {escape(r.subject[:60])}: {escape(what)}")
    return 0


def decisions(
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Every SKIPPED and DEFERRED upstream commit, and who decided: a person, forkflow, the fork's messages."""
    ledger = wiring.ledger(open_context(repo, store))
    rows = [(e, who) for e in ledger.entries if (who := decider_of(e)) is not None]
    if json_out:
        print_json({"decisions": [
            {"sha": e.commit.sha, "pr": e.pr, "subject": e.commit.subject, "disposition": e.disposition.value,
             "decided_by": who, "reason": e.reason} for e, who in rows]})
        return 0
    if not rows:
        console.print("no decisions: nothing skipped or deferred")
        return 0
    t = Table(title="decisions on upstream commits")
    for col in ("sha", "pr", "subject", "disposition", "decided by", "reason"):
        t.add_column(col, overflow="fold")
    for e, who in rows:
        t.add_row(short(e.commit.sha), f"#{e.pr}" if e.pr else "", escape(e.commit.subject[:60]),
                  e.disposition.value, who, escape(e.reason[:120]))
    console.print(t)
    return 0


def register(app: typer.Typer) -> None:
    app.command()(decide)
    app.command()(decisions)
