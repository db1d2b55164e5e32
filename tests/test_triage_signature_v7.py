"""Signature version 7: what the OOM killer killed, NCCL's `Last error:` under its collective
failure, a device compiler's summary line, diagnostics cut by a hard wrap, a message that is all
parentheses, lit's `# error: command failed` line, a CMake error quoted without its header,
torch's extension builder re-raising ninja, and a port the job may not bind.  Each pattern is
checked for linear time on hostile input."""
from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from forkflow.triage.classify import infra_family, suggested_action
from forkflow.triage.models import FailureKind, InfraFamily
from forkflow.triage.signature import signature_of
from tests.hostile import read_quickly


def test_the_oom_killer_is_keyed_by_what_it_killed() -> None:
    gcc = signature_of("[ 40%] Building CXX object lib/X.cpp.o\n"
                       "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n")
    cut = signature_of("[ 40%] Building CXX object lib/Y.cpp.o\ng++: fatal error: Killed signal terminat\n")
    ld = signature_of("collect2: fatal error: ld terminated with signal 9 [Killed]\ncompilation terminated.\n")
    slurm = signature_of("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=3720.0. Some of your "
                         "processes may have been killed by the cgroup out-of-memory handler.\n"
                         "srun: error: node107: task 0: Out Of Memory\n")
    pod = signature_of("Last State: Terminated\n  Reason: OOMKilled\n")
    bare = signature_of("Collecting torch\n  Downloading torch-2.1.0-cp38-cp38-manylinux1_x86_64.whl (776.8 MB)\n"
                        "Killed\n")
    # a compiler and the linker of a parallel build are one fault, whichever was killed
    assert gcc.key == cut.key == ld.key
    assert slurm.key == pod.key
    assert len({gcc.key, slurm.key, bare.key}) == 3
    for sig in (gcc, slurm, bare):
        assert sig.kind is FailureKind.INFRA and infra_family(sig) is InfraFamily.MACHINE
    assert "memory limit" in suggested_action(slurm) and "MAX_JOBS" in suggested_action(gcc)


def test_nccls_last_error_is_the_detail_of_its_collective_failure() -> None:
    def log(detail: str) -> str:
        return ("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited "
                "or there was a network error, NCCL version 2.21.5\n"
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
                f"prematurely.\nLast error:\n{detail}\n")
    reset = signature_of(log("socketProgressOpt: Call to recv from 172.16.0.4<33759> failed : Connection reset by peer"))
    again = signature_of(log("socketProgressOpt: Call to recv from 10.0.0.9<41000> failed : Connection reset by peer"))
    refused = signature_of(log("socketStartConnect: Connect to 10.0.0.9<41000> failed : Connection refused"))
    plain = signature_of("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, remote "
                         "process exited or there was a network error, NCCL version 2.18.6\n")
    assert reset.kind is FailureKind.CUDA_ERROR and "Connection reset by peer" in reset.text
    assert reset.text.startswith("CUDA_ERROR: NCCL error: remote process exited or there was a network error")
    assert reset.key == again.key and len({reset.key, refused.key, plain.key}) == 3
    assert infra_family(reset) is InfraFamily.MACHINE
    # the same network error with no collective failure above it is still a runner fault
    gloo = signature_of("  File \"t.py\", line 3, in init\nRuntimeError: Connection reset by peer\n")
    assert gloo.text == "INFRA: Connection reset by peer"


def test_a_device_compilers_summary_yields_to_the_error_above_it() -> None:
    sig = signature_of("L0 build module failed. Log:\nerror: Double type is not supported on this platform.\n"
                       "in kernel: 'kernel'\nerror: backend compiler failed build.\n")
    assert sig.text == "GENERIC: error: Double type is not supported on this platform"


def test_a_diagnostic_cut_by_a_hard_wrap_is_joined() -> None:
    width = 84
    lines = ["In file included from /home/u/vllm-rocm/hipsrc/attention/attention_kernels_hip.hip:23:",
             "In file included from /home/u/vllm-rocm/hipsrc/attention/attention_dtypes_and_friends_hip.h:6:",
             "/opt/rocm-5.6.1/include/hip/hip_bf16.h:30:10: fatal error: 'hip/amd_detail/amd_hip_bf16.h' file not found"]
    wrapped = "\n".join(ln[i:i + width] for ln in lines for i in range(0, len(ln), width))
    assert sum(1 for ln in wrapped.split("\n") if len(ln) == width) >= 3
    whole = signature_of("\n".join(lines) + "\n#include <hip/amd_detail/amd_hip_bf16.h>\n")
    cut = signature_of(wrapped + "\n#include <hip/amd_detail/amd_hip_bf16.h>\n")
    assert whole.text == cut.text == "COMPILER_ERROR: error: 'amd_hip_bf16.h' file not found"
    # lines of one length that are not cut (the next line is indented) stay apart
    table = "\n".join(["x" * 70 + ": error: first", "y" * 70 + ": error: other", "z" * 70 + ": error: third",
                       "    note: here"])
    assert "note" not in signature_of(table).text


def test_a_message_that_is_all_parentheses_is_the_message() -> None:
    a = signature_of("Creating package \"torchvision\"\nError:  ('\"torchvision\" could not be found', 404)\n")
    b = signature_of("Creating package \"torchaudio\"\nError:  ('\"torchaudio\" could not be found', 404)\n")
    assert "could not be found" in a.text and a.key != b.key


def test_lits_command_failed_line_yields_to_the_test() -> None:
    def log(test: str) -> str:
        return (f"FAIL: MLIR :: python/{test} (92 of 99)\n"
                f"******************** TEST 'MLIR :: python/{test}' FAILED ********************\n"
                "Exit Code: 1\n\nCommand Output (stdout):\n--\n# RUN: at line 1\n"
                "# note: command had no output on stdout or stderr\n"
                "# error: command failed with exit status: 1\n")
    a, b = signature_of(log("execution_engine.py")), signature_of(log("pass_manager.py"))
    assert "execution_engine.py" in a.text and a.key != b.key


def test_a_cmake_error_quoted_without_its_header_is_its_message() -> None:
    def log(target: str, line: int) -> str:
        return (f"/build/lib/cmake/llvm/AddLLVM.cmake:{line} (add_dependencies):\n"
                f"  The dependency target \"{target}\" of target \"obj.TritonGPUToLLVM\" does not\n  exist.\n"
                "Call Stack (most recent call first):\n"
                "  /llvm/build/lib/cmake/mlir/AddMLIR.cmake:347 (llvm_add_library)\n"
                "  lib/Conversion/TritonGPUToLLVM/CMakeLists.txt:1 (add_mlir_conversion_library)\n")
    a, b, c = signature_of(log("MLIRGPUOps", 553)), signature_of(log("MLIRGPUOps", 560)), signature_of(log("MLIRNVVM", 553))
    assert a.text == 'GENERIC: CMake Error: The dependency target "MLIRGPUOps" of target "obj.TritonGPUToLLVM" does not exist'
    assert a.key == b.key != c.key


def test_torchs_extension_builder_is_ninjas_failure_in_its_own_words() -> None:
    torch = signature_of("    File \"/tmp/pip-build-env-x/torch/utils/cpp_extension.py\", line 2116, in _run_ninja_build\n"
                         "      raise RuntimeError(message) from e\n"
                         "  RuntimeError: Error compiling objects for extension\n  [end of output]\n")
    ninja = signature_of("[9/16] c++ -MMD -MF texture.o.d -c texture.cpp -o texture.o\n"
                         "ninja: build stopped: subcommand failed.\n")
    assert torch.key == ninja.key
    # a compiler error quoted above the wrapper is the failure
    header = signature_of("x.cpp:1:10: fatal error: cuda.h: No such file or directory\n"
                          "ninja: build stopped: subcommand failed.\n"
                          "RuntimeError: Error compiling objects for extension\n")
    assert header.kind is FailureKind.COMPILER_ERROR and header.key != torch.key


def test_a_port_the_job_may_not_bind_is_an_environment_fault() -> None:
    denied = signature_of("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                          "network address. The server socket has failed to bind to [::]:98 (errno: 13 - Permission "
                          "denied). The server socket has failed to bind to 0.0.0.0:98 (errno: 13 - Permission denied).\n")
    taken = signature_of("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                         "network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address "
                         "already in use).\n")
    assert "Permission denied" in denied.text and denied.key != taken.key
    assert infra_family(denied) is InfraFamily.ENVIRONMENT and "1024" in suggested_action(denied)
    assert taken.text == "INFRA: port already in use" and infra_family(taken) is InfraFamily.MACHINE


def test_a_configure_steps_cmake_error_is_an_environment_fault() -> None:
    arch = signature_of("#27 54.52 CMake Error at CMakeLists.txt:186 (message):\n"
                        "#27 54.52   Target architectures support different types of FP8 formats!\n")
    assert arch.text == "COMPILER_ERROR: CMake Error: Target architectures support different types of FP8 formats!"
    assert infra_family(arch) is InfraFamily.ENVIRONMENT
    assert "configure step" in suggested_action(arch)
    # a compiler's error of the build that follows is not
    code = signature_of("lib/x.cpp:3:1: error: no member named 'Atan2Op' in namespace 'mlir::cuda_tile'\n")
    assert infra_family(code) is None


def test_a_quote_cut_in_a_tests_source_is_keyed_by_the_test() -> None:
    def log(test: str, last: str) -> str:
        return ("=================================== FAILURES ===================================\n"
                f"________________ TestConvolutions.{test} _________________\n\n"
                "self = <smoke_test.TestConvolutions object at 0x73e5a6ac2fd0>\n\n"
                f"    def {test}(self):\n        x = torch.randn(\n            (1, 16), device=\"cuda\"\n{last}\n")
    a, b = signature_of(log("test_conv_nhwc", "        )")), signature_of(log("test_conv_nhwc[p1]", "        )"))
    c = signature_of(log("test_conv_transpose2d", "        )"))
    assert a.text == "GENERIC: traceback cut @ TestConvolutions.test_conv_nhwc"
    assert a.key == b.key != c.key


def test_nccls_warning_is_keyed_without_the_source_line_it_names() -> None:
    def log(host: str, where: str) -> str:
        return (f"{host}:183006:183220 [1] NCCL INFO proxy.cc:991 -> 6\n"
                f"{host}:183006:183220 [1] {where} NCCL WARN [Proxy Service 9] Failed to execute operation "
                "Connect from rank 9, retcode 6\n")
    a, b = signature_of(log("a100-st-22", "proxy.cc:1119")), signature_of(log("node-7", "src/proxy.cc:1450"))
    assert a.text == "GENERIC: NCCL WARN [Proxy Service N] Failed to execute operation Connect from rank N"
    assert a.key == b.key


def _prefixed(text: str, prefix: str) -> str:
    return "\n".join(prefix.format(i=i) + line for i, line in enumerate(text.split("\n")))


PREFIXES = ("2024-05-09T20:19:{i:02d}.9729182Z ", "[rank3]: ", "[default0]:", "(VllmWorker pid=9{i}) ",
            "vllm-1  | ", "[2025-08-08T10:26:{i:02d}Z] ",
            # an elapsed time with its fraction, Go's date, Open MPI's tag, a timestamp and a tab
            "00:00:{i:02d}.123 ", "2024/05/09 20:19:{i:02d} ", "[1,0]<stderr>:", "2024-05-09T20:19:{i:02d}.123Z\t")


def test_the_structures_are_found_behind_any_runner_prefix() -> None:
    logs = (
        # pytest's `E` lines, which the scan finds only at the start of a line
        "test_api.py:572: in test_globaltime\n    assert s > 1\nE   assert 0 > 1\n",
        ">       torch.testing.assert_close(grad_y, ref_grad_y, rtol=1e-3, atol=2e-3)\n"
        "E       AssertionError: Tensor-likes are not close!\nE       \nE       Mismatched elements: 1 / 21 (4.8%)\n",
        # a summary whose prefix's colon makes it look like a located diagnostic
        "L0 build module failed. Log:\nerror: Double type is not supported on this platform.\n"
        "in kernel: 'kernel'\nerror: backend compiler failed build.\n",
        # the OOM killer's bare `Killed`, and NCCL's `Last error:`
        "[ 18%] Building NVCC (Device) object src/ATen/x.cu.o\nKilled\n"
        "CMake Error at x.cu.o.Release.cmake:279 (message):\n  Error generating file\n",
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited or there "
        "was a network error, NCCL version 2.21.5\nLast error:\n"
        "socketProgressOpt: Call to recv from 10.0.0.2<33759> failed : Connection reset by peer\n",
    )
    for log in logs:
        plain = signature_of(log)
        for prefix in PREFIXES:
            assert signature_of(_prefixed(log, prefix)).key == plain.key, (prefix, plain.text)
    assert signature_of(logs[0]).text == "EXCEPTION: assert N > N @ test_api.py:test_globaltime"
    assert signature_of(logs[3]).text == "INFRA: host out of memory (OOM killer)"


def test_a_windows_logs_line_ends_and_a_markdown_quote_change_nothing() -> None:
    logs = (
        ">       torch.testing.assert_close(grad_y, ref_grad_y, rtol=1e-3, atol=2e-3)\n"
        "E       AssertionError: Tensor-likes are not close!\nE       \nE       Mismatched elements: 1 / 21 (4.8%)\n"
        "E       Greatest relative difference: 0.0023 at index (0, 1) (up to 0.001 allowed)\n",
        "16:45:11  #27 54.52 CMake Error at CMakeLists.txt:186 (message):\n"
        "16:45:11  #27 54.52   Target architectures support different types of FP8 formats!\n",
        "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ImportError('/x/_C.abi3.so: "
        "undefined symbol: _ZN5torch7LibraryC1E')\n",
        "FAILED python/test/unit/language/test_core.py::test_permute[float16-shape0] - AssertionError: \n",
        "  MLIR :: Conversion/ArithToSPIRV/arith-to-spirv-le-specific.mlir\n",
    )
    for log in logs:
        plain = signature_of(log)
        assert signature_of(log.replace("\n", "\r\n")).key == plain.key, plain.text
        quoted = "\n".join("> " + line if line else ">" for line in log.rstrip("\n").split("\n")) + "\n"
        assert signature_of(quoted).key == plain.key, plain.text
    # pytest's own `>` line is not a quote: the failing statement still keys the failure
    assert "assert_close" in signature_of(logs[0]).text


def test_an_error_a_wrapper_reraises_on_its_line_is_read_whole() -> None:
    cause = ("The above exception was the direct cause of the following exception:\n\nTraceback (most recent call "
             "last):\n  File \"/opt/conda/lib/python3.10/site-packages/torch/_dynamo/output_graph.py\", line 1465, in "
             "_call_user_compiler\n    raise BackendCompilerFailed(self.compiler_fn, e) from e\n")
    denied = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
              "address. The server socket has failed to bind to [::]:98 (errno: 13 - Permission denied). The server "
              "socket has failed to bind to 0.0.0.0:98 (errno: 13 - Permission denied).")
    loader = "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory"
    symbol = ("ImportError: /x/vllm/_C.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN2at4_ops15to_dtype_"
              "layout4callERKNS_6TensorEN3c108optionalINS5_10ScalarTypeEEENS6_INS5_6LayoutEEENS6_INS5_6DeviceEEENS6_"
              "IbEEbbNS6_INS5_12MemoryFormatEEE")
    for error in (denied, loader, symbol):
        plain = signature_of(f"Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n{error}\n")
        wrapped = signature_of(f"Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n{error}\n\n"
                               f"{cause}torch._inductor.exc.InductorError: {error}\n")
        assert wrapped.key == plain.key, (plain.text, wrapped.text)
        assert "InductorError" not in wrapped.text


@pytest.mark.security
def test_the_new_patterns_are_linear_on_hostile_lines() -> None:
    hostile = ("x" * 500_000 + "\nCall Stack (most recent call first):\n",
               ("a" * 300 + "\n") * 3000 + "b: fatal error: x\n",
               "Last error:\n" * 100_000 + "Connection reset by peer\n",
               "(errno: 1 - " + "a" * 500_000,
               "fatal error: Killed signa" * 40_000 + "l\n",
               "oom-kil" * 100_000 + "l\nKilled\n",
               "(" * 200_000 + " Error: ",
               "Error compiling objects for extensio" * 20_000,
               "_" * 500_000 + " x " + "_" * 3,
               "h:1:2 [0] " + "a" * 500_000 + ".cc:1 NCC\n",
               "\nE   " * 100_000 + "x",
               ": error: backend compiler failed build." * 20_000,
               ">" * 500_000 + "\n" + "\n> x" * 100_000,
               "\r" * 500_000 + "\n",
               "____ T.t ____\n" + ("    " * 400 + "x\n") * 2000 + " " * 200_000 + "\n")
    read_quickly(hostile, 1.0, infra_family)


@pytest.mark.security
@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["Last error:", "Connection reset by peer", "NCCL error", "\n", " ", "x",
                                 ".cmake:12 (add_x):", "Call Stack (most recent call first):", "  msg",
                                 "fatal error: Killed signal", "oom-kill event", "Killed", "(errno: 13 - ",
                                 "Permission denied)", "error: backend compiler failed build.",
                                 "# error: command failed with exit status: 1", "Error: (", "'a', 1)",
                                 "x" * 70, ": fatal error: y", "\r\n", "\r", "> ", ">"]),
                max_size=300))
def test_fuzzed_lines_of_the_new_structures_always_get_a_signature(parts: list[str]) -> None:
    (sig,) = read_quickly(["".join(parts)], 1.0, infra_family)
    assert len(sig.text) <= 700
