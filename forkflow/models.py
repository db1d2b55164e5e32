"""Domain values shared across forkflow: frozen dataclasses and closed Enums."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NewType

Sha = NewType("Sha", str)


class Disposition(str, enum.Enum):
    """What became of one upstream commit in the fork."""

    PENDING = "PENDING"
    PICKED = "PICKED"
    SKIPPED = "SKIPPED"
    DEFERRED = "DEFERRED"
    REVERTED = "REVERTED"


class EvidenceKind(str, enum.Enum):
    """Why forkflow believes a disposition, strongest first."""

    TRAILER = "trailer"          # forkflow's own `Upstream-Commit: <sha>`
    MARKER = "marker"            # other tools' markers, e.g. `(cherry picked from commit <sha>)`
    PATCH_ID = "patch-id"        # `git patch-id --stable` equality
    BUNDLE = "bundle"            # one fork commit squashing several upstream commits
    TITLE_PR = "title+pr"        # same title and an unambiguous PR number
    FORK_REVERT = "fork-revert"  # a fork commit reverted the pick
    UPSTREAM_REVERT = "upstream-revert"  # reverted upstream, neither side picked
    RECORDED = "recorded"        # a decision forkflow recorded in its store
    MESSAGE = "message"          # listed as deferred / skipped in a fork pick commit's message
    DECIDED = "decided"          # a person's decision (`forkflow decide`), with its reason
    OPT_OUT = "opt-out"          # the upstream message carries an opt-out marker ([ledger] opt_out)
    MERGE = "merge"              # the fork's branch merged it: an ancestor of the fork tip

    @property
    def strength(self) -> int:
        order = [
            EvidenceKind.MERGE,
            EvidenceKind.TRAILER,
            EvidenceKind.MARKER,
            EvidenceKind.PATCH_ID,
            EvidenceKind.BUNDLE,
            EvidenceKind.TITLE_PR,
        ]
        return len(order) - order.index(self) if self in order else 0


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit as forkflow needs it: identity, parents, date and message."""

    sha: Sha
    parents: tuple[Sha, ...]
    date: int  # committer date, unix seconds
    subject: str
    body: str = ""
    author: str = ""

    @property
    def message(self) -> str:
        return f"{self.subject}\n\n{self.body}" if self.body else self.subject

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1


@dataclass(frozen=True, slots=True)
class Evidence:
    """Why an upstream commit has its disposition."""

    kind: EvidenceKind
    fork_sha: Sha | None
    detail: str

    def describe(self) -> str:
        where = f" in {self.fork_sha[:12]}" if self.fork_sha else ""
        return f"{self.kind.value}{where}: {self.detail}"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """The ledger's verdict on one upstream commit."""

    commit: Commit
    pr: int | None
    disposition: Disposition
    fork_shas: tuple[Sha, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    reason: str = ""
    chain: str = ""  # a held commit: the chain it waits in (its recorded decision's), else ""


@dataclass(frozen=True, slots=True)
class PointInTime:
    """A commit with its date, as shown for tips and the ingestion point."""

    sha: Sha
    date: int


@dataclass(frozen=True, slots=True)
class Ledger:
    """The upstream ledger: every upstream commit after the fork point and its disposition."""

    fork_point: Sha
    fork_tip: Sha
    upstream_tip: PointInTime
    ingestion_point: PointInTime
    ingestion_point_inferred: bool
    entries: tuple[LedgerEntry, ...]
    computed_at: int = 0
    notes: tuple[str, ...] = field(default=())

    def counts(self) -> dict[Disposition, int]:
        out = {d: 0 for d in Disposition}
        for e in self.entries:
            out[e.disposition] += 1
        return out

    def index_of(self, sha: Sha) -> int:
        for i, e in enumerate(self.entries):
            if e.commit.sha == sha:
                return i
        return -1

    @property
    def days_behind(self) -> float:
        return round(max(0, self.upstream_tip.date - self.ingestion_point.date) / 86400.0, 2)

    @property
    def backlog(self) -> tuple[LedgerEntry, ...]:
        """Upstream commits at or before the ingestion point that are not yet picked."""
        cut = self.index_of(self.ingestion_point.sha)
        return tuple(
            e
            for e in self.entries[: cut + 1]
            if e.disposition in (Disposition.PENDING, Disposition.DEFERRED)
        )

    @property
    def out_of_order_picks(self) -> tuple[LedgerEntry, ...]:
        """Picks of upstream commits newer than the ingestion point (urgent picks)."""
        cut = self.index_of(self.ingestion_point.sha)
        return tuple(e for e in self.entries[cut + 1 :] if e.disposition is Disposition.PICKED)


class Better(str, enum.Enum):
    """Which direction of a metric is an improvement."""

    HIGHER = "higher"
    LOWER = "lower"


# A metric's context entry saying its every sample is a ratio to a baseline timed alongside it
# (harness `measure_paired`): what moves a whole process cancels in it, so bisect judges its
# samples one by one rather than each run's median (#16).
PAIRED_SAMPLES = ("samples", "paired")


@dataclass(frozen=True, slots=True)
class Metric:
    """One entry of a metrics report: `{"name", "value", "unit", "better", "samples"}`."""

    name: str
    value: float
    unit: str
    better: Better
    samples: tuple[float, ...] = ()
    # what it measured with: the kernel config, device, driver, versions, clocks ("config" = the
    # autotuner's choice; a change of it is an event of the series, see forkflow.regress.detect)
    context: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"name": self.name, "value": self.value, "unit": self.unit,
                                  "better": self.better.value, "samples": list(self.samples)}
        if self.context:
            doc["context"] = dict(self.context)
        return doc


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One measurement of an L2 metric at one fork commit (a point of its series)."""

    name: str
    rev: Sha  # the fork commit measured
    value: float
    unit: str
    better: Better
    samples: tuple[float, ...] = ()
    suite: str = ""
    run_id: int | None = None
    measured_at: int = 0  # unix seconds
    commit_date: int = 0  # committer date of rev, orders the series
    context: tuple[tuple[str, str], ...] = ()  # as Metric.context

    @property
    def config(self) -> str:
        """The kernel config it was measured with ("" when the workload did not say)."""
        return dict(self.context).get("config", "")


class UnitState(enum.StrEnum):
    """A landing unit's state in the store: where the last run that touched it left it."""

    PICKING = "picking"  # picked, its L1 not judged yet (a crash may leave it so)
    PASSED = "passed"  # L1 passed, not landed yet (likewise)
    FAILED = "failed"  # L1 failed: deferred
    CONFLICT = "conflict"  # nothing pickable without a person: deferred
    EMPTY = "empty"  # everything already applied: skipped
    WAITING = "waiting"  # waits for a unit held back
    LANDED = "landed"
    VALIDATED = "validated"  # passed L1, not landed (no --land)
    ABANDONED = "abandoned"  # the branch moved, or L1 could not run: left pending
    IN_REVIEW = "in-review"  # proposed for review
    CLOSED = "closed"  # its review was closed or went stale


# a unit a crash may have left half-way, and what `forkflow ingest --unit ID` re-runs
OPEN_STATES = (UnitState.PICKING, UnitState.PASSED)
RETRYABLE_STATES = (UnitState.FAILED, UnitState.WAITING, UnitState.CONFLICT, UnitState.PASSED, UnitState.ABANDONED)


class MemberOutcome(enum.StrEnum):
    """What became of one upstream commit inside a stored landing unit."""

    APPLIED = "applied"
    RESOLVED = "resolved"  # applied, a conflict settled by a resolver
    EMPTY = "empty"  # already applied: nothing to pick
    CONFLICT = "conflict"
    WAITING = "waiting"  # waits for a commit held back
    PICKED_ELSEWHERE = "picked elsewhere"  # the fork branch took it during the run

    @property
    def picked(self) -> bool:
        return self in (MemberOutcome.APPLIED, MemberOutcome.RESOLVED)


class RunState(enum.StrEnum):
    """An ingestion run's state in the store."""

    RUNNING = "running"
    DONE = "done"
    INTERRUPTED = "interrupted"


IN_REVIEW_CHAIN = "(in review)"  # the `chain` of a commit proposed for review: no chain name has parentheses


class Decider(str, enum.Enum):
    """Who took a recorded decision: forkflow itself (a conflict, an empty pick) or a person."""

    AUTO = "auto"
    PERSON = "person"


class Decision(str, enum.Enum):
    """A person's decision on an upstream commit (`forkflow decide`)."""

    SKIP = "skip"
    DEFER = "defer"
    WONT_PORT = "wont-port"

    @property
    def disposition(self) -> Disposition:
        return Disposition.DEFERRED if self is Decision.DEFER else Disposition.SKIPPED


@dataclass(frozen=True, slots=True)
class RecordedDecision:
    """A decision stored for an upstream commit (it wins over PENDING only)."""

    sha: Sha
    disposition: Disposition
    reason: str
    fork_shas: tuple[Sha, ...] = ()
    source: Decider = Decider.AUTO
    verdict: Decision | None = None
    until: str | None = None  # ISO date: a person's deferral lapses after it
    task: str = ""
    decided_by: str = ""
    decided_at: str = field(default="", compare=False)
    chain: str = ""  # a commit held back: the chain it is deferred into (typed; never parsed from `reason`)

    def is_active(self, today: str) -> bool:
        """False once a deferral's `until` date has passed (the commit is pending again)."""
        return self.until is None or today <= self.until

    def describe(self) -> str:
        """'decided by a person: wont-port: reason (until ..., task ...)'."""
        if self.source is not Decider.PERSON:
            return self.reason or self.disposition.value.lower()
        extra = [f"until {self.until}" if self.until else "", f"task {self.task}" if self.task else "",
                 f"by {self.decided_by}" if self.decided_by else ""]
        tail = ", ".join(x for x in extra if x)
        kind = self.verdict.value if self.verdict else self.disposition.value.lower()
        return f"decided by a person: {kind}: {self.reason}" + (f" ({tail})" if tail else "")


@dataclass(frozen=True, slots=True)
class GateResult:
    """What an L1 gate said of a landing unit: landing's `Gate` returns it, triage's `L1Gate` too."""

    passed: bool
    summary: str  # one line for people: what ran, what failed
    run_id: int | None = None  # the stored validation run, when there is one
    infra: bool = False  # the gate could not run (runner fault): not the unit's fault
