"""L2 shape sweep, tritonbench-like: the Triton matmul over required shapes, against cuBLAS.

Per shape and dtype it checks the Triton result against torch.matmul, then times both with the
low-noise harness, and writes TFLOP/s and latency (median, with every sample) as metrics JSON.

The Triton kernel runs with one config per (shape, dtype, device, software version), tuned once
and stored (forkflow.workloads.tuning), so two runs of the same commit measure the same kernel;
every metric carries that config and the environment in its `context`.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forkflow.errors import UserError
from forkflow.models import PAIRED_SAMPLES, Better
from forkflow.workloads import ReportFormat, Tier, Workload
from forkflow.workloads.device import NO_GPU, parse_dtypes, torch_dtype
from forkflow.models import Metric
from forkflow.workloads.metrics import MetricsReport, write_metrics

WORKLOAD = Workload(
    name="matmul-sweep",
    tier=Tier.L2,
    module="matmul_sweep",
    report=ReportFormat.METRICS,
    description="Triton matmul TFLOP/s and latency over required shapes (large, decode), "
                "with cuBLAS measured in the same run; GPU only",
    summary="matmul TFLOP/s vs cuBLAS",
    needs_gpu=True,
    resources=(("cpus", 4), ("gpus", 1)),
    timeout="30m",
    paths=("python/**", "lib/**", "include/**", "third_party/**"),
    metrics=("matmul.*",),
    per_sample=("matmul.*.vs_cublas",),
)

# (M, N, K): square large, an MLP projection (8192x4096x14336), mid sizes, and decode (few rows).
DEFAULT_SHAPES = "8192x8192x8192,8192x4096x14336,4096x4096x4096,2048x2048x2048,16x8192x8192,64x4096x14336"
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
OUT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 2}  # fp8 products are written as bf16


@dataclass(frozen=True, slots=True)
class Shape:
    m: int
    n: int
    k: int

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """`8192x8192x8192,16x8192x8192` -> Shapes (M x N x K), or a UserError naming the bad one."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise UserError(f"bad shape {item!r}; write MxNxK with positive integers, e.g. 8192x8192x8192")
        out.append(Shape(*(int(p) for p in parts)))
    if not out:
        raise UserError("no shape given; write e.g. --shapes 8192x8192x8192,16x8192x8192")
    return tuple(out)


def bytes_per_call(shape: Shape, dtype: str) -> int:
    e = ELEMENT_BYTES[dtype]
    return shape.m * shape.k * e + shape.k * shape.n * e + shape.m * shape.n * OUT_BYTES[dtype]


def memory_shortfall(shape: Shape, dtype: str, rotations: int, free_bytes: int) -> str | None:
    """Why `shape` does not fit in `free_bytes` (Triton and cuBLAS outputs, all rotations), or None."""
    need = bytes_per_call(shape, dtype) * rotations + shape.m * shape.n * OUT_BYTES[dtype] * rotations
    if need <= free_bytes * 0.9:
        return None
    return (f"out of memory: {shape.label} {dtype} needs {need / 2**30:.1f} GiB of device memory "
            f"({rotations} operand set(s)), {free_bytes / 2**30:.1f} GiB free")


def _operands(shape: Shape, dtype: str, rotations: int) -> list[tuple[Any, Any, Any, Any]]:
    import torch

    sets = []
    for r in range(rotations):
        g = torch.Generator(device="cuda").manual_seed(r)
        a = torch.randn((shape.m, shape.k), device="cuda", generator=g)
        b = torch.randn((shape.n, shape.k), device="cuda", generator=g)  # K-major B
        if dtype == "fp8":
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).T
            out_t = torch.empty((shape.m, shape.n), device="cuda", dtype=torch.bfloat16)
            out_c = torch.empty_like(out_t)
            sets.append((a8, b8, out_t, out_c))
        else:
            dt = torch_dtype(dtype)
            a, b = a.to(dt), b.T.contiguous().to(dt)
            sets.append((a, b, torch.empty((shape.m, shape.n), device="cuda", dtype=dt),
                         torch.empty((shape.m, shape.n), device="cuda", dtype=dt)))
        del a, b
    return sets


def cublas_call(a: Any, b: Any, out: Any) -> Any:
    """The vendor baseline: torch.matmul (cuBLAS), or torch._scaled_mm for fp8."""
    import torch

    if a.dtype == torch.float8_e4m3fn:
        one = torch.ones((), device=a.device, dtype=torch.float32)
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return torch.matmul(a, b, out=out)


def tile_config(params: dict[str, int]) -> Any:
    """A stored choice's parameters as the kernel's TileConfig."""
    from forkflow.workloads.kernels.matmul import TileConfig

    return TileConfig(params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"], params["GROUP_M"],
                      num_warps=params["num_warps"], num_stages=params["num_stages"])


def candidates(shape: Shape) -> list[dict[str, int]]:
    """The configs tuning chooses from: narrow tiles for decode shapes (M <= 64), Hopper-sized ones
    otherwise (the kernel's own autotune lists)."""
    from forkflow.workloads.kernels.matmul import DECODE_CONFIGS, TUNE_CONFIGS

    pool = DECODE_CONFIGS if shape.m <= 64 else TUNE_CONFIGS
    return [{"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": c.group_m,
             "num_warps": c.num_warps, "num_stages": c.num_stages} for c in pool]


def choose_config(shape: Shape, dtype: str, sets: list[tuple[Any, Any, Any, Any]], env: dict[str, str],
                  store: Any, retune: bool = False) -> tuple[Any, Any, str]:
    """(TileConfig, Choice, "stored" | "tuned"): the stored choice for this shape, or tune it now
    with the harness (cold L2, short samples) and store it."""
    from forkflow.workloads.harness import measure
    from forkflow.workloads.kernels.matmul import matmul
    from forkflow.workloads.tuning import TuneKey, software_version, stored_or_tuned

    key = TuneKey("matmul", shape.label, dtype, env.get("device", ""),
                  software_version(env.get("torch", ""), env.get("triton", "")))

    def time_ms(params: Any) -> float:
        cfg = tile_config(dict(params))
        calls = [functools.partial(matmul, s[0], s[1], config=cfg, c=s[2]) for s in sets]
        return measure(calls, repeats=10, warmup_ms=100.0, target_ms=20.0, max_warmup_ms=500.0).median_ms

    choice, source = stored_or_tuned(store, key, candidates(shape), time_ms, retune=retune)
    return tile_config(dict(choice.params)), choice, source


def run_shape(shape: Shape, dtype: str, args: argparse.Namespace,
              env: dict[str, str] | None = None) -> tuple[list[Metric], str | None]:
    """Check and time one shape; return its metrics, or an error line (out of memory, wrong result)."""
    import torch

    from forkflow.workloads.checks import is_out_of_memory
    from forkflow.workloads.device import ClockSampler
    from forkflow.workloads.harness import measure_paired, paired_ratios, rotations_needed
    from forkflow.workloads.kernels.matmul import matmul
    from forkflow.workloads.tuning import TuneStore

    env = env or {}

    props = torch.cuda.get_device_properties(0)
    rot = rotations_needed(bytes_per_call(shape, dtype), int(getattr(props, "L2_cache_size", 50 << 20)))
    short = memory_shortfall(shape, dtype, rot, torch.cuda.mem_get_info()[0])
    if short:
        return [], short
    try:
        sets = _operands(shape, dtype, rot)
        a, b, out_t, out_c = sets[0]
        cfg, choice, source = choose_config(shape, dtype, sets, env, TuneStore(args.tune_store),
                                            retune=args.retune)
        tri = matmul(a, b, out_dtype=out_t.dtype, config=cfg, c=out_t)
        ref = cublas_call(a, b, out_c)
        err = float(torch.linalg.vector_norm(tri.float() - ref.float()) /
                    torch.linalg.vector_norm(ref.float()).clamp_min(1e-30))
        if not err < 2e-2:
            return [], f"{shape.label} {dtype}: Triton result differs from cuBLAS (relative error {err:.3g})"
        # sample by sample in alternation: their ratio cancels the clock drift between
        # processes (#16: 0.05-0.42% between processes on the H200, the time alone 0.09-0.45%)
        sampler = ClockSampler()
        timings = measure_paired(
            {"triton": [functools.partial(matmul, s[0], s[1], config=cfg, c=s[2]) for s in sets],
             "cublas": [functools.partial(cublas_call, s[0], s[1], s[3]) for s in sets]},
            repeats=args.repeats, use_graph=not args.no_graph, during=sampler)
        t_tri, t_cub = timings["triton"], timings["cublas"]
        speedups = tuple(1.0 / r for r in paired_ratios(t_tri, t_cub))  # Triton over cuBLAS, in TFLOP/s
    except Exception as e:
        if is_out_of_memory(e):
            torch.cuda.empty_cache()
            return [], f"out of memory: {shape.label} {dtype}: {str(e).splitlines()[0][:200]}"
        raise
    finally:
        sets = []
        torch.cuda.empty_cache()
    base = f"matmul.{dtype}.{shape.label}"
    tf = tuple(shape.flops / (ms * 1e-3) / 1e12 for ms in t_tri.samples_ms)
    tf_c = tuple(shape.flops / (ms * 1e-3) / 1e12 for ms in t_cub.samples_ms)
    med_tf, med_c = shape.flops / (t_tri.median_ms * 1e-3) / 1e12, shape.flops / (t_cub.median_ms * 1e-3) / 1e12
    ratio = statistics.median(speedups)
    print(f"{shape.label:>18} {dtype:5} triton {med_tf:8.1f} TFLOP/s {t_tri.median_ms * 1e3:10.1f} us "
          f"(IQR {t_tri.iqr_ms / t_tri.median_ms:6.2%}) | cuBLAS {med_c:8.1f} TFLOP/s "
          f"{t_cub.median_ms * 1e3:10.1f} us | triton/cuBLAS {ratio:6.1%} [{t_tri.method}] "
          f"config {choice.label} ({source})", flush=True)
    during = {f"{k}_during": f"{v:.0f}" for k, v in sampler.summary().items() if k != "reads"}
    ctx = tuple(sorted({**env, **during, "config": choice.label, "config_source": source,
                        "timer": t_tri.method}.items()))
    cub = tuple(sorted({**env, "config": "cuBLAS", "timer": t_cub.method}.items()))
    return [
        Metric(f"{base}.tflops", med_tf, "TFLOP/s", Better.HIGHER, tf, ctx),
        Metric(f"{base}.latency_us", t_tri.median_ms * 1e3, "us", Better.LOWER,
               tuple(x * 1e3 for x in t_tri.samples_ms), ctx),
        Metric(f"{base}.cublas_tflops", med_c, "TFLOP/s", Better.HIGHER, tf_c, cub),
        Metric(f"{base}.vs_cublas", ratio, "ratio", Better.HIGHER, speedups,
               tuple(sorted((*ctx, PAIRED_SAMPLES)))),
    ], None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m forkflow.workloads.matmul_sweep",
                                 description="Triton matmul shape sweep against cuBLAS (GPU).")
    ap.add_argument("--report", type=Path, help="where the metrics JSON goes")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxNxK list")
    ap.add_argument("--dtypes", default="bf16", help="comma-separated: fp32,fp16,bf16,fp8")
    ap.add_argument("--repeats", type=int, default=30, help="timed samples per shape")
    ap.add_argument("--no-graph", action="store_true", help="time eager launches, not graph replay")
    ap.add_argument("--tune-store", type=Path, default=None,
                    help="the stored config choices (default: $FORKFLOW_TUNE_STORE, else "
                         "~/.cache/forkflow/tuning.json)")
    ap.add_argument("--retune", action="store_true",
                    help="tune again and replace the stored choices (a new config is an event "
                         "of the series)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        shapes, dtypes = parse_shapes(args.shapes), parse_dtypes(args.dtypes)
        from forkflow.workloads.device import require_packages

        require_packages(WORKLOAD.requires, "the matmul-sweep workload")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from forkflow.workloads.device import detect, environment, unsupported_reason

    dev = detect(triton=False)
    if dev.torch_device != "cuda":
        reason = f"matmul-sweep skipped: {NO_GPU}"
        print(reason)
        if args.report:
            write_metrics(args.report, MetricsReport((), skipped=reason))
        return 0
    metrics: list[Metric] = []
    errors: list[str] = []
    skipped: list[str] = []
    env = environment()
    print(f"matmul-sweep on {dev.describe()}; " + ", ".join(f"{k} {v}" for k, v in sorted(env.items())),
          flush=True)
    for dtype in dtypes:
        why = unsupported_reason(dtype, dev)
        if why:
            print(f"skipped {dtype}: {why}")
            skipped.append(f"{dtype}: {why}")
            continue
        for shape in shapes:
            got, err = run_shape(shape, dtype, args, env)
            metrics += got
            if err:
                print(f"{shape.label:>18} {dtype:5} ERROR {err}", flush=True)
                errors.append(err)
    report = MetricsReport(tuple(metrics), tuple(errors), "; ".join(skipped) if not metrics and skipped
                           and not errors else "", {"device": dev.describe(), "skipped": skipped,
                                                              "environment": env})
    if args.report:
        write_metrics(args.report, report)
        print(f"report: {args.report}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
