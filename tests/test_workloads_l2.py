"""L2 workloads on CPU: the GPU-only sweep skips clearly, FSDP2 trains on gloo, compile time runs.

Needs torch (the `test` extra installs the CPU build); skipped where it is missing.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forkflow.workloads import fsdp2

HAS_GPU = bool(torch.cuda.is_available())


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path")
def test_gpu_only_sweep_skips_with_a_clear_message(tmp_path: Path) -> None:
    report = tmp_path / "s.json"
    p = _run("forkflow.workloads.matmul_sweep", "--report", str(report))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ("matmul-sweep skipped: no CUDA GPU here (torch.cuda.is_available() "
                                "is False); run it on a machine with an NVIDIA GPU")
    assert json.loads(report.read_text()) == {"metrics": [], "skipped": p.stdout.strip()}


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path")
def test_gpu_backends_without_gpu_are_refused(tmp_path: Path) -> None:
    p = _run("forkflow.workloads.fsdp2", "--backend", "nccl", "--report", str(tmp_path / "f.json"))
    assert p.returncode == 2
    assert p.stderr.strip() == ("error: --backend nccl needs CUDA GPUs and there are none here; "
                                "use --backend gloo")
    p = _run("forkflow.workloads.compile_time", "--device", "cuda")
    assert p.returncode == 2 and "no CUDA GPU here" in p.stderr
    assert not (tmp_path / "f.json").exists()


def test_sweep_bad_arguments_are_user_errors() -> None:
    p = _run("forkflow.workloads.matmul_sweep", "--dtypes", "fp4")
    assert p.returncode == 2 and "unknown dtype 'fp4'" in p.stderr
    p = _run("forkflow.workloads.matmul_sweep", "--shapes", "8192x8192")
    assert p.returncode == 2 and "bad shape '8192x8192'" in p.stderr


def test_fsdp2_world_must_divide_the_batch() -> None:
    p = _run("forkflow.workloads.fsdp2", "--backend", "gloo", "--world", "3")
    assert p.returncode == 2 and "--world 3 must divide the global batch of 8" in p.stderr


@pytest.mark.parametrize("world", ["0", "-3"])
def test_fsdp2_world_below_one_is_refused(world: str, tmp_path: Path) -> None:
    p = _run("forkflow.workloads.fsdp2", "--backend", "gloo", "--world", world, "--report", str(tmp_path / "f.json"))
    assert p.returncode == 2 and p.stderr.strip() == f"error: --world must be at least 1, not {world}"
    assert not (tmp_path / "f.json").exists()


def test_drift_is_the_largest_step_difference() -> None:
    assert fsdp2.drift([1.0, 2.0, 3.0], [1.0, 2.5, 2.9]) == pytest.approx(0.5)
    assert fsdp2.drift([1.0], [1.0, 7.0]) == 0.0
    assert fsdp2.drift([], [1.0]) == 0.0


@pytest.mark.slow
def test_fsdp2_two_gloo_ranks_follow_one_process_and_the_reference(tmp_path: Path) -> None:
    report = tmp_path / "f.json"
    p = _run("forkflow.workloads.fsdp2", "--backend", "gloo", "--world", "2", "--report", str(report))
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(report.read_text())
    m = {x["name"]: x for x in doc["metrics"]}
    assert set(m) == {f"fsdp2.tiny.gloo2.{k}" for k in ("tokens_per_s", "step_ms", "final_loss",
                                                         "loss_drift")}
    losses = m["fsdp2.tiny.gloo2.final_loss"]["samples"]
    assert len(losses) == 20 and losses[-1] < losses[0]  # it learns
    assert m["fsdp2.tiny.gloo2.tokens_per_s"]["value"] > 0
    assert m["fsdp2.tiny.gloo2.loss_drift"]["value"] < 1e-4  # against the recorded trajectory
    one = fsdp2.train(fsdp2.RunConfig("tiny", "gloo", 1, 8, 3, "fp32"))
    assert len(one["losses"]) == 8
    assert fsdp2.drift(one["losses"], losses) < 1e-5  # sharding over 2 ranks changes nothing


def test_fsdp2_records_and_reads_a_reference(tmp_path: Path) -> None:
    cfg = fsdp2.RunConfig("tiny", "gloo", 2, 3, 1, "fp32")
    ref = tmp_path / "ref.json"
    assert fsdp2.load_reference(ref, cfg.reference_key) is None
    fsdp2.record_reference(ref, cfg, [3.0, 2.0, 1.0], "test")
    assert fsdp2.load_reference(ref, "tiny/gloo/fp32/3") == [3.0, 2.0, 1.0]
    ms = fsdp2.metrics_of(cfg, {"losses": [3.0, 2.5, 1.0], "step_s": [1.0, 0.5, 0.25]},
                          [3.0, 2.0, 1.0])
    by = {m.name: m for m in ms}
    assert by["fsdp2.tiny.gloo2.loss_drift"].value == 0.5
    assert by["fsdp2.tiny.gloo2.tokens_per_s"].samples == (8 * 32 / 0.5, 8 * 32 / 0.25)


@pytest.mark.slow
def test_compile_time_cold_and_warm(tmp_path: Path) -> None:
    report = tmp_path / "c.json"
    p = _run("forkflow.workloads.compile_time", "--size", "tiny", "--repeats", "1",
             "--report", str(report), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    m = {x["name"]: x for x in json.loads(report.read_text())["metrics"]}
    cold, warm = m["compile.tiny.cold_s"]["value"], m["compile.tiny.warm_s"]["value"]
    assert cold > 0 and warm > 0
    assert warm < cold  # the caches the cold run filled are used


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_sweep_on_a_gpu_reports_tflops_and_out_of_memory(tmp_path: Path) -> None:
    report = tmp_path / "s.json"
    p = _run("forkflow.workloads.matmul_sweep", "--shapes", "1024x1024x1024,400000x400000x400000",
             "--repeats", "6", "--report", str(report))
    assert p.returncode == 1  # the shape that does not fit is an error, reported as such
    doc = json.loads(report.read_text())
    names = [m["name"] for m in doc["metrics"]]
    assert "matmul.bf16.1024x1024x1024.tflops" in names
    # Triton over cuBLAS: one ratio per paired sample, declared paired so bisect judges it per sample
    by = {m["name"]: m for m in doc["metrics"]}
    ratio = by["matmul.bf16.1024x1024x1024.vs_cublas"]
    assert len(ratio["samples"]) == 6 and ratio["context"]["samples"] == "paired"
    assert "samples" not in by["matmul.bf16.1024x1024x1024.tflops"]["context"]
    assert doc["errors"][0].startswith("out of memory: 400000x400000x400000 bf16 needs")
