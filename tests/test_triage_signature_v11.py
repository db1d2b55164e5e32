"""Signature version 11: what a printer, a locale or a quote changes is not the error.

Each rule is stated in general terms; the logs are shaped like the field corpus's train part
(tests/data/field/read-*.jsonl), written here so that each test shows its rule alone."""
from __future__ import annotations

import time

import pytest

from forkflow.triage.classify import infra_family
from forkflow.triage.models import FailureKind, InfraFamily
from forkflow.triage.signature import signature_of


def _key(log: str) -> str:
    return signature_of(log + "\n").key


def test_typographic_quotes_are_the_plain_ones() -> None:
    """gcc quotes with ‘’ in a UTF-8 locale and '' in the C locale; a forum curls pasted quotes."""
    utf8 = _key("Signals.inc:44:6: error: variable or field \u2018CleanupOnSignal\u2019 declared void")
    plain = _key("Signals.inc:44:6: error: variable or field 'CleanupOnSignal' declared void")
    assert utf8 == plain
    assert _key("x.cpp:1:1: error: \u2018uint64_t\u2019 was not declared in this scope") != utf8


def test_a_sentences_full_stop_is_not_part_of_the_error() -> None:
    with_stop = signature_of("RuntimeError: Detected that PyTorch and torchvision were compiled with "
                             "different CUDA versions. PyTorch has CUDA Version=11.8 and torchvision has CUDA "
                             "Version=12.1.\n")
    without = signature_of("RuntimeError: Detected that PyTorch and torchvision were compiled with "
                           "different CUDA versions\n")
    cut = signature_of("RuntimeError: Detected that PyTorch and torchvision were compiled with different "
                       "CUDA versions.\n")
    assert with_stop.key == without.key == cut.key, (with_stop.text, without.text, cut.text)
    assert not cut.text.endswith(".")
    # an ellipsis is not a full stop, and a number's point stays
    assert signature_of("RuntimeError: waiting for the store...\n").text.endswith("...")


def test_a_cmake_error_is_its_first_sentence() -> None:
    """CMake goes on with what to do; a quote cuts that anywhere.  A version's dots are no end."""
    whole = _key("CMake Error at CMakeLists.txt:1 (cmake_minimum_required):\n  Compatibility with CMake < 3.5 "
                 "has been removed from CMake.\n\n  Update the VERSION argument <min> value.  Or, use the "
                 "<min>...<max> syntax\n  to tell CMake that the project requires at least <min> but has "
                 "been updated\n  to work with policies introduced by <max> or earlier.\n")
    short = _key("CMake Error at third_party/x/CMakeLists.txt:2 (cmake_minimum_required):\n  Compatibility "
                 "with CMake < 3.5 has been removed from CMake.\n")
    assert whole == short
    req = signature_of("CMake Error: CMake 3.20.0 or higher is required.  You are running version 3.16.3\n")
    assert "3.20.0 or higher is required" in req.text, req.text


def test_the_cuda_runtimes_error_is_one_whether_named_or_said() -> None:
    said = signature_of("CUDA error 222 at ggml-cuda.cu:7788: the provided PTX was compiled with an "
                        "unsupported toolchain.\n")
    named = signature_of("CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)\n")
    both = signature_of("[cudaErrorUnsupportedPtxVersion] the provided PTX was compiled with an unsupported "
                        "toolchain. in expression cudaGetLastError()\n")
    assert said.kind is named.kind is both.kind is FailureKind.CUDA_ERROR
    assert said.key == named.key == both.key, (said.text, named.text, both.text)
    assert infra_family(named) is InfraFamily.ENVIRONMENT  # a driver older than the toolkit
    illegal = signature_of("CUDA_ERROR_ILLEGAL_ADDRESS\n")
    assert illegal.text == "CUDA_ERROR: CUDA runtime error: an illegal memory access was encountered"
    # a name without a message of its own keeps its words
    assert "cudaErrorMemoryAllocation" in signature_of("cudaErrorMemoryAllocation\n").text


def test_peer_access_the_gpus_lack_is_one_error_whoever_checks_it() -> None:
    trt = signature_of("[TensorRT-LLM][ERROR] CUDA runtime error in error: peer access is not supported "
                       "between these two devices\n")
    cudart = signature_of("RuntimeError: CUDART error: peer access is not supported between these two devices\n")
    assert trt.kind is cudart.kind is FailureKind.CUDA_ERROR and trt.key == cudart.key, (trt.text, cudart.text)


def test_nvccs_fatal_error_in_any_spacing_is_a_compiler_error() -> None:
    one = signature_of("nvcc fatal : Unsupported gpu architecture 'compute_86'\n")
    three = signature_of("nvcc fatal   : Unsupported gpu architecture 'compute_86'\n")
    assert one.kind is three.kind is FailureKind.COMPILER_ERROR and one.key == three.key, (one.text, three.text)
    assert infra_family(one) is InfraFamily.ENVIRONMENT
    curly = signature_of("Nvcc fatal : Value \u2018sm_75\u2019 is not defined for option \u2018gpu-architecture\u2019\n")
    assert curly.text == "COMPILER_ERROR: fatal: Value 'sm_75' is not defined for option 'gpu-architecture'"
    assert infra_family(curly) is InfraFamily.ENVIRONMENT  # the toolkit does not know the device
    assert signature_of("the word nvcc fatal appears in prose here\n").kind is not FailureKind.COMPILER_ERROR


@pytest.mark.parametrize("log", [
    "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n",
    "em++: error: 'tools/clang/lib/AST/Disasm.cpp.o' failed (received SIGKILL (-9))\n"
    "ninja: build stopped: subcommand failed.\n",
    "FAILED: [code=137] gen_ai/bf16_grouped_128_128_128_1_1_1_9_f.cu.o\n/usr/local/cuda/bin/nvcc -c x.cu\n"
    "ninja: build stopped: subcommand failed.\n",
])
def test_a_build_step_killed_by_sigkill_is_the_oom_killer_on_a_build(log: str) -> None:
    gcc = signature_of("c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n")
    sig = signature_of(log)
    assert sig.kind is FailureKind.INFRA and sig.key == gcc.key, sig.text
    assert infra_family(sig) is InfraFamily.MACHINE


def test_a_git_transfer_cut_midway_is_the_network() -> None:
    curl92 = signature_of("Cloning into 'llvm'...\nerror: RPC failed; curl 92 HTTP/2 stream 0 was not closed "
                          "cleanly: CANCEL (err 8)\nfatal: the remote end hung up unexpectedly\nfatal: early EOF\n"
                          "fatal: index-pack failed\n")
    tls = signature_of("error: RPC failed; curl 56 GnuTLS recv error (-9): Error decoding the received TLS "
                       "packet.\nfatal: The remote end hung up unexpectedly\nfatal: early EOF\n"
                       "fatal: index-pack failed\nERROR: process \"/bin/sh -c git clone x\" did not complete "
                       "successfully: exit code: 128\n")
    assert curl92.kind is tls.kind is FailureKind.INFRA and curl92.key == tls.key, (curl92.text, tls.text)
    assert infra_family(curl92) is InfraFamily.MACHINE
    # a repository that does not exist is not the network
    assert signature_of("fatal: repository 'https://x/y.git/' not found\n").kind is not FailureKind.INFRA


@pytest.mark.security
@pytest.mark.parametrize("line", [
    "CMake Error: " + "word a. " * 50_000,
    "CMake Error: " * 30_000,
    "cudaError" * 40_000,
    "CUDA_ERROR_" + "A" * 300_000,
    "\u2018" * 300_000,
    "x." * 300_000,
    "No such file or directory: '" + "/" * 300_000,
    "could not select device driver " * 20_000,
    "FAIL: " + " :: " * 100_000,
    "'A=" + "x" * 300_000 + "': command not found",
])
def test_version_11_rules_stay_linear_on_hostile_lines(line: str) -> None:
    t0 = time.perf_counter()
    sig = signature_of(line + "\n")
    infra_family(sig)
    assert time.perf_counter() - t0 < 2.0 and len(sig.text) < 2_100


def test_lit_names_a_failed_test_one_way_in_its_banner_and_its_summary() -> None:
    banner = signature_of("******************** TEST 'Clang :: Analysis/live-stmts.cpp' FAILED ********************\n"
                          "Exit Code: 1\n")
    summary = signature_of("Failed Tests (1):\n  Clang :: Analysis/live-stmts.cpp\n\nFAIL: Clang :: "
                           "Analysis/live-stmts.cpp (1234 of 5678)\n")
    assert banner.key == summary.key, (banner.text, summary.text)
    assert banner.text.endswith("lit test failed: Clang :: live-stmts.cpp")
    other = signature_of("******************** TEST 'Clang :: Analysis/other.cpp' FAILED ********************\n")
    assert other.key != banner.key


def test_a_variable_assignment_run_as_a_command_is_one_failure() -> None:
    """lit's internal shell runs `VAR=value cmd` as a command called `VAR=value`."""
    a = signature_of("'XRAY_OPTIONS=patch_premain=false:verbosity=1': command not found\n")
    b = signature_of("'ZERO_AR_DATE=1': command not found\n")
    assert a.key == b.key, (a.text, b.text)
    assert signature_of("bash: nvcc: command not found\n").key != a.key


@pytest.mark.parametrize("log", [
    "FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'\n",
    "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'\n",
    "# | clang: error: cannot find libdevice for sm_75; provide path to different CUDA installation via "
    "'--cuda-path', or pass '-nocudalib' to build without linking with libdevice\n",
    "clang-17: error: cannot find ROCm device library; provide its path via '--rocm-path' or "
    "'--rocm-device-lib-path', or pass '-nogpulib' to build without ROCm device library\n",
    'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n',
    "ERROR: 6: The engine plan file is not compatible with this version of TensorRT, expecting library "
    "version 8.0.0 got 8.0.1, please rebuild.\n",
])
def test_a_missing_toolkit_container_runtime_or_stale_engine_is_the_environment(log: str) -> None:
    assert infra_family(signature_of(log)) is InfraFamily.ENVIRONMENT, signature_of(log).text


def test_a_missing_project_file_is_not_the_toolkit() -> None:
    sig = signature_of("FileNotFoundError: [Errno 2] No such file or directory: 'configs/train.yaml'\n")
    assert infra_family(sig) is None


def test_enospc_by_its_number_in_a_linkers_words() -> None:
    assert signature_of("ld: write() failed, errno=28\n").text == "INFRA: out of disk space"
    assert signature_of("ld: write() failed, errno=280\n").kind is not FailureKind.INFRA


def test_tensorflow_and_xla_logging_prefix_is_looked_through() -> None:
    line = ("Loaded runtime CuDNN library: 8.9.2 but source was compiled with: 9.1.0.  CuDNN library needs "
            "to have matching major version and equal or higher minor version.")
    tf = signature_of("2024-05-01 12:00:00.123456: E external/local_xla/xla/stream_executor/cuda/"
                      f"cuda_dnn.cc:535] {line}\n")
    absl = signature_of(f"E0501 12:00:00.123456   12345 cuda_dnn.cc:535] {line}\n")
    bare = signature_of(line + "\n")
    assert tf.key == absl.key == bare.key, (tf.text, absl.text, bare.text)
