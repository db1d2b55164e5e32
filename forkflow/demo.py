"""`forkflow demo`: a sample upstream and fork (a small Python + C++ project), then the main job:
init, status, plan and ingest --land, with what happened explained.

The sample has upstream commits of every kind ingestion meets: clean ones, one that conflicts
with a fork patch (and one that depends on it), a trivial conflict (both sides added includes),
a change the fork already made, a revert pair, a pin update, and one that breaks the fork's tests.
"""
from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from forkflow.conflicts import approval
from forkflow.conflicts import records as crecords
from forkflow.context import open_context
from forkflow import wiring
from forkflow.errors import UserError
from forkflow.git.run import run_git
from forkflow.init import init_fork
from forkflow.landing.ingest import IngestOptions, Mode
from forkflow.landing.wired import ingest
from forkflow.landing.plan import make_plan, resolve_until
from forkflow.landing.settings import ingest_settings
from forkflow.ledger.history import record_snapshot
from forkflow.ledger.report import headline_of, snapshot_of, stored_conflicts
from forkflow.render import (
    conflict_owners,
    exit_code,
    render_conflicts,
    render_exit,
    render_init,
    render_plan,
    render_report,
    render_status,
)
from forkflow.testing.gitrepo import ForkBuilder

OPS_PY = '''"""Elementwise ops of the mini compiler."""


def add(x, y):
    return [a + b for a, b in zip(x, y)]


def mul(x, y):
    return [a * b for a, b in zip(x, y)]


def scale(x, k):
    return [a * k for a in x]


def total(x):
    return sum(x)
'''

KERNELS_PY = '''"""Kernel launch logic."""


class Kernel:
    def __init__(self, name, num_warps=4):
        self.name = name
        self.num_warps = num_warps

    def grid(self, n, block=128):
        return (n + block - 1) // block

    def launch(self, n):
        blocks = self.grid(n)
        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps}
'''

OPS_H = '''#pragma once
#include <cstddef>
#include <cstdint>

namespace mini {
float dot(const float* a, const float* b, std::size_t n);
void axpy(float alpha, const float* x, float* y, std::size_t n);
}  // namespace mini
'''

OPS_CPP = '''#include "ops.h"

namespace mini {

float dot(const float* a, const float* b, std::size_t n) {
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy(float alpha, const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace mini
'''

TEST_OPS = '''import unittest

from mini import ops
from mini.kernels import Kernel


class OpsTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(ops.add([1, 2], [3, 4]), [4, 6])

    def test_scale(self):
        self.assertEqual(ops.scale([1, 2], 3), [3, 6])

    def test_launch(self):
        self.assertEqual(Kernel("k").launch(300)["blocks"], 3)


if __name__ == "__main__":
    unittest.main()
'''

FORK_TEST = '''import unittest

from mini import ops
from mini.kernels import Kernel


class ForkFeatureTest(unittest.TestCase):
    def test_warp_specialized_launch(self):
        k = Kernel("k", num_warps=8)
        self.assertTrue(k.launch(256)["warp_specialized"])

    def test_scaled_total(self):
        self.assertEqual(ops.total(ops.scale([1, 2, 3], 2)), 12)


if __name__ == "__main__":
    unittest.main()
'''


@dataclass(frozen=True, slots=True)
class Sample:
    root: Path
    fork: Path
    upstream: Path


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def build_sample(root: Path) -> Sample:
    """Write upstream/ and fork/ under root with the commits described in the module docstring."""
    b = ForkBuilder(root)
    files = {"README.md": "# mini\n\nA tiny kernel compiler.\n", "mini/__init__.py": "",
             "mini/ops.py": OPS_PY, "mini/kernels.py": KERNELS_PY, "csrc/ops.h": OPS_H,
             "csrc/ops.cpp": OPS_CPP, "tests/__init__.py": "", "tests/test_ops.py": TEST_OPS,
             "third_party/llvm-hash.txt": "1a2b3c4d\n"}
    b.upstream_commit(files, "Initial import of mini (#1)")
    b.tick(86400)
    b.branch_fork()
    kernels, ops_h, ops_py, readme = KERNELS_PY, OPS_H, OPS_PY, files["README.md"]
    # the fork's own patches
    fork_kernels = _edit(kernels, '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps}\n',
                         '        spec = self.num_warps >= 8  # fork: warp specialization\n'
                         '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps,\n'
                         '                "warp_specialized": spec}\n')
    b.fork_commit({"mini/kernels.py": fork_kernels, "tests/test_fork_feature.py": FORK_TEST},
                  "[fork] warp-specialized launches")
    fork_h = _edit(ops_h, "#include <cstdint>\n", "#include <cstdint>\n#include <vector>\n")
    b.fork_commit({"csrc/ops.h": fork_h}, "[fork] vector helpers need <vector>")
    fork_ops = _edit(ops_py, "def total(x):\n    return sum(x)\n",
                     "def total(x):\n    return sum(x)\n\n\ndef mean(x):\n    return total(x) / len(x)\n")
    b.fork_commit({"mini/ops.py": fork_ops}, "[fork] mean() for the fork's reductions")
    b.tick(86400)

    # upstream moves on
    up = b.upstream_commit
    ops_py = _edit(ops_py, "def total(x):", "def clamp(x, lo, hi):\n    return [min(max(a, lo), hi) for a in x]\n\n\ndef total(x):")
    up({"mini/ops.py": ops_py}, "[frontend] clamp() (#101)")
    readme += "\nSee docs/ for the language reference.\n"
    up({"README.md": readme}, "[docs] point at the reference (#102)")
    kernels2 = _edit(kernels, '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps}\n',
                     '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps,\n'
                     '                "stages": 2}\n')
    up({"mini/kernels.py": kernels2}, "[backend] software pipelining stages in launch (#103)")
    kernels3 = _edit(kernels2, '"stages": 2}', '"stages": 3}')
    up({"mini/kernels.py": kernels3}, "[backend] three pipeline stages (#104)")
    up_h = _edit(ops_h, "#include <cstdint>\n", "#include <cstdint>\n#include <algorithm>\n")
    up({"csrc/ops.h": up_h}, "[cpp] include <algorithm> for std::min (#105)")
    exp = up({"mini/experimental.py": "FLAG = True\n"}, "[frontend] experimental flag (#106)")
    b.revert_upstream(exp)
    cpp = _edit(OPS_CPP, "  float acc = 0.0f;", "  float acc = 0.0f;  // accumulate in fp32")
    fix = up({"csrc/ops.cpp": cpp}, "[cpp] document fp32 accumulation (#107)")
    del fix
    up({"third_party/llvm-hash.txt": "5e6f7a8b\n"}, "[build] bump LLVM to 5e6f7a8b (#108)")
    ops_py = _edit(ops_py, "def scale(x, k):\n    return [a * k for a in x]",
                   "def scale(k, x):\n    return [a * k for a in x]")
    up({"mini/ops.py": ops_py, "tests/test_ops.py": _edit(TEST_OPS, "ops.scale([1, 2], 3)", "ops.scale(3, [1, 2])")},
       "[frontend] scale(k, x): scalar first, like the C++ API (#109)")
    for i, (path, old, new, title) in enumerate([
        ("csrc/ops.cpp", "  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];",
         "  for (std::size_t i = 0; i < n; ++i) {\n    y[i] += alpha * x[i];\n  }", "[cpp] braces in axpy"),
        ("README.md", "A tiny kernel compiler.", "A tiny kernel compiler for GPUs.", "[docs] say GPUs"),
        ("mini/__init__.py", "", '__version__ = "0.2"\n', "[release] version 0.2"),
    ]):
        current = (b.upstream.path / path).read_text()
        up({path: current.replace(old, new, 1) if old else new}, f"{title} (#{110 + i})")
    # the fork already carries #107's change, made by hand together with its own note
    fork_cpp = _edit(OPS_CPP, "  float acc = 0.0f;", "  float acc = 0.0f;  // accumulate in fp32")
    fork_cpp = _edit(fork_cpp, "namespace mini {\n", "namespace mini {\n// fork: reviewed for the H100 port\n")
    b.fetch()
    b.fork_commit({"csrc/ops.cpp": fork_cpp}, "[fork] H100 port review notes")
    b.f.git("checkout", "-q", "--detach")  # forkflow moves `main` by compare-and-swap, never a work tree
    return Sample(root, b.f.path, b.upstream.path)


def demo_config(python: str) -> str:
    l1 = f"{shlex.quote(python)} -m unittest discover -s tests -q"
    return f"""
[ingest]
# L1: the project's unit tests, run in a temporary work tree for every landing unit.
l1_command = {json.dumps(l1)}
max_bundle = 50
pin_files = ["third_party/llvm-hash.txt"]

[[ingest.chain]]
name = "ops-api"
symbols = ["mini/ops.py::scale"]
owner = "@kernels-team"

[trust]
# the sample fork has no hand-resolved picks to backtest the resolvers on: trust them until their
# record here says otherwise (a real fork keeps the default: 95% over 10 cases, else a proposal)
min_cases = 0
"""


def _step(console: Console, title: str) -> None:
    console.rule(f"[bold]{escape(title)}")


def check_keep(keep: Path | None) -> None:
    """`--keep` must name a new or empty folder."""
    if keep is None or not keep.exists():
        return
    if not keep.is_dir():
        raise UserError(f"{keep} is a file, not a folder; pass a new folder to --keep")
    if any(keep.iterdir()):
        raise UserError(f"{keep} is not empty; pass a new folder to --keep")


def _commit_counts(sample: Sample) -> tuple[int, int]:
    """(fork commits, upstream commits) since the fork point."""
    out = run_git("rev-list", "--left-right", "--count", "main...upstream/main", cwd=sample.fork).split()
    return int(out[0]), int(out[1])


def run_demo(keep: Path | None, console: Console) -> int:
    """Generate the sample (in `keep`, or a temporary folder) and run the main job on it."""
    check_keep(keep)
    root = keep if keep is not None else Path(tempfile.mkdtemp(prefix="forkflow-demo-"))
    start = time.monotonic()
    try:
        _step(console, "1. a sample upstream and fork")
        sample = build_sample(root / "sample")
        console.print(f"upstream: {escape(str(sample.upstream))}\nfork:     {escape(str(sample.fork))}  "
                      "(fork branch: main)")
        ours, theirs = _commit_counts(sample)
        console.print(f"the fork carries {ours} patches of its own; upstream has {theirs} new commits since the "
                      "fork point")
        _step(console, "2. forkflow init --upstream upstream")
        render_init(console, init_fork(sample.fork, "upstream", "main", "main", None), None)
        with (sample.fork / "forkflow.toml").open("a", encoding="utf-8") as f:
            f.write(demo_config(sys.executable))
        console.print(escape("added an [ingest] section: L1 = the unit tests, a pin file, and a declared chain"))
        _step(console, "3. forkflow status")
        _status(console, sample.fork, commits=True)
        _step(console, "4. forkflow plan")
        _plan(console, sample.fork)
        _step(console, "5. forkflow ingest --land")
        _ingest(console, sample.fork, Mode.LAND)
        _step(console, "6. forkflow status, after")
        _status(console, sample.fork, commits=False)
        _step(console, "7. forkflow conflicts")
        _conflicts(console, sample.fork)
        _explain(console, sample, keep, time.monotonic() - start)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _status(console: Console, repo: Path, commits: bool) -> None:
    """What `forkflow status [--commits]` does: the ledger, its headline read by the fork's rule
    with the conflicts kept open, a history snapshot, the table.  Without the fork's rule and its
    conflicts the headline is read with defaults and says "open conflicts -" above a table of them."""
    ctx = open_context(repo, None)
    ledger = wiring.ledger(ctx)
    head = headline_of(ledger, ctx.config, conflicts=stored_conflicts(ctx.store, ctx.fork_id),
                       fork_point_date=ctx.repo.commit_date(ledger.fork_point))
    record_snapshot(ctx.store, ctx.fork_id, snapshot_of(ledger, datetime.now(timezone.utc), "status", head))
    render_status(console, ledger, commits, head=head)


def _plan(console: Console, repo: Path) -> None:
    ctx = open_context(repo, None)
    ledger = wiring.ledger(ctx)
    p = make_plan(ctx.repo, ctx.store, ledger, ingest_settings(ctx.config),
                  until=resolve_until(ctx.repo, ledger, None))
    render_plan(console, p, {e.commit.sha: e.commit.subject for e in ledger.entries})


def _ingest(console: Console, repo: Path, mode: Mode) -> None:
    ctx = open_context(repo, None)
    report = ingest(ctx, IngestOptions(mode, False, None, None, None))
    with ctx.store.session_scope() as s:
        open_conflicts = len(crecords.conflicts(s, ctx.fork_id, "open"))
    render_report(console, report)
    render_exit(console, exit_code(report, open_conflicts))


def _conflicts(console: Console, repo: Path) -> None:
    ctx = open_context(repo, None)
    with ctx.store.session_scope() as s:
        rows = crecords.conflicts(s, ctx.fork_id, "open")
        waiting = {x.id for x in rows if x.status == "open" and approval.proposal(s, ctx.fork_id, x) is not None}
    render_conflicts(console, rows, waiting, conflict_owners(ctx))


def _explain(console: Console, sample: Sample, keep: Path | None, took: float) -> None:
    console.rule("[bold]what happened")
    console.print(
        "- low-risk commits landed together in bundles whose messages list every upstream title and PR;\n"
        "- #103 changes the lines of the fork's warp-specialization patch: no resolver could settle it, so it\n"
        "  is DEFERRED with the conflict kept for a person, and #104 (same method) waits for it: its bundle\n"
        "  landed without it;\n"
        "- #105 and the fork both added an #include at the same place: resolved as a union of include lists;\n"
        "- #107 was already in the fork (made by hand): picking it changes nothing, so it is SKIPPED;\n"
        "- #106 and its revert cancel out upstream: SKIPPED;\n"
        "- #108 updates the pinned LLVM hash: its own chain, landed after L1;\n"
        "- #109 changes scale(), declared risky in chain ops-api: it breaks the fork's tests, so L1 failed\n"
        "  and it stays out, without blocking the units after it (out-of-order landing);\n"
        "- the ingestion point moved over every commit landed or decided; #103, #104 waiting for it and #109\n"
        "  are held by forkflow for a person, so days behind counts from #103 until someone settles it\n"
        "  (`forkflow conflicts resolve`) or decides it (`forkflow decide`).")
    console.print(f"done in {took:.1f}s")
    if keep is not None:
        console.print(f"explore it: cd {escape(str(sample.fork))} && forkflow status --commits && "
                      "forkflow conflicts && git log --oneline main")
    else:
        console.print("keep the result to explore it: forkflow demo --keep DIR")


def run_demo_on(repo: Path, console: Console) -> int:
    """Status, plan and a dry-run ingest of an existing fork: reads git, writes nothing to it."""
    _step(console, "forkflow status")
    _status(console, repo, commits=False)
    _step(console, "forkflow plan")
    _plan(console, repo)
    _step(console, "forkflow ingest --dry-run")
    _ingest(console, repo, Mode.DRY_RUN)
    return 0
