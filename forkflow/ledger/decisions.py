"""A person's decisions on upstream commits (`forkflow decide`): skip, defer, won't port.

They are stored next to forkflow's automatic ones (a conflict defers a commit) and told apart
by `Decider`; the ledger shows them as SKIPPED / DEFERRED with the evidence "decided by a
person: <reason>", so the planner no longer sees them as pending (issue 12).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timezone

from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.ledger import records
from forkflow.ledger.build import build_ledger
from forkflow.ledger.classify import ShaIndex, decider_of
from forkflow.models import Decider, Decision, Disposition, Ledger, LedgerEntry, RecordedDecision, Sha
from forkflow.store.session import Store

_PR = re.compile(r"^#?(\d{1,7})$")


@dataclass(frozen=True, slots=True)
class DecideResult:
    sha: Sha
    subject: str
    decision: RecordedDecision | None  # None: the decision was cleared


def resolve_commits(ledger: Ledger, refs: list[str]) -> list[LedgerEntry]:
    """Upstream commits named by full or short SHAs or by '#PR', or a UserError naming the bad ones."""
    index = ShaIndex(e.commit.sha for e in ledger.entries)
    by_sha = {e.commit.sha: e for e in ledger.entries}
    out: list[LedgerEntry] = []
    bad: list[str] = []
    for ref in refs:
        m = _PR.match(ref) if ref.startswith("#") else None
        if m:
            hits = [e for e in ledger.entries if e.pr == int(m.group(1))]
            sha = hits[0].commit.sha if len(hits) == 1 else None
        else:
            sha = index.resolve(ref)
        if sha is None:
            bad.append(ref)
        elif by_sha[sha] not in out:
            out.append(by_sha[sha])
    if bad:
        raise UserError(f"not an upstream commit after the fork point (or ambiguous): {', '.join(bad)}; "
                        "pass SHAs or #PR numbers from `forkflow status --commits`")
    return out


def parse_until(value: str | None, verdict: Decision | None) -> str | None:
    if value is None:
        return None
    if verdict is not Decision.DEFER:
        raise UserError("--until only goes with --defer: a deferral ends, a skip does not")
    try:
        day = date.fromisoformat(value)
    except ValueError as e:
        raise UserError(f"--until {value!r} is not a date; use YYYY-MM-DD") from e
    if day < datetime.now(timezone.utc).date():
        raise UserError(f"--until {value} is in the past; give a later date")
    return day.isoformat()


def person(repo: Repo) -> str:
    """The person at this checkout, as git names them ("Name <email>"), for what they decide."""
    name = repo.git("config", "user.name", check=False).strip()
    email = repo.git("config", "user.email", check=False).strip()
    return f"{name} <{email}>" if name and email else (name or email)


def decide(repo: Repo, config: Config, store: Store, fork_id: int, refs: list[str], verdict: Decision | None,
           reason: str, until: str | None = None, task: str = "") -> list[DecideResult]:
    """Record (or, with verdict None, clear) a person's decision on each named upstream commit."""
    if verdict is not None and not reason.strip():
        raise UserError("a decision needs --reason TEXT: say why, for whoever reads it next")
    ledger = build_ledger(repo, config, store, fork_id)
    entries = resolve_commits(ledger, refs)
    picked = [e for e in entries if e.disposition in (Disposition.PICKED, Disposition.REVERTED)]
    if verdict is not None and picked:
        names = ", ".join(f"{e.commit.sha[:12]} (in {e.fork_shas[0][:12]})" for e in picked if e.fork_shas)
        raise UserError(f"already taken by the fork: {names or picked[0].commit.sha[:12]}; a decision is "
                        "for commits the fork has not taken")
    until = parse_until(until, verdict)
    who = person(repo)
    out: list[DecideResult] = []
    with store.session_scope() as s:
        for e in entries:
            if verdict is None:
                records.forget_decision(s, fork_id, e.commit.sha)
                out.append(DecideResult(e.commit.sha, e.commit.subject, None))
                continue
            d = RecordedDecision(e.commit.sha, verdict.disposition, " ".join(reason.split()),
                                 source=Decider.PERSON, verdict=verdict, until=until, task=task,
                                 decided_by=who)
            records.record_decision(s, fork_id, d)
            out.append(DecideResult(e.commit.sha, e.commit.subject, d))
    return out


def decision_counts(ledger: Ledger) -> dict[str, dict[str, int]]:
    """{'deferred': {'person': n, 'auto': n, ...}, 'skipped': {...}}: the decided backlog by decider."""
    out: dict[str, Counter[str]] = {"deferred": Counter(), "skipped": Counter()}
    for e in ledger.entries:
        who = decider_of(e)
        if who is not None:
            out[e.disposition.value.lower()][who] += 1
    return {k: dict(sorted(v.items())) for k, v in out.items()}
