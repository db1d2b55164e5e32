"""Environment and toolchain faults read from the error's form: a loader's or compiler's
statement that the binary, library, driver, device or package versions do not fit, each keyed
on how the tool says it, with its own suggested action.  Code failures that share a word with
them stay out of the family, and every form stays linear on hostile lines."""
from __future__ import annotations

import time

import pytest

from forkflow.triage.classify import classify_failure, Evidence, infra_family, suggested_action
from forkflow.triage.models import Classification, Failure, InfraFamily
from forkflow.triage.signature import signature_of
from tests.hostile import read_quickly

HEAD = 'Traceback (most recent call last):\n  File "/work/proj/run.py", line 3, in <module>\n    import ext\n'
ABORT = "Aborted (core dumped)\n"

# (log, a word the suggested action must say): one case for each form
ENV_LOGS = {
    "numpy-abi": (HEAD + "ImportError: numpy.core.multiarray failed to import\n", "NumPy"),
    "numpy-2": ("A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.1 as it may crash.\n"
                + HEAD + "AttributeError: _ARRAY_API not found\n", "NumPy"),
    "cxxabi": (HEAD + "ImportError: /usr/lib/libstdc++.so.6: version `CXXABI_1.3.15' not found\n", "library"),
    "nvml-mismatch": ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.54\n",
                      "driver"),
    "driver-combination": (HEAD + "RuntimeError: CUDA error: system has unsupported display driver / cuda "
                                  "driver combination\n", "driver"),
    "forward-compat": (HEAD + "RuntimeError: CUDA driver error: forward compatibility was attempted on non "
                              "supported HW\n", "driver"),
    "cuda-insufficient": (HEAD + "RuntimeError: Triton Error [CUDA]: CUDA_ERROR_INSUFFICIENT_DRIVER\n", "driver"),
    "hip-insufficient": (HEAD + "RuntimeError: HIP error: hipErrorInsufficientDriver\n", "driver"),
    "ze-version": (HEAD + "RuntimeError: Triton Error [ZE]: ZE_RESULT_ERROR_UNSUPPORTED_VERSION\n", "driver"),
    "ze-version-hex": (HEAD + "RuntimeError: Triton Error [ZE]: 0x78000002\n", "driver"),
    "clang-arch": ("clang: error: unsupported CUDA gpu architecture: sm_120\n"
                   "ninja: build stopped: subcommand failed.\n", "architecture"),
    "unknown-cpu": ("clang: error: unknown target CPU 'gfx1201'\nninja: build stopped: subcommand failed.\n",
                    "architecture"),
    "cuda-no-binary": (HEAD + "RuntimeError: Triton Error [CUDA]: CUDA_ERROR_NO_BINARY_FOR_GPU\n", "architecture"),
    "hip-device-function": (HEAD + "RuntimeError: HIP error: hipErrorInvalidDeviceFunction\n", "architecture"),
    "ptx-version": ("ptxas /tmp/k.ptx, line 5; fatal   : Unsupported .version 8.7; current version is '8.4'\n"
                    "ptxas fatal   : Ptx assembly aborted due to errors\n", "ptxas"),
    "exec-format": ("/bin/sh: 1: /home/u/.triton/llvm/bin/mlir-tblgen: cannot execute binary file: Exec format "
                    "error\nninja: build stopped: subcommand failed.\n", "platform"),
    "elf-class": (HEAD + "ImportError: /work/proj/_C.so: wrong ELF class: ELFCLASS32\n", "platform"),
    "cudnn-loader": (HEAD + "RuntimeError: Unable to load any of {libcudnn_graph.so.9.1.0, libcudnn_graph.so.9}\n",
                     "library"),
    "windows-dll": (HEAD + "FileNotFoundError: Could not find module 'C:\\w\\torch\\lib\\c10.dll' (or one of its "
                           "dependencies). Try using the full path with constructor syntax.\n", "library"),
    "pip-conflict": ("ERROR: Cannot install torch==2.5.1 and vllm==0.6.0 because these package versions have "
                     "conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested torch==2.5.1\n",
                     "pin"),
    "conda-unsatisfiable": ("LibMambaUnsatisfiableError: Encountered problems while solving:\n  - package "
                            "pytorch-2.5.1 requires cuda-version >=12.4\n", "pin"),
    "conda-not-found": ("PackagesNotFoundError: The following packages are not available from current "
                        "channels:\n\n  - triton=3.9\n", "pin"),
    "msvc": ("C:\\cuda\\include\\crt/host_config.h(153): fatal error C1189: #error:  -- unsupported Microsoft "
             "Visual Studio version! Only the versions between 2017 and 2022 (inclusive) are supported!\n",
             "compiler"),
    "ampere-only": (HEAD + "RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n", "device"),
    "capability": (HEAD + "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
                          "8.0. Your Tesla T4 GPU has compute capability 7.5.\n", "device"),
    "gxx-too-new": (HEAD + "RuntimeError: The current installed version of g++ (13.2.0) is greater than the "
                           "maximum required version by CUDA 12.1.\n", "compiler"),
    "msvc-missing": ("error: Microsoft Visual C++ 14.0 or greater is required. Get it with \"Microsoft C++ Build "
                     "Tools\"\n", "compiler"),
    "ninja": (HEAD + "RuntimeError: Ninja is required to load C++ extensions\n", "compiler"),
    "nvcc-missing": ("error: command '/usr/local/cuda/bin/nvcc' failed: No such file or directory\n", "compiler"),
    "cmake-package": ("CMake Error at /usr/share/cmake/FindPackageHandleStandardArgs.cmake:230 (message):\n"
                      "  Could NOT find CUDAToolkit (missing: CUDAToolkit_INCLUDE_DIR)\n", "pin"),
    "cmake-compiler": ("CMake Error at CMakeLists.txt:3 (project):\n  No CMAKE_CUDA_COMPILER could be found.\n",
                       "compiler"),
    "nvcc-std": ("nvcc fatal   : Value 'c++20' is not defined for option 'std'\n", "compiler"),
    "cuda-too-old": (HEAD + "RuntimeError: FlashAttention is only supported on CUDA 11.6 and above\n", "toolkit"),
    "two-cuda-builds": (HEAD + "RuntimeError: Detected that PyTorch and torchvision were compiled with different "
                               "CUDA major versions. PyTorch has CUDA Version=11.8\n", "toolkit"),
    "cuda-mismatch": (HEAD + "RuntimeError: The detected CUDA version (12.1) mismatches the version that was used "
                             "to compile PyTorch (11.8).\n", "toolkit"),
    "cudnn-mismatch": (HEAD + "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against "
                              "(8, 9, 2) but found runtime version (8, 5, 0).\n", "toolkit"),
    "windows-module": (HEAD + "OSError: [WinError 126] The specified module could not be found. Error loading "
                              "\"C:\\t\\lib\\c10.dll\" or one of its dependencies.\n", "library"),
    "ptx-jit": (HEAD + "RuntimeError: Triton Error [CUDA]: PTX JIT compiler library not found\n", "library"),
    "python-version": ("ERROR: Package 'vllm' requires a different Python: 3.8.10 not in '>=3.9'\n", "pin"),
    "wheel-platform": ("ERROR: triton-3.0.0-cp311-cp311-manylinux2014_x86_64.whl is not a supported wheel on "
                       "this platform.\n", "pin"),
    "ptxas-target": ("ptxas fatal   : SM version specified by .target is higher than default SM version "
                     "assumed\n", "ptxas"),
    "container-driver": ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please "
                         "update your driver to a newer version, or use an earlier cuda container\n", "driver"),
    "cuda-floor": (HEAD + "RuntimeError: Triton requires CUDA 11.4+\n", "toolkit"),
    "python-floor": (HEAD + "RuntimeError: this package requires Python 3.9 or later\n", "toolkit"),
}

# the fault's own line sits above the closing line the signature keeps
EXCERPT_LOGS = {
    "hsa-isa": (":0:rocdevice.cpp            :2875: 4137013 us: [pid:1 tid:0x7f] Callback: Queue 0x7f aborting "
                "with error : HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid. "
                "code: 0x100f\n" + ABORT, "architecture"),
    "tensile": ("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or "
                "directory for GPU arch : gfx1103\n" + ABORT, "architecture"),
    "cudnn-library": ("Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared "
                      "object file: No such file or directory\n" + ABORT, "library"),
    "mach-o": (HEAD + "ImportError: dlopen(/work/proj/_C.so, 0x0002): tried: '/work/proj/_C.so' (mach-o file, but "
                      "is an incompatible architecture (have 'x86_64', need 'arm64'))\n", "platform"),
    "macos-linker": ("ld: library not found for -lomp\nclang: error: linker command failed with exit code 1 "
                     "(use -v to see invocation)\n", "library"),
    "operator-reasons": (HEAD + "ValueError: Operator `memory_efficient_attention` does not support inputs:\n"
                                "     query       : shape=(1, 4101, 32, 128) (torch.float16)\n"
                                "`flshattF` is not supported because:\n"
                                "    requires a GPU with compute capability > 7.5\n", "device"),
}

# code failures that share a word with the forms above
CODE_LOGS = {
    "attribute": HEAD + "AttributeError: 'Tensor' object has no attribute 'ARRAY_API'\n",
    "shape": HEAD + "ValueError: shape mismatch: this op requires 3 dims, got 2\n",
    "missing-data": HEAD + "FileNotFoundError: [Errno 2] No such file or directory: 'data/TensileLibrary.yaml'\n",
    "illegal-access": HEAD + "RuntimeError: CUDA error: an illegal memory access was encountered\n",
    "version-assert": HEAD + "AssertionError: expected version 2, got 3 (compute capability check)\n",
    # a script without its interpreter line: the change's, not a binary for another platform
    "script-exec-format": HEAD + "OSError: [Errno 8] Exec format error: 'tests/run_case.sh'\n",
    # CMake's `Could NOT find` is its own, in capitals: the phrase in other words is anyone's
    "could-not-find": HEAD + "RuntimeError: Could not find kernel 'matmul_kernel' in the compiled module\n",
    "warning-then-crash": ("W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
                           "library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0\n"
                           "Fatal Python error: Segmentation fault\n" + ABORT),
}


@pytest.mark.parametrize("name", sorted(ENV_LOGS))
def test_an_environment_fault_is_read_from_its_form(name: str) -> None:
    log, word = ENV_LOGS[name]
    sig = signature_of(log)
    assert infra_family(sig) is InfraFamily.ENVIRONMENT, sig.text
    verdict = classify_failure(Failure("t", sig), Evidence())
    assert verdict.classification is Classification.INFRA and verdict.family is InfraFamily.ENVIRONMENT
    assert word.lower() in suggested_action(sig).lower()
    assert verdict.action == suggested_action(sig)


@pytest.mark.parametrize("name", sorted(EXCERPT_LOGS))
def test_a_fault_above_the_closing_line_is_read_from_the_excerpt(name: str) -> None:
    log, word = EXCERPT_LOGS[name]
    sig = signature_of(log)
    assert infra_family(sig) is InfraFamily.ENVIRONMENT, (sig.text, sig.excerpt)
    assert word.lower() in suggested_action(sig).lower()


@pytest.mark.parametrize("name", sorted(CODE_LOGS))
def test_a_code_failure_that_shares_a_word_stays_out(name: str) -> None:
    sig = signature_of(CODE_LOGS[name])
    assert infra_family(sig) is None, sig.text
    assert classify_failure(Failure("t", sig), Evidence()).classification is Classification.NEW


def test_a_runner_fault_keeps_its_family_whatever_the_excerpt_says() -> None:
    # the network between nodes failed after a plugin's loader note: the job stopped for the network
    log = ("Could not load library libnccl-net.so. Error: libnccl-net.so: cannot open shared object file\n"
           "node-1:946:988 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, "
           "opcode 1, len 0, vendor err 129\n")
    sig = signature_of(log)
    assert infra_family(sig) is InfraFamily.MACHINE, sig.text


HOSTILE = [
    "TensileLibrary" * 20000,
    "No paths matched " + "a" * 200000,
    "Could not find module '" + "x" * 200000,
    "Could not load library " + "a" * 200000,
    "NVML: " + "a/" * 100000,
    "but you have " + "x " * 100000,
    "only supports " + "big " * 50000,
    "compute capability " + "9" * 200000,
    "incompatible architecture (have '" * 5000,
    "requires a GPU with compute " * 5000,
    # an allocator's account followed by a long run of digits: each number is tried once
    "total capacity of 80 GiB of which 1 GiB is free " + "9" * 200000,
    "CMake Error: " * 20000,
    "error: command '" * 20000,
]


@pytest.mark.security
@pytest.mark.parametrize("line", HOSTILE, ids=range(len(HOSTILE)))
def test_environment_forms_stay_linear_on_hostile_lines(line: str) -> None:
    read_quickly((HEAD + "RuntimeError: " + line + "\n", line + "\n" + ABORT), 2.0, infra_family, suggested_action)


@pytest.mark.security
@pytest.mark.parametrize("line", HOSTILE, ids=range(len(HOSTILE)))
def test_environment_rules_stay_linear_on_a_hostile_signature(line: str) -> None:
    from forkflow.triage.models import FailureKind, Signature

    for kind in (FailureKind.GENERIC, FailureKind.CRASH, FailureKind.OOM):
        sig = Signature(kind, line, "\n".join([line] * 4), 1)
        t0 = time.perf_counter()
        infra_family(sig)
        suggested_action(sig)
        assert time.perf_counter() - t0 < 2.0


def test_the_action_names_the_device_not_the_build() -> None:
    log = ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
           "installation.\nCUDA Version: 12.8\n" + HEAD
           + "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    sig = signature_of(log)
    assert sig.text.endswith("[on sm_120; cuda 12.8]")
    assert "architecture (sm_120)" in suggested_action(sig)


@pytest.mark.parametrize("runtime", ["CUDA", "HIP"])
def test_a_runner_without_a_gpu_is_the_machines(runtime: str) -> None:
    sig = signature_of(HEAD + f"RuntimeError: No {runtime} GPUs are available\n")
    assert infra_family(sig) is InfraFamily.MACHINE, sig.text
    assert "GPU" in suggested_action(sig)
