"""`forkflow ingest` on a fork that merges upstream (`[fork] intake = "merge"`).

What such a team does by hand, faster: find the newest upstream commit that merges into the fork
without conflict, build that merge in memory, run L1 on it, land it by compare-and-swap as one
merge commit whose message lists the upstream range and its PRs, and name the first upstream
commit that conflicts, with its files, as the next thing for a person.

The search runs over upstream's first-parent chain after the merge base (c1..cn).  A merge of
ck brings in c1..ck, so a conflict, once some ck brings it, stays in every later one: the chain
is clean up to a boundary and conflicted after it (an upstream revert can make a later commit
clean again; the search then stops at the first boundary, which a linear scan of every commit
in order finds too).  Trials: the tip first (one merge when everything is clean), then galloping
from the merge base (c1, c2, c4, c8, ...) and bisection, about 2 log2(k) merges for a boundary at
k.  An upstream commit that touches forkflow's own files (docs/security.md) bounds the search:
it and what follows wait for a person.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from forkflow.config import Config
from forkflow.conflicts import records as crecords
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.casework import Settlement, build_case, build_resolvers, trust_gate
from forkflow.conflicts.engine import resolve_case
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.errors import UserError
from forkflow.git.commits import merge_commits, resolved_merge, write_merge
from forkflow.git.pick import MemoryPicker, MissingBlob, PathConflict, touches_own_files
from forkflow.git.repo import Repo
from forkflow.landing.gate import Gate
from forkflow.landing.ingest import Proposer, ReviewMember
from forkflow.landing.settings import ingest_settings
from forkflow.landing.worktree import catch_up_work_trees
from forkflow.ledger.evidence import pr_number
from forkflow.ledger.refs import check_repo
from forkflow.models import Sha
from forkflow.store.session import Store


@dataclass(frozen=True, slots=True)
class NextConflict:
    """The first upstream commit whose merge conflicts: the next thing for a person."""

    sha: Sha
    subject: str
    files: tuple[str, ...]
    reason: str = ""  # why it waits, when not a conflict (forkflow's own files)


@dataclass(slots=True)
class MergeReport:
    mode: str  # dry-run | validate | land
    base: Sha  # the fork tip the merge is made on
    merge_base: Sha
    upstream_tip: Sha
    pending: int  # upstream first-parent commits after the merge base, up to the tip (or --until)
    target: Sha | None = None  # the newest upstream commit merged (None: nothing merges)
    clean_target: Sha | None = None  # the newest one that merges without conflict (the search's answer)
    resolved_by: dict[str, str] = field(default_factory=dict)  # path -> resolver, where the merge of target conflicted
    merged: int = 0  # upstream first-parent commits the merge brings in
    prs: tuple[int, ...] = ()
    trials: int = 0
    trial_log: list[tuple[int, bool]] = field(default_factory=list)  # (chain index, clean) in order
    candidate: Sha | None = None  # the merge commit made
    gate: str = ""
    l1_run: int | None = None  # the stored L1 run that gated the merge (`forkflow triage RUN`)
    passed: bool | None = None
    landed: bool = False
    proposed: str = ""  # `[ingest] land = "review"`: the request the merge waits in
    tip: Sha = Sha("")
    next_conflict: NextConflict | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        nxt = self.next_conflict
        return {
            "intake": "merge", "mode": self.mode, "base": self.base, "merge_base": self.merge_base,
            "upstream_tip": self.upstream_tip, "pending": self.pending, "target": self.target,
            "clean_target": self.clean_target, "resolved_by": dict(self.resolved_by),
            "merged": self.merged, "prs": list(self.prs), "trials": self.trials, "candidate": self.candidate,
            "gate": self.gate, "l1_run": self.l1_run, "passed": self.passed, "landed": self.landed, "proposed": self.proposed,
            "tip": self.tip,
            "next": None if nxt is None else {"sha": nxt.sha, "subject": nxt.subject, "files": list(nxt.files),
                                              "reason": nxt.reason},
            "seconds": round(self.seconds, 2), "notes": list(self.notes),
        }


def search_boundary(n: int, clean: Callable[[int], bool]) -> int:
    """The index k (0-based, -1 for none) of the newest of chain[0..n-1] such that its merge is
    clean and the next one's is not (or k = n-1): the tip first, then galloping from the start and
    bisection.  `clean(i)` is one merge trial.  [pure]"""
    if n == 0:
        return -1
    if clean(n - 1):
        return n - 1
    lo, hi = -1, n - 1  # lo: known clean (-1 is the merge base itself), hi: known conflicted
    step = 1
    while lo + step < hi:
        i = lo + step
        if clean(i):
            lo, step = i, step * 2
        else:
            hi = i
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if clean(mid):
            lo = mid
        else:
            hi = mid
    return lo


def merge_message(config: Config, merge_base: Sha, target: Sha, merged: Sequence[tuple[Sha, str]],
                  nxt: NextConflict | None) -> str:
    """The merge commit's message: the upstream range and its PRs (shas and numbers only: upstream's
    words are not the fork's, see docs/ledger.md)."""
    prs = [p for p in (pr_number(subject) for _, subject in merged) if p is not None]
    lines = [f"Merge upstream commit '{target}'", "",
             f"Merges {len(merged)} commit(s) of {config.upstream_remote}/{config.upstream_branch}: "
             f"{merge_base[:12]}..{target[:12]}.", "",
             f"Upstream range: {merge_base}..{target}"]
    if prs:
        lines.append("Upstream PRs: " + " ".join(f"#{p}" for p in prs))
    if nxt is not None:
        lines += ["", f"Next for a person: {nxt.sha[:12]} "
                  + (nxt.reason if nxt.reason else f"conflicts in {', '.join(nxt.files[:5])}"
                     + (f" and {len(nxt.files) - 5} more" if len(nxt.files) > 5 else ""))]
    return "\n".join(lines) + "\n"


class ConflictDesk:
    """A merge's conflicts and forkflow's store, as picks' conflicts are kept (`forkflow conflicts`):
    each path no resolver settles is kept for a person, keyed by its regions; a person's resolution
    (`forkflow conflicts resolve ID --file F`) and a resolver's answer that landed are found again
    by that key when the merge is retried, as git's rerere would.  `store` None: nothing is kept
    nor looked up (a dry run of replay's scratch forks keeps nothing either)."""

    def __init__(self, store: Store | None, fork_id: int | None, writes: bool) -> None:
        self.store, self.fork_id, self.writes = store, fork_id, writes

    def lookup_resolution(self, key: str) -> tuple[list[str], str] | None:
        if self.store is None:
            return None
        with self.store.connection_scope() as s:
            return crecords.lookup_resolution(s, key)

    def log_attempt(self, attempt: Attempt) -> None:
        if self.store is not None and self.fork_id is not None and self.writes:
            with self.store.session_scope() as s:
                crecords.add_attempt(s, self.fork_id, attempt)

    def keep(self, sha: Sha, base: Sha, unresolved: Sequence[tuple[ConflictCase, tuple[str, ...]]]) -> None:
        if self.store is None or self.fork_id is None or not self.writes:
            return
        with self.store.connection_scope() as s:
            for case, tried in unresolved:
                crecords.upsert_conflict(s, self.fork_id, upstream_sha=sha, subject=case.subject, path=case.path,
                                         kind=case.kind.value, chain=MERGE_CHAIN, base_sha=base, key=case.key,
                                         marked=case.marked if case.segments else "", tried=tried)

    def close_taken(self, repo: Repo, fork_tip: Sha) -> None:
        """Close the open conflicts of upstream commits the fork branch now reaches (a merge landed
        after review, or a person merged by hand)."""
        if self.store is None or self.fork_id is None or not self.writes:
            return
        with self.store.session_scope() as s:
            open_ = {c.upstream_sha for c in crecords.conflicts(s, self.fork_id, "open")}
        taken = [sha for sha in sorted(open_) if repo.is_ancestor(sha, fork_tip)]
        if taken:
            with self.store.connection_scope() as s:
                crecords.close_conflicts(s, self.fork_id, taken)

    def landed(self, merged: Sequence[Sha], used: Sequence[tuple[ConflictCase, tuple[str, ...], str]]) -> None:
        if self.store is None or self.fork_id is None or not self.writes:
            return
        with self.store.connection_scope() as s:
            for case, regions, resolver in used:
                if case.key:
                    crecords.save_resolution(s, case.key, case.path, list(regions), resolver)
            crecords.close_conflicts(s, self.fork_id, list(merged))


MERGE_CHAIN = "merge"  # the `chain` of a merge's conflicts in `forkflow conflicts`


def merge_intake(repo: Repo, config: Config, gate: Gate | None, mode: str = "validate",
                 until: str | None = None, desk: ConflictDesk | None = None,
                 proposer: Proposer | None = None) -> MergeReport:
    """Merge the newest cleanly mergeable upstream commit into the fork branch (see the module);
    where the first conflicting commit's merge is settled by the resolvers, that one instead.
    With `proposer` (`[ingest] land = "review"`), a merge that passed L1 is proposed for review
    instead of landed; the review's approval lands it (landing/review.py)."""
    start = time.monotonic()
    if mode not in ("dry-run", "validate", "land"):
        raise UserError(f"unknown mode {mode!r}")
    if mode != "dry-run" and gate is None:
        raise UserError("no L1 gate: set [ingest] l1_command in forkflow.toml")
    fork_tip, upstream_tip = check_repo(repo, config)
    merge_base = repo.merge_base(fork_tip, upstream_tip)
    if merge_base is None:
        raise UserError(f"fork branch '{config.fork_branch}' and upstream share no history; check --upstream")
    desk = desk or ConflictDesk(None, None, False)
    desk.close_taken(repo, fork_tip)
    top = upstream_tip
    if until is not None:
        found = repo.resolve(until)
        if found is None or not repo.is_ancestor(found, upstream_tip):
            raise UserError(f"--until {until!r} is not a commit of upstream's branch; pass an upstream sha")
        top = found
    chain = [Sha(s) for s in repo.git("rev-list", "--first-parent", "--reverse", top, f"^{fork_tip}").split()]
    report = MergeReport(mode, fork_tip, merge_base, upstream_tip, len(chain), tip=fork_tip)
    if not chain:
        report.notes.append("up to date: the fork branch reaches upstream's tip")
        report.seconds = time.monotonic() - start
        return report
    subjects = dict(line.split(" ", 1) for line in repo.git(
        "log", "--no-walk=unsorted", "--format=%H %s", *chain).splitlines() if " " in line)
    n = len(chain)
    files = repo.changed_files(chain)
    for i, sha in enumerate(chain):  # forkflow's own files: never merged, a person decides
        why = touches_own_files(files.get(sha, ()))
        if why:
            report.next_conflict = NextConflict(sha, subjects.get(sha, ""), (), why)
            report.notes.append(f"{sha[:12]} {why}; the merge stops before it")
            n = i
            break
    picker = MemoryPicker(repo.path, batch_writes=True)

    seen: dict[int, tuple[PathConflict, ...]] = {}

    def clean(i: int) -> bool:
        if i not in seen:
            seen[i] = merge_commits(picker, fork_tip, chain[i])[1]
            report.trial_log.append((i, not seen[i]))
        return not seen[i]

    k = search_boundary(n, clean)
    report.trials = len(report.trial_log)
    report.clean_target = chain[k] if k >= 0 else None
    used: list[tuple[ConflictCase, tuple[str, ...], str]] = []
    settled: dict[str, bytes | None] | None = None
    if k + 1 < n:
        first = chain[k + 1]
        if k + 1 not in seen:
            clean(k + 1)
        report.next_conflict = NextConflict(first, subjects.get(first, ""), tuple(c.path for c in seen[k + 1]))
        settled = _settle(repo, config, picker, first, merge_base, seen[k + 1], desk, mode, fork_tip, used)
        if settled is not None:  # the resolvers settled the merge of the first conflicting commit
            report.resolved_by = {case.path: resolver for case, _, resolver in used}
            report.notes.append(f"the merge of {first[:12]} conflicted in {len(used)} file(s), settled by "
                                + ", ".join(sorted(set(report.resolved_by.values()))))
            report.next_conflict = None
            k += 1
    if k < 0:
        report.notes.append("no upstream commit merges without conflict: the first one needs a person")
        report.seconds = time.monotonic() - start
        return report
    target = chain[k]
    merged = [(s, subjects.get(s, "")) for s in chain[: k + 1]]
    report.target, report.merged = target, k + 1
    report.prs = tuple(p for p in (pr_number(subj) for _, subj in merged) if p is not None)
    if mode == "dry-run":
        report.seconds = time.monotonic() - start
        return report
    if settled is not None:
        tree = resolved_merge(picker, fork_tip, target, settled)
    else:
        tree, conflicted = merge_commits(picker, fork_tip, target, write=True)
        assert not conflicted, "the search found this merge clean"
    candidate = write_merge(picker, tree, [fork_tip, target],
                            merge_message(config, merge_base, target, merged, report.next_conflict))
    picker.flush([candidate])  # git (and the gate's work tree) sees it from here
    report.candidate = candidate
    assert gate is not None
    result = gate.check(candidate, fork_tip)
    report.gate, report.passed, report.l1_run = result.summary, result.passed, result.run_id
    if not result.passed:
        report.notes.append(f"L1 failed on the merge of {target[:12]}: {result.summary}; nothing landed")
    elif mode == "land" and proposer is not None:
        members = [ReviewMember(sha, subj, pr_number(subj), "merged with the upstream commits before it")
                   for sha, subj in merged]
        report.proposed = proposer.propose(None, f"merge-{target[:12]}", "merge", candidate, fork_tip, members,
                                           result.summary, [])
    elif mode == "land":
        if repo.update_ref(config.fork_ref, candidate, fork_tip, message=f"forkflow: merge upstream {target[:12]}"):
            report.landed, report.tip = True, candidate
            desk.landed([s for s, _ in merged], used)
            report.notes += catch_up_work_trees(repo, config, fork_tip, candidate)  # a checkout of the branch follows
        else:
            report.notes.append(f"the fork branch moved while L1 ran (it is no longer {fork_tip[:12]}); "
                                "nothing landed: run `forkflow ingest --land` again")
    report.seconds = time.monotonic() - start
    return report


def _settle(repo: Repo, config: Config, picker: MemoryPicker, sha: Sha, merge_base: Sha,
            conflicts: Sequence[PathConflict], desk: ConflictDesk, mode: str, base: Sha,
            used: list[tuple[ConflictCase, tuple[str, ...], str]]) -> dict[str, bytes | None] | None:
    """The resolvers on each conflicted path of the merge of `sha` (the configured ones, a person's
    recorded resolution first, under the trust rules as picks' conflicts are): every path's
    content, or None, after keeping the unsettled ones for a person."""
    settings = ingest_settings(config)
    writes = mode != "dry-run"
    resolvers = build_resolvers(settings.resolvers, desk.lookup_resolution, settings.agent, desk.log_attempt,
                                dict(os.environ), with_agent=writes)
    trust = trust_gate(repo, config, desk, writes=writes)
    settled = Settlement(used=used)
    for conflict in conflicts:
        try:
            case = build_case(repo, picker, sha, conflict, fork_point=merge_base)
        except MissingBlob:
            return None
        settled.add(case, trust.gate(case, resolve_case(case, resolvers)))
    if settled.unresolved:
        used.clear()
        desk.keep(sha, base, settled.unresolved)
        return None
    return settled.contents
