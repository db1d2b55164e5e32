"""The days-behind / backlog series: snapshots from `status`, and a backfill from git history."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.ledger import records
from forkflow.ledger.build import build_ledger
from forkflow.ledger.merges import first_parent_before
from forkflow.ledger.refs import check_repo
from forkflow.ledger.report import headline_of, snapshot_of
from forkflow.models import Ledger
from forkflow.ledger.records import Snapshot
from forkflow.store.session import Store

STEPS = {"day": timedelta(days=1), "week": timedelta(weeks=1), "month": timedelta(days=30)}


def record_snapshot(store: Store, fork_id: int, snap: Snapshot) -> None:
    with store.session_scope() as s:
        records.save_snapshot(s, fork_id, snap)


def backfill(repo: Repo, config: Config, store: Store, fork_id: int, since: datetime, every: str = "week",
             until: datetime | None = None,
             progress: Callable[[int, int], None] | None = None) -> list[Snapshot]:
    """Rebuild the series at each step from `since`, from the branches as they were then.

    The ingestion point of the past is inferred (forkflow's recorded point only knows now).
    """
    if every not in STEPS:
        raise UserError(f"--every must be one of {', '.join(STEPS)}, not {every!r}")
    until = until or datetime.now(timezone.utc)
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    if since >= until:
        raise UserError(f"--since {since.date()} is not in the past; give an earlier date")
    fork_ref, upstream_ref = config.fork_ref, config.upstream_ref
    check_repo(repo, config)
    points: list[datetime] = []
    t = since
    while t <= until:
        points.append(t)
        t += STEPS[every]
    out: list[Snapshot] = []
    # steps where neither branch moved share the previous step's ledger (quiet weeks, the
    # stretch after the last commit): no merge-base and no cache lookup for them
    last: tuple[str, str, Ledger | None] | None = None
    for i, at in enumerate(points):
        if progress:
            progress(i, len(points))
        ts = int(at.timestamp())
        # each branch as it was: its first-parent history (a merge fork's merges bring in older
        # upstream commits, which a plain `rev-list --before` would take for the fork's tip)
        fork_tip = first_parent_before(repo, fork_ref, ts)
        upstream_tip = first_parent_before(repo, upstream_ref, ts)
        if fork_tip is None or upstream_tip is None:
            continue
        if last is None or last[:2] != (fork_tip, upstream_tip):
            ledger = None
            if repo.merge_base(fork_tip, upstream_tip) is not None:
                ledger = build_ledger(repo, config, store, fork_id, fork_tip=fork_tip,
                                      upstream_tip=upstream_tip, use_recorded_point=False)
            last = (fork_tip, upstream_tip, ledger)
        if last[2] is not None:
            out.append(snapshot_of(last[2], at, "backfill", headline_of(last[2], config)))
    with store.session_scope() as s:  # one transaction: a killed backfill writes nothing
        # a new backfill replaces the backfilled points of its range (daily, then weekly: weekly)
        records.delete_snapshots(s, fork_id, "backfill", since, until)
        for snap in out:
            records.save_snapshot(s, fork_id, snap)
    if progress:
        progress(len(points), len(points))
    return out
