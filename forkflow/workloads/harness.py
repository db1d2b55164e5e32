"""A low-noise timing harness: warm-up, cold L2, CUDA graphs, many repeats, median and IQR.

Why graphs: launching kernels one by one with events between them leaves gaps in which GPU
clocks wander; replaying one captured graph of many back-to-back calls keeps the GPU in a steady
state (on an H200, triton's do_bench varied 1.5-4.8% between runs on large matmuls, graph replay
0.2-0.3%).  Cold L2: the calls rotate over copies of their operands that together are at least
twice the L2, so no call finds its inputs cached by the call before (the graph-friendly form of
flushing L2 between calls).

Steady state: a large matmul draws the GPU's whole power budget, and its clocks settle over
seconds, not milliseconds (on an H200, 8192^3 bf16 ran 1670 us in the first second of load
and 1727 us once settled; measured after a fixed 300 ms warm-up, the same kernel varied 2.2%
inside one process and 1.0% between processes).  So warm-up runs for at least `warmup_ms` and
then until the last chunks' times stop moving (`is_steady`), up to `max_warmup_ms`.

Pairing: what the warm-up cannot remove (clocks that differ by tenths of a percent from one
process to the next) `measure_paired` cancels by timing the kernel and a reference that no commit
changes (cuBLAS) sample by sample in alternation; their ratio varied 0.05-0.42% between processes
on an H200 where `do_bench` varied 0.5-1.3% (#16, docs/benchmarks.md).
"""
from __future__ import annotations

import contextlib
import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Timing:
    """Per-call times in milliseconds and their summary."""

    samples_ms: tuple[float, ...]
    method: str            # "cuda-graph", "cuda-events" or "cpu-clock"
    calls_per_sample: int

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.samples_ms))

    @property
    def q1_ms(self) -> float:
        return quantile(self.samples_ms, 0.25)

    @property
    def q3_ms(self) -> float:
        return quantile(self.samples_ms, 0.75)

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default) of a non-empty sequence."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over the mean (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else 0.0


def rotations_needed(bytes_per_call: int, l2_bytes: int, cap: int = 64) -> int:
    """How many operand copies make a rotation at least twice the L2 (1 when one call is)."""
    if bytes_per_call <= 0:
        return 1
    return max(1, min(cap, math.ceil(2 * l2_bytes / bytes_per_call)))


def calls_per_sample(estimate_ms: float, target_ms: float, rotations: int, cap: int = 2000) -> int:
    """Calls in one timed sample: enough to last `target_ms`, a multiple of the rotation."""
    n = max(1, math.ceil(target_ms / max(estimate_ms, 1e-4)))
    n = min(cap, max(n, rotations))
    return max(rotations, math.ceil(n / rotations) * rotations)


def is_steady(chunk_ms: Sequence[float], settle: float, window: int = 8) -> bool:
    """Whether the mean of the last `window` chunk times is within `settle` (relative) of the
    mean of the `window` before them."""
    if len(chunk_ms) < 2 * window:
        return False
    last = statistics.fmean(chunk_ms[-window:])
    before = statistics.fmean(chunk_ms[-2 * window:-window])
    return abs(last - before) <= settle * before


def measure(calls: Sequence[Callable[[], Any]], *, device: str = "cuda", repeats: int = 30,
            warmup_ms: float = 300.0, target_ms: float = 40.0, use_graph: bool = True,
            max_warmup_ms: float = 4000.0, settle: float = 0.002) -> Timing:
    """Time one call of `calls[i]` (each the same work on its own operands), cold in L2.

    Args:
        calls: the rotation; see `rotations_needed`.
        device: "cuda" times with CUDA events (graph replay where capture works), "cpu" with
            the wall clock.
        repeats: timed samples; each sample runs `calls_per_sample` calls back to back.
    """
    if device != "cuda":
        return _measure_cpu(calls, repeats, warmup_ms, target_ms)
    import torch

    for c in calls:  # compile, autotune, create handles
        c()
    torch.cuda.synchronize()
    est = _estimate_ms(calls)
    n = calls_per_sample(est, target_ms, len(calls))
    run: Callable[[], Any] = lambda: [calls[i % len(calls)]() for i in range(n)]
    method = "cuda-events"
    graph = _capture(run) if use_graph else None
    if graph is not None:
        run, method = graph.replay, "cuda-graph"
    _warm_up(run, warmup_ms, max_warmup_ms, settle)
    event: Any = torch.cuda.Event
    events = [(event(enable_timing=True), event(enable_timing=True)) for _ in range(repeats)]
    for start, end in events:  # queued back to back: the GPU never idles between samples
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    samples = tuple(s.elapsed_time(e) / n for s, e in events)
    del graph
    return Timing(samples, method, n)


def measure_interleaved(variants: dict[str, Sequence[Callable[[], Any]]], *, rounds: int = 3,
                       repeats: int = 30, **kw: Any) -> dict[str, Timing]:
    """Measure several variants in alternation (A B A B ...), so drift in GPU clocks and
    temperature over the run falls on all of them alike; each gets `repeats` samples in all."""
    per_round = max(1, math.ceil(repeats / rounds))
    got: dict[str, list[Timing]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, calls in variants.items():
            got[name].append(measure(calls, repeats=per_round, **kw))
    return {name: Timing(tuple(x for t in ts for x in t.samples_ms), ts[0].method,
                         ts[0].calls_per_sample) for name, ts in got.items()}


def measure_paired(variants: dict[str, Sequence[Callable[[], Any]]], *, device: str = "cuda",
                   repeats: int = 20, warmup_ms: float = 300.0, target_ms: float = 40.0,
                   use_graph: bool = True, max_warmup_ms: float = 4000.0,
                   settle: float = 0.002, during: Any = None) -> dict[str, Timing]:
    """Time several variants sample by sample in alternation (A B A B ...) after one warm-up.

    Sample i of every variant runs within milliseconds of the others' sample i, under the same
    clocks and temperature, so `paired_ratios(a, b)` cancels what moves a GPU between processes
    (its clocks settle over minutes under a 700 W power cap, #16) and keeps what the kernel itself
    changes.  Each variant is a rotation, as for `measure`; `during`, a context manager, is
    entered while the timed samples run (a `ClockSampler`, say).
    """
    if device != "cuda":
        return _paired_cpu(variants, repeats, target_ms)
    import torch

    for calls in variants.values():  # compile, autotune, create handles
        for c in calls:
            c()
    torch.cuda.synchronize()
    runs: dict[str, tuple[Callable[[], Any], int]] = {}
    graphs: list[Any] = []
    for name, calls in variants.items():
        n = calls_per_sample(_estimate_ms(calls), target_ms, len(calls))
        run: Callable[[], Any] = functools.partial(_run_rotation, calls, n)
        graph = _capture(run) if use_graph else None
        graphs.append(graph)
        runs[name] = (run if graph is None else graph.replay, n)
    method = "cuda-graph" if all(g is not None for g in graphs) else "cuda-events"
    _warm_up(lambda: [r() for r, _ in runs.values()], warmup_ms, max_warmup_ms, settle)
    event: Any = torch.cuda.Event
    rows = [[(event(enable_timing=True), event(enable_timing=True)) for _ in runs] for _ in range(repeats)]
    with during if during is not None else contextlib.nullcontext():
        for row in rows:
            for (start, end), (r, _) in zip(row, runs.values()):
                start.record()
                r()
                end.record()
        torch.cuda.synchronize()
    out = {name: Timing(tuple(row[j][0].elapsed_time(row[j][1]) / n for row in rows), method, n)
           for j, (name, (_, n)) in enumerate(runs.items())}
    del graphs
    return out


def paired_ratios(a: Timing, b: Timing) -> tuple[float, ...]:
    """Sample-by-sample a / b of two timings from one `measure_paired`."""
    return tuple(x / y for x, y in zip(a.samples_ms, b.samples_ms))


def _run_rotation(calls: Sequence[Callable[[], Any]], n: int) -> None:
    for i in range(n):
        calls[i % len(calls)]()


def _paired_cpu(variants: dict[str, Sequence[Callable[[], Any]]], repeats: int,
                target_ms: float) -> dict[str, Timing]:
    ns = {}
    for name, calls in variants.items():
        t0 = time.perf_counter()
        for c in calls:
            c()
        est = (time.perf_counter() - t0) * 1e3 / len(calls)
        ns[name] = calls_per_sample(est, target_ms, len(calls), cap=1000)
    got: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, calls in variants.items():
            t0 = time.perf_counter()
            _run_rotation(calls, ns[name])
            got[name].append((time.perf_counter() - t0) * 1e3 / ns[name])
    return {name: Timing(tuple(v), "cpu-clock", ns[name]) for name, v in got.items()}


def _warm_up(run: Callable[[], Any], warmup_ms: float, max_warmup_ms: float, settle: float) -> None:
    """Run chunks for at least `warmup_ms`, then until their times are steady (or `max_warmup_ms`)."""
    import torch

    event: Any = torch.cuda.Event
    chunks: list[float] = []
    t0 = time.perf_counter()
    while True:
        start, end = event(enable_timing=True), event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        chunks.append(float(start.elapsed_time(end)))
        elapsed = (time.perf_counter() - t0) * 1e3
        if elapsed >= max_warmup_ms or (elapsed >= warmup_ms and is_steady(chunks, settle)):
            return


def _estimate_ms(calls: Sequence[Callable[[], Any]]) -> float:
    import torch

    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    reps = max(3, len(calls))
    start.record()
    for i in range(reps):
        calls[i % len(calls)]()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / reps


def _capture(run: Callable[[], Any]) -> Any:
    """A CUDA graph of `run`, or None where capture fails (some kernels and libraries refuse)."""
    import torch

    try:
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run()
        torch.cuda.synchronize()
        return g
    except Exception:  # noqa: BLE001  (fall back to eager launches between events)
        torch.cuda.synchronize()
        return None


def _measure_cpu(calls: Sequence[Callable[[], Any]], repeats: int, warmup_ms: float,
                 target_ms: float) -> Timing:
    for c in calls:
        c()
    t0 = time.perf_counter()
    calls[0]()
    est = (time.perf_counter() - t0) * 1e3
    n = calls_per_sample(est, target_ms, len(calls), cap=1000)
    t_end = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < t_end:
        calls[0]()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(n):
            calls[i % len(calls)]()
        samples.append((time.perf_counter() - t0) * 1e3 / n)
    return Timing(tuple(samples), "cpu-clock", n)
