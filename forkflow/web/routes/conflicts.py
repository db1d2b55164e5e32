"""Conflicts kept for a person: the list (owners, age, filter by owner) and one conflict's page.

The page shows what `forkflow conflicts show` prints: the regions with context and line numbers,
markers highlighted, beside them the upstream commit's change and the fork's own change (the hunks
that touch the regions) and any proposal as a diff.  Two actions settle it, each needing the
operator's token and logged whether done or refused: approving the proposal shown (the form
carries its hash: a proposal replaced since is refused, `conflicts/approval.py`), or a decision on
the upstream commit (`/commits/SHA/decide`, routes/decisions.py).  Once settled, the page offers
the re-run of its landing unit, which lands it when L1 passes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from forkflow.conflicts import approval
from forkflow.conflicts import owners as cowners
from forkflow.conflicts import records as conflict_records
from forkflow.conflicts import regions as cregions
from forkflow.conflicts.records import ConflictInfo
from forkflow.conflicts.rulebook import load_book
from forkflow.conflicts.rules_view import proposal_diff
from forkflow.conflicts.settle import by_hand, has_file_resolution
from forkflow.errors import ForkflowError, UserError
from forkflow.landing import records as landing_records
from forkflow.models import RETRYABLE_STATES, Ledger, UnitState
from forkflow.web.errors import NotFound, Unavailable
from forkflow.web.render import RowId, both, emptiness, page
from forkflow.web.security import action_done, action_form, record
from forkflow.web.source import Source

router = APIRouter()
EMPTY_HINT = "no open conflict: `forkflow ingest --land` keeps here what no resolver settles"


def _finder(src: Source, ledger: Ledger | None) -> cowners.OwnerFinder | None:
    """The fork's OwnerFinder, when the dashboard runs in the fork's checkout."""
    if src.ctx is None:
        return None
    from forkflow.landing.settings import ingest_settings
    from forkflow.state import state_dir

    ctx = src.ctx
    chains = {spec.name: spec.owner for spec in ingest_settings(ctx.config).chains if spec.owner}
    return cowners.owner_finder(ctx.repo, ctx.config, ledger, chains, state_dir(ctx.repo) / "cache" / "owners.json")


def _save(finder: cowners.OwnerFinder | None) -> None:
    try:
        if finder is not None:
            finder.save()
    except OSError:  # only a cache
        pass


def _doc(c: conflict_records.ConflictInfo, who: cowners.Owners | None, when: int | None,
         now: int | None) -> dict[str, Any]:
    return {"id": c.id, "upstream_sha": c.upstream_sha, "subject": c.subject, "path": c.path, "kind": c.kind,
            "chain": c.chain, "status": c.status, "seen": c.seen, "last_seen": c.last_seen, "tried": list(c.tried),
            "owners": list(who.people) if who else [], "owners_source": who.source if who else "",
            "upstream_date": when, "age_days": cowners.age_days(when, now)}


@both(router, "/ingestion/conflicts")
def conflict_list(request: Request, owner: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    """The open conflicts, oldest upstream commit first, with their owners; `?owner=` filters."""
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        rows = conflict_records.conflicts(s, fid, "open") if fid is not None else []
        waiting = {x.id for x in rows if fid is not None and approval.proposal(s, fid, x) is not None}
        ledger = src.ledger(s, fid)[0] if fid is not None and rows else None
    finder = _finder(src, ledger) if rows else None
    dates = cowners.commit_dates(src.ctx.repo, [x.upstream_sha for x in rows]) if src.ctx is not None else {}
    now = cowners.upstream_now(src.ctx.repo, src.ctx.config) if src.ctx is not None and rows else None
    who = {x.id: finder.conflict(x) for x in rows} if finder is not None else {}
    _save(finder)
    want = (owner or "").strip()
    if want:
        rows = [x for x in rows if x.id in who and who[x.id].names(want)]
    rows.sort(key=lambda x: (x.upstream_sha not in dates, dates.get(x.upstream_sha, 0), x.id))
    people = sorted({p for o in who.values() for p in o.people}, key=str.casefold)
    data = {**emptiness(not rows and not want, EMPTY_HINT), "owner": want, "people": people,
            "owners_known": finder is not None,
            "conflicts": [_doc(x, who.get(x.id), dates.get(x.upstream_sha), now) | {"proposal_waiting": x.id in waiting}
                          for x in rows]}
    return page(request, "ingestion_conflicts.html", data)


def _unit_of(s: Session, fid: int, sha: str) -> dict[str, Any] | None:
    """The newest landing unit that waits with `sha`: its re-run lands the commit once settled."""
    found = [u for u in landing_records.units(s, fid, RETRYABLE_STATES)
             if u.status is not UnitState.PASSED and any(m == sha for m, _ in u.members)]
    if not found:
        return None
    u = found[-1]
    return {"id": u.id, "name": u.name, "status": u.status, "href": f"/ingestion/units/{u.id}"}


_none = cregions.Change("", (), 0, False)  # no checkout: no diffs


@both(router, "/ingestion/conflicts/{conflict_id}")
def conflict(request: Request, conflict_id: RowId) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None or (c := conflict_records.conflict(s, fid, conflict_id)) is None:
            raise NotFound(f"no conflict {conflict_id}; /ingestion/conflicts lists the open ones "
                           "(`forkflow conflicts` too)")
        tried = conflict_records.attempts(s, fid, c.upstream_sha)
        waiting = approval.proposal(s, fid, c) if c.status == "open" else None
        book = load_book(s, fid) if waiting is not None and waiting.rule else None  # a rule's record
        unit = _unit_of(s, fid, c.upstream_sha)
        others = [{"id": y.id, "path": y.path} for y in conflict_records.conflicts(s, fid, "open")
                  if y.upstream_sha == c.upstream_sha and y.id != c.id]
        ledger = src.ledger(s, fid)[0] if src.ctx is not None else None
    finder = _finder(src, ledger)
    who = finder.conflict(c) if finder is not None else None
    _save(finder)
    when = cowners.commit_dates(src.ctx.repo, [c.upstream_sha]).get(c.upstream_sha) if src.ctx is not None else None
    view = cregions.three_way(src.ctx.repo, c) if src.ctx is not None else None
    excerpts = view.regions_json() if view is not None else cregions.ThreeWay(
        tuple(cregions.excerpts(c.marked)), 0, _none, _none, "").regions_json()
    now = cowners.upstream_now(src.ctx.repo, src.ctx.config) if src.ctx is not None else None
    data = {"conflict": _doc(c, who, when, now) | {"base_sha": c.base_sha, "marked": c.marked, "key": c.key},
            "settle": _settle(c, src), "unit": unit, "others": others,
            "region_count": cregions.region_count(c.marked), "regions": excerpts,
            "upstream_change": view.upstream.to_json() if view is not None else None,
            "fork_change": view.fork.to_json() if view is not None else None,
            "attempts": [{"path": a.path, "backend": a.backend, "outcome": a.outcome, "reason": a.reason,
                          "duration_ms": a.duration_ms} for a in tried],
            "proposal": None if waiting is None else {"attempt_id": waiting.attempt_id, "hash": waiting.digest,
                                                      "backend": waiting.backend, "content": waiting.content,
                                                      "rule": waiting.rule, "diff": proposal_diff(c, waiting.content),
                                                      "record": book[0].record(waiting.rule).describe() if book else ""},
            "can_approve": waiting is not None and request.app.state.token is not None,
            "can_decide": c.status == "open" and request.app.state.token is not None and src.ctx is not None,
            "can_land": c.status != "open" and not others and unit is not None
            and request.app.state.token is not None and src.ctx is not None}
    return page(request, "ingestion_conflict.html", data)


@router.post("/ingestion/conflicts/{conflict_id}/approve", name="conflict-approve")
@router.post("/api/ingestion/conflicts/{conflict_id}/approve", name="conflict-approve")
async def approve_conflict(request: Request, conflict_id: RowId) -> Response:
    """Approve the agent's proposal for a conflict (token-checked, logged); the next ingest picks
    with it and runs L1 (conflicts/approval.py).  The form's `proposal` field is the hash of the
    proposal the page showed: a proposal replaced since is refused."""
    form = await action_form(request, "conflict-approve", f"conflict {conflict_id}")
    return await run_in_threadpool(_approve, request, conflict_id, form.get("proposal"))


def _fork_file(src: Source) -> Callable[[ConflictInfo], bytes | None] | None:
    """Reads the fork's own file on the conflict's tip (the parse check `ingest` makes), when the
    dashboard serves a checkout."""
    ctx = src.ctx
    if ctx is None:
        return None

    def read(x: ConflictInfo) -> bytes | None:
        try:
            return ctx.repo.git_bytes("cat-file", "blob", f"{x.base_sha}:{x.path}")
        except ForkflowError:
            return None
    return read


def _approve(request: Request, conflict_id: int, shown: str | None) -> Response:
    target = f"conflict {conflict_id}"
    src: Source = request.app.state.source
    client = request.client.host if request.client else "?"
    try:
        with src.session() as s:
            fid = src.fork(s)
            if fid is None:
                raise UserError(f"no conflict {conflict_id}")
            x, p = approval.approve(s, fid, conflict_id, f"the dashboard operator token from {client}", shown,
                                    _fork_file(src))
    except UserError as e:
        record(request, "conflict-approve", target, f"refused: {e}")
        raise Unavailable(str(e)) from None
    record(request, "conflict-approve", target, "approved", attempt=p.attempt_id, proposal=p.digest, path=x.path)
    href = f"/ingestion/conflicts/{conflict_id}"
    return action_done(request, href, {"conflict_id": conflict_id, "state": "approved", "href": href})


def _settle(c: conflict_records.ConflictInfo, src: Source) -> str:
    """What settles the conflict, as `forkflow conflicts show` says it (binary, delete/modify and
    submodule conflicts have no text for `conflicts resolve`)."""
    if has_file_resolution(c):
        return (f"`forkflow conflicts edit {c.id}` (writes the marked file, opens $EDITOR), then "
                f"`forkflow conflicts resolve {c.id}` (or write the resolved file yourself, then "
                f"`forkflow conflicts resolve {c.id} --file FILE`); the resolution is recorded and reused")
    return by_hand(c, src.ctx.config.fork_branch if src.ctx is not None else "the fork branch")
