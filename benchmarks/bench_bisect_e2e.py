"""End to end on a GPU: seeded trials of a small slowdown hidden in a Triton kernel library.

    python benchmarks/bench_bisect.py --triton-e2e DIR [--e2e-trials 5] [--shift 0.02]
        [--e2e-metric vs_cublas|ms] [--e2e-unit run|sample|auto] [--e2e-budget-s S]

Each trial (seed t) builds an upstream Triton kernel library of 64 commits; one of them, at a
seeded position, pads the matmul's K loop with masked tiles: about `--shift` more work, the
result unchanged.  A fork takes them as single picks and bundles of 4 (with fork commits
between).  The L2 suite (declared in forkflow.toml with `metrics = ["matmul/*"]`) is the
library's bench.py, which times the matmul with forkflow's harness on a config tuned once and
stored (forkflow.workloads.tuning), paired sample by sample with cuBLAS on the same operands
(`measure_paired`): it reports the time (`.../ms`) and Triton over cuBLAS (`.../vs_cublas`), the
ratio that cancels the GPU clock drift between processes.  A bench run is one process.

Then, as a nightly would: every fork commit is measured once (in one process, as a nightly
history fill), the points are stored, `forkflow detect --metric 'matmul/*/<metric>'` must open a
regression alert over a range holding the culprit, and `forkflow bisect --alert N --per-<unit>`
(no flag with `--e2e-unit auto`: the ratio's context says samples = paired, so it is judged per
sample; no --command: it uses the L2 suite that declares the metric) must name the culprit upstream
commit.  Per trial it prints the alert, the culprit named, rounds, bench runs and seconds; the
summary goes to $OUT/e2e_<first seed>.json after every trial.

Without a GPU the library's bench reports a simulated time (1 % process noise, shared with the
simulated cuBLAS), a dry run of the pipeline.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

N_UPSTREAM = 64

CONFIGS = '''# Candidate configs of the matmul; bench.py tunes once per device and software version.
MATMUL = [
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
]
'''

MATMUL = '''import torch
import triton
import triton.language as tl

PAD_SHARE = 0.0  # extra K tiles, as a share of the real ones
REVISION = 0


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, PAD,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K) + PAD):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + scm * cm[:, None] + scn * cn[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul(a, b, cfg, c=None):
    M, K = a.shape
    _, N = b.shape
    if c is None:
        c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    tiles = triton.cdiv(K, cfg["BLOCK_K"])
    pad = round(PAD_SHARE * tiles)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), pad, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                        BLOCK_K=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"], num_warps=cfg["num_warps"],
                        num_stages=cfg["num_stages"])
    return c
'''

BENCH = '''"""L2 benchmark: writes the metrics JSON to --report, $FORKFLOW_METRICS_OUT, or stdout."""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
NAME = "matmul/4096x4096x6400/ms"


RATIO = "matmul/4096x4096x6400/vs_cublas"


def measure(samples=10):
    import time

    t0 = time.perf_counter()
    import torch

    if not torch.cuda.is_available():  # a dry run of the pipeline: a simulated time
        src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels", "matmul.py")).read()
        share = float(src.split("PAD_SHARE = ")[1].split()[0])
        clock = 1 + 0.01 * random.gauss(0, 1)  # what moves the process moves cuBLAS alike
        base = 0.33 * (1 + share) * clock * (1 + 0.002 * random.gauss(0, 1))
        vals = sorted(base * (1 + 0.001 * random.gauss(0, 1)) for _ in range(samples))
        ratios = sorted(v / (0.3 * clock) for v in vals)
        ctx = {"config": "simulated"}
        return [{"name": NAME, "value": vals[len(vals) // 2], "unit": "ms", "better": "lower",
                 "samples": vals, "context": ctx},
                {"name": RATIO, "value": ratios[len(ratios) // 2], "unit": "ratio", "better": "lower",
                 "samples": ratios, "context": {**ctx, "samples": "paired"}}]
    import functools
    import statistics

    import triton
    from forkflow.workloads.device import environment
    from forkflow.workloads.harness import measure as harness
    from forkflow.workloads.harness import measure_paired, paired_ratios
    from forkflow.workloads.tuning import TuneKey, TuneStore, software_version, stored_or_tuned
    from kernels.configs import MATMUL
    from kernels.matmul import matmul

    t_import = time.perf_counter()
    m, n, k = 4096, 4096, 6400  # 100 K tiles of 64: the padding commit adds whole tiles
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16, generator=g)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    # a second operand set: calls alternate, so none finds its inputs in L2 (60 MB on an H200)
    a2, b2, c2 = a.clone(), b.clone(), torch.empty_like(c)
    c3, c4 = torch.empty_like(c), torch.empty_like(c)
    env = environment()
    key = TuneKey("library-matmul", f"{m}x{n}x{k}", "fp16", env.get("device", ""),
                  software_version(torch.__version__, triton.__version__))
    tune = lambda cfg: harness([functools.partial(matmul, a, b, dict(cfg), c)], repeats=8, target_ms=20,
                               warmup_ms=100, max_warmup_ms=500).median_ms
    choice, source = stored_or_tuned(TuneStore(), key, MATMUL, tune)
    cfg = dict(choice.params)
    ref = a[:256].float() @ b.float()
    assert torch.allclose(matmul(a, b, cfg, c)[:256].float(), ref, atol=1.0, rtol=0.05), "matmul is wrong"
    t_setup = time.perf_counter()
    # Triton and cuBLAS (which no commit here changes) sample by sample in alternation: their
    # ratio cancels the clock drift that moves both between processes
    pair = measure_paired({"triton": [functools.partial(matmul, a, b, cfg, c), functools.partial(matmul, a2, b2, cfg, c2)],
                           "cublas": [functools.partial(torch.matmul, a, b, out=c3),
                                      functools.partial(torch.matmul, a2, b2, out=c4)]},
                          repeats=samples, target_ms=30, warmup_ms=100, max_warmup_ms=500)
    t = pair["triton"]
    ratios = paired_ratios(t, pair["cublas"])
    t_end = time.perf_counter()
    ctx = {**env, "config": choice.label, "config_source": source, "timer": t.method}
    print(f"bench: import {t_import - t0:.2f} s, setup {t_setup - t_import:.2f} s, measure {t_end - t_setup:.2f} s; "
          f"triton {t.median_ms:.4f} ms, cuBLAS {pair['cublas'].median_ms:.4f} ms", file=sys.stderr)
    return [{"name": NAME, "value": t.median_ms, "unit": "ms", "better": "lower",
             "samples": list(t.samples_ms), "context": ctx},
            {"name": RATIO, "value": statistics.median(ratios), "unit": "ratio", "better": "lower",
             "samples": list(ratios), "context": {**ctx, "samples": "paired"}}]  # bisect: per sample


if __name__ == "__main__":
    doc = json.dumps({"metrics": measure()})
    target = sys.argv[sys.argv.index("--report") + 1] if "--report" in sys.argv else os.environ.get("FORKFLOW_METRICS_OUT")
    if target:
        open(target, "w").write(doc)
    else:
        print(doc)
'''

SUITE = '''
[[suite]]
name = "l2-kernels"
tier = "L2"
command = "python3 bench.py --report {report}"
report = "metrics"
metrics = ["matmul/*"]
resources = { cpus = 1, gpus = 1 }
timeout = "10m"
'''


def build_fork(root: Path, culprit_at: int, shift: float, seed: int) -> tuple[Path, list[str], str]:
    """Upstream with N_UPSTREAM commits (one slows the matmul down by `shift`), landed in a fork as
    single picks and bundles of 4, with fork commits between."""
    from forkflow.testing.gitrepo import ForkBuilder

    rng = random.Random(seed)
    b = ForkBuilder(root / "repos")
    b.upstream_commit({"kernels/__init__.py": "", "kernels/configs.py": CONFIGS,
                       "kernels/matmul.py": MATMUL, "bench.py": BENCH},
                      "Triton kernels and their benchmark (#1000)")
    b.branch_fork()
    b.fork_commit({"FORK.md": "fork notes\n"}, "fork: notes")
    ups = []
    matmul_src = MATMUL
    for i in range(1, N_UPSTREAM + 1):
        kind = rng.random()
        if i == culprit_at:
            matmul_src = matmul_src.replace("PAD_SHARE = 0.0", f"PAD_SHARE = {shift}")
            files: dict[str, str | bytes | None] = {"kernels/matmul.py": matmul_src}
            subject = f"matmul: pad the K loop to whole split-K tiles (#{1000 + i})"
        elif kind < 0.25:  # harmless edits to the kernel file itself
            old = matmul_src.split("REVISION = ")[1].split("\n")[0]
            matmul_src = matmul_src.replace(f"REVISION = {old}\n", f"REVISION = {i}\n")
            files = {"kernels/matmul.py": matmul_src}
            subject = f"matmul: tidy (#{1000 + i})"
        else:
            files = {f"notes/{i:03d}.md": f"change {i}\n"}
            subject = f"docs: note {i} (#{1000 + i})"
        ups.append(b.upstream_commit(files, subject))
    b.fetch()
    i = 0
    while i < len(ups):
        group = ups[i:i + 4] if (i // 4) % 3 == 2 else ups[i:i + 1]
        if len(group) == 1:
            b.pick(group[0])
        else:
            for u in group:
                b.f.git("cherry-pick", "--no-commit", u)
            b.f.git("commit", "-q", "-m", f"Cherry-pick {len(group)} upstream commits\n\n" + "\n".join(
                f"Upstream-Commit: {u}" for u in group), env=b.f.env())
        i += len(group)
        if i % 10 == 0:
            b.fork_commit({"FORK.md": f"fork notes {i}\n"}, f"fork: own change {i}")
    for night in range(1, 5):  # the nights after: a change at the tip needs points after it
        b.fork_commit({"FORK.md": f"fork notes, night {night}\n"}, f"fork: own change, night {night}")
    return b.f.path, [str(u) for u in ups], str(ups[culprit_at - 1])


def forkflow(*args: str, cwd: Path, show: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "forkflow", *args]
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if show:
        print("$ forkflow " + " ".join(args), flush=True)
        print((p.stdout + p.stderr)[-4000:], flush=True)
    return p


def measure_series(fork: Path, trees: Path) -> list[tuple[str, int, list[dict[str, Any]]]]:
    """Measure every first-parent fork commit, in one process (a nightly history fill)."""
    from forkflow.git.repo import Repo

    repo = Repo.open(fork)
    out: list[tuple[str, int, list[dict[str, Any]]]] = []
    for c in repo.log("HEAD", first_parent=True):
        tree = trees / c.sha[:12]
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", c.sha], cwd=fork, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        for name in [m for m in sys.modules if m == "bench" or m.startswith("kernels")]:
            del sys.modules[name]
        sys.path.insert(0, str(tree))
        bench = importlib.import_module("bench")
        sys.path.remove(str(tree))
        out.append((c.sha, c.date, bench.measure()))
    return out


def noise_of(vals: list[float]) -> float:
    """Point-to-point noise of a series with one step: the median absolute difference of
    neighbours over the median, scaled to a standard deviation (1.4826 / sqrt 2)."""
    diffs = [abs(b - a) for a, b in zip(vals, vals[1:])]
    return 1.0484 * statistics.median(diffs) / statistics.median(vals) if diffs else 0.0


def trial(root: Path, seed: int, shift: float, metric: str = "vs_cublas", unit: str = "run") -> dict[str, Any]:
    t0 = time.time()
    rng = random.Random(seed)
    culprit_at = rng.randint(2, N_UPSTREAM)
    fork, ups, culprit = build_fork(root / f"trial{seed}", culprit_at, shift, seed)
    forkflow("init", "--upstream", "upstream", cwd=fork, show=False)
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + SUITE)
    t1 = time.time()
    series = measure_series(fork, root / f"trial{seed}" / "trees")
    t_series = time.time() - t1
    from forkflow.context import open_context
    from forkflow.models import Better, MetricPoint, Sha
    from forkflow.regress import records as regress_records

    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        regress_records.add_metric_points(s, ctx.fork_id, [
            MetricPoint(m["name"], Sha(sha), float(m["value"]), "ms", Better.LOWER, tuple(m["samples"]),
                        suite="l2-kernels", commit_date=date,
                        context=tuple(sorted((k, str(v)) for k, v in m.get("context", {}).items())))
            for sha, date, metrics in series for m in metrics])
    configs = sorted({ms[0].get("context", {}).get("config", "") for _, _, ms in series})
    print(f"trial {seed}: culprit upstream #{culprit_at} {culprit[:12]}; {len(series)} fork commits measured "
          f"in {t_series:.0f} s; config {configs}", flush=True)
    out: dict[str, Any] = {"seed": seed, "culprit_at": culprit_at, "culprit": culprit, "shift": shift,
                           "fork_commits": len(series), "series_seconds": round(t_series, 1),
                           "configs": configs, "metric": metric, "unit": unit, "series": {}, "series_noise": {}}
    for name in [m["name"] for m in series[0][2]]:
        vals = [float(m["value"]) for _, _, ms in series for m in ms if m["name"] == name]
        out["series"][name], out["series_noise"][name] = vals, noise_of(vals)
        print(f"  {name} (oldest first; point-to-point noise {noise_of(vals):.2%}): "
              + " ".join(f"{v:.4f}" for v in vals), flush=True)
    p = forkflow("detect", "--json", "--metric", f"matmul/*/{metric}", cwd=fork, show=False)
    alerts = json.loads(p.stdout)["alerts"] if p.returncode == 0 else []
    regressions = [a for a in alerts if a["direction"] == "regression"]
    out["alerts"] = [{k: a[k] for k in ("id", "good", "bad", "direction")} | {
        "magnitude": a["members"][0]["magnitude"]} for a in alerts]
    if not regressions:
        out.update(alerted=False, right=False)
        print(f"  no regression alert ({len(alerts)} alert(s))", flush=True)
        return out
    a = regressions[0]
    in_range = subprocess.run(["git", "rev-list", f"{a['good']}..{a['bad']}"], cwd=fork, capture_output=True,
                              text=True).stdout.split()
    has_culprit = any(culprit in subprocess.run(["git", "log", "-1", "--format=%B", r], cwd=fork,
                                                capture_output=True, text=True).stdout for r in in_range)
    out["alerted"] = True
    out["alert_holds_culprit"] = has_culprit
    t2 = time.time()
    flag = [] if unit == "auto" else [f"--per-{unit}"]  # auto: the unit the stored metric declares
    p = forkflow("bisect", "--alert", str(a["id"]), *flag, "--json", cwd=fork, show=False)
    t_bisect = time.time() - t2
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        print(p.stdout[-2000:] + p.stderr[-2000:], flush=True)
        doc = {}
    named = (doc.get("culprit") or {}).get("upstream_commit")
    out.update(named=named, right=named == culprit, rounds=doc.get("rounds"), runs=doc.get("measurements"),
               unit=doc.get("verdict_unit"), bisect_seconds=round(t_bisect, 1), trial_seconds=round(time.time() - t0, 1),
               magnitude=a["members"][0]["magnitude"], message=doc.get("message"))
    print(f"  alert {a['id']}: {a['members'][0]['magnitude']:+.2%}, range holds the culprit: {has_culprit}; "
          f"bisect named {str(named)[:12]}: {'RIGHT' if out['right'] else 'WRONG'} in {out['rounds']} rounds, "
          f"{out['runs']} bench runs, {t_bisect:.0f} s; trial {out['trial_seconds']:.0f} s", flush=True)
    return out


def run_e2e(root: Path, trials: int = 5, shift: float = 0.02, first_seed: int = 1, metric: str = "vs_cublas",
            budget_s: float = 0.0, unit: str = "run") -> None:
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FORKFLOW_TUNE_STORE", str(root / "tuning.json"))
    results = []
    t0 = time.time()
    for seed in range(first_seed, first_seed + trials):
        if budget_s and time.time() - t0 > budget_s:
            print(f"# budget of {budget_s:.0f} s spent before trial {seed}", flush=True)
            break
        results.append(trial(root, seed, shift, metric, unit))
        doc = {"shift": shift, "trials": results}
        out = os.environ.get("OUT")
        if out:
            Path(out, f"e2e_{first_seed}.json").write_text(json.dumps(doc, indent=1))
    right = sum(r.get("right", False) for r in results)
    alerted = sum(r.get("alerted", False) for r in results)
    bis = [r["bisect_seconds"] for r in results if "bisect_seconds" in r]
    print(f"\n{len(results)} trial(s) at {shift:.1%}: alerted {alerted}, culprit named {right}; "
          f"rounds {[r.get('rounds') for r in results]}, runs {[r.get('runs') for r in results]}, "
          f"bisect seconds median {statistics.median(bis) if bis else 0:.0f}; total {time.time() - t0:.0f} s",
          flush=True)
