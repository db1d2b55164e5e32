"""Triage rules for logs of the field (issue 32): prefixes of any shape, the error line over a
log's summary lines, a failure's environment, kinds on a structure, and INFRA's two families.

The logs here are written for the tests, in the shapes CI logs take; the last test scores the
train part of the field corpus (tests/data/field), whose held-aside part is scored only by
benchmarks/bench_triage.py --heldout.
"""
from __future__ import annotations

import pytest

from forkflow.testing import real_corpus
from forkflow.triage.classify import Evidence, classify_failure, infra_family, suggested_action
from forkflow.triage.group import adjusted_rand_index
from forkflow.triage.models import Classification, Failure, FailureKind, InfraFamily
from forkflow.triage.signature import signature_of

K = FailureKind
ERROR = ("Traceback (most recent call last):\n"
         '  File "/srv/app/engine.py", line 12, in step\n'
         "    run()\n"
         "RuntimeError: shape mismatch in paged attention: 64 vs 128\n")


def _prefixed(prefix: str, text: str) -> str:
    return "".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n"))


# ----- prefixes --------------------------------------------------------------------------------

@pytest.mark.parametrize("prefix", [
    "(VllmWorker pid=123) ", "(VllmWorkerProcess pid=4711) ERROR 06-13 07:35:59 [core.py:517] ",
    "(RayWorkerWrapper pid=3131, ip=10.0.0.7) ", "[rank3]:", "[rank0]:[W1206 18:44:12.7 ProcessGroupNCCL.cpp:607] ",
    "vllm-1  | ", "api_server | ", "2024-05-01T12:00:00.123Z ", "2024-05-01T12:00:00.1234567+02:00 ",
    "  | [2025-08-08T10:26:49Z] ", "INFO 08-13 04:39:39 engine.py:400] ",
    "2025-08-13 04:39:39,465 - __main__ - INFO - ", "[default2]:", "#12 34.56 ",
])
def test_a_prefix_of_any_shape_is_looked_through(prefix: str) -> None:
    plain = signature_of(ERROR)
    got = signature_of(_prefixed(prefix, ERROR))
    assert got.kind is K.EXCEPTION
    assert got.key == plain.key, got.text


def test_two_processes_tags_do_not_split_one_error() -> None:
    a = signature_of(_prefixed("(VllmWorker pid=101) ", ERROR))
    b = signature_of(_prefixed("(VllmWorker pid=202) ", ERROR))
    c = signature_of(_prefixed("(EngineCore_0 pid=9) ", ERROR))
    assert a.key == b.key == c.key
    assert "pid" not in a.text


def test_runner_markers_and_gtest_columns_are_not_the_error() -> None:
    log = ("[ RUN      ] Matmul.Fp8\n"
           "matmul_test.cc:41: Failure\n"
           "Expected equality of these values: got 3, want 4\n"
           "[  FAILED  ] Matmul.Fp8 (12 ms)\n"
           "[  FAILED  ] 1 test, listed below:\n"
           "[  FAILED  ] Matmul.Fp8\n"
           "##[error]Process completed with exit code 1.\n")
    sig = signature_of(log)
    assert "Matmul.Fp8" not in sig.text and "exit code" not in sig.text, sig.text
    assert "Failure" in sig.text or "Expected equality" in sig.text


# ----- the error line over summary lines -------------------------------------------------------

def test_a_build_steps_summary_yields_to_the_error_above_it() -> None:
    log = ("[41/97] Building CXX object lib/CMakeFiles/x.dir/a.cpp.o\n"
           "/src/a.cpp:1:10: fatal error: cuda_runtime.h: No such file or directory\n"
           "compilation terminated.\n"
           "ninja: build stopped: subcommand failed.\n"
           "make[2]: *** [CMakeFiles/x.dir/build.make:76: a.o] Error 1\n"
           "make: *** [Makefile:12: all] Error 2\n")
    sig = signature_of(log)
    assert sig.kind is K.COMPILER_ERROR
    assert "cuda_runtime.h" in sig.text


def test_the_linkers_error_over_the_drivers_summary() -> None:
    log = "/usr/bin/ld: cannot find -lcuda\ncollect2: error: ld returned 1 exit status\n"
    assert "cannot find -lcuda" in signature_of(log).text


def test_a_missing_library_version_over_pass_rates_and_counts() -> None:
    log = ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found "
           "(required by /opt/venv/lib/libtriton.so)\n"
           "Some tests failed. Pass rate: 97.5% (390/400)\n"
           "Total: 400, Failed: 10, Passed: 390\n")
    sig = signature_of(log)
    assert "GLIBCXX" in sig.text, sig.text


def test_a_hip_error_over_the_runners_tail() -> None:
    log = ("RuntimeError: HIP error: invalid device function\n"
           "HIP kernel errors might be asynchronously reported at some other API call, so the "
           "stacktrace below might be incorrect.\n"
           "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n"
           "FAILED (errors=1)\n##[error]Process completed with exit code 1.\n")
    sig = signature_of(log)
    assert sig.kind is K.CUDA_ERROR and "invalid device function" in sig.text, sig.text


def test_a_filecheck_mismatch_over_lits_failed_tests_list() -> None:
    log = ("t.mlir:12:11: error: CHECK: expected string not found in input\n"
           "// CHECK: ttg.warp_specialize\n"
           "********************\n"
           "Failed Tests (2):\n"
           "  TRITON :: TritonGPU/a.mlir\n"
           "  TRITON :: TritonGPU/b.mlir\n"
           "Total Discovered Tests: 300\n  Failed: 2\n")
    sig = signature_of(log)
    assert sig.kind is K.FILECHECK and "warp_specialize" in sig.text, sig.text


def test_a_footer_glued_to_the_errors_line_does_not_hide_it() -> None:
    log = ("test/test_x.py | TestX | test_big | torch.OutOfMemoryError: XPU out of memory. Tried to "
           "allocate 16.00 GiB. To execute this test, run the following from the base repo dir: "
           "python test/test_x.py TestX.test_big\n")
    sig = signature_of(log)
    assert sig.kind is K.OOM and "XPU out of memory" in sig.text, sig.text


def test_a_separator_line_is_no_exception() -> None:
    log = "Traceback (most recent call last):\n--\n" + ERROR.split("\n", 1)[1]
    assert "shape mismatch" in signature_of(log).text


def test_cmake_errors_are_keyed_by_their_message() -> None:
    a = signature_of("CMake Error at CMakeLists.txt:3 (cmake_minimum_required):\n"
                     "  CMake 3.20.0 or higher is required.  You are running version 3.16.3\n\n")
    b = signature_of("CMake Error at llvm/CMakeLists.txt:3 (cmake_minimum_required):\n"
                     "  CMake 3.20.0 or higher is required.  You are running version 3.10.2\n\n")
    c = signature_of("CMake Error at CMakeLists.txt:3 (find_package):\n  Could not find a package "
                     "configuration file provided by \"MLIR\"\n\n")
    assert a.key == b.key != c.key
    assert "or higher is required" in a.text


# ----- environment -------------------------------------------------------------------------------

NO_KERNEL = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"


def test_the_architecture_splits_identical_texts_only_when_it_differs() -> None:
    sm120 = signature_of("GPU: NVIDIA GeForce RTX 5090 with CUDA capability sm_120\n" + NO_KERNEL)
    sm120b = signature_of("Device arch: sm_120\nDriver Version: 570.133.07\n" + NO_KERNEL)
    sm70 = signature_of("compute capability 7.0 (Tesla V100-SXM2-32GB)\n" + NO_KERNEL)
    bare = signature_of(NO_KERNEL)
    assert sm120.key == sm120b.key
    assert len({sm120.key, sm70.key, bare.key}) == 3
    assert sm120.text.endswith("[on sm_120]") and sm70.text.endswith("[on sm_70]")
    assert "[on" not in bare.text


def test_a_list_of_build_targets_is_not_the_device() -> None:
    log = ("NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current "
           "PyTorch installation.\n"
           "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n")
    sig = signature_of(log)
    assert sig.kind is K.CUDA_ERROR and sig.text.endswith("[on sm_120]"), sig.text
    # torch's warning and the launch that fails after it are one failure
    assert sig.key == signature_of("with CUDA capability sm_120\n" + NO_KERNEL).key


def test_a_code_failure_is_not_split_by_the_gpu_it_ran_on() -> None:
    err = "AssertionError: Tensor-likes are not close!\nMismatched elements: 3 / 4096\n"
    a = signature_of("GPU 0: NVIDIA H100 (sm_90)\n" + err)
    b = signature_of("GPU 0: NVIDIA A100 (sm_80)\n" + err)
    assert a.key == b.key


def test_the_environment_is_kept_as_its_own_field() -> None:
    sig = signature_of("| NVIDIA-SMI 470.86   Driver Version: 470.86   CUDA Version: 11.4 |\n"
                       "torch 2.5.1+cu124\nGPU arch: sm_86\n" + NO_KERNEL)
    assert sig.env == "sm_86; driver 470; cuda 11.4; torch 2.5"


def test_a_driver_too_old_is_keyed_by_the_version_it_found() -> None:
    msg = ("RuntimeError: The NVIDIA driver on your system is too old (found version {v}). Please "
           "update your GPU driver.\n")
    a, b, c = (signature_of(msg.format(v=v)) for v in ("11040", "11040", "11060"))
    assert a.key == b.key != c.key
    assert a.text.endswith("[on cuda 11.4]")


# ----- kinds on a structure ---------------------------------------------------------------------

@pytest.mark.parametrize("log", [
    "[rank0]:[E1206 18:44:12.7 ProcessGroupNCCL.cpp:632] [Rank 0] Timeout at NCCL work: 12, last "
    "enqueued NCCL work: 12, Timeout(ms)=600000\n",
    "torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving ncclUniqueId "
    "from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n",
    "[rank1]:[E ProcessGroupNCCL.cpp:1316] NCCL communicator was aborted on rank 1. Original reason for "
    "failure was: Timeout(ms)=1800000\n",
])
def test_a_timeout_inside_a_collective_failure_is_no_test_timeout(log: str) -> None:
    sig = signature_of(log)
    assert sig.kind is K.CUDA_ERROR and sig.text.startswith("CUDA_ERROR: NCCL error"), sig.text
    lit = signature_of("TIMEOUT: MLIR :: Dialect/a.mlir (3 of 9)\nReached timeout of 60 seconds\n")
    assert sig.key != lit.key


def test_collective_failures_are_keyed_by_what_went_wrong() -> None:
    a = signature_of("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/"
                     "c10d/NCCLUtils.hpp:268, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                     "NCCL version 2.21.5\n")
    b = signature_of("cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system error "
                     "(run with NCCL_DEBUG=INFO for details)\n")
    c = signature_of("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote "
                     "process exited or there was a network error, NCCL version 2.20.5\n")
    assert a.key == b.key != c.key


def test_lit_timeouts_keep_their_test() -> None:
    a = signature_of("TIMEOUT: MLIR :: Dialect/a.mlir (3 of 9)\nReached timeout of 60 seconds\n")
    b = signature_of("TIMEOUT: MLIR :: Dialect/b.mlir (4 of 9)\nReached timeout of 60 seconds\n")
    assert a.kind is b.kind is K.TIMEOUT
    assert a.key != b.key and "a.mlir" in a.text


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB",
    "RuntimeError: XPU out of memory. Tried to allocate 1024.00 MiB",
    "RuntimeError: Tried to allocate 4.00 GiB (GPU 0; 15.77 GiB total capacity; 14.1 GiB already allocated)",
    "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
])
def test_an_allocators_out_of_memory_is_oom_whatever_its_wording(line: str) -> None:
    assert signature_of(line + "\n").kind is K.OOM


# ----- INFRA families ----------------------------------------------------------------------------

@pytest.mark.parametrize("log, family, action", [
    (NO_KERNEL, InfraFamily.ENVIRONMENT, "rebuild the wheel"),
    ("Device arch: gfx1151\nRuntimeError: HIP error: invalid device function\n", InfraFamily.ENVIRONMENT,
     "architecture (gfx1151)"),
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n",
     InfraFamily.ENVIRONMENT, "update the GPU driver"),
    ("/src/proton/csrc/a.cpp:3:10: fatal error: 'crt/host_defines.h' file not found\n", InfraFamily.ENVIRONMENT,
     "install the missing headers"),
    ("ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n",
     InfraFamily.ENVIRONMENT, "install the library"),
    ("ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n", InfraFamily.ENVIRONMENT,
     "architecture (sm_121a)"),
    ("ImportError: cannot import name 'AttrsDescriptor' from 'triton.backends.compiler' (/v/compiler.py)\n",
     InfraFamily.ENVIRONMENT, "pin the package versions"),
    ("CMake Error at CMakeLists.txt:3 (cmake_minimum_required):\n  CMake 3.20.0 or higher is required.  You "
     "are running version 3.16.3\n\n", InfraFamily.ENVIRONMENT, "pin the compiler"),
    ("/bin/bash: line 1: anaconda: command not found\n", InfraFamily.ENVIRONMENT, "install the missing tool"),
    ("/usr/include/c10/macros/Macros.h:8:2: error: #error C++20 or later compatible compiler is required to "
     "use PyTorch.\n", InfraFamily.ENVIRONMENT, "pin the compiler"),
    ("huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
     "https://huggingface.co/api/models/x\n", InfraFamily.MACHINE, "backoff"),
    ("You are running out of disk space. The runner will stop working when the machine runs out of "
     "disk space. Free space left: 12 MB\n", InfraFamily.MACHINE, "free disk space"),
    ("OSError: [Errno 28] No space left on device: 'build'\n", InfraFamily.MACHINE, "free disk space"),
    ("Error: Available diskspace is less than 30 percent.\n", InfraFamily.MACHINE, "free disk space"),
    ("RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.\n", InfraFamily.MACHINE,
     "--shm-size"),
    ("LLVM ERROR: pthread_create failed: Resource temporarily unavailable\n", InfraFamily.MACHINE, "ulimit -u"),
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 12) of binary: "
     "/usr/bin/python\n", InfraFamily.MACHINE, "more host memory"),
    ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
     "KV cache (15920).\n", InfraFamily.MACHINE, "max_model_len"),
    ("docker: error pulling image configuration: received unexpected HTTP status: 500 Internal Server Error.\n",
     InfraFamily.MACHINE, "retry the download"),
    # ENOSPC by its number, the console having cut the words
    ("    self.__buf.write(data)\nOSError: [Errno 28] No space left on devi\n", InfraFamily.MACHINE,
     "free disk space"),
    ("ModuleNotFoundError: No module named 'versioneer'\n", InfraFamily.ENVIRONMENT, "install the missing package"),
    ("RuntimeError: Dynamo is not supported on Python 3.12+\n", InfraFamily.ENVIRONMENT, "pin versions"),
    ("RuntimeError : Windows not yet supported for torch.compile\n", InfraFamily.ENVIRONMENT, "pin versions"),
    ("CondaHTTPError: HTTP 429 TERMS OF SERVICE RATE LIMIT EXCEEDED for url <https://repo.anaconda.com/pkgs/main/"
     "linux-64/repodata.json>\n", InfraFamily.MACHINE, "backoff"),
    ('    raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")\n'
     "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.\n",
     InfraFamily.ENVIRONMENT, "pin the compiler"),
    ("torch._inductor.exc.InductorError: RuntimeError: Compiler: cl is not found.\n", InfraFamily.ENVIRONMENT,
     "pin the compiler"),
    ("RuntimeError: operator torchvision::nms does not exist\n", InfraFamily.ENVIRONMENT, "pin the compiler"),
    ("RuntimeError: GPUs with compute capability below 7.0 are not supported.\n", InfraFamily.ENVIRONMENT,
     "device the code supports"),
    ("rocBLAS error: Cannot read TensileLibrary.dat: Illegal seek for GPU arch : gfx1201\n", InfraFamily.ENVIRONMENT,
     "rebuild the wheel"),
    ("\u00d7 This environment is externally managed\n\u2570\u2500> \n    The system-wide python installation "
     "should be maintained using the system\nhint: See PEP 668 for the detailed specification.\n",
     InfraFamily.ENVIRONMENT, "virtualenv"),
    ("ERROR: This container was built for NVIDIA Driver Release 530.30 or later, but\n       version "
     "470.182.03 was detected and compatibility mode is UNAVAILABLE.\n", InfraFamily.ENVIRONMENT,
     "update the GPU driver"),
    ("##[error]The runner has received a shutdown signal.\n", InfraFamily.MACHINE, "re-run the job"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited "
     "or there was a network error, NCCL version 2.20.5\n", InfraFamily.MACHINE, "network between nodes"),
    ("torch.OutOfMemoryError: XPU out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity "
     "of 11.59 GiB of which 9.92 GiB is free.\n", InfraFamily.MACHINE, "more memory"),
])
def test_infra_families_and_their_actions(log: str, family: InfraFamily, action: str) -> None:
    sig = signature_of(log)
    v = classify_failure(Failure("t", sig), Evidence())
    assert v.classification is Classification.INFRA, sig.text
    assert v.family is family and infra_family(sig) is family
    assert action in v.action and v.action == suggested_action(sig)


def test_a_dotted_module_missing_is_the_builds_not_the_runners() -> None:
    sig = signature_of("ModuleNotFoundError: No module named 'triton._C.libtriton'\n")
    assert infra_family(sig) is None, sig.text


def test_an_extension_missing_symbols_of_one_library_is_one_failure() -> None:
    """Undefined C++ symbols of torch in one extension: built against another torch, one cause;
    a symbol of another library, or a plain C name, stays apart."""
    a = signature_of("ImportError: /opt/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-x86_64-"
                     "linux-gnu.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_"
                     "stringIcSt11char_traitsIcESaIcEEE\n")
    b = signature_of("ImportError: /lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-"
                     "gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n")
    other = signature_of("ImportError: /lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-"
                         "linux-gnu.so: undefined symbol: _ZN2at4_ops5zeros4callEv\n")
    boost = signature_of("ImportError: /lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-"
                         "linux-gnu.so: undefined symbol: _ZN5boost6system15system_categoryEv\n")
    assert boost.key != other.key and "boost::*" in boost.text
    plain = signature_of("OSError: /x/libtorch_cuda.so: undefined symbol: cublasLtGetStatusString\n")
    assert a.key == b.key, (a.text, b.text)
    # torch's namespaces are one library (c10, at, torch): an extension built against another torch
    assert other.key == a.key and "torch::*" in a.text
    assert "torch::*" in a.text and "cublasLtGetStatusString" in plain.text
    # a linker's undefined reference is the code's: its symbol is kept whole
    link = signature_of("a.cpp:(.text+0x1): undefined reference to `_ZN3c104cuda9SetDeviceEi'\n")
    assert "_ZN3c104cuda9SetDeviceEi" in link.text, link.text


def test_a_connection_reset_between_processes_is_not_a_downloads() -> None:
    collective = signature_of('  File "/t/distributed_c10d.py", line 224, in init_process_group\n'
                              "    _default_pg = ProcessGroupGloo(store, rank, world_size)\n"
                              "RuntimeError: Connection reset by peer\n")
    download = signature_of('  File "/t/timm/models/_hub.py", line 9, in download_cached_file\n'
                            "    download_url_to_file(url, cached_file)\n"
                            "ConnectionResetError: [Errno 104] Connection reset by peer\n")
    again = signature_of('  File "/u/site-packages/urllib3/connectionpool.py", line 7, in urlopen\n'
                         "ConnectionResetError: [Errno 104] Connection reset by peer\n")
    assert collective.kind is download.kind is K.INFRA
    assert collective.key != download.key == again.key, (collective.text, download.text, again.text)


def test_pips_two_words_for_a_missing_version_are_one_failure() -> None:
    both = signature_of("ERROR: Could not find a version that satisfies the requirement torch==1.12.1+cu113 "
                        "(from versions: 2.0.0, 2.0.1)\nERROR: No matching distribution found for torch==1.12.1+cu113\n")
    first = signature_of("ERROR: Could not find a version that satisfies the requirement torch==1.11.0+cu113 "
                         "(from versions: 1.13.0)\n")
    other = signature_of("ERROR: No matching distribution found for jaxlib==0.4.1\n")
    assert both.key == first.key != other.key, (both.text, first.text, other.text)
    assert infra_family(both) is InfraFamily.ENVIRONMENT


def test_a_system_python_refusing_pip_names_its_system() -> None:
    head = "error: externally-managed-environment\n\n\u00d7 This environment is externally managed\n\u2570\u2500> "
    apk = signature_of(head + "The system-wide python installation should be maintained using the system\n"
                       "    package manager (apk) only.\n")
    apk_hint = signature_of("\u00d7 This environment is externally managed\n\u2570\u2500> \n    The system-wide python "
                            "installation should be maintained using the system\n    package manager (apk) only.\n"
                            "hint: See PEP 668 for the detailed specification.\n")
    apt = signature_of(head + "To install Python packages system-wide, try apt install\n    python3-xyz\n")
    assert apk.key == apk_hint.key != apt.key, (apk.text, apk_hint.text, apt.text)
    assert infra_family(apt) is InfraFamily.ENVIRONMENT


def test_rate_limits_name_the_hub_they_came_from() -> None:
    hf = signature_of("requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: "
                      "https://huggingface.co/api/models/m\n")
    hub = signature_of("Error response from daemon: toomanyrequests: You have reached your pull rate limit. "
                       "https://www.docker.com/increase-rate-limit\n")
    assert hf.kind is hub.kind is K.INFRA and hf.key != hub.key
    assert hf.text.endswith(": huggingface.co")
    # one service under its several hosts: the registry's own and its docs' are one limit
    registry = signature_of("ERROR: failed to copy: httpReadSeeker: failed open: unexpected status code "
                            "https://registry-1.docker.io/v2/library/rust/manifests/sha256:de6e: "
                            "429 Too Many Requests - Server message:\n")
    docs = signature_of("error pulling image configuration: toomanyrequests: Too Many Requests. Please see "
                        "https://docs.docker.com/docker-hub/download-rate-limit/\n")
    assert registry.key == docs.key == hub.key != hf.key, (registry.text, docs.text, hub.text)


@pytest.mark.parametrize("log", [
    ERROR,
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 79.15 GiB of which 1.2 GiB is free.\n",
    "AssertionError: Tensor-likes are not close!\n",
    "RuntimeError: CUDA error: an illegal memory access was encountered\n",
])
def test_a_codes_failure_has_no_family(log: str) -> None:
    sig = signature_of(log)
    v = classify_failure(Failure("t", sig), Evidence())
    assert v.classification is Classification.NEW and v.family is None
    assert infra_family(sig) is None and suggested_action(sig) == ""


# ----- the field corpus's train part ---------------------------------------------------------------

def test_the_loader_never_hands_out_the_held_aside_part(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    urls = [f"https://github.com/o/r/issues/{i}" for i in range(30)]
    lines = [json.dumps({"id": f"e{i}", "source_url": u, "project": "other", "surface": "log", "class": "code",
                         "cause": f"c{i}", "text": "x", "split": real_corpus.field_split(u)})
             for i, u in enumerate(urls)]
    # an entry whose stored split says train while its thread falls aside stays aside
    lying = next(u for u in urls if real_corpus.field_split(u) == "heldout")
    lines.append(json.dumps({"id": "liar", "source_url": lying, "project": "other", "class": "code",
                             "cause": "c", "text": "x", "split": "train"}))
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n{not json\n")
    train = real_corpus.load_field("train", tmp_path)
    held = real_corpus.load_field("heldout", tmp_path)
    assert {c.source_url for c in train}.isdisjoint({c.source_url for c in held})
    assert all(real_corpus.field_split(c.source_url) == "train" for c in train)
    assert "liar" in {c.id for c in held} and len(train) + len(held) == 31


def test_the_train_part_of_the_field_corpus_scores_above_its_floor() -> None:
    cases = real_corpus.load_field("train")
    if len(cases) < 50:
        pytest.skip("the field corpus's train part has fewer than 50 failures")
    keys = [signature_of(c.text).key for c in cases]
    ours = adjusted_rand_index([c.cause for c in cases], keys)
    first = adjusted_rand_index([c.cause for c in cases],
                                [next((ln for ln in c.text.splitlines() if ln.strip()), "") for c in cases])
    # (the floor falls as read batches join the train part: collectors who never saw each other's
    # labels name one cause differently, the same runner's full disk in three words)
    assert ours >= 0.33 and ours > 3 * first


def test_a_cancelled_job_is_keyed_by_what_made_the_runner_cancel_it() -> None:
    shut = signature_of("##[error]The runner has received a shutdown signal.\n"
                        "##[error]The operation was canceled.\n")
    plain = signature_of("Run python -m pytest test/\n##[error]The operation was canceled.\n")
    assert shut.text == "INFRA: runner shut down"
    assert plain.text == "INFRA: job cancelled by the runner"
    assert classify_failure(Failure("t", plain), Evidence()).family is InfraFamily.MACHINE


def test_the_tracking_issue_of_an_infra_group_says_what_to_do() -> None:
    from forkflow.triage.tracking import render_body
    from forkflow.triage.trunk import RedItem

    def body(log: str) -> str:
        sig = signature_of(log)
        return render_body([RedItem(Failure("test_x", sig, 1, "unit"), "L2", 1, "a" * 40, 2, None)],
                           None, (), [])
    env = body("Device arch: sm_120\n" + NO_KERNEL)
    # the action is quoted as prose (Markdown's punctuation escaped), like any text in the body
    assert "**Suggested action** (INFRA, environment): rebuild the wheel" in env and "sm\\_120" in env
    assert "**Suggested action** (INFRA, machine): free disk space" in body(
        "OSError: [Errno 28] No space left on device\n")
    assert "Suggested action" not in body(ERROR)


def test_a_loggers_words_before_a_footer_are_not_the_error() -> None:
    err = "RuntimeError: out of resource: shared memory, Required: 98304, Hardware limit: 65536\n"
    tail = ("[W298675 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed "
            "before we destruct ProcessGroupNCCL.\n")
    assert signature_of(err + tail).key == signature_of(err).key
    # an error's own words before a footer stay, wherever the window around the hit starts
    row = ("t.py | T | test_big | torch.OutOfMemoryError: XPU out of memory. Tried to allocate 16.00 GiB. "
           "GPU 0 has a total capacity of 11.59 GiB. To execute this test, run the following: python t.py\n")
    sig = signature_of(row)
    assert "total capacity of 11.59 GiB" in sig.excerpt
    assert classify_failure(Failure("t", sig), Evidence()).family is InfraFamily.MACHINE


# ----- second round: rules from the train part's split and merged causes ----------------------

def test_a_docker_build_step_after_a_timestamp_is_looked_through() -> None:
    # a pasted Jenkins log: time, two spaces, then docker build's step and its seconds
    plain = signature_of("CMake Error at CMakeLists.txt:186 (message):\n  Unknown GPU target list!\n")
    got = signature_of("16:45:11  #27 54.52 CMake Error at CMakeLists.txt:186 (message):\n"
                       "16:45:11  #27 54.52   Unknown GPU target list!\n")
    assert got.key == plain.key and "#" not in got.text, got.text


def test_infiniband_completion_errors_are_the_network_between_nodes_with_their_status() -> None:
    nccl = signature_of(
        "node1:411:433 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129\n"
        "node1:411:433 [0] NCCL INFO transport/net.cc:537 -> 2\n"
        "node1:411:411 [1] init.cc:194 NCCL WARN Cuda failure 'an illegal memory access was encountered'\n"
        "node1: Test NCCL failure common.cu:343 'unhandled cuda error'\n")
    plugin = signature_of("NET/IBext:Got completion from peer 10.1.2.3<4711> with status=12 opcode=0 len=0 "
                          "vendor err 129 (Recv)\n")
    other = signature_of("NET/IB : Got completion with error 5, opcode 0, len 0, vendor err 244\n")
    assert nccl.kind is K.INFRA and nccl.key == plugin.key != other.key, (nccl.text, plugin.text, other.text)
    assert nccl.text.endswith("status 12")
    assert infra_family(nccl) is InfraFamily.MACHINE


def test_a_generic_collective_failure_is_keyed_by_the_warning_that_names_its_cause() -> None:
    err = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
           "NCCLUtils.hpp:268, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n")
    shm = signature_of("h1:57:90 [0] misc/shmutils.cc:72 NCCL WARN Error while creating shared memory segment "
                       "/dev/shm/nccl-Ab3xQz (size 9637888)\n" + err)
    shm2 = signature_of("h7:12:40 [3] misc/shmutils.cc:72 NCCL WARN Error while creating shared memory segment "
                        "/dev/shm/nccl-Zk81pQ (size 4194304)\n" + err)
    ibv = signature_of(err + "h2:8:9 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_mr failed with error "
                             "Cannot allocate memory\n")
    bare = signature_of(err)
    assert shm.key == shm2.key
    assert len({shm.key, ibv.key, bare.key}) == 3, (shm.text, ibv.text, bare.text)
    assert "shared memory" in shm.text and "nccl-" not in shm.text


def test_lit_test_ids_without_an_error_are_keyed_by_their_directory() -> None:
    def listed(test: str) -> str:
        return f"Failed Tests (3):\n  {test}\n"
    a = signature_of(listed("TRITON :: TritonGPU/loop-schedule.mlir"))
    b = signature_of(listed("TRITON :: TritonGPU/combine.mlir"))
    c = signature_of(listed("TRITON :: Conversion/tritongpu_to_llvm.mlir"))
    assert a.key == b.key != c.key, (a.text, c.text)
    # an error above the list is still the signature
    err = signature_of("error: CHECK-NEXT: expected string not found in input\n" + listed("MLIR :: IR/x.mlir"))
    assert "lit tests failed" not in err.text


def test_a_missing_symbol_version_is_keyed_by_library_and_requirer_not_the_version() -> None:
    a = signature_of("mlir-tblgen: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found\n")
    b = signature_of("/root/.cache/llvm/bin/mlir-tblgen: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.26' "
                     "not found (required by /root/.cache/llvm/bin/mlir-tblgen)\n")
    other = signature_of("ImportError: /usr/lib/libstdc++.so.6: version `GLIBCXX_3.4.30' not found "
                         "(required by /opt/conda/lib/python3.10/site-packages/triton/_C/libtriton.so)\n")
    assert a.key == b.key != other.key, (a.text, b.text, other.text)
    assert infra_family(a) is InfraFamily.ENVIRONMENT


def test_an_assertion_that_says_what_it_checks_survives_namespace_and_expression_changes() -> None:
    old = ("opt: lib/Conv.cpp:335: virtual mlir::LogicalResult {anonymous}::Lower::matchAndRewrite(mlir::Op, "
           "mlir::ConversionPatternRewriter&) const: Assertion `v && v.getType().isa<mlir::IntegerType>() && "
           "\"only scalar conditions are supported\"' failed.\n")
    new = ("opt: include/Patterns.hpp:843: virtual llvm::LogicalResult {anonymous}::Lower::matchAndRewrite(mlir::Op, "
           "mlir::ConversionPatternRewriter&) const: Assertion `v && isa<mlir::IntegerType>(v.getType()) && "
           "\"only scalar conditions are supported\"' failed.\n")
    elsewhere = new.replace("Lower::matchAndRewrite", "Fold::matchAndRewrite")
    assert signature_of(old).key == signature_of(new).key != signature_of(elsewhere).key
    # a template's bindings still tell its callers apart
    cast = ("x.cpp:1: decltype(auto) llvm::cast(const From&) [To = mlir::{}, From = mlir::Type]: Assertion "
            "`isa<To>(Val) && \"cast<Ty>() argument of incompatible type!\"' failed.\n")
    assert signature_of(cast.format("MemRefType")).key != signature_of(cast.format("RankedTensorType")).key


def test_a_missing_header_is_one_error_whatever_the_compiler_says() -> None:
    gcc = signature_of("/tmp/x/main.c:5:10: fatal error: Python.h: No such file or directory\n")
    clang = signature_of("/src/main.c:5:10: fatal error: 'Python.h' file not found\n")
    prose = signature_of("build fails with `fatal error: 'include/Python.h' file not found` while compiling main.c\n")
    assert gcc.key == clang.key == prose.key, (gcc.text, clang.text, prose.text)
    assert infra_family(gcc) is InfraFamily.ENVIRONMENT


def test_killed_after_the_process_shut_itself_down_is_no_oom_kill() -> None:
    log = ("ERROR 02-17 20:51:49 core.py:210] AssertionError: backend needs compute capability 8.0\n"
           "CRITICAL 02-17 20:51:49 core_client.py:158] Got fatal signal from worker processes, shutting down. "
           "See stack trace above for root cause issue.\n"
           "Killed\n")
    sig = signature_of(log)
    assert sig.kind is not K.INFRA and infra_family(sig) is None, sig.text
    assert signature_of("[18%] Building NVCC (Device) object a.cu.o\nKilled\n").kind is K.INFRA


def test_a_traceback_cut_in_the_harness_is_keyed_by_its_test() -> None:
    def cut(test: str, cls: str) -> str:
        return ("======================================================================\n"
                f"ERROR [21.066s]: {test} (__main__.{cls})\n"
                "----------------------------------------------------------------------\n"
                "Traceback (most recent call last):\n"
                '  File "/opt/conda/lib/python3.10/site-packages/torch/testing/_internal/common_distributed.py", '
                "line 722, in _check_return_codes\n"
                "    raise RuntimeError(error)\n"
                "RuntimeError: Process 0 exited with error code 10 and exception:\n"
                "Traceback (most recent call last):\n"
                '  File "/opt/conda/lib/python3.10/site-packages/torch/testing/_internal/common_distributed.py", '
                "line 576, in run_test\n"
                "    getattr(self, test_name)()\n")
    a, b = signature_of(cut("test_overlap", "TestOverlap")), signature_of(cut("test_timeout", "NcclErrorTest"))
    assert a.key != b.key, a.text
    assert signature_of(cut("test_overlap_2", "TestOverlap")).key == a.key


def test_a_full_disk_and_a_runners_disk_check_are_one_fault() -> None:
    full = signature_of("fatal: write error: No space left on device\n")
    check = signature_of("You are running out of disk space. The runner will stop working when the machine runs "
                         "out of disk space. Free space left: 54 MB\n")
    assert full.key == check.key and full.kind is K.INFRA
    assert "free disk space" in suggested_action(check)


def test_device_memory_held_by_another_process_is_the_machines() -> None:
    held = ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 6.50 GiB. GPU 0 has a total capacity "
            "of 251.98 GiB of which 1.59 GiB is free. Of the allocated memory 19.52 GiB is allocated by PyTorch, "
            "and 978.00 MiB is reserved by PyTorch but unallocated.\n")
    mine = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.50 GiB. GPU 0 has a total capacity "
            "of 79.10 GiB of which 1.59 GiB is free. Of the allocated memory 75.52 GiB is allocated by PyTorch, "
            "and 978.00 MiB is reserved by PyTorch but unallocated.\n")
    assert infra_family(signature_of(held)) is InfraFamily.MACHINE
    assert infra_family(signature_of(mine)) is None  # the test's own allocations: may be the change's


def test_a_quote_ending_inside_a_tracebacks_frames_is_keyed_by_where_it_stopped() -> None:
    def quoted(test: str) -> str:
        return (f"python test\\inductor\\{test}.py Tests.test_basic_xpu\n"
                '  File "C:\\env\\lib\\site-packages\\torch\\_inductor\\runtime\\compile_tasks.py", line 51, in _reload\n'
                "    exec(code, mod.__dict__, mod.__dict__)\n"
                '  File "C:\\Temp\\tmpvg_ym0ay\\2p\\c2p7v5vz2hfgtube4bg7uuh34x23olwgklxoazy.py", line 153, in <module>\n'
                '  File "C:\\env\\lib\\site-packages\\torch\\_inductor\\runtime\\triton_heuristics.py", line 427, in _make_launchers\n'
                "    launchers\n")
    a, b = signature_of(quoted("test_padding")), signature_of(quoted("test_fusion"))
    assert a.key == b.key and "_make_launchers" in a.text, a.text


def test_a_version_a_requirement_names_is_kept() -> None:
    def gcc(v: int) -> str:
        return (f"/usr/include/crt/host_config.h:139:2: error: #error -- unsupported GNU version! gcc versions "
                f"later than {v} are not supported!\n")
    assert signature_of(gcc(11)).key != signature_of(gcc(12)).key
    assert signature_of(gcc(12)).key == signature_of(gcc(12).replace("139:2", "141:2")).key
    cmake = signature_of("CMake Error at CMakeLists.txt:3 (cmake_minimum_required):\n  CMake 3.20.0 or higher is required.  "
                         "You are running version 3.16.3\n")
    assert "3.20.0" in cmake.text and infra_family(cmake) is InfraFamily.ENVIRONMENT


@pytest.mark.parametrize("log, family", [
    ("downloading https://example.blob.core.windows.net/llvm-builds/llvm-ce80c80d-centos-x64.tar.gz ...\n"
     "error: HTTP Error 404: The specified blob does not exist.\n", InfraFamily.ENVIRONMENT),
    (">>> import triton\nWARNING: Failed to find CUDA.\n", InfraFamily.ENVIRONMENT),
    ("oneCCL could not be initialized! Could not load any plugin.\n", InfraFamily.ENVIRONMENT),
])
def test_more_environment_faults(log: str, family: InfraFamily) -> None:
    assert infra_family(signature_of(log)) is family, signature_of(log).text


def test_http_statuses_are_kept_and_tell_errors_apart() -> None:
    a = signature_of("error: HTTP Error 404: The specified blob does not exist.\n")
    b = signature_of("error: HTTP Error 409: The specified blob does not exist.\n")
    assert a.key != b.key


def test_the_loader_hands_out_how_each_cause_was_established(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    url = next(f"https://github.com/o/r/issues/{i}" for i in range(30)
               if real_corpus.field_split(f"https://github.com/o/r/issues/{i}") == "train")
    (tmp_path / "a.jsonl").write_text(json.dumps({
        "id": "e", "source_url": url, "project": "other", "surface": "log", "class": "code", "cause": "c",
        "text": "x", "split": "train", "fix": "fixed by PR #12"}) + "\n")
    [case] = real_corpus.load_field("train", tmp_path)
    assert case.fix == "fixed by PR #12"


# ----- LLVM tools' crashes -----------------------------------------------------------------------

_DUMP = ("PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash "
         "backtrace.\nStack dump:\n0.\tProgram arguments: /b/{w}/bin/{tool} {opts} /w/{w}/llvm/test/{test}\n{extra}"
         " #0 0x000055d0{w} (/b/bin/{tool}+0x1234)\n #1 0x000055d1 (/b/bin/{tool}+0x1235)\n")


def test_an_llvm_crash_without_symbols_is_keyed_by_what_the_tool_was_doing() -> None:
    """A stack dump whose frames name nothing: the innermost pass it ran, else the tool and its
    input; never the words every crash prints (`Stack dump:`)."""
    def dump(w: str, tool: str, test: str, extra: str = "", opts: str = "-S") -> str:
        return signature_of(_DUMP.format(w=w, tool=tool, test=test, extra=extra, opts=opts)).text

    lv = '1.\tRunning pass "function(loop-vectorize)" on module "a.ll"\n2.\tRunning pass "loop-vectorize" on function "f"\n'
    slp = '1.\tRunning pass "slp-vectorizer" on function "g"\n'
    assert dump("w1", "opt", "a.ll", lv) == dump("w2", "opt", "b.ll", lv) == "CRASH: crash in pass loop-vectorize"
    assert dump("w1", "opt", "a.ll", slp) != dump("w1", "opt", "a.ll", lv)
    llc = dump("w1", "llc", "CodeGen/NVPTX/redux.ll", opts="-mtriple=nvptx64")
    assert llc == dump("w9", "llc", "CodeGen/NVPTX/redux.ll", opts="-mtriple=nvptx64") == "CRASH: crash of llc on redux.ll"
    assert llc != dump("w1", "llc", "CodeGen/NVPTX/other.ll", opts="-mtriple=nvptx64")
    unhandled = signature_of("Program aborted due to an unhandled Error:\ncreateMCCodeEmitter failed\n"
                             + _DUMP.format(w="w", tool="llc", test="DebugInfo/fixed-point.ll", extra="", opts=""))
    assert unhandled.text == "CRASH: Program aborted due to an unhandled Error: createMCCodeEmitter failed"


def test_nccl_without_shared_memory_is_the_containers_dev_shm_not_the_disk() -> None:
    fallocate = signature_of("[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n"
                             "[3] NCCL INFO include/shm.h:41 -> 2\n[3] include/shm.h:48 NCCL WARN Error while creating "
                             "shared memory segment nccl-shm-recv-1462445a6f01cbfc-1-2-3 (size 9637888)\n")
    vllm = signature_of("(VllmWorkerProcess pid=221) ERROR 04-06 20:46:48 [multiproc_worker_utils.py:238] torch.distributed."
                        "DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled "
                        "system error (\nNCCL WARN Error while creating shared memory segment /dev/shm/nccl-xxxxx (size 7340384)\n")
    disk = signature_of("/usr/bin/ld: final link failed: No space left on device\n")
    assert fallocate.key == vllm.key != disk.key, (fallocate.text, vllm.text, disk.text)
    assert "--shm-size" in suggested_action(vllm) and infra_family(vllm) is InfraFamily.MACHINE


def test_the_oom_killers_line_naming_a_compiler_is_a_build_killed() -> None:
    kernel = signature_of("killed: signal terminated program cc1plus\n\nOut of memory: Killed process 4242 (cc1plus) "
                          "total-vm:9123456kB\n")
    gcc = signature_of("g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n")
    python = signature_of("Out of memory: Killed process 1234 (python3) total-vm:123kB\n")
    assert kernel.key == gcc.key != python.key, (kernel.text, gcc.text, python.text)


def test_a_missing_symbol_is_the_loaders_failure_whatever_raised_it() -> None:
    traceback = signature_of('Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\nImportError: '
                             "/x/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined "
                             "symbol: _ZN3c104cuda9SetDeviceEi\n")
    bare = signature_of("flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n")
    wrapped = signature_of("ImportError:\n/usr/lib/python3/dist-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
                           "\n: undefined symbol: _ZN3c104impl3cow11cow_deleterEPv\n")
    assert traceback.key == bare.key == wrapped.key, (traceback.text, bare.text, wrapped.text)
    assert infra_family(bare) is InfraFamily.ENVIRONMENT


def test_a_line_of_an_exceptions_message_is_read_as_that_exception() -> None:
    """A message over several lines, its last one naming `error` in prose: the exception it
    belongs to is the error, not the prose's first clause."""
    head = "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.\n"
    long = signature_of(head + "making sure all `forward` function outputs participate in calculating loss.\n"
                        "In addition, you can set TORCH_DISTRIBUTED_DEBUG to print which parameters did not receive "
                        "gradient on this rank as part of this error\n")
    assert long.key == signature_of(head).key, long.text
    # a blank line ends the message: what follows is a report of its own
    apart = signature_of("RuntimeError: x\n\nsome prose that mentions an error here\n")
    assert "prose" in apart.text


def test_a_model_wrapper_hiding_an_attribute_is_one_failure_whichever_attribute() -> None:
    a = signature_of("AttributeError: 'DistributedDataParallel' object has no attribute 'down_blocks'\n")
    b = signature_of("AttributeError: 'DistributedDataParallel' object has no attribute 'encode_stage_2_inputs'\n")
    none = signature_of("AttributeError: 'NoneType' object has no attribute 'down_blocks'\n")
    assert a.key == b.key != none.key and "down_blocks" in none.text


@pytest.mark.security
def test_version_10_rules_stay_linear_on_hostile_lines() -> None:
    """A CI log built against signature version 10's rules: a megabyte mangled symbol, library names
    without end before `undefined symbol`, thousands of message lines under an exception, a stack
    dump's arguments of endless options, hub URLs and PEP 668 words repeated."""
    from tests.hostile import read_quickly

    texts = [
        "ImportError: x.so: undefined symbol: _ZN" + "9" * 500_000 + "\n",
        "a.so" * 200_000 + ": undefined symbol: " + "_Z" * 200_000 + "\n",
        "RuntimeError: x\n" + "more of the message that names an error\n" * 50_000,
        "Stack dump:\n0.\tProgram arguments: " + "-o " * 300_000 + "\n" + "1.\tRunning pass '" + "p" * 300_000 + "\n",
        "toomanyrequests: https://" + "a." * 300_000 + "docker.io/x\n",
        "error: externally-managed-environment\n" + "apk apt brew " * 100_000 + "\n",
        "NCCL WARN Error while creating shared memory segment " + "/dev/shm" * 100_000 + "\n",
        "AttributeError: 'DistributedDataParallel' object has no attribute '" + "a" * 500_000 + "'\n",
        "Out of memory: Killed process " + "1" * 300_000 + " (cc1plus)\n",
    ]
    sigs = read_quickly(texts, 1.0, infra_family, suggested_action)
    assert all(s.text for s in sigs)


def test_a_native_frame_or_an_elision_is_never_the_error() -> None:
    dump = ("1.      <eof> parser at end of file\n2.      Code generation\n"
            "3.      Running pass 'Function Pass Manager' on module 'reduced.c'.\n"
            "4.      Running pass 'CodeGen Prepare' on function '@j'\n"
            " #0 0x00007fa0eda2a414 PrintStackTraceSignalHandler(void*) Signals.cpp:0:0\n"
            " #2 0x00007fa0ecd91090 (/lib/x86_64-linux-gnu/libc.so.6+0x43090)\n"
            " #4 0x00007fa0ecd70859 abort /build/glibc-BHL3KM/glibc-2.31/stdlib/abort.c:81:7\n")
    assert signature_of(dump).text == "CRASH: crash in pass CodeGen Prepare"
    assert signature_of("RuntimeError: boom\n[...]\n").key == signature_of("RuntimeError: boom\n").key
    assert signature_of("ValueError: bad shape\n...\n-----\n").key == signature_of("ValueError: bad shape\n").key


def test_windows_loader_errors_are_keyed_by_code_not_by_the_systems_language() -> None:
    english = signature_of('OSError: [WinError 126] The specified module could not be found. Error loading '
                           '"C:\\x\\torch\\lib\\fbgemm.dll" or one of its dependencies.\n')
    german = signature_of("2024-08-01 ERROR Could not load torch: [WinError 126] Das angegebene Modul wurde nicht "
                          "gefunden.\n")
    procedure = signature_of("OSError: [WinError 127] The specified procedure could not be found.\n")
    assert english.key == german.key != procedure.key, (english.text, german.text, procedure.text)
    assert infra_family(german) is InfraFamily.ENVIRONMENT


def test_a_generated_header_not_yet_built_is_one_failure_whichever_header() -> None:
    a = signature_of("/x/y.cpp:3:10: fatal error: 'OpInterfaces.h.inc' file not found\n")
    b = signature_of("/x/z.cpp:9:10: fatal error: 'FuncOps.h.inc' file not found\n")
    gcc = signature_of("/x/z.cpp:9:10: fatal error: CGPasses.h.inc: No such file or directory\n")
    system = signature_of("/x/z.cpp:9:10: fatal error: 'cuda_runtime.h' file not found\n")
    assert a.key == b.key != system.key, (a.text, b.text, system.text)
    assert "*.inc" in gcc.text and infra_family(a) is None and infra_family(system) is InfraFamily.ENVIRONMENT


def test_an_http_429_however_worded_is_a_rate_limit() -> None:
    said = signature_of("Error: Unexpected HTTP response: 429\n")
    assert said.kind is K.INFRA and "rate limited" in said.text
    assert "rate limited" not in signature_of("at line 429 of foo.py: error x\n").text


def test_a_rate_limit_without_its_url_is_named_by_the_client_that_hit_it() -> None:
    hub = signature_of("huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: ...\n")
    with_url = signature_of("HfHubHTTPError: 429 Client Error: Too Many Requests for url: https://huggingface.co/api/m\n")
    assert hub.key == with_url.key and hub.text.endswith(": huggingface.co"), hub.text
    # a job the runner cancelled after retrying against the limit: the limit, and whose
    cancelled = signature_of("  Did not find Miniconda3-latest-Linux-x86_64.sh latest in cache\n"
                             "  Unexpected HTTP response: 429\n  Waiting 17 seconds before trying again\n\n"
                             "Error: Unexpected HTTP response: 429\nError: The operation was canceled.\n")
    assert cancelled.text.endswith("(HTTP 429): anaconda.com"), cancelled.text


def test_a_temporary_files_name_is_never_the_error() -> None:
    a = signature_of("FileNotFoundError: [Errno 2] No such file or directory: '/home/v/.triton/cache/c926/"
                     "fused_moe_kernel.cubin.tmp.pid_72_945989'\n")
    b = signature_of("FileNotFoundError: [Errno 2] No such file or directory: '/m/.triton/cache/cff6/_rms_norm_bwd_dx"
                     "_fused.ttir.tmp.pid_15735_304289' -> '/m/.triton/cache/cf/_rms.ttir'\n")
    other = signature_of("FileNotFoundError: [Errno 2] No such file or directory: '/data/config.yaml'\n")
    assert a.key == b.key != other.key, (a.text, b.text, other.text)


def test_a_registrys_limit_is_named_by_its_registry_not_the_docker_client() -> None:
    ecr_pull = signature_of('    "cmd": "docker pull \\"public.ecr.aws/zebrunner/appium:2.0.2\\"",\n'
                            '    "stderr": "Error response from daemon: toomanyrequests: Rate exceeded",\n')
    ecr = signature_of("Error response from daemon: toomanyrequests: Rate exceeded\n")
    hub = signature_of("Error response from daemon: toomanyrequests: You have reached your pull rate limit. "
                       "https://www.docker.com/increase-rate-limit\n")
    assert ecr_pull.key == ecr.key != hub.key, (ecr_pull.text, ecr.text, hub.text)


def test_torchs_own_words_for_a_missing_dll_are_the_windows_loaders_126() -> None:
    curly = signature_of("Erro loading \u201cxxx\\Lib\\site-packages\\torch\\lib\\fbgemm.dll\u201d or one of its "
                         "dependencies.\n")
    coded = signature_of('OSError: [WinError 126] The specified module could not be found. Error loading '
                         '"C:\\x\\fbgemm.dll" or one of its dependencies.\n')
    assert curly.key == coded.key and infra_family(curly) is InfraFamily.ENVIRONMENT


def test_a_quote_cut_in_a_frames_source_behind_a_prefix_is_cut_at_that_frame() -> None:
    tag = "(VllmWorker rank=0 pid=239570) ERROR 05-13 16:11:49 [multiproc_executor.py:522] "
    lines = ['  File "/usr/lib/python3.10/dist-packages/triton/runtime/jit.py", line 569, in run',
             "    kernel = self.compile(src, target=target, options=options.__dict__)",
             '  File "/usr/lib/python3.10/dist-packages/triton/compiler/compiler.py", line 278, in compile',
             "    module = src.make_ir(options, codegen_fns, module_map, context)"]
    tagged = signature_of("".join(tag + ln + "\n" for ln in lines))
    plain = signature_of("".join(ln + "\n" for ln in lines))
    assert tagged.key == plain.key and "traceback cut @" in tagged.text, (tagged.text, plain.text)


def test_an_abort_is_keyed_by_the_reason_printed_before_it() -> None:
    rocblas = signature_of("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file "
                           "or directory\nAborted (core dumped)\n")
    assert "TensileLibrary" in rocblas.text and infra_family(rocblas) is InfraFamily.ENVIRONMENT
    # nothing printed that says what went wrong: the abort itself
    assert signature_of("Loading model...\nAborted (core dumped)\n").text == "CRASH: Aborted (core dumped)"


def test_a_diagnostic_whose_message_is_on_the_next_line() -> None:
    split = signature_of("/src/mlir/include/mlir/IR/Dialect.h:12:10: fatal error:\n'mlir/IR/DialectAttrs.h.inc' "
                         "file not found\n#include \"x\"\n")
    whole = signature_of("/x/a.cpp:3:10: fatal error: 'OpInterfaces.h.inc' file not found\n")
    assert split.key == whole.key, (split.text, whole.text)


def test_markdown_and_json_quoting_around_an_error_is_the_reporters() -> None:
    plain = signature_of("RuntimeError: mat1 and mat2 shapes cannot be multiplied\n")
    assert signature_of("RuntimeError: mat1 and mat2 shapes cannot be multiplied`\n").key == plain.key
    emphasis = signature_of("_RuntimeError: one of the variables needed for gradient computation has been modified "
                            "by an inplace operation_\n")
    assert emphasis.key == signature_of("RuntimeError: one of the variables needed for gradient computation has been "
                                        "modified by an inplace operation\n").key, emphasis.text
    ecc = signature_of("RuntimeError: CUDA error: uncorrectable ECC error encountered\\\n")
    assert ecc.key == signature_of("RuntimeError: CUDA error: uncorrectable ECC error encountered\n").key
    old = signature_of("RuntimeError: NCCL Error 2: unhandled system error\n")
    assert old.key == signature_of("RuntimeError: NCCL error: unhandled system error\n").key, old.text


def test_a_compiler_too_old_for_the_device_is_the_environments() -> None:
    sig = signature_of("clang: error: invalid target ID 'gfx1100'; format is a processor name followed by an optional "
                       "colon-delimited list of features\n")
    assert infra_family(sig) is InfraFamily.ENVIRONMENT


def test_a_worker_exit_code_near_sigkill_is_not_the_oom_killer() -> None:
    sig = signature_of("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -90) local_rank: 0 "
                       "(pid: 12) of binary: /usr/bin/python\n")
    assert infra_family(sig) is None, sig.text


def test_another_windows_loader_code_keeps_its_own_number() -> None:
    other = signature_of('OSError: [WinError 182] The operating system cannot run %1. Error loading '
                         '"C:\\x\\detectron ops.dll" or one of its dependencies.\n')
    missing = signature_of('OSError: [WinError 126] The specified module could not be found. Error loading '
                           '"C:\\x\\fbgemm.dll" or one of its dependencies.\n')
    assert other.key != missing.key and "182" in other.text, other.text
