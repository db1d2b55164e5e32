"""Signature version 9: a build without the device's kernels is keyed by the device and by the
toolkit and package versions the log prints of the build, never by the driver's."""
from __future__ import annotations


import pytest

from forkflow.triage.signature import SIGNATURE_VERSION, signature_of
from tests.hostile import read_quickly

WARNING = ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
           "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 "
           "sm_86 sm_90.\n")
ERROR = ("Traceback (most recent call last):\n  File \"/srv/app/serve.py\", line 9, in <module>\n"
         "    x = torch.zeros(1, device='cuda')\n"
         "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")


def _log(facts: str) -> str:
    return facts + WARNING + ERROR


def test_the_version_moved() -> None:
    assert SIGNATURE_VERSION >= 9


def test_two_builds_without_the_devices_kernels_are_two_failures() -> None:
    cu126 = signature_of(_log("torch version: 2.7.0+cu126\nCUDA Version: 12.6\n"))
    cu128 = signature_of(_log("torch version: 2.7.1+cu128\nCUDA Version: 12.8\n"))
    assert cu126.key != cu128.key
    assert "sm_120; cuda 12.6; torch 2.7" in cu126.text


def test_the_same_build_on_two_drivers_is_one_failure() -> None:
    # the driver is the machine's, not the build's: it does not split a missing kernel image
    a = signature_of(_log("Driver Version: 550.54.15\nCUDA Version: 12.8\n"))
    b = signature_of(_log("Driver Version: 570.133.07\nCUDA Version: 12.8\n"))
    assert a.key == b.key
    assert "driver" not in a.text


def test_a_log_that_prints_no_build_keeps_the_device_alone() -> None:
    assert signature_of(_log("")).text.endswith("[on sm_120]")


def test_other_errors_are_still_keyed_by_the_device_alone() -> None:
    # a resource limit depends on the device, not on the build's versions
    text = ("CUDA Version: 12.8\nGPU: sm_90\ntriton.runtime.errors.OutOfResources: out of resource: shared memory, "
            "Required: 262144, Hardware limit: 232448\n")
    assert signature_of(text).text.endswith("[on sm_90]")


@pytest.mark.security
def test_build_facts_stay_linear_on_hostile_lines() -> None:
    read_quickly((_log(facts) for facts in ("CUDA Version " + " " * 200_000 + "\n", "torch " * 100_000 + "\n",
                                            ("cuda 12.8 " * 50_000) + "\n")), 2.0)
