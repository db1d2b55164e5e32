"""One test per general signature rule found on real CI logs (issue 14).  [pure]

Each rule is stated in general terms; the literal logs here are written for the test, in the
shape real CI prints them, not copied from the corpus.
"""
from __future__ import annotations

from forkflow.triage.signature import signature_of

DSA_FOOTER = ("CUDA kernel errors might be asynchronously reported at some other API call.\n"
              "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")


def test_trigger_words_in_a_footer_line_are_not_the_error() -> None:
    # the footer says `device-side assertions`: the error is the line above it
    log = "RuntimeError: CUDA error: misaligned address\n" + DSA_FOOTER
    assert signature_of(log).text == "CUDA_ERROR: CUDA runtime error: misaligned address"


def _ima(frame_file: str, func: str, short: bool = False) -> str:
    if short:
        frames = f"{frame_file}:12: in {func}\n    k.run(x)\n"
    else:
        frames = (f'Traceback (most recent call last):\n  File "/w/{frame_file}", line 12, in {func}\n'
                  "    k.run(x)\n")
    return frames + "RuntimeError: CUDA error: an illegal memory access was encountered\n" + DSA_FOOTER


def test_a_kernel_fault_is_told_apart_by_the_frame_that_launched_it() -> None:
    a, b = signature_of(_ima("attn.py", "forward")), signature_of(_ima("norm.py", "forward"))
    assert a.key != b.key
    assert a.text.endswith("@ attn.py:forward")
    # --tb=short prints the same frame differently: the same failure
    assert signature_of(_ima("attn.py", "forward", short=True)).key == a.key


def test_a_missing_kernel_image_is_the_machine_wherever_it_is_seen() -> None:
    def log(f: str) -> str:
        return (f'Traceback (most recent call last):\n  File "/w/{f}", line 3, in g\n    y = f(x)\n'
                "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert signature_of(log("a.py")).key == signature_of(log("b.py")).key


def test_details_after_the_first_clause_do_not_split_an_error() -> None:
    # sizes and hints after the first `, ` / `. ` / ` (` change with the run and the version
    a = signature_of("ValueError: too few workspace slots, have: 12, want: 48. Raise the limit.\n")
    b = signature_of("ValueError: too few workspace slots, have: 4, want: 64, try a larger pool\n")
    c = signature_of("ValueError: too few workspace slots (have 4 of 64)\n")
    assert a.key == b.key == c.key
    assert a.text == "EXCEPTION: ValueError: too few workspace slots"
    # but a comma inside quotes or brackets is part of the message
    d = signature_of("RuntimeError: shape '[2, 3]' is invalid for input of size 5\n")
    assert d.text.endswith("shape '[N, N]' is invalid for input of size N")
    # a parenthesised detail is dropped, what follows it is kept
    e = signature_of("RuntimeError: The size of tensor a (4) must match the size of tensor b (5)\n")
    assert e.text.endswith("The size of tensor a must match the size of tensor b")


def test_an_exception_is_found_after_whatever_the_logger_put_before_it() -> None:
    plain = signature_of("mylib.errors.OutOfSlots: no free slot, needed 3\n")
    for line in ("[16:10:42] worker/ERROR  mylib.errors.OutOfSlots: no free slot, needed 9 (x5)\n",
                 "93 mylib.errors.OutOfSlots: no free slot, needed 3\n",  # a numbered paste
                 "W1210 08:01:33.059000 3495860 mylib/run.py:987] [0/0] OutOfSlots: no free slot\n"):
        assert signature_of(line).key == plain.key, line


def test_a_line_that_introduces_the_error_is_followed_to_it() -> None:
    log = ("E0912 11:54:57.366000 1121181 pkg/tune.py:2100] [7/0] Runtime error during tuning: \n"
           "E0912 11:54:57.366000 1121181 pkg/tune.py:2100] [7/0] No valid configs. "
           "OutOfSlots: no free slot, needed 3\n"
           "E0912 11:54:57.366000 1121181 pkg/tune.py:2100] [7/0] Ignoring this choice.\n")
    assert signature_of(log).key == signature_of("OutOfSlots: no free slot\n").key


def test_an_exception_line_is_never_taken_for_harness_noise() -> None:
    log = ('  File "/w/subprocess.py", line 526, in run\n    raise CalledProcessError(retcode, args,\n'
           "subprocess.CalledProcessError: Command '['cc', 'a.c']' returned non-zero exit status 1.\n")
    assert signature_of(log).text.startswith("EXCEPTION: CalledProcessError: Command")


def test_a_wrapper_is_looked_through_to_any_exception_it_names() -> None:
    inner = "mylib.errors.OutOfSlots: no free slot, needed 3\n"
    wrapped = (inner + "\nThe above exception was the direct cause of the following exception:\n\n"
               "Traceback (most recent call last):\n"
               '  File "/site-packages/torch/_dynamo/output_graph.py", line 1465, in _call_user_compiler\n'
               "    raise BackendCompilerFailed(self.compiler_fn, e) from e\n"
               "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n" + inner)
    assert signature_of(wrapped).key == signature_of(inner).key
    inductor = inner + "torch._inductor.exc.InductorError: " + inner
    assert signature_of(inductor).key == signature_of(inner).key


def test_a_passed_test_named_before_the_failure_does_not_locate_it() -> None:
    failure = "FAILED tests/test_mm.py::test_mm[bf16] - AssertionError: Tensor-likes are not close!\n"
    passed = "".join(f"PASSED tests/test_ops.py::test_case_{i} [0.01s]\n" for i in range(50))
    assert signature_of(passed + failure).key == signature_of(failure).key
    assert signature_of(failure).text.endswith("@ test_mm.py")


def test_pytest_e_marker_is_not_part_of_an_out_of_memory_message() -> None:
    a = signature_of("E       RuntimeError: XPU out of memory (allocated: 3 GB, limit: 4 GB).\n")
    b = signature_of("RuntimeError: XPU out of memory (allocated: 1 GB, limit: 2 GB).\n")
    assert a.key == b.key
    assert a.text == "OOM: XPU out of memory"


def _rewrap(log: str, error_line: str) -> str:
    return (log + "\nThe above exception was the direct cause of the following exception:\n\n"
            "Traceback (most recent call last):\n"
            '  File "/site-packages/torch/_dynamo/output_graph.py", line 1465, in _call_user_compiler\n'
            "    raise BackendCompilerFailed(self.compiler_fn, e) from e\n"
            "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n" + error_line)


def test_a_rewrapped_kernel_fault_keeps_the_frame_that_launched_it() -> None:
    log = _ima("attn.py", "forward").replace(DSA_FOOTER, "")
    wrapped = _rewrap(log, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert signature_of(wrapped).key == signature_of(log).key


def test_a_rewrapped_timeout_is_located_where_it_first_happened() -> None:
    log = ('Traceback (most recent call last):\n  File "/w/test_dist.py", line 40, in test_gather\n'
           "    self._wait()\nRuntimeError: Process 0 timed out after 300 seconds\n")
    wrapped = _rewrap(log, "RuntimeError: Process 0 timed out after 300 seconds\n")
    assert signature_of(log).text == "TIMEOUT: timeout in test_dist.py:test_gather"
    assert signature_of(wrapped).key == signature_of(log).key


def test_an_assertion_is_keyed_by_its_function_not_by_what_the_runner_printed_before() -> None:
    func = "T& llvm::SmallVectorTemplateCommon<T, {p}>::operator[](size_type) [with T = int]"
    a = (f"test_a (__main__.TestX) ... python: /root/llvm/SmallVector.h:291: {func.format(p='<template-parameter-1-2>')}: "
         "Assertion `idx < size()' failed.\n")
    b = f"opt: /src/llvm/SmallVector.h:295: {func.format(p='')}: Assertion `idx < size()' failed.\n"
    assert signature_of(a).key == signature_of(b).key
    assert "TestX" not in signature_of(a).text


def test_a_tests_parameters_are_not_part_of_its_signature() -> None:
    def crash(params: str) -> str:
        return f"worker 'gw3' crashed while running 'tests/test_bp.py::test_matmul[{params}]'\n"
    assert signature_of(crash("shape0-4")).key == signature_of(crash("shape1-8")).key


def test_a_message_is_one_error_whatever_type_carries_it() -> None:
    # torch moved CUDA errors from RuntimeError to AcceleratorError; some logs print no type
    a = signature_of("RuntimeError: XPU backend cannot allocate the workspace\n")
    b = signature_of("torch.AcceleratorError: XPU backend cannot allocate the workspace\n")
    c = signature_of("XPU backend cannot allocate the workspace, 64 MB requested\n")
    assert a.key == b.key == c.key
    # a message of one or two words says too little without its type
    assert signature_of("KeyError: 'BLOCK_K'\n").key != signature_of("IndexError: 'BLOCK_K'\n").key


def test_an_abort_after_another_fatal_error_is_not_the_cause() -> None:
    fpe = "Fatal Python error: Floating point exception\n\nCurrent thread 0x00007fb2 (most recent call first):\n"
    assert signature_of(fpe + "Fatal Python error: Aborted\n").key == signature_of(fpe).key


def test_a_tools_name_and_version_are_not_part_of_its_error() -> None:
    def log(tool: str) -> str:
        return f"#3 0x1 _start (/bin/{tool}+0x1)\n{tool}: error: unable to execute command: Aborted (core dumped)\n"
    assert signature_of(log("clang-8")).key == signature_of(log("clang++")).key


def test_a_blank_e_line_does_not_end_pytests_error_block() -> None:
    log = (">       torch.testing.assert_close(out, ref)\n"
           "E       AssertionError: Tensor-likes are not close!\nE\n"
           "E       Mismatched elements: 111 / 4096 (2.7%)\n"
           "E       Greatest absolute difference: 0.00048 at index (5, 28)\n\n"
           "tests/test_dot.py:12: AssertionError\n")
    assert signature_of(log).text.startswith("EXCEPTION: AssertionError: Tensor-likes are not close!")


def test_an_exception_printed_as_its_repr_is_the_same_exception() -> None:
    def log(got: str) -> str:
        return ("triton.compiler.errors.CompilationError: at 12:8:\n    c = tl.dot(a, b)\n        ^\n"
                f"AssertionError('Both operands must be same dtype. Got {got} and fp32')\n")
    assert signature_of(log("bf16")).key == signature_of(log("fp16")).key
    assert signature_of(log("bf16")).text.endswith("AssertionError: Both operands must be same dtype")


def test_a_message_that_only_introduces_a_block_is_located() -> None:
    def failed(test: str) -> str:
        return f"FAILED tests/{test}::test_k[a-1] - triton.compiler.errors.CompilationError: at 80:4:\n"
    assert signature_of(failed("test_attn.py")).key != signature_of(failed("test_norm.py")).key
    assert signature_of(failed("test_attn.py")).text.endswith("@ test_attn.py")


def test_a_rewrapped_kernel_fault_is_located_past_other_ranks_tracebacks() -> None:
    log = _ima("attn.py", "forward").replace(DSA_FOOTER, "")
    other_rank = ('[rank1]: Traceback (most recent call last):\n'
                  '[rank1]:   File "/w/train.py", line 72, in <module>\n')
    wrapped = _rewrap(log + other_rank, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert signature_of(wrapped).key == signature_of(log).key


def test_runner_prefixes_on_every_line_are_not_part_of_the_error() -> None:
    lines = ["step 1 ok", "ERROR: the build failed in stage compile", "done"]
    plain = signature_of("".join(f"{ln}\n" for ln in lines))
    for prefix in ("2024-08-04T01:59:02.2673094Z ", "[2024-08-04T01:59:02.267Z] ", "[16:10:42] ",
                   "2024-08-04 01:59:02,267 - root - ", "[gw3] ", "[rank0]: ", "# | ",
                   "209: "):  # ctest's test number
        log = "".join(f"{prefix}{ln}\n" for ln in lines)
        assert signature_of(log).key == plain.key, prefix


_CLOSE_E = "E       AssertionError: Tensor-likes are not close!\nE\nE       Mismatched elements: 11 / 4096 (0.3%)\n"


def test_pytests_long_and_short_styles_give_one_signature() -> None:
    long = ("    def test_dot(M):\n        out = kernel(x)\n>       torch.testing.assert_close(out, ref)\n"
            + _CLOSE_E + "\ntests/test_dot.py:40: AssertionError\n")
    short = "tests/test_dot.py:40: in test_dot\n    torch.testing.assert_close(out, ref)\n" + _CLOSE_E
    native = ('Traceback (most recent call last):\n  File "/w/tests/test_dot.py", line 40, in test_dot\n'
              "    torch.testing.assert_close(out, ref)\nAssertionError: Tensor-likes are not close!\n")
    assert signature_of(long).key == signature_of(short).key == signature_of(native).key
    assert signature_of(long).text.endswith("@ test_dot.py:test_dot")
    # a helper that asserts is where it happened, in both styles
    long_helper = ("    def test_dot(M):\n>       check(kernel(x), ref)\n\ntests/test_dot.py:40: \n"
                   "_ _ _ _ _ _ _ _\n\n    def check(a, b):\n>       torch.testing.assert_close(a, b)\n"
                   + _CLOSE_E + "\ntests/helpers.py:7: AssertionError\n")
    short_helper = ("tests/test_dot.py:40: in test_dot\n    check(kernel(x), ref)\n"
                    "tests/helpers.py:7: in check\n    torch.testing.assert_close(a, b)\n" + _CLOSE_E)
    assert signature_of(long_helper).key == signature_of(short_helper).key


def test_a_number_at_the_end_of_a_path_keeps_the_name_before_it() -> None:
    def failed(n: int, suite: str) -> str:
        return (f"[  FAILED  ] Inst/{suite}.Run/{n}, where GetParam() = (gfx942, 3) (1434 ms)\n")
    # gtest's parameter index is not the signature; the test's name is
    assert signature_of(failed(29, "AssertTest")).key == signature_of(failed(30, "AssertTest")).key
    assert signature_of(failed(29, "AssertTest")).key != signature_of(failed(29, "CopyTest")).key


def test_a_traceback_behind_ctests_test_number_is_still_a_traceback() -> None:
    tb = ('Traceback (most recent call last):\n  File "/w/tests/test_io.py", line 9, in test_read\n'
          "    check(x)\nValueError: bad header in block 3\n")
    assert signature_of("".join(f"209: {ln}\n" for ln in tb.splitlines())).key == signature_of(tb).key


def test_a_failed_mlir_pipeline_is_keyed_by_the_pass_that_failed() -> None:
    def tb(pass_name: str, diag_after: bool = False) -> str:
        diag = f"Pipeline failed while executing [`{pass_name}` on 'builtin.module' operation]\n"
        text = ('Traceback (most recent call last):\n  File "/w/triton/compiler.py", line 304, in make_ttgir\n'
                "    pm.run(mod)\nRuntimeError: PassManager::run failed\n")
        return text + diag if diag_after else diag + text
    a, b = signature_of(tb("TritonGPUPipeline")), signature_of(tb("TritonGPUCoalesce"))
    assert a.key != b.key
    assert signature_of(tb("TritonGPUPipeline", diag_after=True)).key == a.key
    # the same pass failure seen only as the pass manager's line
    assert signature_of("Pipeline failed while executing TritonGPUPipeline\n").key == a.key


def test_the_runners_and_build_tools_exit_lines_after_the_error_are_not_it() -> None:
    error = "FAILED tests/test_a.py::test_b - ValueError: bad block size, got 3\n"
    plain = signature_of(error)
    for tail in ("##[error]Process completed with exit code 1.\n",
                 "Error: Process completed with exit code 1.\n##[group]Run upload\n##[endgroup]\n",
                 "make[2]: *** [CMakeFiles/t.dir/build.make:76: t] Error 1\nmake: *** [all] Error 2\n",
                 "ninja: build stopped: subcommand failed.\n",
                 "ERROR: InvocationError for command /usr/bin/pytest (exited with code 1)\n"):
        assert signature_of(error + tail).key == plain.key, tail


def test_the_test_runners_closing_counts_are_not_the_error() -> None:
    error = "FAILED tests/test_a.py::test_b - ValueError: bad block size, got 3\n"
    plain = signature_of(error)
    for tail in ("Ran 12 tests in 3.1s\n\nFAILED (errors=1, skipped=2)\n",
                 "The following tests FAILED:\n\t 12 - test_io (Failed)\nErrors while running CTest\n",
                 "Failed Tests (1):\n  TRITON :: TritonGPU/combine.mlir\n\nTesting Time: 3.1s\n  Failed: 1\n"):
        assert signature_of(error + tail).key == plain.key, tail


def test_a_fatal_python_error_is_located_by_its_dump() -> None:
    def dump(func: str) -> str:
        return ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007fb2 (most recent call first):\n"
                f'  File "/w/driver.py", line 267 in {func}\n  File "/w/test_k.py", line 30 in test_k\n')
    a, b = signature_of(dump("launch")), signature_of(dump("compile"))
    assert a.key != b.key
    assert a.text.endswith("@ driver.py:launch")
    # an abort printed after it (a crashed xdist worker) keeps the same place
    assert signature_of(dump("launch") + "Fatal Python error: Aborted\n").key == a.key


def test_an_error_code_named_in_the_detail_is_kept() -> None:
    def native(code: str) -> str:
        return f"RuntimeError: Native API failed. Native API returns: -5 ({code}) -5 ({code})\n"
    a, b = signature_of(native("PI_ERROR_OUT_OF_RESOURCES")), signature_of(native("PI_ERROR_INVALID_BINARY"))
    assert a.key != b.key
    assert a.text.endswith("Native API failed. [PI_ERROR_OUT_OF_RESOURCES]")


def test_timeouts_with_no_frame_are_told_apart_by_their_test_module() -> None:
    def t(test: str, limit: int) -> str:
        return f"FAILED tests/{test}::test_mm[{limit}] - Failed: Timeout >{limit}.0s\n"
    assert signature_of(t("test_big.py", 300)).key == signature_of(t("test_big.py", 600)).key
    assert signature_of(t("test_big.py", 300)).key != signature_of(t("test_io.py", 300)).key
