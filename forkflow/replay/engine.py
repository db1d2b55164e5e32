"""The one place replay calls forkflow's ledger, planner and picker (see #15).

Everything replay needs from the ingestion pipeline goes through `Engine`: the status of a
(fork, upstream) state, what `forkflow ingest --land` does on it in a scratch repository, and
how an upstream change picked onto a fork commit's parent compares with that commit.  When the
planner changes (dependency-exact chains, #11), this module is the one that follows.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forkflow.config import Config
from forkflow.conflicts.engine import resolve_case
from forkflow.conflicts.records import lookup_resolution
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.errors import UserError
from forkflow.git.commits import ObjectError, changed_paths, parents_of, same_entries
from forkflow.git.repo import Repo
from forkflow.conflicts.casework import build_case, build_resolvers
from forkflow.landing.gate import CommandGate, Gate
from forkflow.landing.ingest import IngestOptions, Mode, UnitResult, UnitStatus
from forkflow.landing.stored import store_ingestor
from forkflow.git.pick import MemoryPicker, MissingBlob, PickStep, Resolutions
from forkflow.landing.settings import IngestSettings, ingest_settings
from forkflow.landing.merge_intake import ConflictDesk, merge_intake
from forkflow.ledger.build import build_ledger
from forkflow.ledger.headline import Headline, headline
from forkflow.ledger.report import headline_of, stored_conflicts
from forkflow.ledger.merges import MERGE, intake_of
from forkflow.models import Disposition, GateResult, Ledger, Sha
from forkflow.replay.model import Landed, State
from forkflow.store import forks
from forkflow.store.session import Store

ENGINE_VERSION = "7"  # part of every cache key: bump when what a step computes changes


class MergeabilityGate:
    """The default gate of a replay: a unit that picked without conflict passes (no tests run)."""

    def check(self, rev: Sha, base: Sha) -> GateResult:
        return GateResult(True, "merge-ability only (no gate command)")


@dataclass(frozen=True, slots=True)
class StateWork:
    """forkflow's work on one state, before the fork's real picks are looked up."""

    after: State
    landed: tuple[tuple[str, str, str, str], ...]  # (sha, subject, applied|resolved, resolver)
    skipped: int
    deferred: int
    waiting: int
    units: int
    notes: tuple[str, ...]
    tip: Sha = Sha("")  # forkflow's fork branch after the ingest
    backlog_at: int = 0  # not taken at or before the point given to `ingest` (the real fork's)
    stopped: str = ""  # why the ingest stopped before its queue was done (L1 failed on the fork tip)


def state_of(ledger: Ledger, head: Headline | None = None) -> State:
    """The state `status` shows of `ledger`: its headline (read with the defaults without `head`)."""
    counts = ledger.counts()
    head = head or headline(ledger)
    return State(head.days_behind, head.backlog, counts[Disposition.PENDING],
                 counts[Disposition.PENDING] + counts[Disposition.DEFERRED], head.point.sha, True,
                 held=head.held, oldest_open_days=head.oldest_open_days, conflict_commits=head.conflict_commits,
                 conflict_files=head.conflict_files, if_deferred_days=head.if_deferred_days)


class Engine:
    """forkflow's pipeline on a scratch repository whose refs a replay sets step by step."""

    def __init__(self, repo: Repo, config: Config, store: Store, gate_command: str = "",
                 log_dir: Path | None = None) -> None:
        self.repo, self.config, self.store = repo, config, store
        self.settings: IngestSettings = ingest_settings(config)
        self.gate: Gate = (CommandGate(repo, gate_command, self.settings.l1_timeout, log_dir=log_dir)
                           if gate_command else MergeabilityGate())
        self._picker: MemoryPicker | None = None

    @property
    def picker(self) -> MemoryPicker:
        if self._picker is None:
            self._picker = MemoryPicker(self.repo.path)
        return self._picker

    def fork(self, name: str) -> int:
        """A fresh fork in the scratch store (its id): no decision of another step leaks into this one."""
        with self.store.session_scope() as s:
            return forks.fork_id(s, name)

    def state(self, ledger: Ledger, fork_id: int | None = None) -> State:
        """`state_of` by the fork's own rule (its config), with the open conflicts of `fork_id`."""
        conflicts = stored_conflicts(self.store, fork_id) if fork_id is not None else None
        return state_of(ledger, headline_of(ledger, self.config, conflicts=conflicts,
                                            fork_point_date=self.repo.commit_date(ledger.fork_point)))

    def status(self, fork_id: int, fork_tip: Sha, upstream_tip: Sha, *, recorded: bool = False) -> Ledger:
        return build_ledger(self.repo, self.config, self.store, fork_id, fork_tip=fork_tip,
                            upstream_tip=upstream_tip, use_recorded_point=recorded)

    def ingest(self, fork_id: int, upstream_tip: Sha, point: Sha | None = None) -> StateWork:
        """`forkflow ingest --land` on the scratch fork branch; the state it leaves.

        With `point` (the real fork's ingestion point), it also counts the upstream commits at
        or before that very point that forkflow's branch has not taken: the real backlog's twin.
        A fork that merges upstream (`[fork] intake = "merge"`) gets merge-mode ingest."""
        if intake_of(self.config) == MERGE:
            return self._merge_ingest(fork_id, upstream_tip, point)
        ingestor = store_ingestor(self.repo, self.config, self.store, fork_id, IngestOptions(mode=Mode.LAND),
                                  self.gate, settings=self.settings)
        try:
            report = ingestor.run()
        except (ObjectError, KeyError) as e:
            if "not found" not in str(e):
                raise
            # a history that names blobs the object database lacks (a partial clone); see #11
            raise UserError(f"an object of the fork's history is missing ({e}); fetch it (`git fetch --refetch`) "
                            "or use a complete clone, then re-run: finished steps are kept") from e
        finally:
            if isinstance(self.gate, CommandGate):
                self.gate.close()  # a step's L1 tree goes with it (a pool worker never says it ends)
        after = self.status(fork_id, report.tip, upstream_tip, recorded=True)
        subjects = {e.commit.sha: e.commit.subject for e in after.entries}
        landed: list[tuple[str, str, str, str]] = []
        for r in report.results:
            if r.status is UnitStatus.LANDED:
                landed += [(sha, subjects.get(sha, ""), *_how(r, sha)) for sha in r.picked]
        return StateWork(
            after=self.state(after, fork_id), landed=tuple(landed),
            skipped=sum(len(r.skipped) for r in report.results),
            deferred=sum(len(r.deferred) - len(_held(r)) for r in report.results if r.status is not UnitStatus.WAITING),
            waiting=sum(len(r.deferred) if r.status is UnitStatus.WAITING else len(_held(r)) for r in report.results),
            units=len(report.results), notes=report.notes, tip=report.tip,
            backlog_at=backlog_at(after, point) if point else 0, stopped=report.stopped)

    def _merge_ingest(self, fork_id: int, upstream_tip: Sha, point: Sha | None) -> StateWork:
        """The newest cleanly mergeable upstream commit merged, gated and landed (merge_intake.py)."""
        try:
            report = merge_intake(self.repo, self.config, self.gate, "land",
                                  desk=ConflictDesk(self.store, fork_id, True))
        finally:
            if isinstance(self.gate, CommandGate):
                self.gate.close()
        after = self.status(fork_id, report.tip, upstream_tip, recorded=True)
        landed: list[tuple[str, str, str, str]] = []
        if report.landed and report.target is not None:
            merged = self.repo.git("rev-list", "--reverse", report.target, f"^{report.base}").split()
            subjects: dict[str, str] = {e.commit.sha: e.commit.subject for e in after.entries}
            landed = [(sha, subjects.get(sha, ""), "applied", "") for sha in merged]
        waiting = report.pending - report.merged
        notes = tuple(report.notes) + ((f"next for a person: {report.next_conflict.sha[:12]}",)
                                       if report.next_conflict is not None else ())
        return StateWork(after=self.state(after, fork_id), landed=tuple(landed), skipped=0,
                         deferred=1 if report.next_conflict is not None else 0,
                         waiting=max(0, waiting - (1 if report.next_conflict is not None else 0)),
                         units=1 if report.candidate else 0, notes=notes, tip=report.tip,
                         backlog_at=backlog_at(after, point) if point else 0)

    def same_rule(self, name: str, fork_tip: Sha, upstream_tip: Sha) -> State:
        """forkflow's fork measured as the real one is: by its picks alone, the point inferred.

        The real fork never ran forkflow, so its ingestion point is inferred from its picks (the
        newest upstream commit with `infer_threshold` of the commits up to it taken).  forkflow's
        own status reads the same rule and counts its own holds as open too, so the two differ
        only by what its store settled: empty picks skipped, a person's decisions."""
        return self.state(self.status(self.fork(name), fork_tip, upstream_tip, recorded=False))

    # -- the fork's own picks ------------------------------------------------------
    def compare_pick(self, fork_sha: Sha, upstream: Sequence[Sha], *, resolve: bool,
                     patch_ids: Mapping[Sha, str] | None = None) -> str:
        """How `upstream`, picked by forkflow onto the fork commit's parent, compares with that commit.

        Returns `patch-id` (one commit, the same patch), `post-image` (the files either side touched
        end up the same), `differs`, `conflict` (no resolver: the pick needs a person) or, with
        `resolve`, `unresolved` when forkflow's resolvers leave a conflict."""
        parents = parents_of(self.picker, fork_sha)
        if parents is None or len(parents) != 1 or not upstream:
            return "differs"
        if len(upstream) == 1 and not resolve:
            ids = patch_ids if patch_ids and fork_sha in patch_ids else self.repo.patch_ids([fork_sha, upstream[0]])
            if ids.get(fork_sha) and ids.get(fork_sha) == ids.get(upstream[0]):
                return "patch-id"
        base = self.picker.commit_tree(parents[0])
        fix = self._resolver() if resolve else None
        pick = self.picker.pick_sequence(base, upstream, resolve=fix)
        if pick.conflicted:
            return "unresolved" if resolve else "conflict"
        return "post-image" if self._same_files(pick.tree, base, fork_sha, upstream) else "differs"

    def _same_files(self, tree: str, base: str, fork_sha: Sha, upstream: Sequence[Sha]) -> bool:
        picker = self.picker
        theirs = picker.commit_tree(fork_sha)
        paths = changed_paths(picker, base, theirs)
        for u in upstream:
            paths |= changed_paths(picker, picker.mainline_tree(u), picker.commit_tree(u))
        return same_entries(picker, tree, theirs, paths)

    def _resolver(self) -> Callable[[PickStep, str], Resolutions | None]:
        def lookup(key: str) -> tuple[list[str], str] | None:
            with self.store.session_scope() as s:
                return lookup_resolution(s, key)

        resolvers = build_resolvers(self.settings.resolvers, lookup, self.settings.agent, _no_log,
                                    dict(os.environ), with_agent=True)

        def fix(step: PickStep, onto_tree: str) -> Resolutions | None:
            out: dict[str, bytes | None] = {}
            for conflict in step.conflicts:
                try:
                    case = build_case(self.repo, self.picker, step.sha, conflict)
                except MissingBlob:  # a blob the clone lacks: the conflict stays, as one git would leave
                    return None
                outcome = resolve_case(case, resolvers)
                if not outcome.resolved:
                    return None
                out[conflict.path] = outcome.content
            return out

        return fix


def backlog_at(ledger: Ledger, point: Sha) -> int:
    """Upstream commits at or before `point` that the ledger's fork has not taken."""
    cut = ledger.index_of(point)
    return sum(1 for e in ledger.entries[: cut + 1] if e.disposition in (Disposition.PENDING, Disposition.DEFERRED))


def _no_log(attempt: Attempt) -> None:
    pass


def _held(r: UnitResult) -> dict[str, str]:
    """Commits a unit deferred only because they depend on one held back (a planner that tells them apart)."""
    held: dict[str, str] = getattr(r, "held", {})
    return {sha: why for sha, why in held.items() if sha in r.deferred}


def _how(r: UnitResult, sha: str) -> tuple[str, str]:
    resolver = next((v for k, v in r.resolved_by.items() if k.startswith(sha[:12])), "")
    return ("resolved", resolver) if resolver else ("applied", "")


def landed_of(outcome: StateWork) -> tuple[Landed, ...]:
    return tuple(Landed(sha, subject, how, resolver) for sha, subject, how, resolver in outcome.landed)
