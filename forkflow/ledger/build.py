"""Build the ledger from git and the store, with a cache keyed by commit SHAs."""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from datetime import datetime, timezone
from dataclasses import asdict

from forkflow import __version__
from forkflow.config import Config
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.ledger.classify import LedgerBuilder
from forkflow.ledger.merges import (
    MERGE,
    detect_intake,
    former_upstream,
    intake_of,
    merged_upstream,
    original_fork_point,
)
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
from forkflow.ledger import records
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
        recorded = records.recorded_decisions(s, fork_id)
        key = _cache_key(fork_tip, upstream_tip, fork_point, recorded_point, recorded, config)
        payload = records.cached_ledger(s, key)
    if payload is not None:
        return ledger_from_json(payload)
    ledger = _compute(repo, config, store, fork_tip, upstream_tip, fork_point, recorded_point, recorded)
    with store.session_scope() as s:
        records.save_ledger(s, fork_id, key, ledger_to_json(ledger))
    return ledger


def _cache_key(fork_tip: Sha, upstream_tip: Sha, fork_point: Sha, point: Sha | None,
               recorded: list[RecordedDecision], config: Config) -> str:
    h = hashlib.sha256()
    parts = [__version__, fork_tip, upstream_tip, fork_point, point or "-",
             repr(config.ledger), repr(config.section("upstream").get("first_parent", False)),
             intake_of(config)]
    parts += sorted(f"{r.sha}:{r.disposition.value}:{r.reason}:{','.join(r.fork_shas)}:{r.source.value}:"
                    f"{r.verdict}:{r.until}:{r.task}:{r.decided_by}:{r.chain}" for r in recorded)
    if any(r.until for r in recorded):  # a deferral lapses at midnight: the key changes with the day
        parts.append(_today())
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def _compute(repo: Repo, config: Config, store: Store, fork_tip: Sha, upstream_tip: Sha, fork_point: Sha,
             recorded_point: Sha | None, recorded: list[RecordedDecision]) -> Ledger:
    first_parent = bool(config.section("upstream").get("first_parent", False))
    merging = intake_of(config) == MERGE
    # a merge fork's ledger starts where the fork grew from: what its merges took is listed, TAKEN
    origin = (original_fork_point(repo, fork_tip, upstream_tip) or fork_point) if merging else fork_point
    upstream = repo.log(f"{origin}..{upstream_tip}", first_parent=first_parent)
    fork_commits = repo.log(fork_tip, f"^{upstream_tip}")
    builder = LedgerBuilder(upstream, config.ledger.markers, config.ledger.opt_out,
                            is_inverse=InverseDiff(repo))
    if merging:
        builder.add_merged(merged_upstream(repo, fork_tip, origin, set(builder.by_sha)))
    # whatever the intake: a merge of upstream whose commits upstream rewrote away brought upstream's words
    former, notes = former_upstream(repo, fork_tip, upstream_tip, config.upstream_remote, config.upstream_branch)
    if "intake" not in config.section("fork") and (found := detect_intake(repo, fork_tip, upstream_tip)).style == MERGE:
        notes.append(f"this fork merges upstream ({found.upstream_merges} merge(s) of upstream) but forkflow.toml has no "
                     '[fork] intake: set intake = "merge" for its merges to count (docs/ledger.md)')
    builder.add_fork_commits(fork_commits, patch_only=former)
    unreadable = _match_patch_ids(repo, store, builder)
    builder.add_title_matches()
    entries = builder.entries(recorded, today=_today())
    if unreadable:
        notes.append(f"{len(unreadable)} commit(s) have no patch-id: their blobs are missing from this clone "
                     f"and could not be fetched (first: {unreadable[0][:12]}); they were matched by markers "
                     "and titles only")
    if merging:  # the merge base and what is decided right after it: merges move the point
        point, inferred = _decided_point(entries, fork_point), True
    else:
        point, inferred = _ingestion_point(entries, recorded_point, config.ledger.infer_threshold)
    if not merging and recorded_point is not None and point is None:
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


class InverseDiff:
    """Does a revert's diff undo its target's?  Asked only of revert candidates, each pair once.

    Exact (`whole`, for upstream reverts): the tree change undone path by path (every path the
    target changed from (mode, blob) A to B, the revert changes from B back to A, and no other),
    or, where the file moved on in between, the changed lines: the revert removes exactly the lines
    the target added and adds exactly those it removed, path by path, context and line numbers
    aside. Mostly (not `whole`, for a fork's back-out of its own pick): the revert undoes at least
    `MOSTLY` of the target's changed lines, whatever else it changes (a back-out that keeps one
    line, or backs out the diffs on top too). A diff git cannot read (a blob this clone lacks)
    confirms nothing."""

    MOSTLY = 0.9

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self._seen: dict[tuple[Sha, Sha, bool], bool] = {}

    def __call__(self, revert: Sha, target: Sha, whole: bool) -> bool:
        key = (revert, target, whole)
        if key not in self._seen:
            try:
                self._seen[key] = self._check(revert, target, whole)
            except (GitError, UserError):
                self._seen[key] = False
        return self._seen[key]

    def _check(self, revert: Sha, target: Sha, whole: bool) -> bool:
        r, t = self._tree_change(revert), self._tree_change(target)
        if not t:
            return False
        if set(r) == set(t) and all(r[p] == (new, old) for p, (old, new) in t.items()):
            return True
        if whole and set(r) != set(t):
            return False
        r_lines, t_lines = self._changed_lines(revert), self._changed_lines(target)
        if not t_lines:
            return False
        flipped: Counter[tuple[bytes, str, bytes]] = Counter(
            {(p, "-" if sign == "+" else "+", text): n for (p, sign, text), n in t_lines.items()})
        if whole:
            return r_lines == flipped
        undone = sum((r_lines & flipped).values())
        return undone >= self.MOSTLY * sum(flipped.values())

    def _args(self, sha: Sha) -> list[str]:
        return ["diff-tree", "-r", "--root", "--no-renames", "--no-commit-id", "-m", "--first-parent"]

    def _tree_change(self, sha: Sha) -> dict[bytes, tuple[bytes, bytes]]:
        """path -> ((old mode, old blob), (new mode, new blob)) flattened to two byte strings."""
        raw = self.repo.git_bytes(*self._args(sha), "-z", sha)
        toks = raw.split(b"\0")
        out: dict[bytes, tuple[bytes, bytes]] = {}
        for head, path in zip(toks[0::2], toks[1::2]):
            if not head.startswith(b":"):
                continue
            old_mode, new_mode, old, new = head[1:].split(b" ")[:4]
            out[path] = (old_mode + b" " + old, new_mode + b" " + new)
        return out

    def _changed_lines(self, sha: Sha) -> Counter[tuple[bytes, str, bytes]]:
        raw = self.repo.git_bytes(*self._args(sha), "-p", "-U0", "--binary", sha)
        out: Counter[tuple[bytes, str, bytes]] = Counter()
        path = b""
        in_hunk = False
        for line in raw.split(b"\n"):
            if line.startswith(b"diff --git "):
                path, in_hunk = line, False
            elif line.startswith(b"@@"):
                in_hunk = True
            elif in_hunk and line[:1] in (b"+", b"-"):
                out[(path, line[:1].decode(), line[1:])] += 1
            elif not in_hunk and line.startswith(b"GIT binary patch"):
                out[(path, "binary", line)] += 1  # never equal to its flip: binary needs the tree check
        return out


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
        facts = records.commit_facts(s, [c.sha for c in fork_side] + upstream_side)
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
            records.save_commit_facts(s, new_facts)
    builder.add_patch_id_matches(
        {sha: facts[sha][0] or "" for sha in fork_cands},
        {sha: facts[sha][0] or "" for sha in candidates},
    )
    return [sha for sha in need_pid if sha not in pids]


def _decided_point(entries: list[LedgerEntry], fork_point: Sha) -> Sha | None:
    """A merge fork's ingestion point: the newest upstream commit up to which every listed commit
    is handled (merged, picked, skipped, deferred), never before the merge base."""
    best: Sha | None = None
    for e in entries:
        if e.disposition is Disposition.PENDING:
            break
        best = e.commit.sha
    if best is None or not any(e.commit.sha == fork_point for e in entries):
        return best
    cut = next(i for i, e in enumerate(entries) if e.commit.sha == fork_point)
    mine = next(i for i, e in enumerate(entries) if e.commit.sha == best)
    return best if mine >= cut else fork_point


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
            chain=e.get("chain", ""),
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
