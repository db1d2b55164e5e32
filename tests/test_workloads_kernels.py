"""The L1 pack on this machine: Triton kernels in the interpreter (or on a GPU), checked for real.

Needs torch and triton (the `test` extra installs CPU builds); skipped where they are missing.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("needs torch and triton (pip install 'forkflow[gpu]')", allow_module_level=True)

from forkflow.workloads.device import Backend, DeviceInfo, use_interpreter_without_gpu

# Before triton is first imported: triton.language's own @jit helpers (tl.max, tl.sum...) pick
# interpreter or compiler mode when triton loads.
use_interpreter_without_gpu()


from forkflow.workloads.junit import CaseOutcome
from forkflow.workloads.kernels import SPECS, Spec
from forkflow.workloads.l1 import run_check


@pytest.fixture(scope="module")
def kernels() -> Any:
    """The kernel modules (under TRITON_INTERPRET=1 when there is no GPU) and the device."""
    from forkflow.workloads.device import detect
    from forkflow.workloads.kernels import cases, matmul, softmax

    dev = detect()
    return dev, cases, matmul, softmax


def _junit(path: Path) -> list[tuple[str, str]]:
    out = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        kids = [k.tag for k in tc]
        out.append((tc.get("name") or "", kids[0] if kids else "passed"))
    return out


def test_whole_kernel_pack_passes_within_budget(tmp_path: Path) -> None:
    report = tmp_path / "kernels.xml"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "forkflow.workloads.kernels", "--report", str(report)],
                       capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - t0
    assert p.returncode == 0, p.stdout + p.stderr
    cases = _junit(report)
    assert [c[0] for c in cases] == [s.id for s in SPECS]
    assert all(outcome == "passed" for _, outcome in cases), cases
    assert "21 passed, 0 failed, 0 errors, 0 skipped in" in p.stdout
    assert wall < 300  # the whole pack on 2 CPU cores within 5 minutes


def test_only_selects_and_unknown_selection_is_refused(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "forkflow.workloads.kernels"]
    p = subprocess.run([*run, "--list", "-k", "rope*"], capture_output=True, text=True, check=False)
    assert p.stdout.split() == ["rope[fp32-2x16x4x64]", "rope[fp16-2x16x3x32]", "rope[bf16-2x16x4x64]"]
    p = subprocess.run([*run, "-k", "nope*"], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and "no check matches 'nope*'" in p.stderr


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # planted on purpose
def test_nan_in_an_output_fails_naming_where(kernels: Any) -> None:
    import torch

    dev, _, _, softmax = kernels
    x = torch.randn(6, 40)
    x[3, :] = float("-inf")  # a fully masked row: the kernel computes 0/0 there
    x = x.to(dev.torch_device)
    res = run_check("kernels.softmax", "softmax[masked-row]", "fp32", dev,
                    lambda: (softmax.softmax(x), torch.zeros(6, 40, dtype=torch.float64)))
    assert res.outcome is CaseOutcome.FAILED
    assert res.message.startswith("40 non-finite value(s) of 240 in the output: nan at [3, 0], "
                                  "nan at [3, 1], nan at [3, 2] (first 3)")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # planted on purpose
def test_infinity_in_an_output_fails_naming_where(kernels: Any) -> None:
    import torch

    dev, _, matmul, _ = kernels
    a = torch.ones(32, 32) * 3e38
    a[:5] = 1.0
    b = torch.ones(32, 32)
    a, b = a.to(dev.torch_device), b.to(dev.torch_device)
    res = run_check("kernels.matmul", "matmul[overflow]", "fp32", dev,
                    lambda: (matmul.matmul(a, b), a.cpu().double() @ b.cpu().double()),
                    tolerance="tf32")
    assert res.outcome is CaseOutcome.FAILED
    assert "non-finite value(s) of 1024 in the output: inf at [5, 0]" in res.message


def test_a_wrong_kernel_result_fails_with_the_worst_element(kernels: Any) -> None:
    import torch

    dev, _, matmul, _ = kernels
    g = torch.Generator().manual_seed(1)
    a = torch.randn(64, 48, generator=g).half().to(dev.torch_device)
    b = torch.randn(48, 40, generator=g).half().to(dev.torch_device)

    def wrong_strides() -> tuple[Any, Any]:
        # A launch bug: B's strides swapped, so the kernel reads B transposed.
        c = torch.empty(64, 40, dtype=torch.float16, device=dev.torch_device)
        k = matmul.SMALL
        grid = ((64 + k.block_m - 1) // k.block_m * ((40 + k.block_n - 1) // k.block_n),)
        matmul.matmul_kernel[grid](a, b, c, 64, 40, 40, a.stride(0), a.stride(1), 1, 40,
                                   c.stride(0), c.stride(1), BLOCK_M=k.block_m, BLOCK_N=k.block_n,
                                   BLOCK_K=k.block_k, GROUP_M=k.group_m)
        return c, a.cpu().double() @ b.cpu().double()

    res = run_check("kernels.matmul", "matmul[bug]", "fp16", dev, wrong_strides)
    assert res.outcome is CaseOutcome.FAILED
    assert "element(s) outside atol=0.002 rtol=0.01; worst at [" in res.message


def test_every_dtype_name_is_a_torch_dtype() -> None:
    import torch

    from forkflow.workloads.device import DTYPES, torch_dtype

    assert {n: torch_dtype(n) for n in DTYPES} == {
        "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


def test_dtype_the_hardware_lacks_is_skipped_without_running(kernels: Any) -> None:
    ran = []
    t4 = DeviceInfo(Backend.CUDA, "Tesla T4", (7, 5))
    res = run_check("kernels.matmul", "matmul[bf16]", "bf16", t4, lambda: ran.append(1))  # type: ignore[arg-type, return-value]
    assert res.outcome is CaseOutcome.SKIPPED and not ran
    assert res.message == "bf16 (bfloat16) needs compute capability 8.0 or newer; Tesla T4 has 7.5"


def test_shape_that_runs_out_of_memory_is_reported_as_such(kernels: Any) -> None:
    import torch

    dev, cases, _, _ = kernels
    huge = Spec("matmul", "fp32", (1 << 21, 1 << 21, 1 << 21))  # 16 TiB per operand
    res = run_check("kernels.matmul", huge.id, "fp32", dev,
                    lambda: cases.BUILDERS["matmul"](huge, dev, torch.Generator().manual_seed(0)))
    assert res.outcome is CaseOutcome.ERROR
    assert res.message.startswith(f"out of memory on {dev.describe()}: ")


def test_customer_kernels_skip_helion_that_cannot_import(tmp_path: Path) -> None:
    fake = tmp_path / "helion"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('planted: needs a newer torch')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    p = subprocess.run([sys.executable, "-m", "forkflow.workloads.customer_kernels", "-k", "helion*",
                        "--report", str(tmp_path / "c.xml")], capture_output=True, text=True,
                       env=env, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    cases = _junit(tmp_path / "c.xml")
    assert [o for _, o in cases] == ["skipped", "skipped"]
    assert "helion cannot be imported with torch" in p.stdout
    assert "planted: needs a newer torch" in p.stdout


@pytest.mark.slow
def test_customer_kernels_run_helion_and_inductor(tmp_path: Path) -> None:
    pytest.importorskip("helion")
    p = subprocess.run([sys.executable, "-m", "forkflow.workloads.customer_kernels",
                        "--report", str(tmp_path / "c.xml")], capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [o for _, o in _junit(tmp_path / "c.xml")] == ["passed"] * 4
