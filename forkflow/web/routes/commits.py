"""One commit, everywhere the store knows it: its disposition, landing units, runs, metrics, bisections."""
from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from forkflow.errors import UserError
from forkflow.landing import records as landing_records
from forkflow.ledger import records as ledger_records
from forkflow.models import Ledger, Sha
from forkflow.regress import records as regress_records
from forkflow.web import reads
from forkflow.web.errors import NotFound
from forkflow.web.render import both, page
from forkflow.web.source import Source

router = APIRouter()
_HEX = re.compile(r"^[0-9a-f]{4,64}$")


def _entry(ledger: Ledger | None, sha: str) -> dict[str, Any] | None:
    if ledger is None:
        return None
    for e in ledger.entries:
        if e.commit.sha.startswith(sha):
            return {"sha": e.commit.sha, "subject": e.commit.subject, "author": e.commit.author,
                    "date": e.commit.date, "pr": e.pr, "disposition": e.disposition.value,
                    "fork_shas": list(e.fork_shas), "reason": e.reason,
                    "evidence": [ev.describe() for ev in e.evidence]}
    return None


@both(router, "/commits/{sha}")
def commit(request: Request, sha: str) -> Response:
    sha = sha.lower()
    if not _HEX.match(sha):
        raise UserError(f"{sha[:80]!r} is not a commit sha; pass 4 to 64 hex digits")
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None:
            raise NotFound(f"no commit {sha} in the store: it is empty")
        ledger, _, _ = src.ledger(s, fid)
        entry = _entry(ledger, sha)
        full = entry["sha"] if entry else sha
        decision = next((d for d in ledger_records.recorded_decisions(s, fid) if d.sha == full), None)
        units = [u for uid in reads.units_with(s, fid, full)
                 if (u := landing_records.unit(s, fid, uid)) is not None]
        bisections = [regress_records.bisection(s, fid, b) for b in reads.bisections_naming(s, fid, full)]
        runs = reads.runs_at(s, fid, [full]).get(Sha(full), [])
        metrics = reads.metric_revs(s, fid, full)
    if not (entry or decision or units or bisections or runs or metrics):
        raise NotFound(f"no commit {sha} in the store (not an upstream commit of the ledger, not in a "
                       "landing unit, run, metric series or bisection)")
    data = {
        "sha": full, "upstream": entry,
        "decision": None if decision is None else {"disposition": decision.disposition.value,
                                                   "reason": decision.reason,
                                                   "fork_shas": list(decision.fork_shas)},
        "units": [{"id": u.id, "kind": u.kind, "name": u.name, "status": u.status, "summary": u.summary,
                   "candidate_sha": u.candidate_sha} for u in units],
        "bisections": [{"id": b.id, "alert_id": b.alert_id, "metric": b.metric, "status": b.status,
                        "as": "upstream commit" if b.culprit_upstream_sha == full else "fork commit",
                        "confidence": b.confidence} for b in bisections if b is not None],
        "runs": runs, "metrics": metrics,
        # a person's skip / defer / won't-port, as `forkflow decide` (routes/decisions.py)
        "can_decide": entry is not None and request.app.state.token is not None and src.ctx is not None,
    }
    return page(request, "commit.html", data)
