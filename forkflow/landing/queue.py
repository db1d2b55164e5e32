"""The landing queue's parts: stacks of staged units, the batches they are cut into, and the
runners that validate speculative stacks at once.

A writing `ingest --land` picks every unit onto the top of a stack (the fork tip, then each staged
candidate in turn), cuts the stack into batches (`cut_batches`: as large as `[ingest] max_batch`
allows, a risky commit weighing `RISK_WEIGHT`), and gates the top of each batch: batch 1, batch
1+2, ... at once on `[ingest] runners` gates (`Runners`).  The longest green prefix lands by one
compare-and-swap; the first red batch is bisected (`halves`); what was built on it is picked
again on the new tip.  The loop itself is `Ingestor._land_queue` (landing/ingest.py).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from forkflow.git.pick import PickStep
from forkflow.landing.gate import Gate
from forkflow.models import GateResult, MemberOutcome, Sha
from forkflow.planning.model import Unit

T = TypeVar("T")
RISK_WEIGHT = 4  # a risky commit (a chain link, one meeting the fork's own lines, one resolved) counts this much
DEFAULT_MAX_BATCH = 160  # weighted commits a batch may hold


@dataclass(frozen=True, slots=True)
class Item:
    """Work for the queue: a bundle, or one chain link, to pick.  Items of one `group` (> 0) are
    the half of a red batch: they are staged and gated as a batch of their own."""

    name: str
    unit: Unit
    shas: tuple[Sha, ...]
    group: int = 0


@dataclass(slots=True)
class Staged:
    """A unit (a bundle, or one chain link) picked onto the stack, its candidate written, not gated."""

    item: Item  # what it was asked to pick (picked again from it when its stack is dropped)
    base: Sha  # the commit it was picked onto: the fork tip or the candidate below it
    candidate: Sha
    tree: str
    unit_id: int
    members: tuple[tuple[Sha, MemberOutcome], ...]
    applied: tuple[Sha, ...]
    conflicted: tuple[PickStep, ...]  # deferred when it settles
    chain: str | None  # the chain its conflicts are deferred into
    risky: bool
    result: Any = None  # the `UnitResult` it settles with when it lands (landing/ingest.py)
    skips: list[Sha] = field(default_factory=list)  # found already applied on top of it: SKIPPED once it lands

    @property
    def name(self) -> str:
        return self.item.name

    @property
    def unit(self) -> Unit:
        return self.item.unit

    @property
    def weight(self) -> int:
        return len(self.applied) * (RISK_WEIGHT if self.risky else 1)


@dataclass(slots=True)
class Batch:
    """Consecutive staged units validated by one gate run of their top candidate."""

    number: int
    group: int = 0  # a red batch's half, or 0
    units: list[Staged] = field(default_factory=list)

    @property
    def top(self) -> Staged:
        return self.units[-1]

    @property
    def commits(self) -> tuple[Sha, ...]:
        return tuple(sha for s in self.units for sha in s.applied)

    @property
    def weight(self) -> int:
        return sum(s.weight for s in self.units)


def opens_batch(batches: Sequence[Batch], item: Item, max_batch: int) -> bool:
    """Whether `item` starts a new batch: the last one holds `max_batch` weighted commits or more,
    or one of them is a red batch's half (a batch of its own).  [pure]"""
    if not batches:
        return True
    last = batches[-1]
    return last.group != item.group or (item.group == 0 and last.weight >= max_batch)


def add_to(batches: list[Batch], staged: Staged, max_batch: int) -> None:
    """Put a staged unit on the last batch, or on a new one.  [pure]"""
    if opens_batch(batches, staged.item, max_batch):
        batches.append(Batch(len(batches) + 1, staged.item.group))
    batches[-1].units.append(staged)


def halves(group: Sequence[T]) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """A red batch's two halves, the first one gated first.  [pure]"""
    mid = len(group) // 2
    return tuple(group[:mid]), tuple(group[mid:])


@dataclass(frozen=True, slots=True)
class Verdict:
    """A gate run's result for one stack top, and the runner's trouble when it had some."""

    result: GateResult
    runner_died: str = ""  # the error of a runner that died, once or twice


class Runners:
    """Up to `count` gates validating stack tops at once (Zuul's speculative pipeline).

    A gate's check mostly waits for a process (the `l1_command` in its own work tree), so each
    runner is a thread with a gate of its own; `make_gate` gives runners beyond the first.  A
    runner whose check raises died mid-batch: its stack is validated again on a fresh runner, once;
    a second death is an infrastructure fault (nothing is decided from it)."""

    def __init__(self, first: Gate, make_gate: Callable[[], Gate] | None, count: int) -> None:
        self._idle: list[Gate] = [first]
        self._make = make_gate
        self._made: list[Gate] = []  # the gates made here, closed here (the first is its maker's)
        self.count = max(1, count if make_gate is not None else 1)
        self._lock = threading.Lock()
        self.runs = 0

    def _gate(self) -> Gate:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        if self._make is None:
            raise RuntimeError("no runner is left: the only one died")
        gate = self._make()
        with self._lock:
            self._made.append(gate)
        return gate

    def _give_back(self, gate: Gate) -> None:
        with self._lock:
            self._idle.append(gate)

    def check(self, rev: Sha, base: Sha) -> Verdict:
        """One stack top, with the retry of a runner that died."""
        died = ""
        for _ in range(2):
            gate = self._gate()
            with self._lock:
                self.runs += 1
            try:
                result = gate.check(rev, base)
            except Exception as e:  # noqa: BLE001 - a runner that died; KeyboardInterrupt goes through
                died = f"{died}; " if died else ""
                died += f"the runner died while validating {rev[:12]} ({type(e).__name__}: {str(e)[:200]})"
                if self._make is None:
                    self._give_back(gate)  # the only runner: it is tried once more
                continue  # a made gate is dropped: the next try takes a fresh one
            self._give_back(gate)
            return Verdict(result, died)
        return Verdict(GateResult(False, f"{died}; nothing was decided from it", infra=True), died)

    def check_all(self, stacks: Sequence[tuple[Sha, Sha]]) -> list[Verdict]:
        """Each (top, base) at once, `count` at a time; the verdicts in the same order."""
        if len(stacks) <= 1 or self.count == 1:
            return [self.check(rev, base) for rev, base in stacks]
        out: list[Verdict | None] = [None] * len(stacks)
        failure: list[BaseException] = []
        next_index = [0]

        def work() -> None:
            while True:
                with self._lock:
                    i = next_index[0]
                    next_index[0] += 1
                if i >= len(stacks) or failure:
                    return
                try:
                    out[i] = self.check(*stacks[i])
                except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                    failure.append(e)
                    return

        threads = [threading.Thread(target=work, name=f"forkflow-runner-{n}", daemon=True)
                   for n in range(min(self.count, len(stacks)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failure:
            raise failure[0]
        return [v for v in out if v is not None]

    def close(self) -> None:
        """Close the gates made here that have a work tree to remove (`CommandGate.close`)."""
        for gate in self._made:
            close = getattr(gate, "close", None)
            if callable(close):
                close()
        self._made = []
