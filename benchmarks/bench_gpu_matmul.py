"""Triton matmul vs cuBLAS per shape, and timing-harness noise, in one run on one GPU.

For each shape (bf16 by default):
  1. Triton (forkflow.workloads.kernels.matmul, with the config the sweep stores for the shape:
     tuned once, then reused, see forkflow.workloads.tuning) and cuBLAS (torch.matmul), both timed
     with forkflow's harness: TFLOP/s and the Triton/cuBLAS ratio.
  2. Harness noise: 20 repeated measurements of the Triton kernel with forkflow's harness,
     triton.testing.do_bench and triton.testing.do_bench_cudagraph, interleaved, each returning a
     median; the coefficient of variation (stdev/mean) of the 20 results per method.

    python benchmarks/bench_gpu_matmul.py [--shapes ...] [--dtype bf16] [--noise-reps 20] [--out f.json]
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

NOISE_SHAPES = "8192x8192x8192,8192x4096x14336,4096x4096x4096,16x8192x8192"
SHAPES = "8192x8192x8192,8192x4096x14336,4096x4096x4096,2048x2048x2048,16x8192x8192,64x4096x14336"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--noise-shapes", default=NOISE_SHAPES)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--noise-reps", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch
    import triton
    from triton.testing import do_bench, do_bench_cudagraph

    from forkflow.workloads.harness import (
        coefficient_of_variation,
        measure,
        measure_interleaved,
        rotations_needed,
    )
    from forkflow.workloads.kernels.matmul import matmul
    from forkflow.workloads.device import environment
    from forkflow.workloads.matmul_sweep import (
        _operands,
        bytes_per_call,
        choose_config,
        cublas_call,
        parse_shapes,
    )
    from forkflow.workloads.tuning import TuneStore

    if not torch.cuda.is_available():
        print("bench_gpu_matmul: skipped: no CUDA GPU here")
        return 0
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 50 << 20))
    print(f"# {props.name}, torch {torch.__version__}, triton {triton.__version__}, "
          f"L2 {l2 >> 20} MiB, dtype {args.dtype}", flush=True)
    env = environment()
    store = TuneStore()
    results: dict[str, object] = {"device": props.name, "torch": torch.__version__,
                                  "triton": triton.__version__, "dtype": args.dtype, "environment": env}

    print("\n## Triton vs cuBLAS (forkflow harness: CUDA graph, cold L2, 30 samples of 40 ms "
          "in 3 alternating rounds, median)")
    print(f"{'shape':>18} {'triton TFLOP/s':>15} {'cuBLAS TFLOP/s':>15} {'ratio':>7} "
          f"{'triton us':>10} {'IQR':>6} {'method':>10}")
    rows = []
    for shape in parse_shapes(args.shapes):
        rot = rotations_needed(bytes_per_call(shape, args.dtype), l2)
        sets = _operands(shape, args.dtype, rot)
        cfg, choice, source = choose_config(shape, args.dtype, sets, env, store)
        both = measure_interleaved(
            {"triton": [lambda s=s: matmul(s[0], s[1], config=cfg, c=s[2]) for s in sets],
             "cublas": [lambda s=s: cublas_call(s[0], s[1], s[3]) for s in sets]})
        t, c = both["triton"], both["cublas"]
        tf_t = shape.flops / t.median_ms / 1e9
        tf_c = shape.flops / c.median_ms / 1e9
        rows.append({"shape": shape.label, "triton_tflops": tf_t, "cublas_tflops": tf_c,
                     "ratio": tf_t / tf_c, "triton_us": t.median_ms * 1e3,
                     "triton_iqr_rel": t.iqr_ms / t.median_ms, "method": t.method,
                     "config": choice.label, "config_source": source})
        print(f"{shape.label:>18} {tf_t:15.1f} {tf_c:15.1f} {tf_t / tf_c:7.1%} "
              f"{t.median_ms * 1e3:10.1f} {t.iqr_ms / t.median_ms:6.2%} {t.method:>10} {choice.label} ({source})",
              flush=True)
        del sets
        torch.cuda.empty_cache()
    results["triton_vs_cublas"] = rows

    print(f"\n## Harness noise: CV over {args.noise_reps} repeated measurements (Triton kernel)")
    print(f"{'shape':>18} {'forkflow':>9} {'do_bench':>9} {'do_bench_cg':>11} "
          f"{'median us: forkflow':>20} {'do_bench':>9} {'do_bench_cg':>11} {'seconds':>8}")
    noise = []
    for shape in parse_shapes(args.noise_shapes):
        rot = rotations_needed(bytes_per_call(shape, args.dtype), l2)
        sets = _operands(shape, args.dtype, rot)
        cfg, _, _ = choose_config(shape, args.dtype, sets, env, store)
        fn = functools.partial(matmul, sets[0][0], sets[0][1], config=cfg, c=sets[0][2])
        fn()
        ff, db, cg = [], [], []
        t0 = time.perf_counter()
        for _ in range(args.noise_reps):  # interleaved: all three see the same GPU state
            ff.append(measure([lambda s=s: matmul(s[0], s[1], config=cfg, c=s[2]) for s in sets]).median_ms)
            db.append(float(do_bench(fn, return_mode="median")))
            cg.append(float(do_bench_cudagraph(fn, return_mode="median")))
        secs = time.perf_counter() - t0
        cv = [coefficient_of_variation(x) for x in (ff, db, cg)]
        noise.append({"shape": shape.label, "cv_forkflow": cv[0], "cv_do_bench": cv[1],
                      "cv_do_bench_cudagraph": cv[2], "median_ms_forkflow": statistics.median(ff),
                      "median_ms_do_bench": statistics.median(db),
                      "median_ms_do_bench_cudagraph": statistics.median(cg),
                      "samples_ms": {"forkflow": ff, "do_bench": db, "do_bench_cudagraph": cg}})
        print(f"{shape.label:>18} {cv[0]:9.2%} {cv[1]:9.2%} {cv[2]:11.2%} "
              f"{statistics.median(ff) * 1e3:20.1f} {statistics.median(db) * 1e3:9.1f} "
              f"{statistics.median(cg) * 1e3:11.1f} {secs:8.1f}", flush=True)
        del sets, fn
        torch.cuda.empty_cache()
    results["noise"] = noise
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
