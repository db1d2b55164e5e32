"""`forkflow status` against `git cherry` on the same generated fork, cold and warm, with peak memory.

    python benchmarks/bench_status.py                       # Triton-sized: 2,000 upstream, 2,500 fork
    python benchmarks/bench_status.py --upstream 100000 --fork 5000 --files 20000   # LLVM-sized

Cold: a fresh store (no cache).  Warm: the same command again (ledger cached by commit SHAs).
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

from forkflow.testing.synth import SynthSpec, generate


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MiB, stdout of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = b"", b""
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {err.decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024.0, out.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--upstream", type=int, default=2000)
    ap.add_argument("--fork", type=int, default=2500)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--history", type=int, default=500)
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="ff-bench-status-"))
    repo = root / "fork"
    if not repo.exists():
        t0 = time.perf_counter()
        generate(repo, SynthSpec(base_files=args.files, history_before_fork=args.history,
                                 upstream_commits=args.upstream, fork_commits=args.fork))
        print(f"generated {args.upstream} upstream + {args.fork} fork commits, {args.files} files "
              f"in {time.perf_counter() - t0:.1f}s at {repo}")
    shutil.rmtree(repo / ".git" / "forkflow", ignore_errors=True)
    exe = str(Path(sys.executable).parent / "forkflow")
    cherry_s, cherry_mb, cherry_out = timed(["git", "cherry", "upstream/main", "main"], repo)
    cold_s, cold_mb, out = timed([exe, "status", "--json"], repo)
    warm_s, warm_mb, _ = timed([exe, "status", "--json"], repo)
    doc = json.loads(out)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"ledger: {doc['upstream_commits']} upstream commits, counts {doc['counts']}, "
          f"days behind {doc['days_behind']}, backlog {doc['backlog_commits']}")
    print(f"git cherry upstream/main main : {cherry_s:7.2f} s  {cherry_mb:7.0f} MiB "
          f"({sum(1 for l in cherry_out.splitlines() if l.startswith('-'))} picks found by patch-id)")
    print(f"forkflow status (cold)        : {cold_s:7.2f} s  {cold_mb:7.0f} MiB  "
          f"ratio to git cherry {cold_s / cherry_s:.2f}x")
    print(f"forkflow status (warm)        : {warm_s:7.2f} s  {warm_mb:7.0f} MiB  "
          f"ratio to git cherry {warm_s / cherry_s:.2f}x")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
