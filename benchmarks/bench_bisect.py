"""Simulation study of performance bisection, and `git bisect run` on a real repository.

    python benchmarks/bench_bisect.py [--trials 200] [--git-trials 20]
    python benchmarks/bench_bisect.py --triton-e2e DIR [--e2e-trials 5] [--shift 0.02]  # on a GPU
    python benchmarks/bench_bisect.py --l2-sim [--sim-trials 200] [--between 0.0062] [--shift 0.02]

128 commits, 3 % noise, a 5 % slowdown at a random commit.  Compared side by side:
  forkflow K=1 / K=4  statistical verdicts (interleaved repeats, Mann-Whitney U + KS)
  single run          one run per commit against a fixed threshold (tritonbench's bisection)
  git bisect run      a real `git bisect run` on a generated repository, one run per step,
                      the same fixed threshold, next to forkflow's CommandProbe on that repo
"""
from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from forkflow.bisect.bisector import Bisector, Candidate
from forkflow.bisect.probes import CommandProbe, Measurement, MeasureStatus
from forkflow.git.repo import Repo
from forkflow.models import Better, Sha

N, NOISE, SHIFT = 128, 0.03, 0.05


class SimProbe:
    def __init__(self, culprit: int, rng: np.random.Generator) -> None:
        self.culprit, self.rng = culprit, rng

    def measure(self, rev: Sha) -> Measurement:
        bad = int(rev) >= self.culprit
        v = 100 * (1 + SHIFT * bad) * (1 + NOISE * float(self.rng.standard_normal()))
        return Measurement(MeasureStatus.OK, (v,), unit="ms", better=Better.LOWER)

    def close(self) -> None:
        pass


def forkflow_trials(trials: int, k: int) -> dict[str, float]:
    right, rounds, meas = 0, [], []
    per_round: list[int] = []
    for t in range(trials):
        rng = np.random.default_rng(t)
        culprit = int(rng.integers(1, N + 1))
        out = Bisector([Candidate(Sha(str(i))) for i in range(N + 1)], SimProbe(culprit, rng),
                       parallel=k).run()
        right += out.culprit == culprit
        rounds.append(len(out.rounds))
        meas.append(out.measurements)
        per_round.extend(r.measurements for r in out.rounds)
    return {"right": right / trials, "max_rounds": max(rounds), "mean_rounds": float(np.mean(rounds)),
            "measurements": float(np.mean(meas)), "per_round": float(np.mean(per_round))}


def single_run_trials(trials: int) -> dict[str, float]:
    """One run per commit, BAD when above the midpoint of one run at each end."""
    right, rounds = 0, []
    for t in range(trials):
        rng = np.random.default_rng(t)
        culprit = int(rng.integers(1, N + 1))
        probe = SimProbe(culprit, rng)
        g, b = probe.measure(Sha("0")).samples[0], probe.measure(Sha(str(N))).samples[0]
        threshold = (g + b) / 2
        lo, hi, r = 0, N, 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            r += 1
            if probe.measure(Sha(str(mid))).samples[0] > threshold:
                hi = mid
            else:
                lo = mid
        right += hi == culprit
        rounds.append(r)
    return {"right": right / trials, "max_rounds": max(rounds), "mean_rounds": float(np.mean(rounds)),
            "measurements": float(np.mean(rounds)) + 1, "per_round": 1.0}


# -- the real repository -----------------------------------------------------------
MEASURE = r'''
import json, os, random, sys
from pathlib import Path
import fcntl
idx = int(Path("idx.txt").read_text())
with open(os.environ["COUNTER"], "a+") as cnt:  # one draw per run, also when runs overlap
    fcntl.flock(cnt, fcntl.LOCK_EX)
    cnt.seek(0)
    k = int(cnt.read() or 0)
    cnt.seek(0)
    cnt.truncate()
    cnt.write(str(k + 1))
rng = random.Random(f"{os.environ['SEED']}-{k}")
v = 100 * (1 + 0.05 * (idx >= int(os.environ["CULPRIT"]))) * (1 + 0.03 * rng.gauss(0, 1))
if os.environ.get("MODE") == "threshold":
    sys.exit(1 if v > 102.5 else 0)
doc = {"metrics": [{"name": "lat", "value": v, "unit": "ms", "better": "lower", "samples": [v]}]}
Path(os.environ["FORKFLOW_METRICS_OUT"]).write_text(json.dumps(doc))
'''


def make_repo(root: Path) -> list[str]:
    repo = root / "repo"
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    script = "\n".join(f"commit refs/heads/main\ncommitter b <b@x> {1700000000 + i} +0000\n"
                       f"data <<EOF\ncommit {i}\nEOF\nM 644 inline idx.txt\ndata <<EOF\n{i}\nEOF\n"
                       for i in range(N + 1))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=script.encode(), check=True, env=env)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    out = subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=repo, capture_output=True, text=True)
    return out.stdout.split()


def git_bisect_trials(trials: int, root: Path, shas: list[str]) -> dict[str, float]:
    repo, script = root / "repo", root / "measure.py"
    right, steps, secs = 0, [], 0.0
    for t in range(trials):
        culprit = int(np.random.default_rng(t).integers(1, N + 1))
        env = {"CULPRIT": str(culprit), "SEED": str(t), "MODE": "threshold",
               "COUNTER": str(root / f"count-git-{t}")}
        t0 = time.perf_counter()
        subprocess.run(["git", "bisect", "start", shas[-1], shas[0]], cwd=repo, capture_output=True, check=True)
        p = subprocess.run(["git", "bisect", "run", sys.executable, str(script)], cwd=repo,
                           capture_output=True, text=True, env={**_env(), **env})
        subprocess.run(["git", "bisect", "reset"], cwd=repo, capture_output=True, check=True)
        secs += time.perf_counter() - t0
        m = re.search(r"([0-9a-f]{40}) is the first bad commit", p.stdout)
        right += bool(m) and shas.index(m.group(1)) == culprit  # type: ignore[union-attr]
        steps.append(len(re.findall(r"^running ", p.stdout, re.M)))
    return {"right": right / trials, "max_rounds": max(steps), "mean_rounds": float(np.mean(steps)),
            "measurements": float(np.mean(steps)), "per_round": 1.0, "seconds": secs / trials}


def forkflow_git_trials(trials: int, root: Path, shas: list[str], k: int) -> dict[str, float]:
    repo, script = Repo.open(root / "repo"), root / "measure.py"
    right, rounds, meas, secs = 0, [], [], 0.0
    for t in range(trials):
        culprit = int(np.random.default_rng(t).integers(1, N + 1))
        env = {"CULPRIT": str(culprit), "SEED": str(t), "COUNTER": str(root / f"count-ff-{t}")}
        probe = CommandProbe(repo, f"{sys.executable} {script}", "lat", env=env)
        t0 = time.perf_counter()
        try:
            out = Bisector([Candidate(Sha(s)) for s in shas], probe, parallel=k).run()
        finally:
            probe.close()
        secs += time.perf_counter() - t0
        right += out.culprit == culprit
        rounds.append(len(out.rounds))
        meas.append(out.measurements)
    return {"right": right / trials, "max_rounds": max(rounds), "mean_rounds": float(np.mean(rounds)),
            "measurements": float(np.mean(meas)), "per_round": float(np.mean(meas)) / float(np.mean(rounds)),
            "seconds": secs / trials}


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)


# -- the nightly series, detect, then bisect (simulated at measured GPU noise) -----------------
class RunProbe:
    """One bench run per measurement: a process offset (between-process noise) shared by its
    `samples` samples, each with within-process noise on top."""

    def __init__(self, culprit: int, shift: float, between: float, within: float, samples: int,
                 rng: np.random.Generator) -> None:
        self.culprit, self.shift, self.between, self.within = culprit, shift, between, within
        self.samples, self.rng = samples, rng

    def value(self, idx: int) -> tuple[float, ...]:
        level = 1.0 * (1 + self.shift * (idx >= self.culprit)) * (1 + self.between * self.rng.standard_normal())
        return tuple(level * (1 + self.within * self.rng.standard_normal(self.samples)))

    def measure(self, rev: Sha) -> Measurement:
        return Measurement(MeasureStatus.OK, self.value(int(rev)), unit="ms", better=Better.LOWER)

    def close(self) -> None:
        pass


def l2_trials(trials: int, n: int, shift: float, between: float, within: float,
              samples: int = 8, per_run: bool = False) -> dict[str, float]:
    """Per trial: a nightly series of n commits (one bench run each), detect, then bisect the
    alert's span; right = the alert holds the culprit and bisect names it."""
    from forkflow.regress.detect import detect_change_points

    alerted = held = right = 0
    runs: list[int] = []
    rounds: list[int] = []
    for t in range(trials):
        rng = np.random.default_rng(10_000 + t)
        culprit = int(rng.integers(1, n))
        probe = RunProbe(culprit, shift, between, within, samples, rng)
        series = [float(np.median(probe.value(i))) for i in range(n + 4)]  # 4 nights after the tip
        cps = [c for c in detect_change_points(series) if c.after > c.before]
        if not cps:
            continue
        alerted += 1
        c = max(cps, key=lambda c: c.magnitude)
        first, last = c.span
        good, bad = first - 1, last
        if not good < culprit <= bad:
            continue
        held += 1
        from forkflow.bisect.workflow import PER_RUN_POLICY, RunMedians
        from forkflow.bisect.verdict import VerdictPolicy

        out = Bisector([Candidate(Sha(str(i))) for i in range(good, bad + 1)],
                       RunMedians(probe) if per_run else probe,
                       policy=PER_RUN_POLICY if per_run else VerdictPolicy()).run()
        right += out.culprit is not None and good + out.culprit == culprit
        runs.append(out.measurements)
        rounds.append(len(out.rounds))
    return {"alerted": alerted / trials, "held": held / trials, "right": right / trials,
            "runs": float(np.mean(runs)) if runs else 0.0, "rounds": float(np.mean(rounds)) if rounds else 0.0}


def l2_sim(trials: int, between: float, within: float, shifts: Sequence[float]) -> None:
    print(f"nightly series of 64 commits (+4 nights), one bench run per point and per bisection step "
          f"(8 samples), between-process noise {between:.2%}, within {within:.2%}; {trials} trials each")
    print(f"{'shift':>6} {'verdict unit':>13} {'alerted':>8} {'span holds':>10} {'named':>7} {'runs':>6} "
          f"{'rounds':>7}")
    for shift in shifts:
        for per_run in (False, True):
            r = l2_trials(trials, 64, shift, between, within, per_run=per_run)
            print(f"{shift:>6.1%} {'run (median)' if per_run else 'sample':>13} {r['alerted']:>8.1%} "
                  f"{r['held']:>10.1%} {r['right']:>7.1%} {r['runs']:>6.1f} {r['rounds']:>7.1f}", flush=True)


def row(name: str, trials: int, r: dict[str, float]) -> None:
    secs = f"{r['seconds']:.1f}" if "seconds" in r else "-"
    print(f"{name:<34} {trials:>6} {r['right']:>8.1%} {r['max_rounds']:>6} {r['mean_rounds']:>6.2f} "
          f"{r['per_round']:>9.1f} {r['measurements']:>8.1f} {secs:>8}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--git-trials", type=int, default=20)
    ap.add_argument("--triton-e2e", type=Path, default=None, help="run the GPU end-to-end study here")
    ap.add_argument("--e2e-trials", type=int, default=5, help="seeded end-to-end trials")
    ap.add_argument("--e2e-first-seed", type=int, default=1)
    ap.add_argument("--e2e-metric", default="vs_cublas", help="end to end: the metric detect and bisect use "
                    "(vs_cublas: Triton over cuBLAS, paired; ms: Triton alone)")
    ap.add_argument("--e2e-unit", choices=("run", "sample", "auto"), default="run",
                    help="end to end: bisect judges runs (--per-run) or samples (--per-sample), "
                         "or (auto) what the metric's stored points declare")
    ap.add_argument("--e2e-budget-s", type=float, default=0.0, help="end to end: start no trial after this")
    ap.add_argument("--shift", type=float, default=0.02, help="end to end: the hidden slowdown")
    ap.add_argument("--l2-sim", action="store_true", help="simulate nightly series + detect + bisect")
    ap.add_argument("--sim-trials", type=int, default=200)
    ap.add_argument("--between", type=float, default=0.0062, help="between-process CV (measured: 0.62%%)")
    ap.add_argument("--within", type=float, default=0.003, help="within-process CV of one sample")
    ap.add_argument("--shifts", default="0.02,0.01")
    args = ap.parse_args(argv)
    if args.l2_sim:
        l2_sim(args.sim_trials, args.between, args.within, [float(x) for x in args.shifts.split(",")])
        return
    if args.triton_e2e is not None:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_bisect_e2e import run_e2e

        run_e2e(args.triton_e2e, args.e2e_trials, args.shift, args.e2e_first_seed, args.e2e_metric,
                args.e2e_budget_s, args.e2e_unit)
        return
    print(f"{N} commits, noise {NOISE:.0%}, shift {SHIFT:.0%}; bounds: serial log2(N)+2 = "
          f"{math.log2(N) + 2:.0f} rounds, K=4 ceil(log5 N)+2 = {math.ceil(math.log(N, 5)) + 2} rounds")
    print(f"{'method':<34} {'trials':>6} {'right':>8} {'max r':>6} {'mean r':>6} {'meas/rnd':>9} "
          f"{'meas':>8} {'s/trial':>8}")
    if args.trials:
        row("forkflow K=1 (simulated)", args.trials, forkflow_trials(args.trials, 1))
        row("forkflow K=4 (simulated)", args.trials, forkflow_trials(args.trials, 4))
        row("single run + threshold (simulated)", args.trials, single_run_trials(args.trials))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "measure.py").write_text(MEASURE)
        shas = make_repo(root)
        row("git bisect run (real repo)", args.git_trials, git_bisect_trials(args.git_trials, root, shas))
        row("forkflow K=4, CommandProbe (real)", args.git_trials,
            forkflow_git_trials(args.git_trials, root, shas, 4))


if __name__ == "__main__":
    main()
