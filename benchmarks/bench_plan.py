"""`forkflow plan` of 1,000 pending upstream commits (target: at most 10 s), cold and warm.

    python benchmarks/bench_plan.py                    # 1,000 pending commits, 3,000 files
    python benchmarks/bench_plan.py --pending 5000

Cold: a fresh store (every commit's files and symbols parsed, every bundle probed in memory).
Warm: again with the store (touches cached by sha).  For scale, the same run prints how long
plain `git log -p` takes to print those commits' patches (reading them, no planning).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_pick import generate, git  # noqa: E402

from forkflow.config import render_config  # noqa: E402


def forkflow_plan(repo: Path) -> tuple[float, dict]:  # type: ignore[type-arg]
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    t0 = time.perf_counter()
    p = subprocess.run([*cmd, "plan", "--json", "--repo", str(repo)], capture_output=True, text=True)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return took, json.loads(p.stdout)


def startup() -> float:
    exe = Path(sys.executable).parent / "forkflow"
    t0 = time.perf_counter()
    subprocess.run([str(exe), "--version"], capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--files", type=int, default=3000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="forkflow-bench-plan-"))
    repo = root / "fork"
    try:
        generate(repo, args.files, args.pending)
        git(repo, "remote", "add", "upstream", "https://example.invalid/upstream.git")
        (repo / "forkflow.toml").write_text(render_config("upstream", "main", "main") + (
            '\n[ingest]\nl1_command = "true"\n\n[[ingest.chain]]\nname = "tritongpu"\n'
            'paths = ["lib/Dialect/d8/**"]\n'))
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(["git", "log", "-p", "main..upstream/main"], cwd=repo, capture_output=True, check=True)
        log_p = time.perf_counter() - t0
        cold, doc = forkflow_plan(repo)
        warm, doc2 = forkflow_plan(repo)
        assert doc == doc2
        kinds: dict[str, int] = {}
        for u in doc["units"]:
            kinds[u["kind"]] = kinds.get(u["kind"], 0) + 1
        n = sum(len(u["commits"]) for u in doc["units"])
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{git(repo, 'version').strip()}")
        print(f"pending commits planned: {n} into {len(doc['units'])} units {kinds}")
        print(f"forkflow plan --json, cold store: {cold:6.2f}s   (CLI start-up alone: {startup():.2f}s)")
        print(f"forkflow plan --json, warm store: {warm:6.2f}s")
        print(f"git log -p of the same commits:   {log_p:6.2f}s")
        print(f"target <= 10 s: {'met' if cold <= 10 else 'MISSED'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
