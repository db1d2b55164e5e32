"""Agent-made code needs a person, and so does the answer of a resolver rule this fork's history
does not trust yet (conflicts/trust.py): an agent's resolution that passed the guardrails is kept as a
proposal, and only a person's approval (`forkflow conflicts approve ID --proposal HASH`, or the
dashboard's token-checked button) records it; the next `forkflow ingest` then picks with it and runs L1.

An approval names what the person read: `conflicts show` and the dashboard print the proposal's
hash (its path and exact bytes), and approving refuses when the waiting proposal's hash is another
one (a cron `ingest` between reading and approving used to swap in a newer answer, which was
recorded in the person's name).

`[ingest.agent] autoland = true` skips the wait (docs/security.md says what that risks).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.conflicts import guardrails
from forkflow.conflicts import records as crecords
from forkflow.conflicts.provenance import note_people
from forkflow.conflicts.case import case_from_marked
from forkflow.conflicts.classify import ConflictKind
from forkflow.errors import UserError
from forkflow.store.schema_ingest import AgentAttemptRow

PROPOSED = "proposed"  # the attempt outcome of a guardrail-approved answer that waits for a person
APPROVED = "agent-approved"  # that attempt's outcome once approved, and the recorded resolution's source
RULE_APPROVED = "rule-approved"  # the same for a resolver rule's proposal (conflicts/trust.py)
RULE_BACKEND = "rule"  # the attempt log's backend of a rule's proposal (trust.RULE_BACKEND)
HASH_LEN = 12  # hex digits of sha256 a person reads and types back


@dataclass(frozen=True, slots=True)
class Proposal:
    attempt_id: int
    backend: str
    content: str  # the whole resolved file the agent proposed
    digest: str  # proposal_hash(path, content): what an approval must name
    rule: str = ""  # the resolver rule that proposed it, not trusted alone on this fork; "" for the agent


def proposal_hash(path: str, content: str) -> str:
    """The short hash that binds an approval to a proposal: sha256 of the path and exact bytes.  [pure]"""
    h = hashlib.sha256(path.encode("utf-8", "surrogateescape") + b"\0")
    h.update(content.encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:HASH_LEN]


def proposal(s: Session, fid: int, x: crecords.ConflictInfo) -> Proposal | None:
    """The newest agent proposal waiting for the conflict `x`, if any."""
    row = s.scalar(select(AgentAttemptRow)
                   .where(AgentAttemptRow.fork_id == fid, AgentAttemptRow.upstream_sha == x.upstream_sha,
                          AgentAttemptRow.path == x.path, AgentAttemptRow.outcome == PROPOSED)
                   .order_by(AgentAttemptRow.id.desc()).limit(1))
    if row is None:
        return None
    rule = row.request.removeprefix("rule ") if row.backend == RULE_BACKEND else ""
    return Proposal(row.id, row.backend, row.response, proposal_hash(x.path, row.response), rule)


def approve(s: Session, fid: int, cid: int, by: str, shown: str | None,
            fork_file: Callable[[crecords.ConflictInfo], bytes | None] | None = None,
            ) -> tuple[crecords.ConflictInfo, Proposal]:
    """Record the waiting agent proposal of conflict `cid` as its resolution, approved by `by`.

    `shown` is the hash of the proposal the person read (`conflicts show`); a waiting proposal
    with another hash is refused, nothing recorded.  The proposal passes the guardrails again (on
    the stored conflict) before it is recorded; the next `forkflow ingest` uses it like any
    recorded resolution, and L1 runs on the result."""
    x = crecords.conflict(s, fid, cid)
    if x is None:
        raise UserError(f"no conflict with id {cid}; list them with `forkflow conflicts --all`")
    if x.status != "open":
        raise UserError(f"conflict {cid} is {x.status}; only an open conflict can be approved")
    p = proposal(s, fid, x)
    if p is None:
        raise UserError(f"conflict {cid} has no proposal (agent or rule) waiting for approval; settle it with "
                        f"`forkflow conflicts resolve {cid} --file FILE`")
    given = (shown or "").strip().lower()
    if not given:
        raise UserError(f"approving needs the hash of the proposal you read: run `forkflow conflicts show {cid}`, "
                        f"then `forkflow conflicts approve {cid} --proposal HASH` with the hash it prints")
    if given != p.digest:
        raise UserError(f"the proposal changed since you read it; run `forkflow conflicts show {cid}` again")
    case = case_from_marked(x.upstream_sha, x.subject, x.path, ConflictKind(x.kind), x.marked, x.key)
    # the parse check against the fork's own file, as `ingest` makes it, when the caller can read it
    own = fork_file(x) if fork_file is not None else None
    verdict = guardrails.check(case, p.content.encode("utf-8", "surrogateescape"), own) if case else None
    if verdict is None or not verdict.ok:
        why = verdict.reason if verdict is not None else "the conflict has no text regions"
        raise UserError(f"the proposal of conflict {cid} no longer passes the guardrails ({why}); "
                        f"settle it with `forkflow conflicts resolve {cid} --file FILE`")
    source = RULE_APPROVED if p.rule else APPROVED
    crecords.save_resolution(s, x.key, x.path, verdict.regions, source)
    note_people(s, x.key, approved_by=by)  # the landed commit's Approved-By
    crecords.set_conflict_status(s, x.id, "resolved")
    row = s.get(AgentAttemptRow, p.attempt_id)
    assert row is not None
    row.outcome = source  # who approved what stays in the attempt log
    row.reason = f"{row.reason}; approved by {by}"[:2000]
    return x, p
