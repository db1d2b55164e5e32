"""`forkflow validate`, `forkflow nightly`, `forkflow l3 request|run|signoff|list`.

Exit codes of validate and nightly: 0 everything selected ran and passed, 1 a failure (a test,
or a saturation finding: a suite that silently did not run), 4 INFRA (the runner failed).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.cli.common import MAX_ID, JsonOpt, RepoOpt, StoreOpt, console, err_console, print_json, short
from forkflow import wiring
from forkflow.context import open_context
from forkflow.errors import UserError
from forkflow.tiers import l3 as l3_core
from forkflow.tiers.nightly import nightly as run_nightly
from forkflow.tiers.records import L3RequestInfo
from forkflow.tiers.tiers import Tier
from forkflow.tiers.validate import ValidateRequest, ValidationOutcome, validate as run_validate

RunnerOpt = Annotated[str | None, typer.Option("--runner", help="local or ray (default: \\[validation] runner).")]
AddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="Ray head: auto, host:port or ray://host:port (default: \\[validation] ray_address).")]
_COLOR = {"PASS": "green", "FAIL": "red", "INFRA": "yellow"}


def _tier(value: str) -> Tier:
    try:
        return Tier(value.upper())
    except ValueError:
        raise UserError(f"--tier {value!r} is not a tier; use L1, L2 or L3") from None


def _say(json_out: bool) -> Any:
    return None if json_out else (lambda line: err_console.print(escape(line), highlight=False))


def outcome_dict(o: ValidationOutcome) -> dict[str, Any]:
    return {"run_id": o.run_id, "status": o.status, "tier": o.tier.value, "rev": o.rev,
            # every finding the summary counts: the run's own, then each suite's
            "summary": o.summary, "findings": list(o.findings) + [f for r in o.suites for f in r.findings],
            "suites": [{"suite": r.suite, "status": r.status, "tests_ran": r.tests_ran,
                        "tests_failed": r.tests_failed, "duration_s": round(r.duration_s, 3),
                        "log": r.log_path, "findings": list(r.findings), "message": r.message}
                       for r in o.suites],
            "not_selected": [{"suite": s, "why": why} for s, why in o.skipped]}


def _render(o: ValidationOutcome) -> None:
    t = Table(title=f"{o.tier.value} at {short(o.rev)}: run {o.run_id}")
    for col in ("suite", "status", "tests", "failed", "time", "log / finding"):
        t.add_column(col, overflow="fold")
    for r in o.suites:
        note = r.findings[0] if r.findings else (r.log_path if r.status != "PASS" else "")
        t.add_row(r.suite, f"[{_COLOR.get(r.status, 'white')}]{r.status}[/]", str(r.tests_ran),
                  str(r.tests_failed), f"{r.duration_s:.1f}s", escape(note))
    for name, why in o.skipped:
        t.add_row(name, "[dim]not selected[/]", "", "", "", escape(why))
    console.print(t)
    for f in o.findings:
        console.print(f"[red]finding:[/] {escape(f)}")
    console.print(f"[{_COLOR.get(o.status, 'white')}]{o.status}[/]: {escape(o.summary)}")


def _show(o: ValidationOutcome, json_out: bool) -> int:
    """Print the outcome (JSON or a table); its exit code."""
    print_json(outcome_dict(o)) if json_out else _render(o)
    return o.exit_code


def validate(
    tier: Annotated[str, typer.Option("--tier", help="L1, L2 or L3.")],
    rev: Annotated[str, typer.Option("--rev", help="The fork commit to validate.")] = "HEAD",
    changed_from: Annotated[str | None, typer.Option(
        "--changed-from", help="Select suites and tests by what changed since this commit.")] = None,
    suite: Annotated[list[str] | None, typer.Option("--suite", help="Only this suite (repeatable).")] = None,
    runner: RunnerOpt = None,
    ray_address: AddressOpt = None,
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Run a tier's suites on a rev, check nothing silently skipped, store every outcome."""
    v = wiring.validator(open_context(repo, store))
    req = ValidateRequest(_tier(tier), rev, changed_from, tuple(suite or ()), runner, ray_address)
    return _show(run_validate(v, req, _say(json_out)), json_out)


def nightly(
    force: Annotated[bool, typer.Option("--force", help="Measure again even if this tip has a nightly run.")] = False,
    runner: RunnerOpt = None,
    ray_address: AddressOpt = None,
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Run L2 on the fork tip and store its metric series (for cron)."""
    ctx = open_context(repo, store)
    res = run_nightly(wiring.validator(ctx), ctx.config.fork_branch, force=force, runner=runner, ray_address=ray_address, reporter=_say(json_out))
    if res.outcome is None:
        msg = f"tip {short(res.tip)} already has nightly run {res.previous_run_id}; pass --force to measure again"
        print_json({"tip": res.tip, "skipped": True, "previous_run_id": res.previous_run_id}) \
            if json_out else console.print(msg)
        return 0
    from forkflow.regress.service import measured_in_run  # lazy: validate starts without numpy

    o = res.outcome
    measured = measured_in_run(ctx.store, ctx.fork_id, o.run_id) if o.run_id is not None else []
    if json_out:
        print_json(outcome_dict(o) | {"metrics": [m.to_dict() for m in measured]})
        return o.exit_code
    _render(o)
    if measured:
        t = Table(title=f"measured at {short(o.rev)} (run {o.run_id}), beside the series")
        for col in ("metric", "value", "recent median", "change"):
            t.add_column(col, overflow="fold")
        for m in measured:
            recent = f"{m.before:.6g} ({m.commits_before} commits)" if m.before is not None else "first point"
            change = f"{m.change:+.1%}" if m.change is not None else "-"
            t.add_row(escape(m.name), f"{m.value:.6g} {escape(m.unit)}".strip(), recent, change)
        console.print(t)
        console.print("next: forkflow detect --bisect (change points over the whole series)")
    return o.exit_code


l3_app = typer.Typer(help="L3 manual tests: request, run, sign off.", no_args_is_help=True)


@l3_app.command("request")
def l3_request(
    suite: Annotated[str, typer.Argument(help="An L3 suite of forkflow.toml.")],
    rev: Annotated[str, typer.Option("--rev", help="The fork commit to test.")] = "HEAD",
    by: Annotated[str, typer.Option("--by", help="Who asks.")] = "",
    note: Annotated[str, typer.Option("--note")] = "",
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Ask for an L3 suite to run on a rev."""
    rid = l3_core.request(wiring.validator(open_context(repo, store)), suite, rev, by, note)
    print_json({"request_id": rid}) if json_out else console.print(
        f"L3 request {rid}; next: forkflow l3 run {rid}")
    return 0


@l3_app.command("run")
def l3_run(
    request_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="The request id.")],
    runner: RunnerOpt = None,
    ray_address: AddressOpt = None,
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Run a requested L3 suite."""
    return _show(l3_core.run_request(wiring.validator(open_context(repo, store)), request_id, runner, ray_address,
                                     _say(json_out)), json_out)


@l3_app.command("signoff")
def l3_signoff(
    request_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="The request id.")],
    verdict: Annotated[str, typer.Option("--verdict", help="accept or reject.")],
    owner: Annotated[str | None, typer.Option("--owner", help="Who you expect to sign as; must be the "
                                              "account \\[l3] identity finds (a typed name is no identity).")] = None,
    note: Annotated[str, typer.Option("--note")] = "",
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Sign off (accept or reject) a request's results, as the account of your forge token."""
    try:
        v = l3_core.SignOff(verdict.lower())
    except ValueError:
        raise UserError(f"--verdict {verdict!r} must be accept or reject") from None
    ctx = open_context(repo, store)
    who = l3_core.cli_identity(ctx.config)
    if owner is not None and owner != who.name:
        raise UserError(f"--owner {owner!r} is not who signs off: the {who.how} is '{who.name}'; "
                        "sign off with that person's own token")
    sid = l3_core.signoff(wiring.validator(ctx), request_id, who, v, note)
    print_json({"signoff_id": sid, "request_id": request_id, "verdict": v.value, "owner": who.name,
                "identity": who.how}) if json_out else \
        console.print(f"request {request_id}: {v.value}ed by {escape(who.name)} ({who.how})")
    return 0


def _request_dict(r: L3RequestInfo) -> dict[str, Any]:
    return {"id": r.id, "suite": r.suite, "rev": r.rev, "state": r.state, "requested_by": r.requested_by,
            "requested_at": r.requested_at.isoformat(), "note": r.note,
            "runs": [{"run_id": x.id, "status": x.status, "summary": x.summary} for x in r.runs],
            "signoffs": [{"owner": x.owner, "verdict": x.verdict, "note": x.note, "run_id": x.run_id,
                          "signed_at": x.signed_at.isoformat()} for x in r.signoffs]}


@l3_app.command("list")
def l3_list(json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Requests, their runs and sign-offs, newest first."""
    reqs = l3_core.list_requests(wiring.validator(open_context(repo, store)))
    if json_out:
        print_json({"requests": [_request_dict(r) for r in reqs]})
        return 0
    t = Table(title="L3 requests")
    for col in ("id", "suite", "rev", "state", "runs", "sign-offs"):
        t.add_column(col, overflow="fold")
    for r in reqs:
        t.add_row(str(r.id), r.suite, short(r.rev), r.state,
                  " ".join(f"#{x.id}:{x.status}" for x in r.runs),
                  escape("; ".join(f"{x.owner} {x.verdict}" + (f" ({x.note})" if x.note else "")
                                   for x in r.signoffs)))
    console.print(t if reqs else "no L3 requests yet: forkflow l3 request SUITE --rev REV")
    return 0


def register(app: typer.Typer) -> None:
    app.command()(validate)
    app.command()(nightly)
    app.add_typer(l3_app, name="l3")
