"""`forkflow ingest`: recover, plan, then for each landing unit pick in memory, resolve, run L1,
land by compare-and-swap and record decisions; finally move the ingestion point.  With `--land`
the units go through the landing queue (`forkflow.landing.queue.MergeQueue`), for which the
`Ingestor` is the `Lander`: it picks each unit onto the queue's stack and records what the
queue's gate runs decide.

The order of writes makes every crash safe: a candidate commit is only an object until L1
passed and the compare-and-swap moved the branch; the store learns of a landing afterwards,
and `recover` settles a unit a crash left half-way from what git says.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from forkflow.config import Config
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.errors import GitError, UserError
from forkflow.landing import records
from forkflow.conflicts.provenance import People
from forkflow.children import AHEAD_MIN, early_started
from forkflow.conflicts.learn import learn_ahead
from forkflow.landing.holds import Holds
from forkflow.landing.queue import GateRuns, Item, MergeQueue, Policy, Runners, Staged, could_not_run
from forkflow.git.reads import quick_reads
from forkflow.landing.journal import Journal, KeptConflict, UnitStart
from forkflow.landing.gate import Gate, prune_stale_worktrees
from forkflow.landing.candidates import CandidateWriter
from forkflow.landing.land import advance_ingestion_point, decided_prefix, keep_candidate, land, prune_candidates
from forkflow.landing.message import Decided
from forkflow.git.repo import Repo
from forkflow.git.notes import add_note
from forkflow.git.pick import MemoryPicker, PickStatus, PickStep, UnitPick
from forkflow.landing.worktree import catch_up_work_trees
from forkflow.landing.settling import Settler
from forkflow.landing.settings import IngestSettings
from forkflow.ledger.trailers import provenance_line
from forkflow.ledger.classify import decider_of
from forkflow.ledger.refs import check_repo, ingestion_ref
from forkflow.models import Disposition, GateResult, Ledger, MemberOutcome, RecordedDecision, Sha, UnitState
from forkflow.planning.lines import Dependency
from forkflow.planning.model import HeldBack, Plan, Unit, UnitKind

FailedBefore = dict[frozenset[Sha], records.UnitRecord]  # a failed unit's commits -> its record

MAX_CAS_TRIES = 5
OPEN_DISPOSITIONS = (Disposition.PENDING, Disposition.DEFERRED)


class Mode(str, enum.Enum):
    DRY_RUN = "dry-run"  # plan and pick in memory; write nothing
    VALIDATE = "validate"  # pick, run L1, keep candidates under refs/forkflow/candidates/
    LAND = "land"  # ... and land passing units on the fork branch


class UnitStatus(str, enum.Enum):
    LANDED = "landed"
    VALIDATED = "validated"  # passed L1, not landed (no --land)
    WOULD_PICK = "would-pick"  # dry run
    FAILED = "failed"  # L1 failed: deferred
    CONFLICT = "conflict"  # nothing pickable without a person: deferred
    EMPTY = "empty"  # everything already applied: skipped
    WAITING = "waiting"  # a chain link behind a deferred one
    ABANDONED = "abandoned"  # the branch kept moving, or L1 could not run: left pending
    IN_REVIEW = "in-review"  # passed L1, proposed for review ([ingest] land = "review")
    CLOSED = "closed"  # its review was closed (a person's deferral) or went stale (planned again)
    STAGED = "picking"  # on the landing queue's stack, not gated yet (settles before any report)


@dataclass(frozen=True, slots=True)
class IngestOptions:
    mode: Mode = Mode.VALIDATE
    push: bool = False
    max_units: int | None = None
    until: str | None = None
    max_bundle: int | None = None


@dataclass(frozen=True, slots=True)
class UnitResult:
    name: str
    kind: str
    status: UnitStatus
    summary: str
    picked: tuple[Sha, ...] = ()
    skipped: tuple[Sha, ...] = ()
    deferred: tuple[Sha, ...] = ()
    fork_sha: Sha | None = None
    resolved_by: dict[str, str] = field(default_factory=dict)  # "sha12 path" -> resolver
    unit_id: int | None = None  # the stored landing unit (none for a dry run)
    failed: tuple[Sha, ...] = ()  # the picked commits that failed L1 together
    held: dict[Sha, str] = field(default_factory=dict)  # deferred because it depends on one held back: why
    l1_run: int | None = None  # the stored L1 run that gated it (`forkflow triage RUN`), when there is one


@dataclass(frozen=True, slots=True)
class IngestReport:
    mode: Mode
    base: Sha
    tip: Sha
    plan: Plan
    results: tuple[UnitResult, ...]
    ingestion_point: Sha | None
    notes: tuple[str, ...] = ()
    held_back: tuple[HeldBack, ...] = ()  # every commit this run held back, and what it waits for
    stopped: str = ""  # why the run stopped before its queue was done (L1 could not run, failed on the tip)


class Reporter(Protocol):
    def phase(self, text: str) -> None: ...
    def start_units(self, total: int) -> None: ...
    def unit_done(self, result: UnitResult) -> None: ...


class QuietReporter:
    def phase(self, text: str) -> None:
        pass

    def start_units(self, total: int) -> None:
        pass

    def unit_done(self, result: UnitResult) -> None:
        pass


@dataclass(frozen=True, slots=True)
class ReviewMember:
    """A member of a unit proposed for review, as its request describes it."""

    sha: Sha
    subject: str
    pr: int | None
    reason: str


class Proposer(Protocol):
    """Review before landing (`landing/review.py`'s `Reviewer`): proposes a unit that passed L1."""

    def propose(self, unit_id: int | None, name: str, kind: str, candidate: Sha, base: Sha,
                members: list[ReviewMember], l1: str, depends_on: list[str]) -> str: ...


class IngestReader(Protocol):
    """What an ingest run reads from the store, and the bookkeeping of recovery; implemented once
    over the store (`landing/wired.py`), so the landing loop never opens a session."""

    def ledger(self, fork_tip: Sha, upstream_tip: Sha) -> Ledger: ...
    def plan(self, ledger: Ledger, settings: IngestSettings, until: str | None, max_bundle: int | None,
             picker: MemoryPicker) -> Plan:
        """`forkflow plan`'s first routing, without its probe: each unit's pick is its probe."""
        ...
    def unfinished_units(self) -> list[records.UnitRecord]:
        """The units a killed run left open (its running runs marked interrupted)."""
        ...
    def failed_with(self, shas: Sequence[Sha]) -> list[records.UnitRecord]:
        """The units that failed L1 with any of `shas` among their commits."""
        ...
    def close_conflicts_of(self, settled: set[Sha]) -> None:
        """Close the open conflicts of commits decided outside forkflow."""
        ...
    def lookup_resolution(self, key: str) -> tuple[list[str], str] | None: ...
    def log_attempt(self, attempt: Attempt) -> None: ...
    def resolution_people(self, keys: Sequence[str]) -> dict[str, People]: ...


def check_push_remote(repo: Repo, settings: IngestSettings) -> None:
    """Refuse `--push` to a remote that does not exist, before anything lands."""
    remote = settings.push_remote
    if remote not in repo.remotes():
        raise UserError(f"cannot push: no remote '{remote}'; add it (git remote add {remote} URL) or set "
                        "[ingest] push_remote in forkflow.toml; nothing was landed")


class SharedBranch(Protocol):
    """The branch a team shares (`landing/shared.py`): settled at the start, pushed at the end."""

    def begin(self) -> list[str]: ...
    def push(self) -> str: ...


class Ingestor:
    """One ingest run; each public method is one step."""

    def __init__(self, repo: Repo, picker: MemoryPicker, gate: Gate | None, journal: Journal,
                 reporter: Reporter | None, *, config: Config, settings: IngestSettings, options: IngestOptions,
                 reader: IngestReader) -> None:
        self.config = config  # the fork's refs and work trees; the store is behind journal and reader
        self.journal = journal
        self.reader = reader
        self.repo = repo
        self.options = options
        self.settings = settings
        self.gate = gate
        self.reporter = reporter or QuietReporter()
        self.picker = picker
        self.notes: list[str] = []
        self.decided: set[Sha] = set()
        self.settled: set[Sha] = set()  # decided for good (not DEFERRED): no candidate of them can land
        self.order: list[Sha] = []
        self.reviewer: Proposer | None = None  # [ingest] land = "review" (landing/review.py)
        self.shared: SharedBranch | None = None  # the team's branch and this run's lease (landing/shared.py)
        self.run_id = 0
        self._virtual: dict[str, Sha] = {}  # chain -> last validated link (without --land)
        self.reasons: dict[Sha, str] = {}  # upstream sha -> the plan's routing reason
        self.retry_of: int | None = None  # the stored unit this run re-runs (`ingest --unit ID`)
        self.deps: dict[Sha, tuple[Dependency, ...]] = {}  # the plan's dependencies between pending commits
        self.holds = Holds()  # what this run holds back, and the chain each waits in
        self._failed_before: FailedBefore = {}  # units that failed L1 on the fork tip this run starts on
        self._later: set[Sha] = set()  # held while the units not tried yet go first (`ingest_units`)
        self._stop = ""
        self._tip_seen: Sha | None = None  # the fork tip whose picks this run knows (see _not_picked)
        self._upstream_tip: Sha | None = None
        self._point_moved: Sha | None = None  # the ingestion point this run recorded last
        # the landing queue (`_land_queue`): runners beyond the first, the gate's runs, the stack
        # being staged and the fork tip under it, the queue's results
        self.more_gates: Callable[[], Gate] | None = None
        self._gate_runs: GateRuns | None = None
        self._stack: list[Staged] | None = None  # a list while a unit is staged, not gated
        self._root: Sha | None = None  # the fork tip the stack stands on
        self._results: list[UnitResult] = []
        # conflicts met by the resolvers through the trust gate; candidates written with their messages
        self.settler = Settler(repo, picker, config, settings, reader, reader.lookup_resolution, reader.log_attempt,
                               writes=options.mode is not Mode.DRY_RUN, note=self.notes.append)
        self.writer = CandidateWriter(picker, settings.landing == "per-commit", self.settler.settled,
                                      reader.resolution_people)

    @property
    def writes(self) -> bool:
        return self.options.mode is not Mode.DRY_RUN

    # -- steps ---------------------------------------------------------------
    def run(self) -> IngestReport:
        if self.writes and (early_started("learn", self.repo.path) or self._behind() >= AHEAD_MIN):
            # on the other core while this one reads the ledger and plans: the first conflict needs it
            # (started after the ledger, it learnt while the plan's `git diff-tree` wanted that core;
            # the program's entry starts it before its imports, see forkflow.cli.entry)
            learn_ahead(self.repo)
        if self.writes:
            self.recover()
        ledger = self.load_ledger()
        with quick_reads():  # the picks read the files they merge again and again, as the plan's probe
            plan = self.plan(ledger)
            results = self.ingest_units(plan)
        return self.finish(ledger, plan, results)

    def _behind(self) -> int:
        """How many upstream commits the fork branch lacks (picked ones too: what the ledger reads)."""
        try:
            out = self.repo.git("rev-list", "--count", f"{self.config.fork_ref}..{self.config.upstream_ref}", check=False)
            return int(out.strip() or 0)
        except (GitError, ValueError):
            return 0  # the ledger says what is wrong with the refs

    def finish(self, ledger: Ledger, plan: Plan, results: Sequence[UnitResult]) -> IngestReport:
        """Move the ingestion point, push when asked, close the run; the report of it all."""
        if self._stop:
            self.notes.append(self._stop)
        point = self.advance_point() if self.options.mode is Mode.LAND else None
        if self.options.push and self.options.mode is Mode.LAND:
            self.push()
        tip = self.repo.read_ref(self.config.fork_ref) or ledger.fork_tip
        if tip != ledger.fork_tip and self.options.mode is Mode.LAND:
            self.notes.extend(catch_up_work_trees(self.repo, self.config, ledger.fork_tip, tip))
        if self._gate_runs is not None:
            self._gate_runs.runners.close()  # the work trees of the runners made beyond the first
        if self.writes:
            prune_candidates(self.repo, self.settled)
        if self.writes and results:
            self.tidy_packs()
        if self.writes:
            self.journal.run_finished(self.run_id)
        return IngestReport(self.options.mode, ledger.fork_tip, tip, plan, tuple(results), point,
                            tuple(self.notes), tuple(self.holds.back), self._stop)

    def tidy_packs(self) -> None:
        """Units wrote loose objects (or a pack, for a big one); let git fold them as it does after a
        fetch (`git gc --auto`: nothing until `gc.auto` loose objects or `gc.autoPackLimit` packs;
        `gc.auto = 0` turns it off).  In the foreground, so that no repack outlives the run."""
        self.reporter.phase("tidying packs")
        self.repo.git("-c", "gc.autoDetach=false", "gc", "--auto", "--quiet", check=False)

    def recover(self) -> None:
        """Settle what a killed run left: landed units get their decisions, the rest are abandoned,
        and a ref lock a killed `git update-ref` left is removed (under the ingest lock, once it
        has outlived any git command)."""
        if self.shared is not None:  # fetch the shared branch; settle what earlier runs did not push
            self.notes.extend(self.shared.begin())
        prune_stale_worktrees(self.repo)
        for ref in (self.config.fork_ref, ingestion_ref(self.config)):
            if self.repo.clear_stale_ref_lock(ref):
                self.notes.append(f"removed {ref}.lock that a killed git command left behind")
        tip = self.repo.read_ref(self.config.fork_ref)
        landed: list[records.UnitRecord] = []
        for u in self.reader.unfinished_units():
            if u.candidate_sha and tip and u.status is UnitState.PASSED and self.repo.is_ancestor(u.candidate_sha, tip):
                landed.append(u)
            else:
                self.journal.unit_settled(u.id, UnitState.ABANDONED, "interrupted before landing")
        for u in landed:
            assert u.candidate_sha is not None
            self._record_landing(u.id, u.candidate_sha, u.members, u.base_sha,
                                 u.summary + " (recorded after an interrupted run)")

    def load_ledger(self, start_run: bool = True) -> Ledger:
        self.reporter.phase("reading the ledger")
        fork_tip, upstream_tip = check_repo(self.repo, self.config)
        ledger = self.reader.ledger(fork_tip, upstream_tip)
        self.order = self.writer.order = [e.commit.sha for e in ledger.entries]
        self._tip_seen, self._upstream_tip = fork_tip, upstream_tip
        self.settler.fork_point = ledger.fork_point
        self.decided = {e.commit.sha for e in ledger.entries if e.disposition is not Disposition.PENDING}
        self.settled = {e.commit.sha for e in ledger.entries if e.disposition not in OPEN_DISPOSITIONS}
        self.writer.subjects = {e.commit.sha: (e.commit.subject, e.pr) for e in ledger.entries}
        self.writer.person_decided = {e.commit.sha: Decided(e.commit.sha, e.commit.subject, e.disposition is Disposition.DEFERRED, e.reason) for e in ledger.entries if decider_of(e) == "person"}  # noqa: E501
        if self.writes:
            self._close_settled_conflicts(ledger)
        if self.writes and start_run:
            self.start_run(fork_tip)
        return ledger

    def _close_settled_conflicts(self, ledger: Ledger) -> None:
        """Open conflicts of commits that got a decision outside forkflow (picked in git by hand) close."""
        settled = {e.commit.sha for e in ledger.entries if e.disposition not in OPEN_DISPOSITIONS}
        self.reader.close_conflicts_of(settled)

    def start_run(self, fork_tip: Sha) -> None:
        mode = "retry" if self.retry_of is not None else self.options.mode.value
        self.run_id = self.journal.run_started(mode, fork_tip)

    def plan(self, ledger: Ledger) -> Plan:
        self.reporter.phase("planning")
        # no probe ahead: each unit's pick is its probe, conflicts leave it as the landing meets them
        plan = self.reader.plan(ledger, self.settings, self.options.until, self.options.max_bundle, self.picker)
        self.reasons.update({sha: why for u in plan.units for sha, why in u.reasons.items()})
        self.deps = dict(plan.dependencies)
        return plan

    def ingest_units(self, plan: Plan) -> list[UnitResult]:
        """Land the plan's units, up to `--max-units` of them, so that a failure never stalls the queue.

        A unit (or chain link) that failed L1 on this very fork tip with these very commits is held
        with its failure, not run again and not counted.  One that failed on an earlier tip is tried
        again after the units not tried yet, within what `--max-units` leaves; meanwhile its commits
        are held, so that what depends on them waits.  `ingest --unit ID` re-runs either on demand."""
        earlier: FailedBefore = {}
        if self.writes and self.retry_of is None:
            failed = self.reader.failed_with([sha for u in plan.units for sha in u.commits])
            self._failed_before = failed_before([r for r in failed if r.base_sha == plan.base])
            earlier = failed_before([r for r in failed if r.base_sha != plan.base])
        budget = self.options.max_units
        fresh: list[Unit] = []
        later: list[tuple[Unit, records.UnitRecord]] = []
        held: list[UnitResult] = []
        for unit in plan.units:
            links = [(unit.name, tuple(unit.commits))] if unit.kind is UnitKind.BUNDLE else \
                [(unit.link(sha), (sha,)) for sha in unit.commits]
            keys = [frozenset(shas) for _, shas in links]
            if keys and all(k in self._failed_before for k in keys):  # reported while the budget lasts
                shown = budget is None or len(fresh) < budget
                held.extend(r for name, shas in links if (r := self._held_failure(name, unit, shas, shown)) is not None)
            elif keys and all(k in self._failed_before or k in earlier for k in keys):
                later.append((unit, next(earlier[k] for k in keys if k in earlier)))
            elif budget is None or len(fresh) < budget:
                fresh.append(unit)
        room = len(later) if budget is None else max(0, budget - len(fresh))
        for i, (unit, rec) in enumerate(later):
            for sha in unit.commits:  # what depends on them waits until they are tried again
                self.holds.keep(sha, unit.name)
                if i < room:
                    self._later.add(sha)
                else:
                    self.holds.back.append(HeldBack(sha, f"failed L1 in unit {rec.id} on an earlier fork tip; "
                                                         "tried again after the units not tried yet"))
        units = fresh + [unit for unit, _ in later[:room]]
        self.reporter.start_units(len(held) + sum(1 if u.kind is UnitKind.BUNDLE else len(u.commits) for u in units))
        for r in held:
            self.reporter.unit_done(r)
        if self._queued():
            return held + self._land_queue(units)
        out: list[UnitResult] = list(held)
        for unit in units:
            if self._stop:
                break
            self._try_again(unit.commits)
            for r in self.process_unit(unit, plan.base):
                out.append(r)
                self.reporter.unit_done(r)
        return out

    def _queued(self) -> bool:
        """Whether units land through the queue: where a candidate that passes L1 becomes the tip."""
        return self.options.mode is Mode.LAND and self.reviewer is None and self.gate is not None

    def advance_point(self) -> Sha | None:
        """Move the recorded ingestion point; only when the decided prefix moved since this run last
        moved it (two git processes a landed unit were most of the time it stood still)."""
        prefix = decided_prefix(self.order, self.decided)
        if prefix is not None and prefix == self._point_moved:
            return prefix
        point = advance_ingestion_point(self.repo, self.config, self.order, self.decided)
        if point == prefix:
            self._point_moved = prefix
        return point

    def push(self) -> None:
        if self.shared is not None:  # proved by the lease, retried after a fetch, decisions made shared
            self.notes.append(self.shared.push())
            return
        remote, ref = self.settings.push_remote, self.config.fork_ref
        check_push_remote(self.repo, self.settings)
        try:
            self.repo.git("push", "--quiet", "--porcelain", remote, f"{ref}:{ref}")
        except GitError as e:
            if "[rejected]" in e.stdout:
                raise UserError(f"push to '{remote}' was rejected (its {ref} moved); run ingest again to "
                                "rebase on it, then push") from e
            raise UserError(f"push to '{remote}' failed: {e.reason}; the landed commits are on {ref} here, "
                            "push them by hand or run ingest --push again") from e
        self.notes.append(f"pushed {ref} to {remote}")

    # -- one unit ------------------------------------------------------------
    def process_unit(self, unit: Unit, start_tip: Sha) -> list[UnitResult]:
        if unit.kind is UnitKind.BUNDLE:
            return self.land_units(unit.name, unit, unit.commits, start_tip)
        out: list[UnitResult] = []
        for sha in unit.commits:  # each link waits only for what it depends on
            known = self._held_failure(unit.link(sha), unit, (sha,))
            if known is not None:
                out.append(known)
                continue
            r = self.land_unit(unit.link(sha), unit, (sha,), start_tip)
            out.append(r)
            if r.status in (UnitStatus.FAILED, UnitStatus.ABANDONED):
                self.holds.keep(sha, unit.name)
        return out

    def _base(self, unit: Unit, start_tip: Sha) -> Sha:
        if self._stack is not None:  # staging: onto the top of the stack
            return self._stack[-1].candidate if self._stack else self._stack_root()
        if self.options.mode is Mode.LAND:
            tip = self._read_tip()
            if tip is None:
                raise UserError(f"the fork branch {self.config.fork_ref} was deleted during ingest")
            return tip
        return self._virtual.get(unit.name, start_tip)

    def _read_tip(self) -> Sha | None:
        """The fork branch's commit, read in-process (a `git rev-parse` per unit cost 12 s of a run)."""
        try:
            return self.picker.ref_target(self.config.fork_ref)
        except ValueError:
            return self.repo.read_ref(self.config.fork_ref)

    def _try_again(self, shas: Sequence[Sha]) -> None:
        """A unit that failed on an earlier fork tip, now tried again: its commits no longer held."""
        again = [sha for sha in shas if sha in self._later]
        if again:
            self.holds.release(again)
            self._later.difference_update(again)

    def _held_failure(self, name: str, unit: Unit, shas: Sequence[Sha], shown: bool = True) -> UnitResult | None:
        """The unit `shas` as it failed L1 on this fork tip in an earlier run, held with that failure
        (its commits kept in its chain, so what depends on them waits); None when it did not, or
        when it is not `shown` (beyond `--max-units`: only held)."""
        rec = self._failed_before.get(frozenset(shas))
        if rec is None:
            return None
        for sha in shas:
            if sha not in self.holds:
                self.holds.keep(sha, unit.name)
                if shown:
                    self.holds.back.append(HeldBack(sha, f"failed L1 in unit {rec.id} on this fork tip"))
        if not shown:
            return None
        run = f" (L1 run {rec.l1_run})" if rec.l1_run is not None else ""
        summary = (f"failed L1 on this fork tip in unit {rec.id}{run}; not run again until the fork branch or its "
                   f"commits change (forkflow ingest --unit {rec.id} re-runs it): {rec.summary}")[:2000]
        applied = tuple(sha for sha, o in rec.members if o.picked and sha in shas)
        return UnitResult(name, unit.kind.value, UnitStatus.FAILED, summary, deferred=tuple(shas), unit_id=rec.id,
                          failed=applied, l1_run=rec.l1_run)

    def land_units(self, name: str, unit: Unit, shas: Sequence[Sha], start_tip: Sha) -> list[UnitResult]:
        """Land a bundle (bisecting it when it fails L1 and `split_failed_bundles` is on), or one chain link."""
        if unit.kind is UnitKind.BUNDLE and (known := self._held_failure(name, unit, shas)) is not None:
            return [known]
        first = self.land_unit(name, unit, shas, start_tip)
        if (unit.kind is not UnitKind.BUNDLE or first.status is not UnitStatus.FAILED or len(first.failed) < 2
                or not self.settings.split_failed_bundles or self.options.mode is not Mode.LAND):
            return [first]
        return [first] + self.split_bundle(name, unit, first.failed, start_tip)

    def split_bundle(self, name: str, unit: Unit, failed: Sequence[Sha], start_tip: Sha) -> list[UnitResult]:
        """Bisect a bundle that failed L1: gate halves in upstream order, land the passing ones by
        compare-and-swap, split failing halves again; a member failing alone is a culprit, kept out
        (DEFERRED in the bundle's chain, with its failure).  At most `split_max_gate_runs` L1 runs."""
        budget, start = self.settings.split_max_gate_runs, self.gate_runs
        index = {sha: i + 1 for i, sha in enumerate(unit.commits)}
        for sha in failed:
            self.reasons[sha] = f"{self.reasons.get(sha, '')}; split out of {name}, which failed L1".lstrip("; ")
        out: list[UnitResult] = []
        left: list[Sha] = []

        def bisect(group: Sequence[Sha]) -> None:
            mid = len(group) // 2
            for half in (group[:mid], group[mid:]):
                if self._stop or self.gate_runs - start >= budget:
                    left.extend(half)
                    continue
                first, last = index.get(half[0], 0), index.get(half[-1], 0)
                part = f"{name}[{first}]" if len(half) == 1 else f"{name}[{first}-{last}]"
                r = self.land_unit(part, unit, half, start_tip)
                out.append(r)
                if r.status is UnitStatus.FAILED and len(r.failed) > 1:
                    bisect(r.failed)

        bisect(list(failed))
        if left and not self._stop:
            self.notes.append(f"{name}: bisection stopped after {budget} L1 runs ([ingest] split_max_gate_runs); "
                              f"{len(left)} commit(s) stay DEFERRED in chain {unit.name} for the next run")
        return out

    def land_unit(self, name: str, unit: Unit, shas: Sequence[Sha], start_tip: Sha) -> UnitResult:
        """Pick, gate and land `shas` less those that depend on a commit held back; each one left out
        is deferred naming the commit it waits for and why."""
        tree = self.picker.commit_tree(self._base(unit, start_tip))
        try:
            return self._land_unit_waiting(name, unit, shas, start_tip, tree)
        finally:
            self._flush_waiting()

    def _flush_waiting(self) -> None:
        decisions = self.holds.take()
        if decisions and self.options.mode is Mode.LAND:
            self.journal.decided(decisions)
            self.decided |= {d.sha for d in decisions}

    def _land_unit_waiting(self, name: str, unit: Unit, shas: Sequence[Sha], start_tip: Sha,
                           tree: str) -> UnitResult:
        waiting = {sha: d for sha in shas if (d := self._waits(sha, tree)) is not None}
        for sha, d in waiting.items():
            self.holds.wait(sha, d)
        rest = [sha for sha in shas if sha not in waiting]
        if not rest:
            return self._all_waiting(name, unit, self._base(unit, start_tip), waiting)
        self.holds.start_unit()
        r = self._land_unit(name, unit, rest, start_tip)
        if self.holds.only is not None:  # every picked commit waits: nothing was stored yet
            (base, inner), self.holds.only = self.holds.only, None
            return self._all_waiting(name, unit, base, {**waiting, **inner})
        held = {**{sha: f"waits for {d.describe()}" for sha, d in waiting.items()}, **self.holds.in_unit}
        if r.status in (UnitStatus.LANDED, UnitStatus.VALIDATED):
            self.holds.release(r.picked)
        if not held:
            return r
        deferred = tuple(r.deferred) + tuple(sha for sha in held if sha not in r.deferred)
        more = [(sha, MemberOutcome.WAITING) for sha in self.holds.in_unit]
        if r.status is UnitStatus.EMPTY and not r.skipped:  # nothing was picked: every commit waits
            summary = "; ".join(f"{sha[:12]} {why}" for sha, why in held.items())[:2000]
            if r.unit_id is not None:
                self.journal.unit_settled(r.unit_id, UnitState.WAITING, summary, more, self.reasons)
            return replace(r, status=UnitStatus.WAITING, summary=summary, deferred=deferred, held=held)
        if r.unit_id is not None and more:
            self.journal.unit_settled(r.unit_id, UnitState(r.status.value), None, more, self.reasons)
        return replace(r, deferred=deferred, held=held)

    def _all_waiting(self, name: str, unit: Unit, base: Sha, waiting: dict[Sha, Dependency]) -> UnitResult:
        """A unit whose every commit waits for one held back: stored with its deferrals, one transaction."""
        summary = "; ".join(f"{sha[:12]} waits for {d.describe()}" for sha, d in waiting.items())
        unit_id = None
        if self.writes:
            decisions: tuple[RecordedDecision, ...] = ()
            if self.options.mode is Mode.LAND:
                decisions = tuple(self.holds.take())
                self.decided |= {d.sha for d in decisions}
            unit_id = self.journal.unit_started(self.run_id, UnitStart(
                unit.kind.value, name, base, None, UnitState.WAITING, tuple((sha, MemberOutcome.WAITING) for sha in waiting),
                summary[:2000], self.reasons, self.retry_of, decisions))
        return UnitResult(name, unit.kind.value, UnitStatus.WAITING, summary, deferred=tuple(waiting),
                          unit_id=unit_id, held={sha: f"waits for {d.describe()}" for sha, d in waiting.items()})

    def _waits(self, sha: Sha, tree: str) -> Dependency | None:
        return self.picker.waits_for([d for d in self.deps.get(sha, ()) if d.on in self.holds], tree, sha)

    def _hold_picked(self, pick: UnitPick, chain: str | None) -> None:
        """Conflicts (and blobs missing) of a pick are held back, and so is what depends on them."""
        for step in pick.conflicted:
            self.holds.conflict(step, chain)
        for sha, d in pick.held.items():
            self.holds.wait(sha, d, in_unit=True)

    def _land_unit(self, name: str, unit: Unit, shas: Sequence[Sha], start_tip: Sha) -> UnitResult:
        """Pick `shas` onto the fork tip, write the candidate, gate it and land it by compare-and-swap
        (again on the new tip when the branch moved); while the queue stages, stop at the candidate
        (`_stage`)."""
        is_chain = unit.kind is UnitKind.CHAIN
        elsewhere: list[Sha] = []
        for _ in range(MAX_CAS_TRIES):
            base = self._base(unit, start_tip)
            shas, gone = self._not_picked(shas, self._stack_root() if self._stack is not None else base)
            elsewhere += gone
            if not shas:
                return self._picked_elsewhere(name, unit, base, elsewhere)
            base_tree = self.picker.commit_tree(base)
            trees: list[str] = []  # the tree each commit comes onto
            pick = self.picker.pick_sequence(base_tree, shas, resolve=self.settler.resolve, stop_on_conflict=is_chain,
                                             depends=self.deps, held_before=set(self.holds.chain),
                                             visit=lambda _, tree: trees.append(tree))
            conflicted = tuple(step.sha for step in pick.conflicted)
            conflict_chain = unit.name if is_chain or _named_after(unit) else None
            self._hold_picked(pick, conflict_chain)
            if self.writes and pick.held and not (pick.applied or pick.empty or pick.conflicted or elsewhere):
                self.holds.only = (base, dict(pick.held))  # stored by the caller, with its deferrals
                return UnitResult(name, unit.kind.value, UnitStatus.WAITING, "")
            if pick.tree == base_tree:  # e.g. a change and its undoing: never an empty commit
                return self._without_commit(name, unit, base, (), pick.applied + pick.empty, pick.conflicted,
                                            conflict_chain)
            if not pick.applied or not self.writes:
                return self._without_commit(name, unit, base, pick.applied, pick.empty, pick.conflicted,
                                            conflict_chain)
            candidate = self.writer.write(pick, base, shas, trees)
            members = ([(s, MemberOutcome.RESOLVED if s in pick.resolved else MemberOutcome.APPLIED) for s in pick.applied]
                       + [(s, MemberOutcome.EMPTY) for s in pick.empty] + [(s, MemberOutcome.CONFLICT) for s in conflicted])
            unit_id = self._add_unit(name, unit, base, candidate, UnitState.PICKING, members)
            self._store_conflicts(pick.conflicted, conflict_chain, base)
            if self._stack is not None:
                return self._stage(Staged(Item(name, unit, tuple(shas)), base, candidate, pick.tree, unit_id, tuple(members),
                                          pick.applied, pick.conflicted, conflict_chain,
                                          is_chain or name.startswith("fork-") or bool(pick.resolved)))
            verdict = self._gate(candidate, base, pick.tree, name)
            self.journal.unit_gated(unit_id, verdict.passed, verdict.summary, verdict.run_id)
            if not verdict.passed:
                return self._failed(name, unit, verdict, pick.applied, pick.empty, pick.conflicted, base, unit_id)
            if self.options.mode is Mode.VALIDATE or self.reviewer is not None:
                ref = keep_candidate(self.repo, name, candidate)
                self._virtual[unit.name] = candidate
                status, summary = UnitStatus.VALIDATED, f"{verdict.summary}; kept as {ref}"
                if self.reviewer is not None:
                    status, summary = UnitStatus.IN_REVIEW, self.reviewer.propose(unit_id, name, unit.kind.value, candidate, base, [ReviewMember(sha, *self.writer.subjects.get(sha, ("", None)), unit.reasons.get(sha, "")) for sha in pick.applied], verdict.summary, sorted({r for r in unit.reasons.values() if 'depends on' in r}))  # noqa: E501
                return UnitResult(name, unit.kind.value, status, summary,
                                  pick.applied, pick.empty, conflicted, candidate, self.settler.resolved_by(pick.applied),
                                  unit_id, l1_run=verdict.run_id)
            if land(self.repo, self.config, candidate, base, name):
                self._tip_seen = candidate
                self._record_landing(unit_id, candidate, members, base)
                self._note_l1(candidate, verdict.run_id, verdict.summary)
                self._defer_conflicts(pick.conflicted, conflict_chain)
                self.advance_point()
                return UnitResult(name, unit.kind.value, UnitStatus.LANDED, verdict.summary, pick.applied,
                                  pick.empty, conflicted, candidate, self.settler.resolved_by(pick.applied), unit_id,
                                  l1_run=verdict.run_id)
            self.journal.unit_settled(unit_id, UnitState.ABANDONED, "the fork branch moved during L1; retrying on the new tip")
        return UnitResult(name, unit.kind.value, UnitStatus.ABANDONED,
                          f"the fork branch kept moving ({MAX_CAS_TRIES} tries); left pending")

    # -- the queue (landing/queue.py's `MergeQueue`; this is its `Lander`) ------
    def _land_queue(self, units: Sequence[Unit]) -> list[UnitResult]:
        items: list[Item] = []
        self._results = []
        for unit in units:  # a bundle is one item; a chain, one per link (each waits only for what it needs)
            if unit.kind is UnitKind.BUNDLE:
                items.append(Item(unit.name, unit, tuple(unit.commits)))
                continue
            for sha in unit.commits:
                known = self._held_failure(unit.link(sha), unit, (sha,))
                if known is not None:
                    self._report(known)
                else:
                    items.append(Item(unit.link(sha), unit, (sha,)))
        s = self.settings
        MergeQueue(self, self._gates(), Policy(s.max_batch, s.split_failed_bundles, s.split_max_gate_runs,
                                               MAX_CAS_TRIES)).run(items)
        return self._results

    def stopped(self) -> bool:
        return bool(self._stop)

    def tip(self) -> Sha:
        tip = self._read_tip()
        if tip is None:
            raise UserError(f"the fork branch {self.config.fork_ref} was deleted during ingest")
        return tip

    def stage(self, item: Item, stack: list[Staged], root: Sha) -> None:
        self._stack, self._root = stack, root
        self._try_again(item.shas)
        try:
            r = self.land_unit(item.name, item.unit, item.shas, root)
        finally:
            self._stack = None
        if stack and stack[-1].result is None:
            stack[-1].item, stack[-1].result = item, r
        else:
            self._report(r)

    def passed(self, s: Staged, summary: str) -> None:
        self.journal.unit_gated(s.unit_id, True, summary, s.l1_run)

    def land(self, top: Staged, root: Sha, name: str) -> bool:
        if not land(self.repo, self.config, top.candidate, root, name):
            return False
        self._tip_seen = top.candidate
        return True

    def landed(self, s: Staged, summary: str) -> None:
        self._record_landing(s.unit_id, s.candidate, s.members, s.base, summary)
        self._note_l1(s.candidate, s.l1_run, summary)
        self._defer_conflicts(s.conflicted, s.chain)
        self._skip_empty(s.skips, s.candidate)
        self.holds.release(s.applied)
        self.advance_point()
        self._report(replace(s.result, status=UnitStatus.LANDED, summary=summary, l1_run=s.l1_run))

    def failed(self, s: Staged, verdict: GateResult) -> None:
        """A staged unit that failed L1 on its own: deferred in its chain, as before the queue."""
        r: UnitResult = s.result
        self.journal.unit_gated(s.unit_id, False, verdict.summary, verdict.run_id)
        failed = self._failed(s.name, s.unit, verdict, s.applied,
                              [sha for sha, o in s.members if o is MemberOutcome.EMPTY], s.conflicted, s.base, s.unit_id)
        self._report(replace(failed, held=r.held, deferred=tuple(dict.fromkeys(failed.deferred + r.deferred))))

    def abandoned(self, s: Staged, why: str) -> None:
        self.journal.unit_settled(s.unit_id, UnitState.ABANDONED, why)

    def split_off(self, s: Staged) -> None:
        for sha in s.applied:
            if "; split out of " not in self.reasons.get(sha, ""):  # once, naming the unit it was planned in
                self.reasons[sha] = f"{self.reasons.get(sha, '')}; split out of {s.name}, which failed L1".lstrip("; ")

    def note(self, text: str) -> None:
        self.notes.append(text)

    def halt(self, why: str) -> None:
        self._stop = why

    def _report(self, r: UnitResult) -> None:
        self._results.append(r)
        self.reporter.unit_done(r)

    def _stage(self, staged: Staged) -> UnitResult:
        assert self._stack is not None
        self._stack.append(staged)
        return UnitResult(staged.name, staged.unit.kind.value, UnitStatus.STAGED, "", staged.applied,
                          tuple(sha for sha, o in staged.members if o is MemberOutcome.EMPTY),
                          tuple(step.sha for step in staged.conflicted), staged.candidate,
                          self.settler.resolved_by(staged.applied), staged.unit_id)

    def _stack_root(self) -> Sha:
        assert self._root is not None
        return self._root

    # -- the gate ----------------------------------------------------------------
    def _gates(self) -> GateRuns:
        if self._gate_runs is None:
            assert self.gate is not None
            self._gate_runs = GateRuns(Runners(self.gate, self.more_gates, self.settings.runners), self.notes.append)
        return self._gate_runs

    @property
    def gate_runs(self) -> int:
        return self._gate_runs.runs if self._gate_runs is not None else 0

    def _gate(self, candidate: Sha, base: Sha, tree: str, name: str) -> GateResult:
        """L1 of one candidate (outside the queue)."""
        return self._gates().check([(candidate, base, tree, name)])[0]

    def _not_picked(self, shas: Sequence[Sha], base: Sha) -> tuple[Sequence[Sha], list[Sha]]:
        """`shas` less those the fork branch picked (or skipped) since this run last saw it.

        The branch moves under a run when someone lands from another clone and pushes, or a
        compare-and-swap lost: picking such a commit again would land it twice (or, when the
        picks meet as a conflict, keep a conflict for a commit already picked)."""
        if self.options.mode is not Mode.LAND or base == self._tip_seen:
            return shas, []
        assert self._upstream_tip is not None
        ledger = self.reader.ledger(base, self._upstream_tip)
        self._tip_seen = base
        state = {e.commit.sha: e.disposition for e in ledger.entries}
        gone = [sha for sha in shas if state.get(sha, Disposition.PENDING) not in OPEN_DISPOSITIONS]
        self.decided |= set(gone)
        self.settled |= set(gone)
        return [sha for sha in shas if sha not in gone], gone

    def _picked_elsewhere(self, name: str, unit: Unit, base: Sha, shas: Sequence[Sha]) -> UnitResult:
        summary = f"already picked on the fork branch, which moved during this run (at {base[:12]}): nothing to pick"
        unit_id = self._add_unit(name, unit, base, None, UnitState.EMPTY,
                                 [(sha, MemberOutcome.PICKED_ELSEWHERE) for sha in shas], summary)
        return UnitResult(name, unit.kind.value, UnitStatus.EMPTY, summary, (), tuple(shas), unit_id=unit_id)

    def _without_commit(self, name: str, unit: Unit, base: Sha, applied: Sequence[Sha], empty: Sequence[Sha],
                        conflicted: Sequence[PickStep], chain: str | None) -> UnitResult:
        shas = tuple(step.sha for step in conflicted)
        if not self.writes:
            summary = f"would pick {len(applied)}, skip {len(empty)} already applied, defer {len(shas)} conflicting"
            return UnitResult(name, unit.kind.value, UnitStatus.WOULD_PICK, summary, tuple(applied), tuple(empty),
                              shas, resolved_by=self.settler.resolved_by(applied))
        self._store_conflicts(conflicted, chain, base)
        if self.options.mode is Mode.LAND:
            self._skip_empty(empty, base)
            self._defer_conflicts(conflicted, chain)
        status = UnitStatus.CONFLICT if shas else UnitStatus.EMPTY
        summary = (f"conflict in {', '.join(c.path for step in conflicted for c in step.conflicts)[:200]}; "
                   "see `forkflow conflicts`") if shas else "already applied: nothing to pick"
        if shas and all(step.missing for step in conflicted):  # nothing for a person to merge
            summary = "; ".join(step.missing for step in conflicted)[:400]
        unit_id = self._add_unit(name, unit, base, None, UnitState(status.value), [(s, MemberOutcome.EMPTY) for s in empty]
                                 + [(s, MemberOutcome.CONFLICT) for s in shas], summary)
        return UnitResult(name, unit.kind.value, status, summary, (), tuple(empty), shas, unit_id=unit_id)

    def _failed(self, name: str, unit: Unit, verdict: GateResult, applied: Sequence[Sha], empty: Sequence[Sha],
                conflicted: Sequence[PickStep], base: Sha, unit_id: int) -> UnitResult:
        if verdict.infra:  # not the unit's failure: abandoned, so that a later run tries it again
            self._stop = could_not_run(verdict)
            self.journal.unit_settled(unit_id, UnitState.ABANDONED, verdict.summary)
            return UnitResult(name, unit.kind.value, UnitStatus.ABANDONED, verdict.summary, unit_id=unit_id,
                              l1_run=verdict.run_id)
        chain = unit.name
        for sha in applied:
            self.holds.keep(sha, chain)
        if self.options.mode is Mode.LAND:
            self._decide(Disposition.DEFERRED, applied, f"chain {chain}: L1 failed in {name}: {verdict.summary}",
                         chain=chain)
            self._skip_empty(empty, base)
            self._defer_conflicts(conflicted, chain if unit.kind is UnitKind.CHAIN or _named_after(unit) else None)
        return UnitResult(name, unit.kind.value, UnitStatus.FAILED, verdict.summary, (), tuple(empty),
                          tuple(applied) + tuple(s.sha for s in conflicted), unit_id=unit_id, failed=tuple(applied),
                          l1_run=verdict.run_id)

    def _add_unit(self, name: str, unit: Unit, base: Sha, candidate: Sha | None, status: UnitState,
                  members: Sequence[tuple[Sha, MemberOutcome]], summary: str = "") -> int:
        """Store a landing unit with the routing reason of each member."""
        return self.journal.unit_started(self.run_id, UnitStart(unit.kind.value, name, base, candidate, status,
                                                                tuple(members), summary, self.reasons, self.retry_of))

    # -- decisions -------------------------------------------------------------
    def _decide(self, disposition: Disposition, shas: Sequence[Sha], reason: str,
                fork_shas: tuple[Sha, ...] = (), chain: str = "") -> None:
        if not shas or self.options.mode is not Mode.LAND:
            return
        self.journal.decided([RecordedDecision(sha, disposition, reason, fork_shas, chain=chain) for sha in shas])
        self.decided |= set(shas)
        if disposition not in OPEN_DISPOSITIONS:
            self.settled |= set(shas)

    def _skip_empty(self, empty: Sequence[Sha], base: Sha) -> None:
        if self._stack and base == self._stack[-1].candidate:
            root = self.picker.commit_tree(self._stack_root())
            on_root = [sha for sha in empty if self.picker.pick(root, sha).status is PickStatus.EMPTY]
            # empty on the fork tip itself: skipped now; empty only on the stack: once that lands
            self._stack[-1].skips.extend(sha for sha in empty if sha not in on_root)
            empty = on_root
        settled = {sha: self.settler.used[sha] for sha in empty if self.settler.used.get(sha)}
        self._decide(Disposition.SKIPPED, [sha for sha in empty if sha not in settled],
                     f"already applied: picking it onto {base[:12]} changes nothing")
        for sha, used in settled.items():  # its only changes were to what the fork settled otherwise
            how = ", ".join(f"{case.path} by {resolver}" for case, _, resolver in used)
            self._decide(Disposition.SKIPPED, [sha], f"changes nothing on {base[:12]} once its conflicts are "
                                                     f"settled ({how[:300]})")

    def _defer_conflicts(self, conflicted: Sequence[PickStep], chain: str | None) -> None:
        for step in conflicted:
            name = chain or f"resolve-{step.sha[:10]}"
            if step.missing:
                self._decide(Disposition.DEFERRED, [step.sha], f"chain {name}: {step.missing}", chain=name)
                continue
            paths = ", ".join(c.path for c in step.conflicts)[:200]
            self._decide(Disposition.DEFERRED, [step.sha],
                         f"chain {name}: conflict in {paths} needs a person (forkflow conflicts)", chain=name)

    def _note_l1(self, candidate: Sha, run_id: int | None, summary: str) -> None:
        """The L1 run that passed a landed commit, as its git note (git/notes.py): a commit cannot
        name the run that validated it without becoming another, untested commit."""
        what = f"{run_id}" if run_id is not None else "unrecorded"
        add_note(self.repo.path, candidate,
                 provenance_line("L1-Run", f"{what} ({' '.join(summary.split())[:160] or 'passed'})"))

    def _record_landing(self, unit_id: int, candidate: Sha, members: Sequence[tuple[Sha, MemberOutcome]], base: Sha,
                        summary: str | None = None) -> None:
        picked = [sha for sha, outcome in members if outcome.picked]
        used = self.settler.used_in(picked)
        self.journal.unit_landed(unit_id, candidate, members, base, used, summary)
        done = {sha for sha, outcome in members if outcome.picked or outcome is MemberOutcome.EMPTY}
        self.decided |= done
        self.settled |= done

    def _store_conflicts(self, conflicted: Sequence[PickStep], chain: str | None, base: Sha) -> None:
        if self.writes:
            self.journal.conflicts_kept([KeptConflict(step.sha, case, tuple(tried), chain or f"resolve-{step.sha[:10]}",
                                                      base)
                                         for step in conflicted for case, tried in self.settler.unresolved.get(step.sha, [])])


def _named_after(unit: Unit) -> bool:
    """A unit of one commit named after it (`fork-<sha10>`: it meets the fork's own lines): what it
    holds back stays under that name (a chain of it), not a new `resolve-<sha10>`, so the unit
    has one name from plan to landing to retry."""
    return len(unit.commits) == 1 and unit.name.endswith(f"-{unit.commits[0][:10]}")


def failed_before(failed: Sequence[records.UnitRecord]) -> FailedBefore:
    """Failed units by their commits: every member, and the ones it picked (a unit whose other
    commits waited or were already applied is the same unit).  The newest failure wins.  [pure]"""
    out: FailedBefore = {}
    for rec in sorted(failed, key=lambda r: r.id):
        for key in (frozenset(sha for sha, _ in rec.members), frozenset(sha for sha, o in rec.members if o.picked)):
            if key:
                out[key] = rec
    return out
