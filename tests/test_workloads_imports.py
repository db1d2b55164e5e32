"""Every module of the workload pack imports with the torch, triton and helion installed here:
the `gpu` extra pins a set that works together (helion 1.5.1 does not import with torch 2.11)."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

pytest.importorskip("torch")

import forkflow.workloads as pack

MODULES = sorted(m.name for m in pkgutil.walk_packages(pack.__path__, prefix="forkflow.workloads."))


def test_the_pack_has_its_modules() -> None:
    assert {"forkflow.workloads.matmul_sweep", "forkflow.workloads.tuning",
            "forkflow.workloads.kernels.helion_kernels"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_every_workload_module_imports(module: str) -> None:
    importlib.import_module(module)
