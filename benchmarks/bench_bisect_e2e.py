"""End to end on a GPU: a fork of a small Triton-kernel repository hides a slowdown in one
upstream commit inside a bundle; forkflow stores the L2 series, `detect` opens the alert and
`bisect --alert` names the upstream commit.

    python benchmarks/bench_bisect.py --triton-e2e /tmp/e2e
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CONFIGS_FAST = ('MATMUL = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)\n'
                'SOFTMAX = dict(num_warps=8)\n')
CONFIGS_SLOW = ('# retuned for small GPUs\n'
                'MATMUL = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=1)\n'
                'SOFTMAX = dict(num_warps=8)\n')

MATMUL = '''import torch
import triton
import triton.language as tl

from kernels.configs import MATMUL


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
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
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + scm * cm[:, None] + scn * cn[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    cfg = MATMUL
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                        BLOCK_K=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"], num_warps=cfg["num_warps"],
                        num_stages=cfg["num_stages"])
    return c
'''

SOFTMAX = '''import torch
import triton
import triton.language as tl

from kernels.configs import SOFTMAX


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


def softmax(x):
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1],
                                  BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=SOFTMAX["num_warps"])
    return out
'''

BENCH = '''"""L2 benchmark: prints (or writes to $FORKFLOW_METRICS_OUT) the metrics JSON."""
import json
import os
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels.matmul import matmul  # noqa: E402
from kernels.softmax import softmax  # noqa: E402


def cases():
    for n in (1024, 2048, 4096):
        a = torch.randn((n, n), device="cuda", dtype=torch.float16)
        b = torch.randn((n, n), device="cuda", dtype=torch.float16)
        yield f"matmul/{n}x{n}x{n}/ms", (lambda a=a, b=b: matmul(a, b)), (a, b)
    x = torch.randn((4096, 4096), device="cuda", dtype=torch.float32)
    yield "softmax/4096x4096/ms", (lambda x=x: softmax(x)), (x,)


def measure(only=None, samples=10, rep=20):
    out = []
    for name, fn, args in cases():
        if only and name != only:
            continue
        if name.startswith("matmul"):
            ref = args[0].float() @ args[1].float()
            assert torch.allclose(fn().float(), ref, atol=1.0, rtol=0.05), "matmul is wrong"
        vals = [float(triton.testing.do_bench(fn, warmup=5, rep=rep)) for _ in range(samples)]
        vals.sort()
        out.append({"name": name, "value": vals[len(vals) // 2], "unit": "ms", "better": "lower",
                    "samples": vals})
    return out


if __name__ == "__main__":
    doc = json.dumps({"metrics": measure(os.environ.get("FORKFLOW_METRIC") or None)})
    target = os.environ.get("FORKFLOW_METRICS_OUT")
    if target:
        open(target, "w").write(doc)
    else:
        print(doc)
'''

CULPRIT_AT = 47  # upstream commit index that slows matmul down


def build_fork(root: Path) -> tuple[Path, list[str], str]:
    """Upstream with 76 commits, a fork landing them as picks and bundles of 4 with trailers."""
    from forkflow.testing.gitrepo import ForkBuilder

    b = ForkBuilder(root / "repos")
    b.upstream_commit({"kernels/__init__.py": "", "kernels/configs.py": CONFIGS_FAST,
                       "kernels/matmul.py": MATMUL, "kernels/softmax.py": SOFTMAX, "bench.py": BENCH},
                      "Triton kernels and their benchmark (#1000)")
    b.branch_fork()
    b.fork_commit({"FORK.md": "fork notes\n"}, "fork: notes")
    ups = []
    for i in range(1, 77):
        files: dict[str, str | bytes | None] = {f"notes/{i:03d}.md": f"change {i}\n"}
        subject = f"docs: note {i} (#{1000 + i})"
        if i == CULPRIT_AT:
            files = {"kernels/configs.py": CONFIGS_SLOW}
            subject = f"matmul: retune block sizes for small GPUs (#{1000 + i})"
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
    return b.f.path, ups, ups[CULPRIT_AT - 1]


def forkflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # the CLI imports only the invoked command's group (init: ledger, detect and bisect: regress)
    cmd = [sys.executable, "-m", "forkflow", *args]
    print("$ forkflow " + " ".join(args), flush=True)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    print(p.stdout + p.stderr, flush=True)
    return p


def measure_series(fork: Path, trees: Path) -> list[tuple[str, int, list[dict[str, object]]]]:
    """Measure every fork commit in one process (the nightly L2 run over history)."""
    from forkflow.git.repo import Repo

    repo = Repo.open(fork)
    commits = repo.log("HEAD", first_parent=True)
    out = []
    for c in commits:
        tree = trees / c.sha[:12]
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", c.sha], cwd=fork, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        for name in [m for m in sys.modules if m == "bench" or m.startswith("kernels")]:
            del sys.modules[name]
        sys.path.insert(0, str(tree))
        bench = importlib.import_module("bench")
        sys.path.remove(str(tree))
        out.append((c.sha, c.date, bench.measure(samples=3, rep=15)))
    return out


def run_e2e(root: Path) -> None:
    t0 = time.time()
    root.mkdir(parents=True, exist_ok=True)
    fork, ups, culprit = build_fork(root)
    print(f"fork at {fork}; hidden slowdown: upstream {culprit[:12]} (upstream commit #{CULPRIT_AT})")
    print(subprocess.run(["git", "log", "--oneline", "--first-parent", "-8"], cwd=fork, capture_output=True,
                         text=True).stdout, flush=True)
    forkflow("init", "--upstream", "upstream", cwd=fork)
    series = measure_series(fork, root / "trees")
    print(f"measured {len(series)} fork commits x 4 metrics in {time.time() - t0:.0f} s", flush=True)
    from forkflow.context import open_context
    from forkflow.models import Better, MetricPoint, Sha
    from forkflow.store import queries

    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        queries.add_metric_points(s, ctx.fork_id, [
            MetricPoint(m["name"], Sha(sha), float(m["value"]), "ms", Better.LOWER,  # type: ignore[arg-type]
                        tuple(m["samples"]), suite="l2-kernels", commit_date=date)  # type: ignore[arg-type]
            for sha, date, metrics in series for m in metrics])
    for name in ("matmul/4096x4096x4096/ms", "softmax/4096x4096/ms"):
        vals = [next(float(m["value"]) for m in ms if m["name"] == name) for _, _, ms in series]  # type: ignore[arg-type]
        print(f"{name}: " + " ".join(f"{v:.3f}" for v in vals), flush=True)
    forkflow("detect", cwd=fork)
    alerts = json.loads(forkflow("detect", "--json", cwd=fork).stdout)["alerts"]
    regressions = [a for a in alerts if a["direction"] == "regression"]
    if not regressions:
        print("no regression alert")
        return
    a = regressions[0]
    p = forkflow("bisect", "--alert", str(a["id"]), "--command", f"{sys.executable} bench.py", "--json",
                 cwd=fork)
    doc = json.loads(p.stdout)
    named = (doc.get("culprit") or {}).get("upstream_commit")
    print(f"bisect --alert named upstream {str(named)[:12]}; hidden culprit {culprit[:12]}: "
          f"{'RIGHT' if named == culprit else 'WRONG'} ({time.time() - t0:.0f} s so far)", flush=True)
    if time.time() - t0 < 90:  # and over the whole history, when the budget allows
        first = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=fork, capture_output=True,
                               text=True).stdout.split()[0]
        p = forkflow("bisect", "--metric", "matmul/4096x4096x4096/ms", "--good", first, "--bad", "HEAD",
                     "--command", f"{sys.executable} bench.py", "--parallel", "4", cwd=fork)
    print(f"total {time.time() - t0:.0f} s", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "bisect_alert.json").write_text(json.dumps(doc, indent=1))
