"""In-memory picking against `git cherry-pick` in a work tree, on the same commits, in one run.

    python benchmarks/bench_pick.py                     # Triton-sized: 3,000 files, 250 picks
    python benchmarks/bench_pick.py --files 20000 --picks 500

Both sides pick the same upstream commits, one by one in upstream order, onto the same fork tip,
and write one commit per pick.  The clean picks must give identical trees.  Baselines:
`git cherry-pick <sha>` once per commit (how a landing loop picks unit by unit) and one
`git cherry-pick A B C ...` sequence (git's own sequencer, a single process).
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forkflow.landing.pick import MemoryPicker, PickStatus  # noqa: E402
from forkflow.models import Sha  # noqa: E402

ENV = dict(os.environ, GIT_AUTHOR_NAME="Dev", GIT_AUTHOR_EMAIL="dev@example.com", GIT_COMMITTER_NAME="Dev",
           GIT_COMMITTER_EMAIL="dev@example.com", GIT_AUTHOR_DATE="1700000000 +0000",
           GIT_COMMITTER_DATE="1700000000 +0000", LC_ALL="C")


def _py_file(i: int, funcs: int) -> list[str]:
    lines = [f'"""Module {i}."""', ""]
    for f in range(funcs):
        lines += ["", f"def func_{i}_{f}(x, y):", f"    a = x + {f}", f"    b = y * {f}", "    return a + b", ""]
    return lines


def _cpp_file(i: int, funcs: int) -> list[str]:
    lines = ["#include <cstdint>", "", "namespace mini {"]
    for f in range(funcs):
        lines += ["", f"int func_{i}_{f}(int x, int y) {{", f"  int a = x + {f};", f"  int b = y * {f};",
                  "  return a + b;", "}"]
    return lines + ["", "}  // namespace mini"]


class FastImport:
    """Commits written by one `git fast-import` process."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=repo, stdin=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.out = self.proc.stdin
        self.mark = 0
        self.clock = 1_600_000_000

    def commit(self, ref: str, parent: int | None, msg: str, files: dict[str, str]) -> int:
        self.mark += 1
        self.clock += 600
        who = f"Dev <dev@example.com> {self.clock} +0000\n".encode()
        data = msg.encode()
        buf = [f"commit {ref}\nmark :{self.mark}\n".encode(), b"author " + who, b"committer " + who,
               b"data %d\n" % len(data), data, b"\n"]
        if parent is not None:
            buf.append(f"from :{parent}\n".encode())
        for name, text in files.items():
            payload = text.encode()
            buf.append(f"M 100644 inline {name}\ndata {len(payload)}\n".encode() + payload + b"\n")
        self.out.write(b"".join(buf) + b"\n")
        return self.mark

    def close(self) -> None:
        self.out.write(b"done\n")
        self.out.close()
        if self.proc.wait() != 0:
            raise SystemExit("git fast-import failed")


def generate(repo: Path, files: int, picks: int, fork_patches: int = 30, seed: int = 3,
             funcs: int = 20) -> None:
    """A fork (branch main) and upstream (refs/remotes/upstream/main) of Python and C++ files."""
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    names = [f"{'python/triton' if i % 2 else 'lib/Dialect'}/d{i % 40}/f{i}.{'py' if i % 2 else 'cpp'}"
             for i in range(files)]
    content = {n: (_py_file(i, funcs) if n.endswith(".py") else _cpp_file(i, funcs)) for i, n in enumerate(names)}
    imp = FastImport(repo)
    base = imp.commit("refs/heads/main", None, "Initial import\n", {n: "\n".join(v) + "\n" for n, v in content.items()})
    up, fork = base, base
    upstream_state = {n: list(v) for n, v in content.items()}
    for k in range(picks):
        changed = {}
        for n in rng.sample(names, rng.choice((1, 1, 2, 3))):
            lines = upstream_state[n]
            targets = [j for j, line in enumerate(lines) if "a = x +" in line]
            j = rng.choice(targets)
            lines[j] = lines[j].rstrip(";") + (f" + {k}" if n.endswith(".py") else f" + {k};")
            lines[j] = lines[j].replace("; +", " +")
            changed[n] = "\n".join(lines) + "\n"
        up = imp.commit("refs/remotes/upstream/main", up, f"[area] upstream change {k} (#{1000 + k})\n", changed)
    fork_files = {}
    for k in range(fork_patches):
        fork_files[f"fork/feature{k}.py"] = f"FEATURE_{k} = True\n"
        fork = imp.commit("refs/heads/main", fork, f"[fork] feature {k}\n", dict(fork_files))
    imp.close()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=ENV).stdout


def forkflow_picks(repo: Path, tip: str, shas: list[str]) -> tuple[float, list[str]]:
    picker = MemoryPicker(repo)
    t0 = time.perf_counter()
    tree = picker.commit_tree(tip)
    parent = Sha(tip)
    trees = []
    for sha in shas:
        step = picker.pick(tree, Sha(sha))
        if step.status is not PickStatus.APPLIED:
            raise SystemExit(f"{sha} did not apply cleanly: {step.status}")
        tree = step.tree
        raw, enc = picker.raw_message(sha)
        parent = picker.write_commit(tree, parent, raw + f"\nUpstream-Commit: {sha}\n".encode(),
                                     picker.author(sha), enc)
        trees.append(tree)
    return time.perf_counter() - t0, trees


def cherry_pick_each(repo: Path, tip: str, shas: list[str], wt: Path) -> tuple[float, float, list[str]]:
    t0 = time.perf_counter()
    git(repo, "worktree", "add", "--detach", "-q", str(wt), tip)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    for sha in shas:
        subprocess.run(["git", "cherry-pick", "-x", sha], cwd=wt, check=True, capture_output=True, env=ENV)
    took = time.perf_counter() - t0
    trees = git(wt, "log", "--reverse", "--format=%T", f"-{len(shas)}", "HEAD").split()
    git(repo, "worktree", "remove", "--force", str(wt))
    return setup, took, trees


def cherry_pick_sequence(repo: Path, tip: str, shas: list[str], wt: Path) -> tuple[float, list[str]]:
    git(repo, "worktree", "add", "--detach", "-q", str(wt), tip)
    t0 = time.perf_counter()
    subprocess.run(["git", "cherry-pick", "-x", *shas], cwd=wt, check=True, capture_output=True, env=ENV)
    took = time.perf_counter() - t0
    trees = git(wt, "log", "--reverse", "--format=%T", f"-{len(shas)}", "HEAD").split()
    git(repo, "worktree", "remove", "--force", str(wt))
    return took, trees


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--picks", type=int, default=250)
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="forkflow-bench-pick-"))
    try:
        t0 = time.perf_counter()
        # three identical repositories (same SHAs), so that no side finds objects the other wrote
        repos = [root / name for name in ("forkflow", "each", "sequence")]
        for repo in repos:
            generate(repo, args.files, args.picks)
        print(f"generated 3 x ({args.files} files, {args.picks} upstream commits) in "
              f"{time.perf_counter() - t0:.1f}s")
        tip = git(repos[0], "rev-parse", "main").strip()
        shas = git(repos[0], "rev-list", "--reverse", "main..upstream/main").split()
        assert all(git(r, "rev-parse", "main").strip() == tip for r in repos)
        os.sync()  # no side pays for the generator's write-back
        ff_time, ff_trees = forkflow_picks(repos[0], tip, shas)
        os.sync()
        setup, each_time, each_trees = cherry_pick_each(repos[1], tip, shas, root / "wt1")
        os.sync()
        seq_time, seq_trees = cherry_pick_sequence(repos[2], tip, shas, root / "wt2")
        same = sum(a == b == c for a, b, c in zip(ff_trees, each_trees, seq_trees))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{git(repos[0], 'version').strip()}")
        print(f"picks: {len(shas)}; identical trees: {same}/{len(shas)}")
        print(f"forkflow in memory:          {ff_time:8.3f}s  ({1000 * ff_time / len(shas):6.2f} ms/pick)")
        print(f"git cherry-pick, per commit: {each_time:8.3f}s  ({1000 * each_time / len(shas):6.2f} ms/pick)"
              f"  + {setup:.2f}s work tree checkout")
        print(f"git cherry-pick, one run:    {seq_time:8.3f}s  ({1000 * seq_time / len(shas):6.2f} ms/pick)")
        print(f"speedup vs per-commit cherry-pick: {each_time / ff_time:6.1f}x")
        print(f"speedup vs one cherry-pick run:    {seq_time / ff_time:6.1f}x")
        if same != len(shas):
            raise SystemExit("trees differ")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
