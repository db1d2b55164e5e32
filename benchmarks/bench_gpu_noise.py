"""Between-process noise of the Triton matmul on one GPU: the same kernel, measured in separate
processes one after the other, next to the noise inside one process.

    python benchmarks/bench_gpu_noise.py [--procs 10] [--inner 3] [--shapes ...] [--out f.json]

First one process tunes each shape once and stores the choice (forkflow.workloads.tuning); then
`--procs` fresh processes, one after the other, each measure every shape `--inner` times with
three timers, interleaved: forkflow's harness (CUDA graph, cold L2; paired sample by sample with
cuBLAS on the same operands, `measure_paired`), triton's `do_bench` and `do_bench_cudagraph`, all
on the stored config.  Two derived timers cancel the GPU's clock drift between processes:
`harness/cuBLAS` (the paired ratio) and `harness x SM clock` (time at the maximum clock, the SM
clock read through NVML during the samples).  Per shape and timer it reports

  within   the mean over processes of the CV of that process's `--inner` results
  between  the CV of the per-process medians (the number an L2 series sees night to night)

and, with `--autotune-each` (on by default), the between-process CV of the harness when each
process autotunes for itself (triton's @autotune, what the sweep did before), with the configs
the processes chose.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPES = "8192x8192x8192,8192x4096x14336,4096x4096x4096"
TIMERS = ("harness", "do_bench", "do_bench_cudagraph", "cuBLAS (harness)", "harness/cuBLAS",
          "harness x SM clock")


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def child(args: argparse.Namespace) -> int:
    """One process: tune (when asked) or measure every shape; one JSON line on stdout."""
    import torch
    import triton
    from triton.testing import do_bench, do_bench_cudagraph

    from forkflow.workloads.device import ClockSampler, environment
    from forkflow.workloads.harness import measure, measure_paired, paired_ratios, rotations_needed
    from forkflow.workloads.kernels.matmul import matmul, matmul_tuned
    from forkflow.workloads.matmul_sweep import (_operands, bytes_per_call, choose_config, cublas_call,
                                                 parse_shapes)
    from forkflow.workloads.tuning import TuneStore, config_label

    env = environment()
    max_mhz = float(env.get("sm_clock_max_mhz", 1980))
    store = TuneStore(args.tune_store)
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))
    out: dict[str, Any] = {"env": env, "shapes": {}}
    t0 = time.perf_counter()
    for shape in parse_shapes(args.shapes):
        rot = rotations_needed(bytes_per_call(shape, args.dtype), l2)
        sets = _operands(shape, args.dtype, rot)
        cfg, choice, source = choose_config(shape, args.dtype, sets, env, store)
        row: dict[str, Any] = {"config": choice.label, "source": source}
        if args.child == "measure":
            calls = [functools.partial(matmul, s[0], s[1], config=cfg, c=s[2]) for s in sets]
            cub = [functools.partial(cublas_call, s[0], s[1], s[3]) for s in sets]
            fn = calls[0]
            got: dict[str, list[float]] = {t: [] for t in TIMERS}
            clocks: list[dict[str, float]] = []
            for _ in range(args.inner):  # interleaved: the timers see the same GPU state
                sampler = ClockSampler()  # read while the timed samples run, not in the warm-up
                pair = measure_paired({"triton": calls, "cublas": cub}, repeats=args.repeats,
                                      target_ms=args.target_ms, during=sampler)
                clk = sampler.summary()
                clocks.append(clk)
                got["harness"].append(pair["triton"].median_ms)
                got["cuBLAS (harness)"].append(pair["cublas"].median_ms)
                got["harness/cuBLAS"].append(statistics.median(paired_ratios(pair["triton"], pair["cublas"])))
                if clk:  # time x clock: cycles, what a compute-bound kernel costs at any clock
                    got["harness x SM clock"].append(pair["triton"].median_ms * clk["sm_mhz"] / max_mhz)
                got["do_bench"].append(float(do_bench(fn, return_mode="median")))
                got["do_bench_cudagraph"].append(float(do_bench_cudagraph(fn, return_mode="median")))
            row["ms"] = {t: v for t, v in got.items() if v}
            row["clocks"] = clocks
            if args.autotune_each:  # triton's own autotune, fresh in this process
                auto = [functools.partial(matmul, s[0], s[1], config=None, c=s[2]) for s in sets]
                auto[0]()
                best = matmul_tuned.best_config
                row["autotune_config"] = config_label({**best.kwargs, "num_warps": best.num_warps,
                                                       "num_stages": best.num_stages})
                row["autotune_ms"] = measure(auto, repeats=args.repeats, target_ms=args.target_ms).median_ms
        out["shapes"][shape.label] = row
        del sets
        torch.cuda.empty_cache()
    out["seconds"] = time.perf_counter() - t0
    out["triton"] = triton.__version__
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def run_child(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--shapes", args.shapes, "--dtype", args.dtype,
           "--inner", str(args.inner), "--repeats", str(args.repeats), "--target-ms", str(args.target_ms),
           "--tune-store", str(args.tune_store)]
    if not args.autotune_each:
        cmd.append("--no-autotune-each")
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"child {mode} failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=("tune", "measure"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--inner", type=int, default=3, help="measurements per timer inside one process")
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--repeats", type=int, default=20, help="harness samples per measurement")
    ap.add_argument("--target-ms", type=float, default=25.0, help="harness sample length")
    ap.add_argument("--tune-store", type=Path, default=None)
    ap.add_argument("--no-autotune-each", dest="autotune_each", action="store_false")
    ap.add_argument("--budget-s", type=float, default=0.0, help="start no process after this many seconds")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.tune_store is None:
        args.tune_store = Path(tempfile.mkdtemp(prefix="tune-")) / "tuning.json"
    t0 = time.perf_counter()
    tuned = run_child(args, "tune")
    env = tuned["env"]
    print("# " + ", ".join(f"{k} {v}" for k, v in sorted(env.items())), flush=True)
    print(f"# tuned once in {tuned['seconds']:.1f} s: " + "; ".join(
        f"{s} {r['config']} ({r['source']})" for s, r in tuned["shapes"].items()), flush=True)
    runs = []
    for i in range(args.procs):
        if args.budget_s and time.perf_counter() - t0 > args.budget_s and len(runs) >= 2:
            print(f"# budget of {args.budget_s:.0f} s spent: {len(runs)} processes", flush=True)
            break
        r = run_child(args, "measure")
        runs.append(r)
        if args.out:  # raw results survive a timeout
            args.out.with_suffix(".procs.json").write_text(json.dumps(runs))
        clocks = r["env"].get("sm_clock_mhz", "?")
        print(f"process {i + 1}/{args.procs}: {r['seconds']:.1f} s, SM clock at start {clocks} MHz; " + "; ".join(
            f"{s} harness {statistics.median(row['ms']['harness']) * 1e3:.1f} us"
            f" /cuBLAS {statistics.median(row['ms']['harness/cuBLAS']):.4f}"
            + "".join(f" [{c.get('sm_mhz', 0):.0f} MHz {c.get('temp_c', 0):.0f} C {c.get('power_w', 0):.0f} W]"
                      for c in row.get("clocks", []) if c)
            + (f", autotune {row['autotune_config']} {row['autotune_ms'] * 1e3:.1f} us" if "autotune_ms" in row else "")
            for s, row in r["shapes"].items()), flush=True)
    print(f"\n## {len(runs)} processes x {args.inner} measurements per timer (CV: stdev / mean)")
    print(f"{'shape':>16} {'timer':>19} {'within':>8} {'between':>8} {'median us':>10} {'min..max of process medians':>30}")
    summary: dict[str, Any] = {"env": env, "procs": len(runs), "inner": args.inner, "shapes": {}}
    for shape in tuned["shapes"]:
        rows = [r["shapes"][shape] for r in runs]
        srow: dict[str, Any] = {"config": tuned["shapes"][shape]["config"]}
        for t in TIMERS:
            if not all(t in x["ms"] for x in rows):
                continue
            per = [statistics.median(x["ms"][t]) for x in rows]
            within = statistics.fmean(cv(x["ms"][t]) for x in rows)
            srow[t] = {"within_cv": within, "between_cv": cv(per), "medians": per}
            scale = 1.0 if t == "harness/cuBLAS" else 1e3  # a ratio, else us
            print(f"{shape:>16} {t:>19} {within:8.3%} {cv(per):8.3%} {statistics.median(per) * scale:10.4g} "
                  f"{min(per) * scale:14.4g}..{max(per) * scale:.4g}")
        if "autotune_ms" in rows[0]:
            per = [x["autotune_ms"] for x in rows]
            chosen = sorted({x["autotune_config"] for x in rows})
            srow["autotune_each"] = {"between_cv": cv(per), "ms": per, "configs": [x["autotune_config"] for x in rows]}
            print(f"{shape:>16} {'harness, autotune':>19} {'':>8} {cv(per):8.3%} {statistics.median(per) * 1e3:10.1f} "
                  f"{min(per) * 1e3:14.1f}..{max(per) * 1e3:.1f}  {len(chosen)} config(s) chosen")
            for c in chosen:
                print(f"{'':>18}  {sum(x['autotune_config'] == c for x in rows)} x {c}")
        summary["shapes"][shape] = srow
        if args.out:  # partial results survive a timeout
            args.out.write_text(json.dumps(summary, indent=1))
    summary["seconds"] = time.perf_counter() - t0
    print(f"\ntotal {summary['seconds']:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
