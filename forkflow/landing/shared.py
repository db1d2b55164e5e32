"""Landed means on the shared branch: the fork branch a team shares, its fetch, push and fence.

With `--push`, a team's clones (a cron job, a CI job, a person's checkout) share one store and one
remote branch.  A unit a run lands is first only on that clone's local branch; until the push
puts it on the shared branch, its decisions wait in `ingest_pending_decisions` ("pending push",
`forkflow status`) and no other clone sees them.  The push, once the remote took it, makes them
decisions (`promote`).  Each of these writes first proves that this run still holds the fork
(`Lease.check`, store/locks.py), in the same transaction.

At the start of every run (`begin`) the shared branch is fetched and what an earlier run left is
settled:

* pending decisions whose fork commit the shared branch now holds become decisions (a run pushed
  and died before it said so);
* the local branch behind the shared one is fast-forwarded to it;
* the local branch ahead of it, with pending landings of its own: they are pushed now;
* the local branch beside it (the shared branch moved while these landings were unpushed): the
  unpushed landings are dropped (the local branch is reset to the shared tip, their pending
  decisions deleted, their units abandoned) and the run re-plans from the shared tip, which
  re-validates those commits with L1 on it.  Only forkflow's own landings (commits with an
  `Upstream-Commit:` trailer) are dropped; a person's unpushed commit stops the run with one line.

A push the remote rejects is tried again after a fetch, `MAX_PUSH_TRIES` times in all; when the
shared branch moved beside the local one, `SharedMoved` ends the run and the caller
(`landing/wired.py`) runs it again from `begin`, which drops and re-plans; never a loop.
Without `--push` the local branch is the shared one: decisions are written as they land.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import cast

from sqlalchemy import Table, delete, select
from sqlalchemy.engine import Connection

from forkflow.config import Config
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.landing import records
from forkflow.landing.journal import StoreJournal
from forkflow.landing.worktree import catch_up_work_trees
from forkflow.ledger import records as ledger_records
from forkflow.ledger.trailers import TRAILER_KEY
from forkflow.models import Decider, Decision, Disposition, RecordedDecision, Sha, UnitState
from forkflow.store.locks import Lease
from forkflow.store.schema_ingest import PendingDecisionRow
from forkflow.store.session import Store, insert_new

MAX_PUSH_TRIES = 3
_PENDING = cast(Table, PendingDecisionRow.__table__)


class SharedMoved(UserError):
    """The shared branch moved beside this run's unpushed landings: run again to re-plan on it."""


# -- pending decisions -------------------------------------------------------------
def _to_json(d: RecordedDecision) -> str:
    return json.dumps({"sha": d.sha, "disposition": d.disposition.value, "reason": d.reason,
                       "fork_shas": list(d.fork_shas), "source": d.source.value,
                       "verdict": d.verdict.value if d.verdict else "", "until": d.until, "task": d.task,
                       "decided_by": d.decided_by})


def _from_json(payload: str) -> RecordedDecision:
    p = json.loads(payload)
    return RecordedDecision(Sha(p["sha"]), Disposition(p["disposition"]), p["reason"],
                            tuple(Sha(x) for x in p["fork_shas"]), source=Decider(p["source"]),
                            verdict=Decision(p["verdict"]) if p["verdict"] else None, until=p["until"],
                            task=p["task"], decided_by=p["decided_by"])


def save_pending(conn: Connection, fork_id: int, tip: Sha, decisions: Sequence[RecordedDecision],
                 unit_id: int | None = None) -> None:
    """Decisions that become the fork's once the shared branch holds `tip` (a later one on the same
    commit replaces the earlier)."""
    last = {d.sha: d for d in decisions}
    if not last:
        return
    conn.execute(delete(_PENDING).where(_PENDING.c.fork_id == fork_id, _PENDING.c.upstream_sha.in_(list(last))))
    now = datetime.now(timezone.utc)
    insert_new(conn, _PENDING, [{"fork_id": fork_id, "upstream_sha": sha, "tip_sha": tip, "unit_id": unit_id,
                                 "payload": _to_json(d), "created_at": now} for sha, d in last.items()])


def pending(conn: Connection, fork_id: int) -> list[tuple[int, Sha, Sha, int | None, RecordedDecision]]:
    """(row id, upstream sha, fork commit it waits for, unit, decision) of every pending decision."""
    rows = conn.execute(select(_PENDING.c.id, _PENDING.c.upstream_sha, _PENDING.c.tip_sha, _PENDING.c.unit_id,
                               _PENDING.c.payload).where(_PENDING.c.fork_id == fork_id).order_by(_PENDING.c.id))
    return [(int(r[0]), Sha(r[1]), Sha(r[2]), r[3], _from_json(r[4])) for r in rows]


def pending_summary(store: Store, fork_id: int) -> tuple[int, list[Sha]]:
    """(how many decisions wait for a push, the fork commits they wait for): `forkflow status`."""
    with store.connection_scope() as conn:
        rows = pending(conn, fork_id)
    return len(rows), list(dict.fromkeys(tip for _, _, tip, _, _ in rows))


class PendingJournal(StoreJournal):
    """The store's journal for a run that pushes: a landing's decisions wait for the push, and
    each write of them first proves the run's lease, in its own transaction."""

    def __init__(self, store: Store, fork_id: int, lease: Lease, local_tip: Callable[[], Sha | None]) -> None:
        super().__init__(store, fork_id)
        self.lease = lease
        self.local_tip = local_tip

    def _prove(self, s: Connection) -> None:
        self.lease.check(s)

    def _keep(self, s: Connection, decisions: Sequence[RecordedDecision], tip: Sha | None,
              unit_id: int | None = None) -> None:
        # a unit's landing waits for its own candidate; other decisions for the local tip now
        at = tip if unit_id is not None else self.local_tip() or tip
        assert at is not None
        save_pending(s, self.fork_id, at, decisions, unit_id)


class FencedJournal(StoreJournal):
    """The store's journal for a run whose local branch is the shared one: decisions as they land,
    each write of them proving the run's lease in its own transaction."""

    def __init__(self, store: Store, fork_id: int, lease: Lease) -> None:
        super().__init__(store, fork_id)
        self.lease = lease

    def _prove(self, s: Connection) -> None:
        self.lease.check(s)


# -- the shared branch -------------------------------------------------------------
class Shared:
    """The fork branch a team shares, for one run: `remote` None when nothing is pushed."""

    def __init__(self, repo: Repo, config: Config, store: Store, fork_id: int, lease: Lease,
                 remote: str | None) -> None:
        self.repo, self.config, self.store, self.fork_id = repo, config, store, fork_id
        self.lease, self.remote = lease, remote
        self.branch = config.fork_branch
        self.ref = config.fork_ref
        self.tracking = f"refs/remotes/{remote}/{self.branch}" if remote else self.ref

    def journal(self) -> StoreJournal:
        if self.remote is None:
            return FencedJournal(self.store, self.fork_id, self.lease)
        return PendingJournal(self.store, self.fork_id, self.lease, lambda: self.repo.read_ref(self.ref))

    # -- git -------------------------------------------------------------------
    def fetch(self) -> Sha | None:
        """The shared branch's tip now (None: the remote has no such branch yet)."""
        if self.remote is None:
            return self.repo.read_ref(self.ref)
        try:
            out = self.repo.git("ls-remote", "--heads", "--", self.remote, f"refs/heads/{self.branch}")
        except GitError as e:
            raise UserError(f"cannot fetch the shared branch from '{self.remote}' ({e.reason}); check "
                            f"`git remote get-url {self.remote}` and the network; nothing was landed") from e
        if not out.strip():
            return None
        try:
            self.repo.git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", self.remote,
                          f"+refs/heads/{self.branch}:{self.tracking}")
        except GitError as e:
            raise UserError(f"cannot fetch the shared branch from '{self.remote}' ({e.reason}); check "
                            f"`git remote get-url {self.remote}` and the network; nothing was landed") from e
        return self.repo.read_ref(self.tracking)

    def _foreign(self, shared: Sha, local: Sha) -> list[Sha]:
        """The commits of `shared..local` that forkflow did not land (no `Upstream-Commit:` trailer)."""
        out = self.repo.git("log", "--format=%H%x00%B%x01", f"{shared}..{local}", "--")
        foreign: list[Sha] = []
        for chunk in out.split("\x01"):
            sha, _, body = chunk.strip("\n").partition("\x00")
            if sha and f"\n{TRAILER_KEY}:" not in f"\n{body}":
                foreign.append(Sha(sha))
        return foreign

    def _move(self, new: Sha, old: Sha, why: str) -> list[str]:
        if not self.repo.update_ref(self.ref, new, old, f"forkflow: {why}"):
            raise UserError(f"the fork branch {self.ref} moved while forkflow settled it with the shared branch; "
                            "run ingest again")
        return catch_up_work_trees(self.repo, self.config, old, new)

    # -- the start of a run ------------------------------------------------------------
    def begin(self) -> list[str]:
        """Fetch the shared branch and settle what earlier runs left (see the module's doc); notes."""
        notes: list[str] = []
        shared = self.fetch()
        local = self.repo.read_ref(self.ref)
        if self.remote is None or local is None:
            return self._promote_on(shared, drop_gone=False)
        if shared is not None and shared != local:
            if self.repo.is_ancestor(local, shared):
                notes += self._move(shared, local, f"fast-forward to {self.remote}/{self.branch}")
                notes.append(f"fast-forwarded {self.branch} to {self.remote}/{self.branch} at {shared[:12]}")
                local = shared
            elif not self.repo.is_ancestor(shared, local):
                foreign = self._foreign(shared, local)
                if foreign:
                    raise UserError(f"{self.branch} has {len(foreign)} commit(s) that {self.remote}/{self.branch} lacks "
                                    f"and forkflow did not land (first: {foreign[0][:12]}), and the two moved apart: "
                                    f"rebase them on {self.remote}/{self.branch} and push, then run ingest again")
                count = len(self.repo.git("rev-list", f"{shared}..{local}").split())
                notes += self._move(shared, local, f"drop unpushed landings; {self.remote}/{self.branch} moved")
                notes.append(f"dropped {count} landed commit(s) that never reached {self.remote}/{self.branch} (it moved "
                             f"to {shared[:12]}); their upstream commits are planned again from there")
                local = shared
        notes += self._promote_on(shared)
        if shared != local and self._has_pending():
            notes.append(self.push())  # what a killed run landed here and never pushed
        return notes

    def _has_pending(self) -> bool:
        with self.store.connection_scope() as conn:
            return bool(pending(conn, self.fork_id))

    def _promote_on(self, shared: Sha | None, drop_gone: bool = True) -> list[str]:
        """Pending decisions whose commit `shared` holds become decisions; those of commits that are
        neither there nor on this clone's branch (unpushed landings of a clone that died or was
        dropped) are deleted and their units abandoned."""
        local = self.repo.read_ref(self.ref)
        with self.store.connection_scope() as conn:
            rows = pending(conn, self.fork_id)
        if not rows:
            return []
        tips = {tip for _, _, tip, _, _ in rows}
        on_shared = {t for t in tips if shared is not None and self.repo.is_ancestor(t, shared)}
        here = {t for t in tips - on_shared if local is not None and self.repo.is_ancestor(t, local)}
        gone = (tips - on_shared - here) if drop_gone else set()
        promote = [r for r in rows if r[2] in on_shared]
        drop = [r for r in rows if r[2] in gone]
        if not promote and not drop:
            return []
        with self.store.connection_scope() as conn:
            self.lease.check(conn)
            ledger_records.record_decisions(conn, self.fork_id, [r[4] for r in promote])
            ids = [r[0] for r in promote + drop]
            conn.execute(delete(_PENDING).where(_PENDING.c.id.in_(ids)))
            units = sorted({r[3] for r in drop if r[3] is not None})
            for unit_id in units:
                records.set_unit(conn, unit_id, UnitState.ABANDONED,
                                 "landed on a clone's branch but never pushed to the shared branch; planned again")
        notes = []
        if promote:
            notes.append(f"{len(promote)} decision(s) of landings now on the shared branch recorded")
        if drop:
            notes.append(f"{len(drop)} decision(s) of landings that never reached the shared branch dropped "
                         f"({len(units)} unit(s) abandoned)")
        return notes

    # -- the push ----------------------------------------------------------------
    def push(self) -> str:
        """Push the fork branch to the shared one, and make its pending decisions the fork's.

        The lease is proved first; a rejection is tried again after a fetch, `MAX_PUSH_TRIES` times
        in all.  Raises SharedMoved when the shared branch moved beside the local one."""
        assert self.remote is not None
        remote, ref = self.remote, self.ref
        for _ in range(MAX_PUSH_TRIES):
            self.lease.verify()
            shared = self.fetch()
            local = self.repo.read_ref(ref)
            if local is None:
                raise UserError(f"the fork branch {ref} was deleted during ingest; nothing was pushed")
            if shared == local:
                self._promote_on(shared)
                return f"{remote}/{self.branch} already at {local[:12]}"
            if shared is not None and not self.repo.is_ancestor(shared, local):
                raise SharedMoved(f"{remote}/{self.branch} moved to {shared[:12]} beside this run's landings "
                                  f"(pushed from elsewhere); run ingest again: it drops them and re-plans from there")
            try:
                self.repo.git("push", "--quiet", "--porcelain", "--", remote, f"{ref}:{ref}")
            except GitError as e:
                if "[rejected]" in e.stdout or "rejected" in e.stderr:
                    continue  # the shared branch moved since the fetch: fetch and look again
                raise UserError(f"push to '{remote}' failed: {e.reason}; the landed commits wait on {ref} here "
                                "(`forkflow status` shows them pending push): run ingest --land --push again") from e
            self._promote_on(local)
            return f"pushed {ref} to {remote}"
        raise UserError(f"push to '{remote}' was rejected {MAX_PUSH_TRIES} times (its {ref} keeps moving); the landed "
                        f"commits wait on {ref} here, pending push: run ingest --land --push again later")
