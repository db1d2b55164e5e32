"""The landing queue: stacks of staged units, the batches they are cut into, the runners that
validate speculative stacks at once, and the loop that joins them (`MergeQueue`).

A writing `ingest --land` picks every unit onto the top of a stack (the fork tip, then each staged
candidate in turn), cuts the stack into batches (`add_to`: as large as `[ingest] max_batch`
allows, a risky commit weighing `RISK_WEIGHT`), and gates the top of each batch: batch 1, batch
1+2, ... at once on `[ingest] runners` gates (`Runners`, through `GateRuns`).  The longest green
prefix lands by one compare-and-swap; the first red batch is split in halves until its failing
commits are found; what was built on it is picked again on the new tip.  What picking, recording
and landing mean is the `Lander`'s (`Ingestor` in landing/ingest.py).
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

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
    l1_run: int | None = None  # the stored L1 run that passed its batch (`GateResult.run_id`)

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


def could_not_run(verdict: GateResult) -> str:
    """Why a run stops when L1 could not run (a runner fault, not a unit's failure)."""
    return f"L1 could not run ({verdict.summary}); stopped, nothing more was decided"


class GateRuns:
    """The run's L1 runs, on its runners: a tree that failed L1 before in this run fails again
    without a run (a red batch's second half, once its first half landed, is the very tree that
    failed); a runner's death is noted."""

    def __init__(self, runners: Runners, note: Callable[[str], None]) -> None:
        self.runners = runners
        self.runs = 0
        self._note = note
        self._red: dict[str, tuple[GateResult, str]] = {}  # tree -> its red verdict, and where it came

    def check(self, tops: Sequence[tuple[Sha, Sha, str, str]]) -> list[GateResult]:
        """Each (candidate, base, tree, where) gated, the new ones at once; verdicts in that order."""
        known = [self._known_red(tree) for _, _, tree, _ in tops]
        runs = [(rev, base) for (rev, base, _, _), k in zip(tops, known) if k is None]
        self.runs += len(runs)
        verdicts = iter(self.runners.check_all(runs))
        out: list[GateResult] = []
        for (_, _, tree, where), k in zip(tops, known):
            if k is None:
                v = next(verdicts)
                if v.runner_died:
                    self._note(v.runner_died)
                k = v.result
                if not k.passed and not k.infra:
                    self._red[tree] = (k, where)
            out.append(k)
        return out

    def check_tip(self, tip: Sha) -> GateResult:
        """L1 on the fork tip itself, with nothing picked onto it (one run)."""
        self.runs += 1
        (v,) = self.runners.check_all([(tip, tip)])
        if v.runner_died:
            self._note(v.runner_died)
        return v.result

    def _known_red(self, tree: str) -> GateResult | None:
        known = self._red.get(tree)
        if known is None:
            return None
        result, where = known
        return GateResult(False, f"{result.summary} (the same tree failed L1 in {where}; not run again)",
                          result.run_id)


class Lander(Protocol):
    """What the queue asks of the landing (`Ingestor`): pick, record, land, settle."""

    def stopped(self) -> bool: ...
    def tip(self) -> Sha: ...
    def stage(self, item: Item, stack: list[Staged], root: Sha) -> None:
        """Pick `item` onto the top of `stack` (on `root`, the fork tip): appended to it when it has a
        candidate to gate, else settled (a conflict, a wait, nothing to pick) and reported at once."""
        ...
    def passed(self, s: Staged, summary: str) -> None: ...
    def land(self, top: Staged, root: Sha, name: str) -> bool:
        """Move the fork branch from `root` to `top`'s candidate by compare-and-swap."""
        ...
    def landed(self, s: Staged, summary: str) -> None: ...
    def failed(self, s: Staged, verdict: GateResult) -> None: ...
    def abandoned(self, s: Staged, why: str) -> None: ...
    def split_off(self, s: Staged) -> None: ...
    def note(self, text: str) -> None: ...
    def halt(self, why: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Policy:
    max_batch: int = DEFAULT_MAX_BATCH
    split: bool = True  # split a unit that fails alone into its commits
    split_runs: int = 16  # gate runs one bisection may take
    moves: int = 5  # times the fork branch may move under a stack before the run stops


class MergeQueue:
    """Land items as a merge queue: stage a window of batches onto a stack on the fork tip, gate
    the batch tops at once, land the longest green prefix by one compare-and-swap, split the first
    red batch in halves (each a batch of its own, the first gated first), and stage again what
    stood on it.  A stack whose base moved is staged and gated again, never landed untested."""

    def __init__(self, lander: Lander, gates: GateRuns, policy: Policy) -> None:
        self.lander, self.gates, self.policy = lander, gates, policy
        self._batches = 0  # batches numbered so far
        self._groups = 0  # red batches' halves so far
        self._bisect_from = 0  # the gate runs made when the bisection going on began
        self._green_tips: set[Sha] = set()  # fork tips known to pass L1: what the queue landed, a checked tip

    def run(self, items: Iterable[Item]) -> None:
        todo = deque(items)
        moved = 0
        while todo and not self.lander.stopped():
            root = self.lander.tip()
            batches = self._stage(todo, root)
            if batches and not self._settle(batches, todo, root):
                moved += 1
                if moved >= self.policy.moves:
                    self.lander.halt(f"the fork branch kept moving while the queue validated ({moved} tries); "
                                     "what was left stays pending")

    def _stage(self, todo: deque[Item], root: Sha) -> list[Batch]:
        """Items onto a stack until each runner has a full batch."""
        stack: list[Staged] = []
        batches: list[Batch] = []
        while todo and not (len(batches) >= self.gates.runners.count
                            and opens_batch(batches, todo[0], self.policy.max_batch)):
            before = len(stack)
            self.lander.stage(todo.popleft(), stack, root)
            if len(stack) > before:
                add_to(batches, stack[-1], self.policy.max_batch)
        for b in batches:
            self._batches += 1
            b.number = self._batches
        return batches

    def _settle(self, batches: list[Batch], todo: deque[Item], root: Sha) -> bool:
        """Gate the batch tops; land the green prefix, split the first red batch.  False when the
        branch moved under the stack."""
        verdicts = self.gates.check([(b.top.candidate, root, b.top.tree, f"batch {b.number}") for b in batches])
        green = 0
        while green < len(batches) and verdicts[green].passed:
            green += 1
        for b, v in zip(batches[:green], verdicts):  # passed before the branch moves: a crash then is recovered
            for s in b.units:
                s.l1_run = v.run_id  # each unit of a batch names the one run that validated them together
                self.lander.passed(s, v.summary)
        if green:
            if not self.lander.land(batches[green - 1].top, root, f"batch {batches[green - 1].number}"):
                self._drop(batches, todo, "the fork branch moved while this stack was validated; "
                                          "picked again on the new tip")
                return False
            self._green_tips.add(batches[green - 1].top.candidate)
            for b, v in zip(batches[:green], verdicts):
                together = f" (validated together in batch {b.number}: {len(b.commits)} commits)" \
                    if len(b.units) > 1 else ""
                for s in b.units:
                    self.lander.landed(s, v.summary + together)
        if green < len(batches):
            red, verdict = batches[green], verdicts[green]
            self._drop(batches[green + 1:], todo, f"stacked on batch {red.number}, which failed L1; picked again")
            if verdict.infra:
                self.lander.halt(could_not_run(verdict))
                self._drop([red], todo, f"L1 could not run: {verdict.summary}")
            else:
                self._split(red, verdict, todo, root)
        return True

    def _tip_passes(self, root: Sha) -> bool:
        """Whether L1 passes on the fork tip the red batch stood on; checked once a tip (a tip the
        queue landed passed as a candidate).  A tip that fails too says the gate fails whatever is
        picked (a hanging or broken L1): splitting would hold every commit after log(n) runs each,
        so the run stops instead, with nothing decided."""
        if root in self._green_tips:
            return True
        verdict = self.gates.check_tip(root)
        self._bisect_from += 1  # not a run of the bisection: its budget (split_runs) stays whole
        if verdict.passed:
            self._green_tips.add(root)
            return True
        if verdict.infra:
            self.lander.halt(could_not_run(verdict))
            return False
        self.lander.halt(f"L1 fails on the fork tip {root[:12]} itself, with no upstream commit picked "
                         f"({verdict.summary}): fix l1_command or the fork's own tests and run again; "
                         "stopped, nothing more was decided")
        return False

    def _split(self, red: Batch, verdict: GateResult, todo: deque[Item], root: Sha) -> None:
        """Split a red batch: its units in halves, then one unit's commits; each half a batch of its
        own on the new tip.  A single unit that fails is settled as failed (its commits held) once L1
        is known to pass on the tip it stood on; once a failing commit is found, what was split off
        after it goes back to the queue, batched anew."""
        if red.group == 0:  # a new bisection, with its budget of gate runs
            self._bisect_from = self.gates.runs
        spent = self.gates.runs - self._bisect_from
        within = spent < self.policy.split_runs
        if (len(red.units) == 1 or not within) and not self._tip_passes(root):
            self._drop([red], todo, f"not held: the run stopped at L1 on the fork tip alone (here: {verdict.summary})")
            return
        if len(red.units) > 1:
            self._drop([red], todo, f"batch {red.number} failed L1 ({verdict.summary}); split in halves")
            for _ in red.units:
                todo.popleft()
            if within:
                self._push_halves(todo, [s.item for s in red.units])
                return
            for s in red.units:  # out of budget: each unit stays out, as one that failed
                self.lander.failed(s, verdict)
        else:
            s = red.top
            self.lander.failed(s, verdict)
            if len(s.applied) > 1 and self.policy.split and not self.lander.stopped() and within:
                self.lander.split_off(s)
                index = {sha: i + 1 for i, sha in enumerate(s.unit.commits)}
                name = s.unit.name
                self._push_halves(todo, [
                    Item(f"{name}[{index[h[0]]}]" if len(h) == 1 else f"{name}[{index[h[0]]}-{index[h[-1]]}]", s.unit, h)
                    for h in halves(s.applied)])
                return
        if not within:
            left = sum(len(s.applied) for s in red.units)
            self.lander.note(f"batch {red.number}: bisection stopped after {spent} L1 runs ([ingest] "
                             f"split_max_gate_runs); {left} commit(s) stay DEFERRED for the next run")
        for i, item in enumerate(todo):  # the failing commit is found: what was split off after it
            if item.group:  # ... goes back to the queue, batched anew with the rest
                todo[i] = replace(item, group=0)

    def _push_halves(self, todo: deque[Item], items: Sequence[Item]) -> None:
        first, second = halves(list(items))
        self._groups += 2
        todo.extendleft(reversed([replace(i, group=self._groups - 1) for i in first]
                                 + [replace(i, group=self._groups) for i in second]))

    def _drop(self, batches: Sequence[Batch], todo: deque[Item], why: str) -> None:
        """Staged units that will not land as staged: abandoned, their items back in front."""
        for b in batches:
            for s in b.units:
                self.lander.abandoned(s, why)
        todo.extendleft(reversed([s.item for b in batches for s in b.units]))
