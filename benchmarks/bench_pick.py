"""In-memory picking against `git cherry-pick` in a work tree, on the same commits, in one run.

    python benchmarks/bench_pick.py                     # Triton-sized: 3,000 files, 250 picks
    python benchmarks/bench_pick.py --files 20000 --picks 500
    python benchmarks/bench_pick.py --real PATH   # PATH: a local clone of fbtriton (a real fork)

Both sides pick the same upstream commits, one by one in upstream order, onto the same fork tip,
and write one commit per pick.  The clean picks must give identical trees.  Baselines:
`git cherry-pick <sha>` once per commit (how a landing loop picks unit by unit) and one
`git cherry-pick A B C ...` sequence (git's own sequencer, a single process).

`--real PATH` replays the newest `--commits` (250) first-parent commits of `--ref` (main) of a real
repository, such as Meta's fbtriton fork of Triton: each commit is picked onto the previous pick,
starting from the first one's mainline parent (merges against their mainline, `-m 1`), in memory
and with `git cherry-pick` in a work tree, each side in its own local `git clone --no-checkout` of
PATH in a temporary folder.  The clean picks must give identical trees on both sides (and, as the
replay starts from the real parent, the trees of the original commits).
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

from forkflow.git.pick import MemoryPicker, PickStatus  # noqa: E402
from forkflow.models import Sha  # noqa: E402
from forkflow.testing.synth import FastImport  # noqa: E402

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


def generate(repo: Path, files: int, picks: int, fork_patches: int = 30, seed: int = 3,
             funcs: int = 20) -> None:
    """A fork (branch main) and upstream (refs/remotes/upstream/main) of Python and C++ files."""
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    names = [f"{'python/triton' if i % 2 else 'lib/Dialect'}/d{i % 40}/f{i}.{'py' if i % 2 else 'cpp'}"
             for i in range(files)]
    content = {n: (_py_file(i, funcs) if n.endswith(".py") else _cpp_file(i, funcs)) for i, n in enumerate(names)}
    imp = FastImport(repo)
    base = imp.commit("refs/heads/main", None, "Initial import\n",
                      {n: ("\n".join(v) + "\n").encode() for n, v in content.items()})
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
            changed[n] = ("\n".join(lines) + "\n").encode()
        up = imp.commit("refs/remotes/upstream/main", up, f"[area] upstream change {k} (#{1000 + k})\n", changed)
    fork_files = {}
    for k in range(fork_patches):
        fork_files[f"fork/feature{k}.py"] = f"FEATURE_{k} = True\n".encode()
        fork = imp.commit("refs/heads/main", fork, f"[fork] feature {k}\n", dict(fork_files))
    imp.close()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=ENV).stdout


def forkflow_picks(repo: Path, tip: str, shas: list[str]) -> tuple[float, list[str]]:
    """`replay_in_memory` of the synthetic picks, which must all apply cleanly."""
    took, trees = replay_in_memory(repo, tip, shas)
    clean = [t for t in trees if t is not None]
    if len(clean) != len(shas):
        raise SystemExit(f"{shas[trees.index(None)]} did not apply cleanly: conflict")
    return took, clean


def written_by_git_view(repo: Path, base: str, last: str, n: int) -> None:
    """git (another process) sees every commit forkflow wrote, each with its tree."""
    count = int(git(repo, "rev-list", "--count", f"{base}..{last}"))
    trees = git(repo, "log", "--format=%T", f"{base}..{last}").split()
    listed = git(repo, "ls-tree", "-r", "-t", "--name-only", last)  # reads every tree of the last commit
    if count != n or len(trees) != n or not listed:
        raise SystemExit(f"git sees {count} of the {n} commits forkflow wrote")


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


def replay_in_memory(repo: Path, base: str, shas: list[str]) -> tuple[float, list[str | None]]:
    """Pick each commit onto the previous pick in memory, one commit written per pick; None = conflict."""
    picker = MemoryPicker(repo, batch_writes=True)  # as `forkflow ingest` picks
    t0 = time.perf_counter()
    tree = picker.commit_tree(base)
    parent = Sha(base)
    trees: list[str | None] = []
    for sha in shas:
        step = picker.pick(tree, Sha(sha))
        if step.status is PickStatus.CONFLICT:
            trees.append(None)
            continue
        tree = step.tree
        raw, enc = picker.raw_message(sha)
        parent = picker.write_commit(tree, parent, raw + f"\nUpstream-Commit: {sha}\n".encode(),
                                     picker.author(sha), enc)
        trees.append(tree)
    picker.flush()  # every commit in the repository, as one pack
    took = time.perf_counter() - t0
    written_by_git_view(repo, base, parent, sum(t is not None for t in trees))
    return took, trees


def replay_cherry_pick(repo: Path, base: str, shas: list[str], merges: set[str],
                       wt: Path) -> tuple[float, float, list[str | None]]:
    """`git cherry-pick` of each commit in a work tree (aborted on conflict); (setup, time, trees)."""
    t0 = time.perf_counter()
    git(repo, "worktree", "add", "--detach", "-q", str(wt), base)
    setup = time.perf_counter() - t0
    clean: list[bool] = []
    t0 = time.perf_counter()
    for sha in shas:
        mainline = ["-m", "1"] if sha in merges else []
        r = subprocess.run(["git", "cherry-pick", "-x", "--allow-empty", "--keep-redundant-commits", *mainline,
                            sha], cwd=wt, capture_output=True, env=ENV)
        if r.returncode != 0:
            subprocess.run(["git", "cherry-pick", "--abort"], cwd=wt, capture_output=True, env=ENV)
        clean.append(r.returncode == 0)
    took = time.perf_counter() - t0
    done = git(wt, "log", "--reverse", "--format=%T", f"-{sum(clean)}", "HEAD").split() if any(clean) else []
    it = iter(done)
    git(repo, "worktree", "remove", "--force", str(wt))
    return setup, took, [next(it) if ok else None for ok in clean]


def replay_window(repo: Path, ref: str, n: int) -> tuple[str, list[str], int]:
    """(base, the n first-parent commits after it, newer commits passed over): the newest window
    whose trees hold no blob this copy lacks (a mirror may leave out its largest files, and git
    cannot write a tree that names an absent blob)."""
    missing = {line[1:] for line in git(repo, "rev-list", "--objects", "--missing=print", ref).split()
               if line.startswith("?")}
    log = git(repo, "log", "--first-parent", "--reverse", "--raw", "--no-abbrev", "--no-renames", "--root",
              "--diff-merges=first-parent", "--format=C %H", ref)
    chain: list[str] = []
    clean: list[bool] = []
    held: dict[str, str] = {}  # path -> absent blob in the current tree
    for line in log.splitlines():
        if line.startswith("C "):
            if chain:
                clean.append(not held)
            chain.append(line[2:])
        elif line.startswith(":"):
            meta, path = line.split("\t", 1)
            new = meta.split()[3]
            if new in missing:
                held[path] = new
            else:
                held.pop(path, None)
    clean.append(not held)
    run, end = 0, -1
    for i, ok in enumerate(clean):
        run = run + 1 if ok else 0
        if run >= n + 1:
            end = i
    if end < 0:
        raise SystemExit(f"no {n + 1} consecutive first-parent commits of {ref} have complete trees here")
    window = chain[end - n:end + 1]
    return window[0], window[1:], len(chain) - 1 - end


def real(args: argparse.Namespace) -> None:
    src = args.real.resolve()
    root = args.keep or Path(tempfile.mkdtemp(prefix="forkflow-bench-pick-real-"))
    try:
        t0 = time.perf_counter()
        clones = [root / "forkflow", root / "cherry-pick"]
        for clone in clones:
            subprocess.run(["git", "clone", "-q", "--no-checkout", "--single-branch", "--branch", args.ref,
                            str(src), str(clone)], check=True)
        print(f"cloned {src} ({args.ref}) twice in {time.perf_counter() - t0:.1f}s")
        repo = clones[0]
        base, shas, passed_over = replay_window(repo, args.ref, args.commits)
        merges = set(git(repo, "rev-list", "--first-parent", "--merges", f"{base}..{shas[-1]}").split())
        originals = git(repo, "log", "--first-parent", "--reverse", "--format=%T", f"{base}..{shas[-1]}").split()
        files = len(git(repo, "ls-tree", "-r", "--name-only", shas[-1]).splitlines())
        os.sync()
        ff_time, ff_trees = replay_in_memory(repo, base, shas)
        os.sync()
        setup, cp_time, cp_trees = replay_cherry_pick(clones[1], base, shas, merges, root / "wt")
        both_clean = [(a, b, o) for a, b, o in zip(ff_trees, cp_trees, originals) if a is not None and b is not None]
        same = sum(a == b for a, b, _ in both_clean)
        as_original = sum(a == b == o for a, b, o in both_clean)
        n = len(shas)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{git(repo, 'version').strip()}; load average {os.getloadavg()[0]:.2f}")
        print(f"replayed {n} first-parent commits of {args.ref} ({shas[0][:12]}..{shas[-1][:12]}, {len(merges)} "
              f"merges, {files} files) onto {base[:12]}")
        if passed_over:
            print(f"(passed over the newest {passed_over} first-parent commits: their trees hold blobs this "
                  "copy lacks, which no side could check out or write)")
        print(f"clean picks: forkflow {sum(t is not None for t in ff_trees)}/{n}, git {sum(t is not None for t in cp_trees)}"
              f"/{n}; identical trees: {same}/{len(both_clean)}; equal to the original commits' trees: "
              f"{as_original}/{len(both_clean)}")
        print(f"forkflow in memory:          {ff_time:8.3f}s  ({n / ff_time:8.1f} commits/s, "
              f"{1000 * ff_time / n:6.2f} ms/pick)")
        print(f"git cherry-pick, per commit: {cp_time:8.3f}s  ({n / cp_time:8.1f} commits/s, "
              f"{1000 * cp_time / n:6.2f} ms/pick)  + {setup:.2f}s work tree checkout")
        print(f"speedup vs per-commit cherry-pick: {cp_time / ff_time:6.1f}x")
        if same != len(both_clean) or not both_clean:
            raise SystemExit("trees differ")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--picks", type=int, default=250)
    ap.add_argument("--keep", type=Path, help="generate (or clone) into this folder and keep it")
    ap.add_argument("--real", type=Path, metavar="PATH", help="replay commits of this git repository instead")
    ap.add_argument("--ref", default="main", help="with --real: the branch to replay (default main)")
    ap.add_argument("--commits", type=int, default=250, help="with --real: how many first-parent commits")
    args = ap.parse_args()
    if args.real is not None:
        real(args)
        return
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
