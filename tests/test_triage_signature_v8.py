"""Signature version 8: the tag every line of a block shares whatever its shape, closing counts
and a tool's word that a step failed yielding to the error above them, the version of a package
built without the device's kernels, and the architecture of ptxas's resource limits.  Each
pattern is checked for linear time on hostile input."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings, strategies as st

from forkflow.triage.classify import infra_family
from forkflow.triage.models import FailureKind, InfraFamily
from forkflow.triage.signature import SIGNATURE_VERSION, clean_window, signature_of, strip_shared_prefixes

TRACEBACK = ["Traceback (most recent call last):",
             '  File "/work/proj/model.py", line 12, in forward',
             "    y = self.mm(x)",
             "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)"]
PLAIN = signature_of("\n".join(TRACEBACK) + "\n")


def _tagged(tag: str) -> str:
    return "".join(tag.replace("{i}", str(n)) + line + "\n" for n, line in enumerate(TRACEBACK))


def test_the_version_moved() -> None:
    assert SIGNATURE_VERSION >= 8


@pytest.mark.parametrize("tag", [
    "Dec  6 18:47:0{i} gpu-node-3 python[12345]: ",     # syslog and journald
    "(18:47:0{i}) ",                                    # bazel's clock
    "[pod/train-job-7f9c-abcde/trainer] ",              # a pod's log, streamed by its controller
    "(VllmWorker TP{i} pid=2321) ",                     # a serving process's worker, any tag
    "[worker-3] ",
    "rank{i}: ",
    "ERROR:root:",                                      # Python's logging, default format
    "INFO:     ",                                       # a level padded to a width
    "[2024-05-09 20:19:45,97{i}] [ERROR] [launch.py:321:sigkill_handler] ",
    "2024-05-09 20:19:45.97{i} | ",
])
def test_a_tag_every_line_of_a_block_shares_is_looked_through(tag: str) -> None:
    sig = signature_of(_tagged(tag))
    assert sig.text == PLAIN.text == "EXCEPTION: RuntimeError: mat1 and mat2 shapes cannot be multiplied"


def test_repeated_content_is_no_tag() -> None:
    make = ("make[2]: *** [CMakeFiles/x.dir/build.make:76: x] Error 1\n"
            "make[2]: *** Waiting for unfinished jobs....\n"
            "make[1]: *** [CMakeFiles/Makefile2:83: all] Error 2\n")
    dump = "Stack dump:\n #0 0x000055d5a in foo() a.cpp:1\n #1 0x000055d6b in bar() a.cpp:2\n #2 0x7f in main\n"
    table = ("Filesystem       Size   Used  Avail Capacity  Mounted on\n"
             "/dev/disk5s2s1  100Gi   14Gi  3.8Gi    79%   /\n"
             "/dev/disk5s5    100Gi  2.0Gi  3.8Gi    35%   /System/Volumes/VM\n"
             "/dev/disk5s1    100Gi   79Gi  3.8Gi    96%   /System/Volumes/Data\n")
    progress = "[1/16] c++ -c a.cpp\n[2/16] c++ -c b.cpp\n[3/16] c++ -c c.cpp\n"
    pytest_e = "E       assert 1 == 2\nE        +  where 1 = f()\nE        +    and 2 = g()\n"
    for text in (make, dump, table, progress, pytest_e):
        assert strip_shared_prefixes(text) == text


def test_a_tag_is_stripped_only_from_the_block_that_shares_it() -> None:
    text = "setup done\n" + _tagged("[trainer-0] ") + "teardown\n"
    cleaned = clean_window(text)
    assert cleaned.startswith("setup done\nTraceback (most recent call last):\n  File ")
    assert cleaned.endswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)\nteardown\n")


ERROR = "ValueError: invalid literal for int() with base 10: 'abc'"


@pytest.mark.parametrize("tail", [
    "Tests failed: 3 of 120\n",
    "ERROR: 3 test(s) failed\n",
    "Summary: 2 failed\n",
    "FAIL: 3/120 (2.5%)\n",
    "Ran 12 tests: 2 failures, 1 error\n",
    "error Command failed with exit code 1.\n",
    "Error: The step 'Run tests' failed\n",
    "ERROR:   py311: commands failed\n",
    "CMakeFiles/x.dir/build.make:76: recipe for target 'x' failed\n",
    "//tests:unit_test FAILED in 12.3s\n",
    "error: build failed, see /tmp/build/log.txt:123 for details\n",
    "error: subprocess-exited-with-error\n",
])
def test_a_summary_line_yields_to_the_error_above_it(tail: str) -> None:
    sig = signature_of("collecting\n" + ERROR + "\n" + tail)
    assert sig.text == "EXCEPTION: ValueError: invalid literal for int() with base N: 'abc'"


def test_a_closing_count_is_still_the_key_when_no_line_says_what_went_wrong() -> None:
    a = signature_of("running 40 checks\n 2 FAILED TESTS\n")
    b = signature_of("running 12 checks\n 5 FAILED TESTS\n")
    assert a.text == b.text == "GENERIC: N FAILED TESTS"


def test_a_build_without_the_devices_kernels_is_keyed_by_the_packages_version() -> None:
    def log(banner: str) -> str:
        return (f"{banner}\nTraceback (most recent call last):\n  File \"/srv/app.py\", line 3, in <module>\n"
                "    torch.zeros(1, device='cuda')\n"
                "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    server = signature_of(log("INFO 07-28 15:07:13 [api_server.py:1755] vLLM API server version 0.10.0"))
    again = signature_of(log("INFO 07-29 09:01:02 [api_server.py:1755] vLLM API server version 0.10.0"))
    wheel = signature_of(log("Building wheel from /tmp/build-via-sdist-x/flashinfer-0.1.1+cu121torch2.3"))
    bare = signature_of(log("starting"))
    assert server.text.endswith("[on vllm 0.10.0]") and wheel.text.endswith("[on flashinfer 0.1.1]")
    assert server.key == again.key and len({server.key, wheel.key, bare.key}) == 3
    assert infra_family(server) is InfraFamily.ENVIRONMENT
    # a device the log names still comes first; other errors do not take a package's version
    on_arch = signature_of(log("vLLM API server version 0.10.0\nRTX 5090 with CUDA capability sm_120 is not "
                               "compatible with the current PyTorch installation."))
    assert on_arch.text.endswith("[on sm_120]")
    shapes = signature_of("vLLM API server version 0.10.0\n" + "\n".join(TRACEBACK) + "\n")
    assert "[on" not in shapes.text


@pytest.mark.parametrize("device, name", [
    ("GPU 0: NVIDIA A10G", "A10G"), ("GPU: NVIDIA L40S", "L40S"), ("NVIDIA GH200 480GB", "GH200"),
    ("GPU: B200, driver 570", "B200"), ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000"),
    ("AMD Radeon PRO W7900", "Radeon PRO W7900"), ("Intel(R) Data Center GPU Flex 170", "Data Center GPU Flex 170"),
    ("NVIDIA Jetson AGX Orin", "Jetson AGX Orin"),
])
def test_a_devices_name_keys_an_error_that_depends_on_it(device: str, name: str) -> None:
    error = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    sig = signature_of(f"{device}\n{error}")
    assert sig.text.endswith(f"[on {name}]")
    assert sig.key != signature_of(error).key


def test_ptxas_resource_limits_are_keyed_by_the_architecture() -> None:
    def log(arch: str) -> str:
        return ("`ptxas` stderr:\nptxas fatal   : (C7600) Register allocation failed with register count of '255'. "
                "Compile the program with a higher register target\nptxas fatal   : Ptx assembly aborted due to errors\n\n"
                f"Repro command: /opt/triton/bin/ptxas -lineinfo -v --gpu-name={arch} /tmp/tmpab12cd.ptx -o /tmp/x.o\n")
    hopper, blackwell, again = signature_of(log("sm_90a")), signature_of(log("sm_100a")), signature_of(log("sm_90a"))
    assert hopper.kind is FailureKind.COMPILER_ERROR and hopper.text.endswith("[on sm_90a]")
    assert hopper.key == again.key != blackwell.key


def test_a_trigger_inside_a_program_errors_quotes_is_a_name_not_an_event() -> None:
    attr = signature_of('Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n    cfg.Timeout\n'
                        "AttributeError: 'Config' object has no attribute 'Timeout'\n")
    kw = signature_of("E   TypeError: connect() got an unexpected keyword argument 'Timeout'\n")
    oom = signature_of("E   AssertionError: 'CUDA out of memory' not found in 'ok'\n")
    crash = signature_of("E   AssertionError: 'Segmentation fault' != 'ok'\n")
    assert attr.text == "EXCEPTION: AttributeError: 'Config' object has no attribute 'Timeout'"
    assert kw.kind is oom.kind is crash.kind is FailureKind.EXCEPTION
    # the same words reported by the runtime, or quoted by a library's own warning, still fire
    assert signature_of("RuntimeError: CUDA error: out of memory\n").kind is FailureKind.OOM
    assert signature_of("node1:12:12 [0] init.cc:194 NCCL WARN Cuda failure 'out of memory'\n").kind is FailureKind.OOM


def test_a_trigger_on_an_info_line_is_no_event() -> None:
    sig = signature_of("INFO setting Timeout to 30s\nI0509 20:19:45.972918 12 main.cc:12] Timeout armed\n"
                       'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nKeyError: \'x\'\n')
    assert sig.text == "EXCEPTION: KeyError: 'x'"
    # a timeout the log reports at a warning or error level still is one
    assert signature_of("WARNING worker 3: Timeout after 600s\n").kind is FailureKind.TIMEOUT


def test_a_sentence_that_ends_in_killed_is_no_oom_kill() -> None:
    assert signature_of("E   AssertionError: expected process to be Killed\n").kind is FailureKind.EXCEPTION
    for log in ("Downloading torch-2.1.0.whl (776.8 MB)\nKilled\n",
                "/bin/sh: line 1:  1234 Killed                  python train.py\n"):
        assert signature_of(log).text == "INFRA: host out of memory (OOM killer)"


def test_a_resource_limit_is_keyed_by_the_test_that_needs_it() -> None:
    def log(test: str, need: int) -> str:
        return (f"FAILED {test} - triton.runtime.errors.OutOfResources: out of resource: shared memory, "
                f"Required: {need}, Hardware limit: 65536. Reducing block sizes or `num_stages` may help.\n")
    a = signature_of(log("operators/test_flash_attention.py::test_op[False-dtype0-2-4-512-16]", 73728))
    b = signature_of(log("operators/test_flash_attention.py::test_op[True-dtype0-2-4-512-16]", 81920))
    c = signature_of(log("language/test_core.py::test_chained_reductions[in_shape1]", 73728))
    assert a.text == "GENERIC: OutOfResources: out of resource: shared memory @ test_flash_attention.py"
    assert a.key == b.key != c.key


def test_a_test_named_by_its_dotted_module_path_locates_a_generic_message() -> None:
    csv = signature_of("Cases:\nop_ut,inductor.test_torchinductor.GPUTests,test_argmax_xpu\n"
                       "AssertionError: Tensor-likes are not close!\n")
    again = signature_of("Cases:\nop_ut,inductor.test_torchinductor.GPUTests,test_amin_xpu\n"
                         "AssertionError: Tensor-likes are not close!\n")
    row = signature_of("test.distributed.fsdp.test_fully_shard.TestFullyShard | test_backend | failed | "
                       "AssertionError: Tensor-likes are not close!\n")
    assert csv.text == "EXCEPTION: AssertionError: Tensor-likes are not close! @ test_torchinductor.py"
    assert csv.key == again.key != row.key
    assert row.text.endswith("@ test_fully_shard.py")


# ----- hostile input: every new pattern stays linear ------------------------------------------

def _timed(text: str) -> float:
    t0 = time.perf_counter()
    signature_of(text)
    return time.perf_counter() - t0


@pytest.mark.security
def test_shared_prefixes_stay_linear_on_hostile_blocks() -> None:
    # many lines sharing a long tag made of the characters that end tags, a huge single line,
    # and tags nested hundreds deep: no quadratic search in the tag's length or the line count
    nested = "".join(f"({'(a) ' * 400}pid={i}) " + ("  x\n" if i % 2 else "Error: y\n") for i in range(4000))
    colons = "".join(":" * 190 + " " + ("  x" if i % 2 else "y") + "\n" for i in range(20000))
    huge = "(w pid=1) " + "x:" * 500_000 + "\n"
    for text in (nested, colons, huge):
        assert _timed(text) < 2.0
    t0 = time.perf_counter()
    strip_shared_prefixes(colons)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.security
def test_incidental_hits_stay_linear_on_hostile_lines() -> None:
    # a huge program-error line made of quotes and triggers, and a million quoted triggers
    quotes = "E   AssertionError: " + "'Timeout' " * 100_000 + "\n"
    levels = "".join("INFO " * 50 + "Timeout\n" for _ in range(20_000))
    frames = "".join('  File "a.py", line 1, in f\n    x = "Segmentation fault"\n' for _ in range(20_000))
    for text in (quotes, levels, frames):
        assert _timed(text) < 2.0


@pytest.mark.security
@pytest.mark.parametrize("name", ["vllm", "torch", "cuda version", "Driver Version", "rocm", "triton"])
def test_environment_facts_stay_linear_after_a_name_and_blank_lines(name: str) -> None:
    # the old patterns let blanks cross lines on both sides of an optional separator: a name
    # followed by thousands of blank lines cost seconds per signature
    error = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    assert _timed(name + " \n" * 6000 + error) < 1.0
    assert _timed((name + " \t" * 1000 + "\n") * 12 + error) < 1.0


@pytest.mark.security
def test_a_line_of_repeated_verified_triggers_stays_linear() -> None:
    # each hit of a trigger that must be verified read its whole line: a 48 KB line of
    # `Killed` cost 9 s, quadratic in the line's length
    for word in ("Killed", "Timeout", "' not found"):
        assert _timed(word * 8000) < 1.0
        assert _timed(word * 8000 + "\nRuntimeError: CUDA error: out of memory\n") < 1.0
    # a real verified hit after such a line is still found
    assert signature_of("Killed" * 8000 + "\nKilled\n").kind is FailureKind.INFRA


@pytest.mark.security
def test_summary_rules_stay_linear_on_hostile_lines() -> None:
    counts = "".join(f"{i} tests failed of {i}\n" for i in range(50_000))
    words = "error " + "test " * 200_000 + "failed\n"
    steps = "step '" + "'" * 300_000 + " failed\n"
    see = "see " + "for " * 200_000 + "\n"
    dotted = "AssertionError: Tensor-likes are not close!\n" + "a." * 300_000 + "test_x.T\n"
    for text in (counts, words, steps, see, dotted):
        assert _timed(text) < 2.0


@pytest.mark.security
@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["(", ")", "[", "]", ":", "|", " ", "\t", "0", "a", "E", "#", "\n"]),
                min_size=0, max_size=400))
def test_any_mix_of_tag_characters_is_handled(chars: list[str]) -> None:
    text = "".join(chars)
    out = strip_shared_prefixes(text)
    assert out.count("\n") == text.count("\n")
    signature_of(text + "\n" + ERROR + "\n")
