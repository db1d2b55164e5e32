"""Signatures: normalization, the right place in long logs, bad input (invalid UTF-8, 1 GB, empty)."""
from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest

from forkflow.testing.failure_corpus import TEMPLATES, generate
from forkflow.triage.group import adjusted_rand_index, group_failures
from forkflow.triage.models import Failure, FailureKind
from forkflow.triage.signature import normalize, scan, signature_of, signature_of_file

TRACEBACK = """\
Traceback (most recent call last):
  File "/home/runner/work/triton/python/test/test_x.py", line 12, in test_x
    kernel[grid](a)
  File "/home/runner/work/triton/python/triton/runtime/jit.py", line 345, in run
    raise ValueError(f"bad block {n}")
ValueError: bad block 128 at 0x7ffee1c0
"""


def test_normalize_removes_what_changes_between_runs() -> None:
    a = normalize("\x1b[31m2024-05-01T12:00:03Z /tmp/tmpa8f3k2/k.py:123: error at 0x7ffe12 in "
                  "3.25s pid 4411 sha 9f8e7d6c5b4a uuid 123e4567-e89b-12d3-a456-426614174000\x1b[0m")
    b = normalize("2025-01-09T08:10:59Z /var/tmp/tmpzz91x0/k.py:98: error at 0x5555ab in "
                  "0.5s pid 12 sha 0a1b2c3d4e5f uuid 00000000-0000-0000-0000-00000000abcd")
    assert a == b
    assert "k.py" in a and "error" in a


def test_normalize_keeps_identifiers_with_digits() -> None:
    assert normalize("fp16 sm_90 x86_64 bf16") == "fp16 sm_90 x86_64 bf16"
    assert normalize("shape [128, 64]") == "shape [N, N]"


def test_traceback_gives_last_exception_and_innermost_frame() -> None:
    sig = signature_of("noise\n" * 50 + TRACEBACK + "=== 1 failed in 2.1s ===\n")
    assert sig.kind is FailureKind.EXCEPTION
    # a specific message is its own signature; the frame is added only to generic ones
    assert sig.text == "EXCEPTION: ValueError: bad block N at <addr>"
    assert sig.line == 51
    assert "ValueError: bad block 128" in sig.excerpt


def test_chained_traceback_takes_the_last_one() -> None:
    log = TRACEBACK + "\nDuring handling of the above exception, another exception occurred:\n\n" + \
        TRACEBACK.replace("ValueError: bad block 128", "KeyError: 'BLOCK_M'")
    assert "KeyError: 'BLOCK_M'" in signature_of(log).text


def test_oom_beats_the_exception_that_reports_it() -> None:
    log = TRACEBACK.replace("ValueError: bad block 128 at 0x7ffee1c0",
                            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    sig = signature_of(log)
    assert sig.kind is FailureKind.OOM
    assert sig.text == "OOM: CUDA out of memory"


def test_crash_beats_filecheck_on_empty_input() -> None:
    log = ("triton-opt: /src/lib/A.cpp:12: void f(): Assertion `x > 0' failed.\n"
           "Stack dump:\n #0 0x0000555 llvm::sys::PrintStackTrace(int)\n"
           "FileCheck error: '<stdin>' is empty.\n")
    sig = signature_of(log)
    assert sig.kind is FailureKind.CRASH
    assert "Assertion `x > N' failed" in sig.text


def test_filecheck_mismatch_names_check_line() -> None:
    log = ("/src/test/combine.mlir:33:11: error: CHECK-NEXT: expected string not found in input\n"
           "// CHECK-NEXT: tt.return\n          ^\n<stdin>:5:2: note: scanning from here\n")
    sig = signature_of(log)
    assert sig.kind is FailureKind.FILECHECK
    assert sig.text == ("FILECHECK: combine.mlir:N:N: error: CHECK-NEXT: expected string not found in "
                        "input | // CHECK-NEXT: tt.return")


def test_compiler_error_takes_first_error_of_burst() -> None:
    log = ("[1/9] Building x.o\n/src/a.h:10:3: error: no member named 'foo'\n"
           "/src/a.h:11:3: error: use of undeclared identifier 'y'\n2 errors generated.\n")
    sig = signature_of(log)
    assert sig.kind is FailureKind.COMPILER_ERROR
    assert sig.text == "COMPILER_ERROR: error: no member named 'foo'"


def test_early_connection_reset_is_not_the_failure() -> None:
    log = "Connection reset by peer, retrying\n" + "ok\n" * 100 + TRACEBACK
    assert signature_of(log).kind is FailureKind.EXCEPTION
    assert signature_of(TRACEBACK + "OSError: [Errno 28] No space left on device\n").kind \
        is FailureKind.INFRA


def test_pytest_timeout_dump_names_where_it_hung() -> None:
    log = ("+++++ Timeout +++++\n~~~~~ Stack of MainThread (1399) ~~~~~\n"
           '  File "/w/test_ws.py", line 5, in test_ws\n    torch.cuda.synchronize()\n'
           '  File "/site/torch/cuda/__init__.py", line 985, in synchronize\n    x()\n'
           "+++++ Timeout +++++\n")
    sig = signature_of(log)
    assert sig.kind is FailureKind.TIMEOUT
    assert sig.text == "TIMEOUT: timeout in __init__.py:synchronize"


def test_coloured_pytest_lines_match_plain_ones() -> None:
    plain = ">       assert out == 3\nE       assert 2 == 3\n\ntests/test_a.py:5: AssertionError\n"
    coloured = plain.replace("E       assert 2 == 3", "\x1b[1m\x1b[31mE       assert 2 == 3\x1b[0m")
    assert signature_of(plain).text == signature_of(coloured).text
    assert signature_of(plain).text == "EXCEPTION: assert N == N | assert out == N @ test_a.py: AssertionError"


def test_empty_log_has_a_signature() -> None:
    sig = signature_of(b"")
    assert sig.kind is FailureKind.NO_OUTPUT
    assert signature_of(b"\n\n  \n").kind is FailureKind.NO_OUTPUT


def test_invalid_utf8_is_read_not_rejected() -> None:
    log = b"\xff\xfe garbage \xc3\x28\n" + TRACEBACK.encode().replace(b"bad block", b"bad \xe9\x80 block")
    sig = signature_of(log)
    assert sig.kind is FailureKind.EXCEPTION
    assert "\ufffd" in sig.text  # the replacement character stands for the broken bytes
    assert sig.text == signature_of(log).text


def test_chunk_boundaries_do_not_change_the_signature() -> None:
    log = ("x\n" * 5000 + TRACEBACK + "tail\n" * 10).encode()
    whole = signature_of(log)
    for size in (7, 64, 1000, 4096):
        chunks = [log[i:i + size] for i in range(0, len(log), size)]
        assert scan(chunks).text == whole.text
        assert scan(chunks).line == whole.line


@pytest.mark.slow
def test_one_gigabyte_log_streams_in_bounded_memory(tmp_path: Path) -> None:
    """A sparse 1 GiB file: a crash near the start, the real error at the very end."""
    path = tmp_path / "huge.log"
    with path.open("wb") as f:
        f.write(b"Segmentation fault (core dumped)\n")
        f.seek(1 << 30)
        f.write(b"\n" + TRACEBACK.encode())
    assert path.stat().st_size > 1 << 30
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    sig = signature_of_file(path)
    elapsed = time.perf_counter() - t0
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert sig.kind is FailureKind.EXCEPTION  # the crash is far above: not the failure
    assert "bad block" in sig.text
    assert grew_kib < 64 * 1024, f"memory grew by {grew_kib} KiB"
    assert elapsed < 60


def test_pipe_is_read_as_a_stream() -> None:
    r, w = os.pipe()
    os.write(w, b"junk\n" * 100 + TRACEBACK.encode())
    os.close(w)
    with os.fdopen(r, "rb") as f:
        assert "bad block" in signature_of(f).text


def test_corpus_grouping_quality() -> None:
    samples = generate(seed=7, per_group=7)
    assert len(TEMPLATES) >= 30 and len(samples) >= 300
    sigs = [signature_of(s.log) for s in samples]
    ari = adjusted_rand_index([s.group for s in samples], [x.text for x in sigs])
    assert ari >= 0.9
    groups = group_failures(Failure(s.test, x) for s, x in zip(samples, sigs))
    assert len(groups) >= 30


def test_adjusted_rand_index_known_values() -> None:
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 9, 9]) == 1.0
    assert adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    # scikit-learn's documented example: ARI([0,0,1,2], [0,0,1,1]) = 0.5714...
    assert adjusted_rand_index([0, 0, 1, 2], [0, 0, 1, 1]) == pytest.approx(0.5714285714)
    with pytest.raises(ValueError):
        adjusted_rand_index([0], [0, 1])


def test_runner_prefixes_only_at_the_end_of_a_long_log_are_removed() -> None:
    tb = ('Traceback (most recent call last):\n  File "/w/t.py", line 3, in test_x\n    f()\n'
          "RuntimeError: PassManager::run failed\n")
    stamped = "".join(f"2024-08-04T01:59:02.{i:07d}Z {ln}\n" for i, ln in enumerate(tb.splitlines()))
    noise = "".join(f"PASSED test_a.py::t{i} [0.01s]\n" for i in range(500))
    assert signature_of(noise + stamped).key == signature_of(tb).key
    assert signature_of(noise + stamped).text == "EXCEPTION: RuntimeError: PassManager::run failed @ t.py:test_x"


def test_volatile_tokens_are_normalised() -> None:
    a = normalize("t87: i8 = freeze t87 in /tmp/pytest-of-ci/pytest-12/test_x0/pid_123_456/k.py at 0xdeadbeef")
    b = normalize("t3: i8 = freeze t3 in /tmp/pytest-of-bob/pytest-7/test_x1/pid_9_1/k.py at 0x1234abcd")
    assert a == b == "tN: i8 = freeze tN in k.py at <addr>"


def test_error_codes_are_kept_numbers_are_not() -> None:
    assert normalize("RuntimeError: Triton Error [ZE]: 0x70000004 after 12 s") != \
        normalize("RuntimeError: Triton Error [ZE]: 0x78000018 after 12 s")
    assert normalize("retry 3 of 5") == normalize("retry 4 of 5")


def test_triage_command_module_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    code = ("import sys, forkflow.cli.triage_cmds; "
            "print(sorted(m for m in ('numpy', 'forkflow.triage.tracking', 'forkflow.triage.trunk') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


FOOTER = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"


def test_footers_are_dropped_in_windows_found_by_the_scan() -> None:
    log = "x\n" * 3000 + TRACEBACK.replace("ValueError: bad block 128 at 0x7ffee1c0\n", "") + \
        "RuntimeError: CUDA error: an illegal memory access was encountered\n" + FOOTER
    whole = signature_of(log)
    assert "TORCH_USE_CUDA_DSA" not in whole.excerpt
    for size in (13, 500, 4096):  # a footer cut by a chunk boundary is still found
        chunks = [log.encode()[i:i + size] for i in range(0, len(log), size)]
        sig = scan(chunks)
        assert (sig.text, sig.excerpt) == (whole.text, whole.excerpt)


def test_many_footers_are_still_dropped() -> None:
    # past the positions the scan keeps, the window is searched for footers again
    footer = "You can suppress this exception and fall back to eager by setting:\n"
    for n in (1, 6000):
        log = footer * n + "ERROR: the build failed in stage 3\n" + footer
        assert signature_of(log).text == "GENERIC: ERROR: the build failed in stage N"


def test_fallback_line_is_the_error_line_of_a_long_log() -> None:
    log = "".join(f"step {i} ok\n" for i in range(5000)) + "ERROR: the build failed\n" + "bye\n" * 3
    assert signature_of(log).line == 5001


def test_control_characters_go_from_non_ascii_text() -> None:
    from forkflow.triage.signature import strip_ansi

    assert strip_ansi("█ 50%\r█ 100%\x07\tok\n") == "█ 50%█ 100%\tok\n"
    assert strip_ansi("50%\r100%\x07\tok\n") == "50%100%\tok\n"


def test_bare_assertion_keys_name_the_test_module() -> None:
    a = signature_of("FAILED tests/test_ops.py::TestOps::test_max_2d - AssertionError: \n")
    b = signature_of("FAILED tests/test_ops.py::TestOps::test_max_3d - AssertionError: \n")
    c = signature_of("FAILED python/test/test_core.py::test_dot[64-float16] - AssertionError: \n")
    assert a.key == b.key != c.key
    assert a.text == "EXCEPTION: AssertionError: @ test_ops.py"


def test_harness_timeout_names_the_test_that_hung() -> None:
    harness = ('Traceback (most recent call last):\n'
               '  File "/x/site-packages/torch/testing/_internal/common_distributed.py", line 9, in _check\n'
               "    raise RuntimeError(msg)\n"
               "RuntimeError: Process 0 terminated or timed out after 100.1 seconds\n")
    a = signature_of("ERROR: test_a (__main__.TestZeroRedundancy)\n" + harness)
    b = signature_of("ERROR [105.0s]: test_b (__main__.TensorPipeDdpTest)\n" + harness)
    assert a.text == "TIMEOUT: timeout in TestZeroRedundancy"
    assert a.key != b.key


def test_libstdcxx_assertions_are_crashes_keyed_by_function() -> None:
    a = signature_of("/usr/include/c++/10/bits/stl_vector.h:1045: std::vector<T>::operator[](size_type) "
                     "[_Tp = int]: Assertion '__n < this->size()' failed.\nAborted (core dumped)\n")
    b = signature_of("std::vector<T>::operator[](size_type) [_Tp = int]: Assertion '__n < this->size()' failed.\n")
    assert a.kind is FailureKind.CRASH
    assert a.key == b.key


def test_llvm_fatal_error_is_one_key_whoever_prints_it() -> None:
    llc = signature_of("LLVM ERROR: Cannot select: intrinsic %llvm.x86.aesni.aesenc\nStack dump:\n")
    clang = signature_of("fatal error: error in backend: Cannot select: intrinsic %llvm.x86.aesni.aesenc\n"
                         "PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/\nStack dump:\n")
    lld = signature_of("LINK : LLVM error : Cannot select: intrinsic %llvm.x86.aesni.aesenc\nStack dump:\n")
    other = signature_of("LLVM ERROR: Cannot select: intrinsic %llvm.x86.sse42.crc32.32.32\nStack dump:\n")
    assert llc.key == clang.key == lld.key != other.key
    assert llc.text == "CRASH: LLVM ERROR: Cannot select: intrinsic %llvm.x86.aesni.aesenc"


def test_abort_after_a_compiler_burst_is_keyed_by_its_first_error() -> None:
    burst = ("ptxas fatal   : Unsupported .version 8.4; current version is '8.3'\n"
             "ptxas fatal : Ptx assembly aborted due to errors\n")
    direct = signature_of(burst)
    crashed = signature_of("[gw3] node down: Not properly terminated\n" + burst + "Fatal Python error: Aborted\n")
    assert crashed.kind is FailureKind.CRASH
    assert crashed.key == direct.key
