"""Turn a Ledger into the documented `status --json` shape and a snapshot."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from forkflow.ledger.classify import decider_of
from forkflow.ledger.decisions import decision_counts
from forkflow.models import Disposition, Ledger
from forkflow.ledger.records import Snapshot


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


def status_dict(ledger: Ledger, *, with_commits: bool = False) -> dict[str, Any]:
    """The `forkflow status --json` document."""
    counts = ledger.counts()
    out: dict[str, Any] = {
        "fork_point": ledger.fork_point,
        "fork_tip": ledger.fork_tip,
        "upstream_tip": {"sha": ledger.upstream_tip.sha, "date": iso(ledger.upstream_tip.date)},
        "ingestion_point": {
            "sha": ledger.ingestion_point.sha,
            "date": iso(ledger.ingestion_point.date),
            "inferred": ledger.ingestion_point_inferred,
        },
        "days_behind": ledger.days_behind,
        "backlog_commits": len(ledger.backlog),
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


def snapshot_of(ledger: Ledger, taken_at: datetime, source: str) -> Snapshot:
    counts = ledger.counts()
    return Snapshot(
        taken_at=taken_at,
        source=source,
        fork_tip=ledger.fork_tip,
        upstream_tip=ledger.upstream_tip.sha,
        ingestion_point=ledger.ingestion_point.sha,
        inferred=ledger.ingestion_point_inferred,
        days_behind=ledger.days_behind,
        backlog=len(ledger.backlog),
        counts={d.value.lower(): counts[d] for d in Disposition},
    )
