"""Test selection on a generated history with known bad changes: tests run vs failures caught.

    python benchmarks/bench_selection.py [--seed 7] [--train 3000] [--eval 1000] [--easy]
                                         [--history RUNS]

A synthetic code base: 60 modules in 6 packages, one test file of 5 tests per module (300
tests).  Each module depends on up to 3 others; each test covers its module and some of those
dependencies (the ground truth, never shown to selection).  Each change touches 1-3 files
(mostly in one package; 5% add a new file); 15% are bad: they break 1 to 3 tests drawn at random from
all the tests covering one touched module (its own tests have no head start).  1 test in 2000 fails at random on any run (flaky noise).

Selection (`forkflow.tiers.selection.select`) sees only what forkflow stores: changed files,
the suite's test ids and, as history, the newest runs (changed files + failed tests), as many
as `forkflow validate` reads (`HISTORY_RUNS`, 5000: all 3000 + 1000 here; `--history 1000`
measures the older, shorter window), newest first as `cofailure_history` returns them.  It
learns online: each evaluated change joins the history.  Its budget is a third of the tests.
Baseline: running every test (fraction 1.0, every bad change caught).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forkflow.tiers.selection import (
    HISTORY_RUNS,
    HistoryEntry,
    SuiteSpec,
    file_of,
    select,
)

PACKAGES, PER_PACKAGE, TESTS_PER_FILE = 6, 10, 5


def world(rng: random.Random) -> tuple[list[str], dict[str, set[str]]]:
    """Module paths, and per module the test ids that exercise it (ground truth)."""
    mods = [f"src/p{p}/m{i}.py" for p in range(PACKAGES) for i in range(PER_PACKAGE)]
    deps = {m: set(rng.sample(mods[: max(1, k)], min(k, rng.randint(0, 3)))) for k, m in enumerate(mods)}
    covers: dict[str, set[str]] = {m: set() for m in mods}
    for m in mods:
        test_file = m.replace("src/", "tests/").replace("/m", "/test_m")
        for t in range(TESTS_PER_FILE):
            tid = f"{test_file}::test_{t}"
            covers[m].add(tid)
            for d in sorted(deps[m]):
                if rng.random() < 0.6:
                    covers[d].add(tid)
    return mods, covers


def change(rng: random.Random, mods: list[str], serial: int) -> list[str]:
    if rng.random() < 0.05:
        return [f"src/p{rng.randrange(PACKAGES)}/new_{serial}.py"]
    pkg = rng.randrange(PACKAGES)
    local = [m for m in mods if m.startswith(f"src/p{pkg}/")]
    files = set(rng.sample(local, rng.randint(1, 2)))
    if rng.random() < 0.3:
        files.add(rng.choice(mods))
    return sorted(files)


EASY = False  # --easy: each covering test breaks with p=0.5 (a module's own tests nearly always do)


def outcome(rng: random.Random, files: list[str], covers: dict[str, set[str]], tests: list[str]) -> set[str]:
    """The tests the change truly breaks (empty for a good change)."""
    known = [f for f in files if f in covers]
    if not known or rng.random() >= 0.15:
        return set()
    culprit = sorted(covers[rng.choice(known)])
    if EASY:
        return {t for t in culprit if rng.random() < 0.5} or {rng.choice(culprit)}
    return set(rng.sample(culprit, min(len(culprit), rng.randint(1, 3))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--train", type=int, default=3000)
    ap.add_argument("--eval", type=int, default=1000)
    ap.add_argument("--history", type=int, default=HISTORY_RUNS, help="runs of history selection sees")
    ap.add_argument("--easy", action="store_true", help="breakage hits each covering test with p=0.5")
    args = ap.parse_args()
    global EASY
    EASY = args.easy
    rng = random.Random(args.seed)
    mods, covers = world(rng)
    tests = sorted({t for ts in covers.values() for t in ts})
    spec = SuiteSpec("unit", ("src/**", "tests/**"), True, tuple(tests))
    history: deque[HistoryEntry] = deque(maxlen=args.history)

    def record(files: list[str], broken: set[str]) -> None:
        flaky = {t for t in tests if rng.random() < 0.0005}
        history.appendleft(HistoryEntry(frozenset(files), frozenset(("unit", t) for t in broken | flaky)))

    for i in range(args.train):
        files = change(rng, mods, i)
        record(files, outcome(rng, files, covers, tests))
    ran = bad = caught = 0
    start = time.perf_counter()
    for i in range(args.eval):
        files = change(rng, mods, args.train + i)
        broken = outcome(rng, files, covers, tests)
        sel = select(files, [spec], list(history)).suites[0]
        chosen = set(tests) if sel.run and sel.files is None else \
            {t for t in tests if sel.run and file_of(t) in set(sel.files or ())}
        ran += len(chosen)
        if broken:
            bad += 1
            caught += bool(broken & chosen)
        record(files, broken)
    took = time.perf_counter() - start
    frac = ran / (args.eval * len(tests))
    met = frac <= 1 / 3 and caught >= 0.99 * bad
    print(f"tests: {len(tests)}; history: {args.train} changes (newest {args.history} used); "
          f"evaluated: {args.eval} changes, {bad} bad; seed {args.seed}")
    print(f"run everything   fraction of tests run 1.000   bad changes caught {bad}/{bad} = 100.0%")
    print(f"forkflow select  fraction of tests run {frac:.3f}   bad changes caught {caught}/{bad} = "
          f"{100 * caught / max(bad, 1):.1f}%   (goal: <= 1/3 and >= 99%: {'met' if met else 'NOT met'})")
    print(f"selection time   {took / args.eval * 1000:.1f} ms per change")


if __name__ == "__main__":
    main()
