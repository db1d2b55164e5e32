"""L2 distributed training: FSDP2 (`fully_shard`) training of a small transformer LM for N steps.

Reports tokens/s, the loss trajectory and its drift against a recorded reference trajectory of
the same configuration (the model-quality drift signal).  gloo on CPU (2 ranks in CI), NCCL with
one rank per GPU.  The global batch is fixed and split across ranks, so any world size follows
the same loss trajectory (up to summation order).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from forkflow.errors import UserError
from forkflow.models import Better
from forkflow.workloads import ReportFormat, Tier, Workload
from forkflow.models import Metric
from forkflow.workloads.metrics import MetricsReport, with_context, write_metrics
from forkflow.workloads.transformer import build_block

WORKLOAD = Workload(
    name="fsdp2",
    tier=Tier.L2,
    module="fsdp2",
    report=ReportFormat.METRICS,
    description="FSDP2 fully_shard training of a small transformer: tokens/s, loss trajectory "
                "and drift against a recorded reference; gloo on CPU, NCCL on GPUs",
    summary="FSDP2 tokens/s, loss drift",
    needs_gpu=False,
    resources=(("cpus", 2), ("gpus", 0)),
    requires=("torch",),
    timeout="30m",
    paths=("python/**", "lib/**", "include/**", "third_party/**"),
    metrics=("fsdp2.*",),
)

REFERENCE = Path(__file__).with_name("fsdp2_reference.json")


@dataclass(frozen=True, slots=True)
class Preset:
    vocab: int
    d_model: int
    heads: int
    layers: int
    seq: int
    global_batch: int
    lr: float = 1e-3


PRESETS = {
    "tiny": Preset(vocab=256, d_model=64, heads=4, layers=2, seq=32, global_batch=8),
    "small": Preset(vocab=8192, d_model=1024, heads=16, layers=8, seq=1024, global_batch=32),
}


@dataclass(frozen=True, slots=True)
class RunConfig:
    preset: str
    backend: str   # gloo | nccl
    world: int
    steps: int
    warmup: int
    dtype: str     # fp32 | bf16 (parameters compute in it; reductions in fp32)

    @property
    def reference_key(self) -> str:
        # World size is left out on purpose: every world size must follow one trajectory.
        return f"{self.preset}/{self.backend}/{self.dtype}/{self.steps}"


def build_model(p: Preset) -> Any:
    import torch
    from torch import nn

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(p.vocab, p.d_model)
            self.blocks = nn.ModuleList(build_block(p.d_model, p.heads) for _ in range(p.layers))
            self.ln = nn.LayerNorm(p.d_model)
            self.head = nn.Linear(p.d_model, p.vocab, bias=False)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.emb(tokens)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))  # type: ignore[no-any-return, unused-ignore]

    return LM()


def batch(p: Preset, step: int, rank: int, world: int, device: str) -> tuple[Any, Any]:
    """This rank's share of step `step`'s global batch: a learnable next-token pattern."""
    import torch

    g = torch.Generator().manual_seed(10_000 + step)
    start = torch.randint(0, p.vocab, (p.global_batch, 1), generator=g)
    stride = torch.randint(1, 8, (p.global_batch, 1), generator=g)
    seq = (start + stride * torch.arange(p.seq + 1)) % p.vocab
    per = p.global_batch // world
    mine = seq[rank * per:(rank + 1) * per].to(device)
    return mine[:, :-1], mine[:, 1:]


def worker(rank: int, cfg: RunConfig, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    p = PRESETS[cfg.preset]
    device = f"cuda:{rank}" if cfg.backend == "nccl" else "cpu"
    if cfg.backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(cfg.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=cfg.world)
    try:
        torch.manual_seed(0)
        model = build_model(p).to(device)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if cfg.dtype == "bf16" else torch.float32,
                                  reduce_dtype=torch.float32)
        # an explicit mesh: without one, fully_shard puts gloo runs on CUDA when a GPU is present
        mesh = init_device_mesh("cuda" if cfg.backend == "nccl" else "cpu", (cfg.world,))
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        opt = torch.optim.AdamW(model.parameters(), lr=p.lr)
        losses, times = [], []
        for step in range(cfg.steps):
            x, y = batch(p, step, rank, cfg.world, device)
            if cfg.backend == "nccl":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, p.vocab), y.reshape(-1))
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            opt.zero_grad(set_to_none=True)
            mean = loss.detach().clone()
            dist.all_reduce(mean)  # also ends the step on every rank before the clock stops
            if cfg.backend == "nccl":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            losses.append(float(mean) / cfg.world)
        if rank == 0:
            Path(out).write_text(json.dumps({"losses": losses, "step_s": times}))
        # every rank reaches teardown together: a rank that destroys its group while the other
        # still talks aborts gloo ("terminate called without an active exception")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def train(cfg: RunConfig) -> dict[str, list[float]]:
    """Run `cfg.world` ranks (spawned processes) and return rank 0's losses and step times."""
    import torch.multiprocessing as mp

    if cfg.backend == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only: gloo picks another interface otherwise
    with tempfile.TemporaryDirectory(prefix="forkflow-fsdp2-") as tmp:
        out = str(Path(tmp) / "rank0.json")
        mp.spawn(worker, args=(cfg, free_port(), out), nprocs=cfg.world,  # type: ignore[attr-defined, no-untyped-call]
                 join=True)
        return json.loads(Path(out).read_text())  # type: ignore[no-any-return]


def drift(losses: list[float], reference: list[float]) -> float:
    """The largest |loss - reference| over the steps both have."""
    n = min(len(losses), len(reference))
    return max((abs(a - b) for a, b in zip(losses[:n], reference[:n])), default=0.0)


def load_reference(path: Path, key: str) -> list[float] | None:
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    entry = doc.get(key)
    return list(entry["losses"]) if entry else None


def record_reference(path: Path, cfg: RunConfig, losses: list[float], note: str) -> None:
    doc = json.loads(path.read_text()) if path.is_file() else {}
    doc[cfg.reference_key] = {"losses": losses, "recorded_with": note, "config": asdict(cfg)}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def metrics_of(cfg: RunConfig, res: dict[str, list[float]], ref: list[float] | None) -> list[Metric]:
    p = PRESETS[cfg.preset]
    losses, steps = res["losses"], res["step_s"][cfg.warmup:] or res["step_s"]
    tok = [p.global_batch * p.seq / s for s in steps]
    import statistics

    base = f"fsdp2.{cfg.preset}.{cfg.backend}{cfg.world}"
    out = [
        Metric(f"{base}.tokens_per_s", statistics.median(tok), "tokens/s", Better.HIGHER, tuple(tok)),
        Metric(f"{base}.step_ms", statistics.median(steps) * 1e3, "ms", Better.LOWER,
               tuple(s * 1e3 for s in steps)),
        Metric(f"{base}.final_loss", losses[-1], "nats", Better.LOWER, tuple(losses)),
    ]
    if ref is not None:
        out.append(Metric(f"{base}.loss_drift", drift(losses, ref), "nats", Better.LOWER))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m forkflow.workloads.fsdp2",
                                 description="FSDP2 training: tokens/s, losses, drift vs a reference.")
    ap.add_argument("--report", type=Path)
    ap.add_argument("--preset", choices=sorted(PRESETS), default=None,
                    help="model size (default: small on GPUs, tiny on CPU)")
    ap.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    ap.add_argument("--world", type=int, default=None, help="ranks (default: GPUs, or 2 on CPU)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    ap.add_argument("--record-reference", action="store_true",
                    help="store this run's losses as the reference of its configuration")
    args = ap.parse_args(argv)
    cfg_or_err = make_config(args)
    if isinstance(cfg_or_err, str):
        print(f"error: {cfg_or_err}", file=sys.stderr)
        return 2
    cfg = cfg_or_err
    print(f"fsdp2: {cfg.preset} model, {cfg.backend} x{cfg.world}, {cfg.steps} steps, {cfg.dtype}",
          flush=True)
    res = train(cfg)
    if args.record_reference:
        import torch

        record_reference(args.reference, cfg, res["losses"], f"torch {torch.__version__}")
        print(f"recorded reference {cfg.reference_key} in {args.reference}")
    ref = load_reference(args.reference, cfg.reference_key)
    from forkflow.workloads.device import environment

    ms = list(with_context(metrics_of(cfg, res, ref), environment()))
    for m in ms:
        print(f"{m.name:40} {m.value:14.6g} {m.unit}")
    print("losses: " + " ".join(f"{x:.6f}" for x in res["losses"]))
    if ref is None:
        print(f"no reference trajectory for {cfg.reference_key} in {args.reference}; "
              "loss_drift not reported (record one with --record-reference)")
    if args.report:
        write_metrics(args.report, MetricsReport(tuple(ms), info={"config": asdict(cfg)}))
        print(f"report: {args.report}")
    return 0


def make_config(args: argparse.Namespace) -> RunConfig | str:
    """The run's configuration, or why it cannot run here."""
    from forkflow.workloads.device import require_packages

    if args.world is not None and args.world < 1:  # 0 once meant "the default" and was ignored
        return f"--world must be at least 1, not {args.world}"
    try:
        require_packages(WORKLOAD.requires, "the fsdp2 workload")
    except UserError as e:
        return str(e)
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = args.backend if args.backend != "auto" else ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        return "--backend nccl needs CUDA GPUs and there are none here; use --backend gloo"
    world = args.world if args.world is not None else (gpus if backend == "nccl" else 2)
    if backend == "nccl" and world > gpus:
        return f"--world {world} but only {gpus} GPU(s) here; NCCL runs one rank per GPU"
    preset = args.preset or ("small" if backend == "nccl" else "tiny")
    p = PRESETS[preset]
    if p.global_batch % world:
        return f"--world {world} must divide the global batch of {p.global_batch}"
    if args.steps < 1:
        return "--steps must be at least 1"
    return RunConfig(preset, backend, world, args.steps, warmup=min(3, args.steps - 1),
                     dtype="bf16" if backend == "nccl" else "fp32")


if __name__ == "__main__":
    sys.exit(main())
