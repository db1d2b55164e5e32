"""Turn a Ledger into the documented `status --json` shape and a snapshot."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.config import Config
from forkflow.ledger.classify import decider_of
from forkflow.ledger.decisions import decision_counts
from forkflow.ledger.headline import Headline, headline
from forkflow.ledger.merges import MERGE, intake_of
from forkflow.models import Disposition, Ledger
from forkflow.ledger.records import Snapshot
from forkflow.store.schema_ingest import ConflictRow
from forkflow.store.session import Store


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


def open_conflicts(s: Session, fid: int) -> list[tuple[str, str]]:
    """(upstream sha, path) of each conflict kept open for a person: one row per conflicted file."""
    rows = s.execute(select(ConflictRow.upstream_sha, ConflictRow.path).where(
        ConflictRow.fork_id == fid, ConflictRow.status == "open")).all()
    return [(str(sha), str(path)) for sha, path in rows]


def headline_of(ledger: Ledger, config: Config | None, *, conflicts: list[tuple[str, str]] | None = None,
                fork_point_date: int | None = None) -> Headline:
    """The headline read by the fork's own rule (its config; the defaults without one), with its
    open conflicts (`open_conflicts`, or `stored_conflicts`) when known."""
    if config is None:
        return headline(ledger, fork_point_date=fork_point_date, conflicts=conflicts)
    return headline(ledger, threshold=config.ledger.infer_threshold, merging=intake_of(config) == MERGE,
                    fork_point_date=fork_point_date, conflicts=conflicts)


def stored_conflicts(store: Store, fork_id: int) -> list[tuple[str, str]]:
    with store.session_scope() as s:
        return open_conflicts(s, fork_id)


def status_dict(ledger: Ledger, *, with_commits: bool = False, head: Headline | None = None) -> dict[str, Any]:
    """The `forkflow status --json` document; `head`: the headline (default: read with the
    default rule and no conflicts known)."""
    counts = ledger.counts()
    head = head or headline(ledger)
    out: dict[str, Any] = {
        "fork_point": ledger.fork_point,
        "fork_tip": ledger.fork_tip,
        "upstream_tip": {"sha": ledger.upstream_tip.sha, "date": iso(ledger.upstream_tip.date)},
        # the point days behind is counted from: up to it, every commit landed or decided (a
        # conflict forkflow only holds keeps it where it is; docs/ledger.md "Days behind")
        "ingestion_point": {
            "sha": head.point.sha,
            "date": iso(head.point.date),
            "inferred": True,
        },
        # forkflow's own ref: how far its runs have handled upstream, holds included
        "recorded_point": None if ledger.ingestion_point_inferred else {
            "sha": ledger.ingestion_point.sha, "date": iso(ledger.ingestion_point.date)},
        "days_behind": head.days_behind,
        "backlog_commits": head.backlog,
        "headline": head.to_json(),
        "counts": {d.value.lower(): counts[d] for d in Disposition},
        # who decided the SKIPPED / DEFERRED commits: person, auto (a conflict), message, opt-out
        "decisions": decision_counts(ledger),
        "out_of_order_picks": len(ledger.out_of_order_picks),
        "upstream_commits": len(ledger.entries),
        "notes": list(ledger.notes),
    }
    if with_commits:
        out["commits"] = [
            {
                "sha": e.commit.sha,
                "pr": e.pr,
                "date": iso(e.commit.date),
                "subject": e.commit.subject,
                "disposition": e.disposition.value,
                "fork_shas": list(e.fork_shas),
                "evidence": [x.describe() for x in e.evidence],
                "reason": e.reason,
                "decided_by": decider_of(e),
            }
            for e in ledger.entries
        ]
    return out


def snapshot_of(ledger: Ledger, taken_at: datetime, source: str, head: Headline | None = None) -> Snapshot:
    counts = ledger.counts()
    head = head or headline(ledger)
    return Snapshot(
        taken_at=taken_at,
        source=source,
        fork_tip=ledger.fork_tip,
        upstream_tip=ledger.upstream_tip.sha,
        ingestion_point=head.point.sha,
        inferred=True,
        days_behind=head.days_behind,
        backlog=head.backlog,
        counts={d.value.lower(): counts[d] for d in Disposition},
    )
