"""L2 compile time: torch.compile of a small transformer block, cold and warm, in fresh processes.

Cold: a new process with empty Inductor and Triton caches compiles forward and backward.
Warm: a new process over the caches the cold run left (FX graph, autograd and Triton caches hit).
Each figure is the first training step's wall time minus a steady step's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from forkflow.errors import UserError
from forkflow.models import Better
from forkflow.process import run
from forkflow.workloads import ReportFormat, Tier, Workload
from forkflow.models import Metric
from forkflow.workloads.metrics import MetricsReport, with_context, write_metrics
from forkflow.workloads.transformer import build_block

WORKLOAD = Workload(
    name="compile-time",
    tier=Tier.L2,
    module="compile_time",
    report=ReportFormat.METRICS,
    description="torch.compile (Inductor) of a small transformer block: cold and warm compile "
                "seconds, forward and backward; GPU when present, else CPU",
    summary="torch.compile cold/warm s",
    needs_gpu=False,
    resources=(("cpus", 2), ("gpus", 0)),  # the local runner refuses more CPUs than the machine has
    # torch alone: Inductor emits C++ on CPU, and torch's CUDA builds bring the triton they compile with
    requires=("torch",),
    timeout="30m",
    paths=("python/**", "lib/**", "include/**", "third_party/**"),
    metrics=("compile.*",),
)

SIZES = {"tiny": (64, 2, 16), "small": (512, 8, 256)}  # d_model, heads, sequence


def child(size: str, device: str) -> dict[str, float]:
    """One process: time the first compiled training step and a steady one."""
    import torch

    d, heads, seq = SIZES[size]
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    block = build_block(d, heads).to(device=device, dtype=dtype)
    x = torch.randn(4, seq, d, device=device, dtype=dtype)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def step(fn: Any) -> float:
        sync()
        t0 = time.perf_counter()
        fn(x).float().square().mean().backward()
        sync()
        return time.perf_counter() - t0

    step(block)  # eager warm-up: kernels, allocator and autograd outside the compile figure
    compiled = torch.compile(block)
    first = step(compiled)
    steady = min(step(compiled) for _ in range(3))
    return {"first_s": first, "steady_s": steady, "compile_s": max(0.0, first - steady)}


def run_child(size: str, device: str, cache: Path, timeout: float) -> float:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
               TRITON_CACHE_DIR=str(cache / "triton"))
    # its own process group: a timeout also ends the compile workers Inductor starts
    p = run([sys.executable, "-m", "forkflow.workloads.compile_time", "--child",
             "--size", size, "--device", device], env=env, timeout=timeout)
    stdout, stderr = p.text()
    if p.timed_out:
        raise RuntimeError(f"compile child timed out after {timeout:g}s")
    if p.rc != 0:
        raise RuntimeError(f"compile child failed (rc {p.rc}): {stderr.strip()[-800:]}")
    return float(json.loads(stdout.strip().splitlines()[-1])["compile_s"])


def measure(size: str, device: str, repeats: int, timeout: float) -> tuple[list[float], list[float]]:
    """`repeats` cold compiles (each in new caches) and, after each, one warm compile."""
    cold, warm = [], []
    for i in range(repeats):
        with tempfile.TemporaryDirectory(prefix="forkflow-compile-") as tmp:
            cold.append(run_child(size, device, Path(tmp), timeout))
            warm.append(run_child(size, device, Path(tmp), timeout))
        print(f"run {i + 1}/{repeats}: cold {cold[-1]:.2f}s warm {warm[-1]:.2f}s", flush=True)
    return cold, warm


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m forkflow.workloads.compile_time",
                                 description="Cold and warm torch.compile seconds of a transformer block.")
    ap.add_argument("--report", type=Path)
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds for one compile process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from forkflow.workloads.device import require_packages

    try:
        require_packages(WORKLOAD.requires, "the compile-time workload")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU here; use --device cpu or auto", file=sys.stderr)
        return 2
    if args.child:
        print(json.dumps(child(args.size, device)))
        return 0
    print(f"compile-time: {args.size} block on {device}, torch {torch.__version__}", flush=True)
    try:
        cold, warm = measure(args.size, device, args.repeats, args.timeout)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        if args.report:
            write_metrics(args.report, MetricsReport((), errors=(str(e)[:2000],)))
        return 1
    import statistics

    from forkflow.workloads.device import environment

    metrics = with_context((
        Metric(f"compile.{args.size}.cold_s", statistics.median(cold), "s", Better.LOWER, tuple(cold)),
        Metric(f"compile.{args.size}.warm_s", statistics.median(warm), "s", Better.LOWER, tuple(warm)),
    ), environment())
    print(f"cold {metrics[0].value:.2f}s  warm {metrics[1].value:.2f}s (median of {args.repeats})")
    if args.report:
        write_metrics(args.report, MetricsReport(metrics, info={"device": device,
                                                                "torch": torch.__version__}))
        print(f"report: {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
