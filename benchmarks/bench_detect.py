"""Simulation study of change-point detection: forkflow's E-divisive vs a Perfherder-style t-test.

    python benchmarks/bench_detect.py [--trials 200]

Series have 2 % Gaussian noise; a 5 % step must be found within 5 points of where it is.
Every setting uses fixed seeds, so two runs print the same table.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

from forkflow.regress.detect import DetectConfig, detect_change_points

NOISE, STEP, TOL = 0.02, 0.05, 5
Detector = Callable[[np.ndarray, int], list[int]]


def forkflow_detector(x: np.ndarray, seed: int) -> list[int]:
    return [c.index for c in detect_change_points(x, DetectConfig(seed=seed))]


def perfherder_detector(x: np.ndarray, seed: int, back: int = 12, fore: int = 12,
                        threshold: float = 7.0) -> list[int]:
    """Perfherder's rule: Welch t of 12 points back vs 12 ahead, local maxima above t = 7."""
    n = x.size
    t = np.zeros(n)
    for i in range(3, n - 2):
        a, b = x[max(0, i - back):i], x[i:i + fore]
        if a.size < 3 or b.size < 3:
            continue
        se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        t[i] = abs(b.mean() - a.mean()) / se if se > 0 else 0.0
    out = []
    for i in range(n):
        if t[i] >= threshold and t[i] == t[max(0, i - fore):i + fore].max():
            out.append(i)
    return out


def series(rng: np.random.Generator, n: int, step_at: int | None) -> np.ndarray:
    x = 100 * (1 + NOISE * rng.standard_normal(n))
    if step_at is not None:
        x[step_at:] *= 1 + STEP
    return x


def trial_set(detector: Detector, trials: int, make: Callable[[np.random.Generator], tuple[np.ndarray, int | None]],
              seed0: int) -> tuple[float, float, int]:
    """(share of trials with the step found within TOL, false alarms per 1,000 points, points)."""
    found = false = points = 0
    for t in range(trials):
        rng = np.random.default_rng(seed0 + t)
        x, at = make(rng)
        idx = detector(x, t)
        near = [i for i in idx if at is not None and abs(i - at) <= TOL]
        found += bool(near)
        false += len(idx) - min(len(near), 1)
        points += x.size
    return found / trials, 1000 * false / points, points


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    args = ap.parse_args(argv)
    n = args.trials

    def mid(rng: np.random.Generator) -> tuple[np.ndarray, int | None]:
        at = int(rng.integers(40, 160))
        return series(rng, 200, at), at

    def tail(k: int) -> Callable[[np.random.Generator], tuple[np.ndarray, int | None]]:
        return lambda rng: (series(rng, 60 + k, 60), 60)

    def null(rng: np.random.Generator) -> tuple[np.ndarray, int | None]:
        return series(rng, 1000, None), None

    settings: list[tuple[str, Callable[[np.random.Generator], tuple[np.ndarray, int | None]]]] = [
        ("200-point series, 5% step at a random point", mid),
        ("step 5 points before the newest commit", tail(5)),
        ("step 8 points before the newest commit", tail(8)),
        ("step 12 points before the newest commit", tail(12)),
        ("1,000-point series, no step", null),
    ]
    print(f"{n} trials per setting, noise {NOISE:.0%}, step {STEP:.0%}, found = within {TOL} points")
    print(f"{'setting':<46} {'detector':<11} {'found':>7} {'false/1000 pts':>15} {'s/series':>9}")
    for k, (name, make) in enumerate(settings):
        for label, det in (("forkflow", forkflow_detector), ("perfherder", perfherder_detector)):
            t0 = time.perf_counter()
            found, false, _ = trial_set(det, n, make, seed0=1000 * (k + 1))
            dt = (time.perf_counter() - t0) / n
            shown = "-" if make is null else f"{found:.1%}"
            print(f"{name:<46} {label:<11} {shown:>7} {false:>15.3f} {dt:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
