"""Build the ledger from git and the store, with a cache keyed by commit SHAs."""
from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime, timezone
from dataclasses import asdict

from forkflow import __version__
from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.ledger.classify import LedgerBuilder
from forkflow.ledger.refs import check_repo, ingestion_ref
from forkflow.models import (
    Commit,
    Disposition,
    Evidence,
    EvidenceKind,
    Ledger,
    LedgerEntry,
    PointInTime,
    RecordedDecision,
    Sha,
)
from forkflow.store import queries
from forkflow.store.session import Store


def build_ledger(repo: Repo, config: Config, store: Store, fork_id: int, *, fork_tip: Sha | None = None, upstream_tip: Sha | None = None,
                 use_recorded_point: bool = True) -> Ledger:
    """The ledger of fork `fork_id` at `fork_tip` against upstream at `upstream_tip` (default: now)."""
    if fork_tip is None or upstream_tip is None:
        fork_tip, upstream_tip = check_repo(repo, config)
    fork_point = repo.merge_base(fork_tip, upstream_tip)
    if fork_point is None:
        raise UserError(
            f"fork branch '{config.fork_branch}' and upstream '{config.upstream_remote}/"
            f"{config.upstream_branch}' share no history; check that --upstream names this "
            "fork's upstream")
    recorded_point = repo.read_ref(ingestion_ref(config)) if use_recorded_point else None
    with store.session_scope() as s:
        recorded = queries.recorded_decisions(s, fork_id)
        key = _cache_key(fork_tip, upstream_tip, fork_point, recorded_point, recorded, config)
        payload = queries.cached_ledger(s, key)
    if payload is not None:
        return ledger_from_json(payload)
    ledger = _compute(repo, config, store, fork_tip, upstream_tip, fork_point, recorded_point, recorded)
    with store.session_scope() as s:
        queries.save_ledger(s, fork_id, key, ledger_to_json(ledger))
    return ledger


def _cache_key(fork_tip: Sha, upstream_tip: Sha, fork_point: Sha, point: Sha | None,
               recorded: list[RecordedDecision], config: Config) -> str:
    h = hashlib.sha256()
    parts = [__version__, fork_tip, upstream_tip, fork_point, point or "-",
             repr(config.ledger), repr(config.section("upstream").get("first_parent", False))]
    parts += sorted(f"{r.sha}:{r.disposition.value}:{r.reason}:{','.join(r.fork_shas)}:{r.source.value}:"
                    f"{r.verdict}:{r.until}:{r.task}:{r.decided_by}" for r in recorded)
    if any(r.until for r in recorded):  # a deferral lapses at midnight: the key changes with the day
        parts.append(_today())
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def _compute(repo: Repo, config: Config, store: Store, fork_tip: Sha, upstream_tip: Sha, fork_point: Sha,
             recorded_point: Sha | None, recorded: list[RecordedDecision]) -> Ledger:
    first_parent = bool(config.section("upstream").get("first_parent", False))
    upstream = repo.log(f"{fork_point}..{upstream_tip}", first_parent=first_parent)
    fork_commits = repo.log(fork_tip, f"^{upstream_tip}")
    builder = LedgerBuilder(upstream, config.ledger.markers, config.ledger.opt_out)
    builder.add_fork_commits(fork_commits)
    unreadable = _match_patch_ids(repo, store, builder)
    builder.add_title_matches()
    entries = builder.entries(recorded, today=_today())
    notes: list[str] = []
    if unreadable:
        notes.append(f"{len(unreadable)} commit(s) have no patch-id: their blobs are missing from this clone "
                     f"and could not be fetched (first: {unreadable[0][:12]}); they were matched by markers "
                     "and titles only")
    point, inferred = _ingestion_point(entries, recorded_point, config.ledger.infer_threshold)
    if recorded_point is not None and point is None:
        notes.append(f"the recorded ingestion point {recorded_point[:12]} is not an upstream commit "
                     "after the fork point; it was ignored and inferred instead")
        point, inferred = _ingestion_point(entries, None, config.ledger.infer_threshold)
    if point is None:
        point_at = PointInTime(fork_point, repo.commit_date(fork_point))
    else:
        point_at = PointInTime(point, next(e.commit.date for e in entries if e.commit.sha == point))
    tip_date = upstream[-1].date if upstream else repo.commit_date(upstream_tip)
    return Ledger(
        fork_point=fork_point,
        fork_tip=fork_tip,
        upstream_tip=PointInTime(upstream_tip, tip_date),
        ingestion_point=point_at,
        ingestion_point_inferred=inferred,
        entries=tuple(entries),
        computed_at=int(time.time()),
        notes=tuple(notes),
    )


def _today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def _match_patch_ids(repo: Repo, store: Store, builder: LedgerBuilder) -> list[Sha]:
    """Patch-id matching, computing patch-ids only where changed-file sets collide (as git does).

    Returns the commits whose patch-id could not be computed (blobs missing from a partial clone)."""
    fork_side = [c for c in builder.unmatched if not c.is_merge]
    if not fork_side:
        return []
    upstream_side = [s for s in builder.unpicked_upstream() if not builder.by_sha[s].is_merge]
    with store.session_scope() as s:
        facts = queries.commit_facts(s, [c.sha for c in fork_side] + upstream_side)
    need_files = [sha for sha in [c.sha for c in fork_side] + upstream_side
                  if facts.get(sha, (None, None))[1] is None]
    new_facts: dict[Sha, tuple[str | None, tuple[str, ...] | None]] = {}
    for sha, files in repo.changed_files(need_files).items():
        new_facts[sha] = (facts.get(sha, (None, None))[0], files)
    facts.update(new_facts)

    def files_of(sha: Sha) -> tuple[str, ...]:
        return tuple(sorted(facts[sha][1] or ()))

    fork_keys = {files_of(c.sha) for c in fork_side}
    candidates = [u for u in upstream_side if files_of(u) in fork_keys]
    cand_keys = {files_of(u) for u in candidates}
    fork_cands = [c.sha for c in fork_side if files_of(c.sha) in cand_keys]
    need_pid = [sha for sha in fork_cands + candidates if facts[sha][0] is None]
    pids = repo.patch_ids(need_pid)
    for sha, pid in pids.items():
        new_facts[sha] = (pid, facts[sha][1])
        facts[sha] = new_facts[sha]
    if new_facts:
        with store.session_scope() as s:
            queries.save_commit_facts(s, new_facts)
    builder.add_patch_id_matches(
        {sha: facts[sha][0] or "" for sha in fork_cands},
        {sha: facts[sha][0] or "" for sha in candidates},
    )
    return [sha for sha in need_pid if sha not in pids]


def _ingestion_point(entries: list[LedgerEntry], recorded: Sha | None,
                     threshold: float) -> tuple[Sha | None, bool]:
    """The recorded point if it names an upstream commit, else the inferred one."""
    if recorded is not None:
        if any(e.commit.sha == recorded for e in entries):
            return recorded, False
        return None, False
    best: Sha | None = None
    handled = 0
    for i, e in enumerate(entries):
        if e.disposition is not Disposition.PENDING:
            handled += 1
            if handled >= threshold * (i + 1):
                best = e.commit.sha
    return best, True


# -- serialization for the cache -------------------------------------------
def ledger_to_json(ledger: Ledger) -> str:
    """JSON of the ledger; commit bodies are left out (git has them, and they dominate the size)."""
    d = asdict(ledger)
    for e in d["entries"]:
        e["commit"]["body"] = ""
    return json.dumps(d, separators=(",", ":"))


def ledger_from_json(payload: str) -> Ledger:
    d = json.loads(payload)
    entries = tuple(
        LedgerEntry(
            commit=Commit(sha=Sha(e["commit"]["sha"]), parents=tuple(e["commit"]["parents"]),
                          date=e["commit"]["date"], subject=e["commit"]["subject"],
                          body=e["commit"]["body"], author=e["commit"]["author"]),
            pr=e["pr"],
            disposition=Disposition(e["disposition"]),
            fork_shas=tuple(e["fork_shas"]),
            evidence=tuple(Evidence(EvidenceKind(x["kind"]), x["fork_sha"], x["detail"])
                           for x in e["evidence"]),
            reason=e["reason"],
        )
        for e in d["entries"]
    )
    return Ledger(
        fork_point=Sha(d["fork_point"]),
        fork_tip=Sha(d["fork_tip"]),
        upstream_tip=PointInTime(**d["upstream_tip"]),
        ingestion_point=PointInTime(**d["ingestion_point"]),
        ingestion_point_inferred=d["ingestion_point_inferred"],
        entries=entries,
        computed_at=d["computed_at"],
        notes=tuple(d["notes"]),
    )
