"""What an ingest run holds back, as one typed piece of state (the landing loop's `Holds`).

A commit is held back when its pick conflicts or lacks a blob, when it fails L1, or when it waits
for one held back.  Each held commit is deferred into a chain (its own `resolve-<sha>`, the chain
it was planned in, or the chain of what it waits for), listed in the run's report, and, when it
waits, given a DEFERRED decision written with its unit in one transaction.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from forkflow.git.pick import PickStep
from forkflow.models import Disposition, RecordedDecision, Sha
from forkflow.planning.lines import Dependency
from forkflow.planning.model import HeldBack


@dataclass(slots=True)
class Holds:
    chain: dict[Sha, str] = field(default_factory=dict)  # held commit -> the chain it is deferred into
    back: list[HeldBack] = field(default_factory=list)  # what the report lists, in the order held
    unwritten: list[RecordedDecision] = field(default_factory=list)  # waits not recorded yet
    in_unit: dict[Sha, str] = field(default_factory=dict)  # the unit being picked: its commits left waiting, why
    only: tuple[Sha, dict[Sha, Dependency]] | None = None  # ... when all it picked waits: (base, why)

    def __contains__(self, sha: object) -> bool:
        return sha in self.chain

    def keep(self, sha: Sha, chain: str) -> None:
        """Hold `sha` in `chain` (a link or a commit that failed L1), unless it is held already."""
        self.chain.setdefault(sha, chain)

    def conflict(self, step: PickStep, chain: str | None) -> None:
        """A pick that conflicts or lacks a blob: held in its chain, or a `resolve-<sha>` of its own."""
        self.keep(step.sha, chain or f"resolve-{step.sha[:10]}")
        why = step.missing or "conflict in " + ", ".join(c.path for c in step.conflicts)[:200]
        self.back.append(HeldBack(step.sha, why))

    def wait(self, sha: Sha, d: Dependency, in_unit: bool = False) -> None:
        """`sha` waits for the held commit `d.on`: held in its chain, its decision to be written."""
        chain = self.chain[d.on]
        self.chain[sha] = chain
        self.back.append(HeldBack(sha, f"waits for {d.describe()}", d.on, d))
        self.unwritten.append(RecordedDecision(sha, Disposition.DEFERRED, f"chain {chain}: waits for {d.describe()}",
                                               chain=chain))
        if in_unit:
            self.in_unit[sha] = f"waits for {d.describe()}"

    def release(self, shas: Iterable[Sha]) -> None:
        """Landed after all (a half of a bundle that failed, a link re-run): no longer held."""
        for sha in shas:
            self.chain.pop(sha, None)

    def start_unit(self) -> None:
        self.in_unit, self.only = {}, None

    def take(self) -> list[RecordedDecision]:
        """The waits not recorded yet, now the caller's to record."""
        out, self.unwritten = self.unwritten, []
        return out
