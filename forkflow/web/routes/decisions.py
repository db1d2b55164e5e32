"""A person's decision from the dashboard: skip, defer or won't-port an upstream commit.

The same as `forkflow decide`; it needs the operator's token (checked before anything else) and
the fork's checkout, and is logged whether done or refused (issue 12).
"""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from forkflow.errors import UserError
from forkflow.models import Decision
from forkflow.web.errors import Unavailable
from forkflow.web.security import action_done, action_form, record
from forkflow.web.source import Source

router = APIRouter()
VERDICTS = {v.value: v for v in Decision}


@router.post("/commits/{sha}/decide", name="commit-decide")
@router.post("/api/commits/{sha}/decide", name="commit-decide")
async def decide_commit(request: Request, sha: str) -> Response:
    """Form fields: verdict (skip, defer, wont-port or clear), reason, until (YYYY-MM-DD), task."""
    target = f"upstream commit {sha[:40]}"
    form = await action_form(request, "commit-decide", target)
    return await run_in_threadpool(_decide, request, sha[:40], form, target)


def _decide(request: Request, sha: str, form: dict[str, str], target: str) -> Response:
    from forkflow.ledger.decisions import decide

    src: Source = request.app.state.source
    name = form.get("verdict", "")
    if name not in VERDICTS and name != "clear":
        record(request, "commit-decide", target, "refused: bad verdict")
        raise UserError(f"verdict must be one of {', '.join(VERDICTS)} or clear, not {name!r}")
    if src.ctx is None:
        record(request, "commit-decide", target, "refused: no checkout")
        raise Unavailable("a decision reads the fork's history: start the dashboard in the fork's checkout "
                          "(forkflow serve --repo PATH --token ...)")
    try:
        (result,) = decide(src.ctx.repo, src.ctx.config, src.ctx.store, src.ctx.fork_id, [sha], VERDICTS.get(name), form.get("reason", ""),
                           form.get("until") or None, form.get("task", ""))
    except UserError as e:
        record(request, "commit-decide", target, f"refused: {e}")
        raise
    d = result.decision
    record(request, "commit-decide", target, "done", verdict=name, reason=d.reason if d else "")
    return action_done(request, f"/commits/{result.sha}", {
        "sha": result.sha, "verdict": name, "disposition": d.disposition.value if d else "PENDING",
        "reason": d.describe() if d else ""})
