"""One commit, everywhere the store knows it: its disposition, landing units, runs, metrics, bisections."""
from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from forkflow.errors import UserError
from forkflow.landing import records as landing_records
from forkflow.ledger import records as ledger_records
from forkflow.ledger.provenance import read_provenance
from forkflow.models import Ledger, RecordedDecision, Sha
from forkflow.regress import records as regress_records
from forkflow.web import reads
from forkflow.web.errors import NotFound
from forkflow.web.render import both, page
from forkflow.web.source import Source

router = APIRouter()
_HEX = re.compile(r"^[0-9a-f]{4,64}$")
_RUN = re.compile(r"#?([1-9][0-9]{0,17})\b", re.A)


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
        conflicts = reads.conflicts_of(s, fid, full)
        bisections = [regress_records.bisection(s, fid, b) for b in reads.bisections_naming(s, fid, full)]
        runs = reads.runs_at(s, fid, [full]).get(Sha(full), [])
        metrics = reads.metric_revs(s, fid, full)
    if not (entry or decision or units or conflicts or bisections or runs or metrics):
        raise NotFound(f"no commit {sha} in the store (not an upstream commit of the ledger, not in a "
                       "landing unit, run, metric series or bisection)")
    decided = decision is not None and decision.source.value != "auto"  # a person's (or a configured rule's)
    landed_as = list(entry["fork_shas"]) if entry else ([full] if any(u.candidate_sha == full for u in units) else [])
    data = {
        "sha": full, "upstream": entry,
        "decision": None if decision is None else {"disposition": decision.disposition.value,
                                                   "reason": decision.reason, "source": decision.source.value,
                                                   "verdict": decision.verdict.value if decision.verdict else "",
                                                   "decided_by": decision.decided_by, "until": decision.until,
                                                   "fork_shas": list(decision.fork_shas)},
        "units": _unit_history(full, units),
        "conflicts": [{"id": c.id, "path": c.path, "kind": c.kind, "stored_status": c.status,
                       "status": "decided" if decided else c.status,
                       "decided_as": _decided_as(decision) if decided and decision is not None else "",
                       "href": f"/ingestion/conflicts/{c.id}"} for c in conflicts],
        "provenance": _provenance(src, landed_as),
        "bisections": [{"id": b.id, "alert_id": b.alert_id, "metric": b.metric, "status": b.status,
                        "as": "upstream commit" if b.culprit_upstream_sha == full else "fork commit",
                        "confidence": b.confidence} for b in bisections if b is not None],
        "runs": runs, "metrics": metrics,
        # a person's skip / defer / won't-port, as `forkflow decide` (routes/decisions.py)
        "can_decide": entry is not None and request.app.state.token is not None and src.ctx is not None,
    }
    return page(request, "commit.html", data)


def _unit_history(sha: str, units: list[landing_records.UnitRecord]) -> list[dict[str, Any]]:
    """The units that carried the commit, the newest first: the one it is in now, then the earlier
    ones as superseded (by a re-run of it, or by a later run's unit); and a unit whose fork commit
    this is, as such."""
    carried = [u for u in units if any(m == sha for m, _ in u.members)]
    now = carried[-1].id if carried else None
    later: dict[int, int] = {}  # unit -> the unit that superseded it
    for older, newer in zip(carried, carried[1:]):
        later[older.id] = newer.id
    out = []
    for u in sorted(units, key=lambda x: -x.id):
        outcome = next((o.value for m, o in u.members if m == sha), "")
        role = "now" if u.id == now else ("superseded" if u.id in later else "made this fork commit")
        out.append({"id": u.id, "run_id": u.run_id, "kind": u.kind, "name": u.name, "status": u.status.value,
                    "summary": u.summary, "candidate_sha": u.candidate_sha, "outcome": outcome, "role": role,
                    "superseded_by": later.get(u.id), "retry_of": u.retry_of})
    return out


def _decided_as(decision: RecordedDecision) -> str:
    """What a decided commit's conflicts became: the verdict (the store closes such a conflict as
    it closes a landed commit's, but nobody resolved it)."""
    return decision.verdict.value if decision.verdict else decision.disposition.value.lower()


def _run_id(key: str, value: str) -> int | None:
    """The validation run an `L1-Run:` trailer names (`42`, `#42`, `42 PASS`), to link it."""
    m = _RUN.match(value) if key == "L1-Run" else None
    return int(m.group(1)) if m else None


def _provenance(src: Source, fork_shas: list[str]) -> list[dict[str, Any]]:
    """The provenance trailers (Resolved-By, Approved-By, L1-Run) of each landed fork commit, read
    from the fork's checkout (a dashboard over a store alone has no commit messages)."""
    if src.ctx is None:
        return []
    found = read_provenance(src.ctx.repo.path, [f for f in fork_shas if _HEX.match(f)])  # one git log
    return [{"fork_sha": f, "trailers": [{"key": k, "value": v, "run_id": _run_id(k, v)} for k, v in found[f]]}
            for f in fork_shas if f in found]
