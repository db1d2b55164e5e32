"""Decisions: the page of every decision on record, and a person's decision from the dashboard.

`/decisions` lists who decided what (skip, defer or won't-port an upstream commit), why, until
when and the task, filtered by kind and person, a page at a time.  The decide action is the same
as `forkflow decide`; it needs the operator's token (checked before anything else) and the fork's
checkout, and is logged whether done or refused.
"""
from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from forkflow.errors import UserError
from forkflow.ledger.classify import decider_of
from forkflow.models import Decision, Disposition, Ledger
from forkflow.web import reads
from forkflow.web.errors import Unavailable
from forkflow.web.render import both, emptiness
from forkflow.web.render import page as page_of
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


# -- the decisions on record ---------------------------------------------------------------------

PAGE_MAX = 10**6
FILL_HINT = ("no decision on record yet: a person records one with `forkflow decide SHA --skip|--defer|"
             "--wont-port --reason TEXT` (or on a commit's page, with the operator token)")


IN_HISTORY_SHOWN = 200
# who decided a commit the ledger reads as decided from git, by `decider_of`
_IN_HISTORY = {"opt-out": ("rule", "[ledger] opt_out"), "message": ("message", "the fork's commit messages")}


def _in_history(ledger: Ledger | None) -> list[dict[str, Any]]:
    """The upstream commits decided by a rule the fork configured (`[ledger] opt_out`) or by the
    fork's own commit messages (Skipped / Deferred lists): no stored row, no date, no task."""
    out: list[dict[str, Any]] = []
    for e in () if ledger is None else ledger.entries:
        who = _IN_HISTORY.get(decider_of(e) or "")
        if who is None:
            continue
        verdict = Decision.DEFER if e.disposition is Disposition.DEFERRED else Decision.SKIP
        out.append({"sha": e.commit.sha, "subject": e.commit.subject, "verdict": verdict.value,
                    "disposition": e.disposition.value, "source": who[0], "decided_by": who[1],
                    "reason": e.evidence[0].describe() if e.evidence else e.reason, "until": None, "task": "",
                    "task_href": None, "decided_at": None, "fork_sha": e.evidence[0].fork_sha if e.evidence else None})
    return out


def _task_href(task: str) -> str | None:
    """The task as a link only when it is an http(s) URL of one token; anything else stays text."""
    text = task.strip()
    if not text.lower().startswith(("https://", "http://")) or any(c.isspace() or ord(c) < 32 for c in text):
        return None
    return text


def _pager(path: str, page: int, pages: int, filters: dict[str, str]) -> dict[str, Any]:
    def href(n: int) -> str:
        return path + "?" + urlencode({**filters, "page": n})

    return {"page": page, "pages": pages, "prev": href(page - 1) if page > 1 else None,
            "next": href(page + 1) if page < pages else None}


@both(router, "/decisions")
def decisions(request: Request, kind: Annotated[str, Query(max_length=40)] = "",
              person: Annotated[str, Query(max_length=400)] = "",
              page: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 1) -> Response:
    """Every decision a person (or a rule the fork configured) recorded: who, on which commit,
    which verdict, why, until when, the task; `?kind=skip|defer|wont-port`, `?person=NAME`, `?page=N`."""
    if kind and kind not in VERDICTS:
        raise UserError(f"kind must be one of {', '.join(VERDICTS)}, not {kind[:40]!r}")
    src: Source = request.app.state.source
    rows: list[reads.DecisionBrief] = []
    total, people, ledger = 0, [], None
    with src.session() as s:
        fid = src.fork(s)
        if fid is not None:
            rows, total = reads.decisions_page(s, fid, verdict=kind or None, person=person or None, page=page)
            people = reads.deciders(s, fid)
            ledger = src.ledger(s, fid)[0]
    subjects = {} if ledger is None else {e.commit.sha: e.commit.subject for e in ledger.entries}
    in_history = _in_history(ledger)
    people += sorted({r["decided_by"] for r in in_history} - set(people))
    in_history = [r for r in in_history if (not kind or r["verdict"] == kind) and (not person or r["decided_by"] == person)]
    pages = max(1, -(-total // reads.DECISIONS_PER_PAGE))
    filters = {k: v for k, v in (("kind", kind), ("person", person)) if v}
    data = {
        **emptiness(total == 0 and not in_history and not filters, FILL_HINT),
        "decisions": [{"sha": d.sha, "subject": subjects.get(d.sha, ""), "verdict": d.verdict,
                       "disposition": d.disposition, "source": d.source, "decided_by": d.decided_by,
                       "reason": d.reason, "until": d.until, "task": d.task, "task_href": _task_href(d.task),
                       "decided_at": d.decided_at} for d in rows],
        "total": total, "kinds": list(VERDICTS), "people": people,
        "filter": {"kind": kind, "person": person},
        "pager": _pager("/decisions", page, pages, filters),
        # decisions the ledger reads from git, not the store: a configured rule's, the fork's messages'
        "in_history": in_history[:IN_HISTORY_SHOWN], "in_history_total": len(in_history),
    }
    return page_of(request, "decisions.html", data)
