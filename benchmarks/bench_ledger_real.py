"""The ledger on a real (upstream, fork) pair: recall and precision of PICKED against ground truth.

    python benchmarks/bench_ledger_real.py PAIR [PAIR ...] [--scratch DIR] [--misses N]

PAIR is a folder made by realfork's `make_pair.py` (upstream.git, downstream/, ground_truth.json,
pair.json).  The pair is never modified: the fork is cloned (`--shared`, no checkout) into a
scratch folder, `forkflow init` and `forkflow status --json --commits` run there.

Ground truth for "taken by the fork at D": every upstream commit after the fork point, at or
before upstream's head at D, that is not listed in ground_truth.json (that file lists exactly the
commits the fork had not taken at D; a commit picked and then backed out is listed).

Days behind: forkflow's figure next to the same rule (the newest upstream commit with at least
`infer_threshold` of the commits up to it handled) applied to the ground truth: its picks, and the
commits the fork's messages listed as deferred or skipped by D.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def forkflow(*args: str, cwd: Path) -> str:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    proc = subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"forkflow {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def prepare(pair: Path, scratch: Path) -> Path:
    """A throw-away clone of the pair's fork with `upstream` fetched and forkflow initialised."""
    repo = scratch / pair.name
    if repo.exists():
        subprocess.run(["rm", "-rf", str(repo)], check=True)
    git("clone", "-q", "--shared", "--no-checkout", str(pair / "downstream"), str(repo), cwd=scratch)
    forkflow("init", "--upstream", str(pair / "upstream.git"), cwd=repo)
    return repo


def days(a: int, b: int) -> float:
    return round((a - b) / 86400, 1)


def truth_point(entries: list[dict[str, Any]], taken: set[str], threshold: float) -> dict[str, Any] | None:
    best = None
    handled = 0
    for i, e in enumerate(entries):
        if e["sha"] in taken:
            handled += 1
            if handled >= threshold * (i + 1):
                best = e
    return best


def measure(pair: Path, scratch: Path, misses: int) -> dict[str, Any]:
    meta = json.loads((pair / "pair.json").read_text())
    gt = json.loads((pair / "ground_truth.json").read_text())
    not_taken = {g["upstream_sha"] for g in gt}
    # listed as deferred / skipped in a fork message dated at or before D: decided, not pending
    declared = {g["upstream_sha"] for g in gt
                if any(day <= meta["date"][:10] for _, day in g["listed_in_fork_messages"])}
    repo = prepare(pair, scratch)
    t0 = time.perf_counter()
    doc = json.loads(forkflow("status", "--json", "--commits", cwd=repo))
    seconds = time.perf_counter() - t0
    entries = doc["commits"]
    shas = {e["sha"] for e in entries}
    taken = shas - not_taken
    picked = {e["sha"] for e in entries if e["disposition"] == "PICKED"}
    tp = len(picked & taken)
    out: dict[str, Any] = {
        "pair_date": meta["date"][:10],
        "upstream_commits": len(entries),
        "taken_truth": len(taken),
        "picked_forkflow": len(picked),
        "recall": round(tp / len(taken), 4) if taken else 1.0,
        "precision": round(tp / len(picked), 4) if picked else 1.0,
        "status_seconds_cold": round(seconds, 2),
        "counts": doc["counts"],
        "declared_truth": len(declared),
        "days_behind_forkflow": doc["days_behind"],
    }
    tip = datetime.fromisoformat(doc["upstream_tip"]["date"].replace("Z", "+00:00"))
    point = truth_point(entries, taken | declared, 0.95)
    if point is not None:
        at = datetime.fromisoformat(point["date"].replace("Z", "+00:00"))
        out["days_behind_truth"] = round((tip - at).total_seconds() / 86400, 1)
    by_sha = {e["sha"]: e for e in entries}
    out["missed"] = [f"{s[:10]} {by_sha[s]['subject'][:70]}" for s in sorted(taken - picked)][:misses]
    out["wrong"] = [f"{s[:10]} {by_sha[s]['subject'][:60]} <- {'; '.join(by_sha[s]['evidence'])[:90]}"
                    for s in sorted(picked - taken)][:misses]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", type=Path)
    ap.add_argument("--scratch", type=Path, default=None)
    ap.add_argument("--misses", type=int, default=15, help="How many misses and wrong picks to list.")
    args = ap.parse_args()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="ff-bench-ledger-"))
    scratch.mkdir(parents=True, exist_ok=True)
    for pair in args.pairs:
        print(json.dumps(measure(pair.resolve(), scratch, args.misses), indent=1))


if __name__ == "__main__":
    main()
