"""A failure's signature: the right place in a (long) log, normalized.  [pure]

The log is read once, forward, in chunks (a pipe works, a 1 GB log needs no more than a few
hundred KB of memory).  Every chunk is searched once for all literal trigger strings (an
Aho-Corasick automaton, in Rust); only the last hit of each kind is kept, with some context before and after it.
At the end the kinds found near the last hit compete by priority (an out-of-memory beats the
exception that reports it, a compiler crash beats the FileCheck that saw empty input), and the
winner's parser picks the key lines, which `normalize` turns into the signature text.
"""
from __future__ import annotations

import bisect
import functools
import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import ahocorasick_rs

from forkflow.triage.models import PRIORITY, FailureKind, Signature
from forkflow.triage.parsers import (ENV_SENSITIVE, PARSERS, env_key, environment, frames_above,
                                     generic_line, unwrapped, with_frame, with_test)

CHUNK = 1 << 20
BEFORE = 32 * 1024   # context kept before a hit
AFTER = 32 * 1024    # context kept after a hit
TAIL = 64 * 1024     # the end of the log kept while scanning
FALLBACK_TAIL = 12 * 1024  # the end looked at by the generic fallback
PARSE_WINDOW = 12 * 1024   # context either side of a hit handed to its parser
EXCERPT_LINES = 60
EXCERPT_CHARS = 8000
MAX_SIGNATURE = 600

# The version of the rules below (triggers, parsers, normalization, `Signature.key`).  Bump it
# whenever their output changes: stored signatures carry the version they were computed with,
# and those of an older one are computed again from the failure text on read, so a failure red
# on trunk stays BROKEN_TRUNK and a tracked group keeps its issue across an upgrade.
# tests/test_signature_version.py fails when the output on its samples changes without a bump.
# 1: the rules up to issue 14; 2: error regions, frames of the project, footers (issue 14).
# 3: process and runner prefixes of any shape, kinds on a structure, the device's architecture
# in the signature of errors that depend on it, environment and machine families (issue 32).
# 4: InfiniBand completion errors, NCCL's warning behind a generic collective failure, lit test
# ids keyed by their directory, and the further rules of the field corpus's second round.
# 5, 6: required versions, HTTP statuses, pointer lines, package and tool faults.
# 7: what the OOM killer killed (a compiler or linker, a job past its cgroup limit), NCCL's
# `Last error:` detail under its collective failure, a device compiler's summary line, a
# diagnostic cut by a hard wrap.
# 8: the tag every line of a block shares, whatever its shape; closing counts and a tool's word
# that a step failed yield to the error above them; the version of the package built without the
# device's kernels, and the architecture of ptxas's resource limits.
# 9: a build without the device's kernels keyed by the toolkit and package versions printed with
# the device.
# 10: a limit named by its service (domain, registry, client); ENOSPC by its number; PEP 668; a
# loader's missing symbol whatever raised it, C++ symbols by library; Windows' loader by code;
# /dev/shm; compilers the OOM killer names; LLVM crashes by pass or input; an exception's prose
# lines; an abort by the reason before it; generated headers; temporary files; quoting.
# 11: a sentence's full stop and typographic quotes dropped; a CMake error's first sentence; the
# CUDA runtime's errors by their names and two more by their words; nvcc's fatal errors in any
# spacing; build steps killed by SIGKILL; git transfers cut; lit's banner and summary of one test as
# one; a variable assignment run as a command; TensorFlow's and XLA's logging prefix.
SIGNATURE_VERSION = 11

K = FailureKind


@dataclass(frozen=True, slots=True)
class Trigger:
    literal: bytes
    kind: FailureKind
    verify: re.Pattern[str] | None = None  # must match the hit's line, else the hit is ignored
    label: str = ""  # an unambiguous runner fault: its signature is this label, whatever follows


def _t(kind: FailureKind, *literals: str, verify: str | None = None) -> list[Trigger]:
    rx = re.compile(verify) if verify else None
    return [Trigger(lit.encode(), kind, rx) for lit in literals]


def _infra(label: str, *literals: str, verify: str | None = None) -> list[Trigger]:
    rx = re.compile(verify) if verify else None
    return [Trigger(lit.encode(), K.INFRA, rx, label) for lit in literals]


_CANCELLED = "job cancelled by the runner"
_SHM = "shared memory (/dev/shm) too small"
_OOM_KILLER = "host out of memory (OOM killer)"
# what the OOM killer killed tells the action: a compiler or linker of a parallel build (fewer
# jobs), a job over its own memory limit (a container's or scheduler's cgroup: a larger limit)
_BUILD_KILLED = "host out of memory (OOM killer): a compiler or linker killed"
_LIMIT_KILLED = "job over its memory limit (cgroup OOM kill)"

# Footers torch and LLVM print under many different errors: never a signature (issue 14).
_FOOTERS_LIST = (
    "CUDA kernel errors might be asynchronously reported", "consider passing CUDA_LAUNCH_BLOCKING",
    "TORCH_USE_CUDA_DSA", "HIP kernel errors might be asynchronously reported", "TORCH_USE_HIP_DSA",
    "consider passing AMD_SERIALIZE_KERNEL", "XPU kernel errors might be asynchronously reported", "PYTORCH_PRINT_REPRO_ON_FAILURE", "To execute this test, run the following",
    "PYTORCH_OPINFO_SAMPLE_INPUT_INDEX=", "Set TORCHDYNAMO_VERBOSE=1", 'TORCH_LOGS="+dynamo"',
    "PLEASE submit a bug report", "suppress this exception and fall back to eager",
    "Stack dump without symbol names", "HINT: To debug", "The failure occurred for item",
    # torch's teardown warnings, printed after the test has already failed
    "process group has NOT been destroyed", "ResourceWarning: unclosed")

_FILECHECK_PHRASES = (
    "expected string not found in input", "excluded string found in input",
    "is not on the line after the previous match", "is not on the same line as previous match",
    "FileCheck error:", "no check strings found with prefix", "found empty check string",
)
_NOT_FILECHECK = "^(?!.*(?:" + "|".join(re.escape(p) for p in _FILECHECK_PHRASES) + "))"

TRIGGERS: tuple[Trigger, ...] = tuple([
    *_t(K.INFRA, "Connection refused", "Connection reset by peer",
        "Could not resolve host", "Temporary failure in name resolution",
        "no CUDA-capable device is detected", "CUDA driver version is insufficient",
        "Found no NVIDIA driver", "NVIDIA-SMI has failed",
        "No XPU devices are available",
        "lost communication with the server", "runner lost", "Network is unreachable",
        "NodeDiedError", "node was preempted", "Read-only file system",
        "Cannot connect to the Docker daemon", "Failed to pull image", "error pulling image configuration",
        "Connection timed out",
        "uncorrectable ECC error", "GPU has fallen off the bus", "Remote end closed connection"),
    *_t(K.TIMEOUT, "Timeout", "timed out", "TIMEOUT", "Timed out", "Reached timeout",
        "deadline exceeded", "DeadlineExceeded",
        # a timeout value a collective-communication failure prints is no test timing out
        verify=r"(?i)^(?!.*\btimeout\s*[=:]\s*[\d.]+\s*(?:s|ms|sec)?\s*[,)]?\s*$)"
               r"(?!.*(?:NCCL|RCCL|ProcessGroup|Watchdog|DistBackendError|c10d|Gloo))"),
    # runner faults that say so unambiguously: the signature is the family, never the test
    *_infra(_OOM_KILLER, "oom-kill", "OOMKilled", "Out of memory: Killed process",
            "fatal error: Killed signal", "terminated with signal 9 [Killed]"),
    # a build step killed by SIGKILL, as the compiler driver or the build tool reports it (nvcc's
    # `'cicc' died due to signal 9`, emcc's `failed (received SIGKILL (-9))`, ninja's `FAILED:
    # [code=137]`): the OOM killer, nearly always, on a build running too many jobs at once
    *_infra(_BUILD_KILLED, "died due to signal 9", "(received SIGKILL", "FAILED: [code=137]"),
    # git's transfer cut mid-way (`error: RPC failed; curl 92 HTTP/2 stream 0 was not closed
    # cleanly`, then `fatal: early EOF`, `fatal: index-pack failed`): the network, not the change
    *_infra("network: a git transfer was cut (RPC failed, early EOF)", "error: RPC failed; curl",
            "fatal: early EOF", "fatal: index-pack failed", "fatal: the remote end hung up unexpectedly",
            "fatal: The remote end hung up unexpectedly"),
    # the shell's word on a job it lost (`Killed`, `line 1: 1234 Killed  python x.py`), not a
    # sentence that ends with the word
    *_infra(_OOM_KILLER, "Killed",
            verify=r"(?:^|[\s:\]|])(?<![a-z] )Killed(?:\s+\S*(?:python|pytest)\S*.*|\s*$|\s+process)"),
    *_infra("port already in use", "Address already in use", "EADDRINUSE"),
    *_infra("NCCL watchdog timeout", "Watchdog caught collective operation timeout"),
    # the InfiniBand transport between nodes gave up on a work request (NCCL's `NET/IB : Got
    # completion with error 12`, a plugin's `Got completion from peer ... with status=12`)
    *_infra("network between nodes (InfiniBand completion error)", "Got completion with error",
            "Got completion from peer"),
    *_infra("Ray worker crashed", "WorkerCrashedError", "The actor died unexpectedly",
            "RayActorError"),
    # a full disk, and a runner's check that it is nearly full: one fault, one action
    # a collective library's shared-memory transport could not get its segment: the container's
    # /dev/shm, not the disk (NCCL says so with `posix_fallocate` or `failed to extend`)
    *_infra(_SHM, "Error while creating shared memory segment"),
    *_infra("out of disk space", "No space left on device", "no space left on device"),
    # ENOSPC by its number, as Python and the C library print it, whatever its words (a console
    # that cut the line, a localised message)
    *_infra("out of disk space", "[Errno 28]", "errno 28", "(28: No space", "errno=28",
            verify=r"(?i)errno[ =]28(?!\d)|\(28: No space"),
    # a runner's own check before the job (`Available diskspace is less than 30 percent`)
    *_infra("out of disk space", "diskspace is less than", "disk space is less than",
            "Available diskspace", "Available disk space is"),
    # a DataLoader worker's shared memory (torch says so after the worker's bus error)
    *_infra(_SHM, "out of shared memory", "raise your shared memory limit"),
    # the runner's limit on processes or threads (`pthread_create failed: Resource temporarily
    # unavailable`, `fork: retry: Resource temporarily unavailable`)
    *_infra("process or thread limit reached", "pthread_create failed", "can't start new thread",
            "fork: retry: Resource temporarily unavailable", "fork: Resource temporarily unavailable"),
    # torchrun's word that a worker was killed by SIGKILL: the OOM killer, nearly always
    *_infra(_OOM_KILLER, "exitcode: -9", "exitcode : -9", "Signal 9 (SIGKILL) received",
            verify=r"exitcode ?: -9\b|Signal 9 \(SIGKILL\)"),
    *_infra("out of disk space", "running out of disk space", "not enough disk space",
            "Not enough disk space", "insufficient disk space", "Insufficient disk space",
            "Not enough free disk space", "not enough free disk space"),
    *_infra("rate limited by a hub or registry (HTTP 429)", "429 Client Error", "Too Many Requests",
            "HTTP Error 429", "toomanyrequests", "rate limit exceeded", "Rate limit exceeded",
            "API rate limit", "status code 429", "status: 429", "429 Too Many", "RATE LIMIT EXCEEDED",
            "HTTP 429"),
    # an HTTP status 429 however a client words it (`Unexpected HTTP response: 429`)
    *_infra("rate limited by a hub or registry (HTTP 429)", "429",
            verify=r"(?i)\b(?:HTTP|status|response)\b[^\n\d]{0,20}\b429\b"),
    *_infra("runner shut down", "has received a shutdown signal"),
    # pip refusing a system Python (PEP 668): the job's environment, whatever the step installs
    *_infra("This environment is externally managed (PEP 668)", "externally-managed-environment",
            "This environment is externally managed"),
    # the runner ended the job: cancelled, or past its time limit
    *_infra(_CANCELLED, "The operation was canceled", "has exceeded the maximum execution time"),
    # an allocator's out-of-memory whatever its device or wording (`HIP out of memory`,
    # `XPU out of memory`, `Tried to allocate 2.00 GiB`, `UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY`)
    *_t(K.OOM, "out of memory", "OutOfMemoryError", "MemoryError", "bad_alloc",
        "Out of memory", "Tried to allocate", "tried to allocate", "OUT_OF_DEVICE_MEMORY",
        "OUT_OF_MEMORY", "ErrorOutOfMemory", "out of device memory", "not enough memory"),
    *_t(K.CUDA_ERROR, "CUDA error", "cudaError", "CUDA_ERROR_", "illegal memory access",
        "device-side assert", "misaligned address", "unspecified launch failure",
        "CUBLAS_STATUS_", "CUDNN_STATUS_", "NCCL error", "ncclUnhandled", "hipError",
        "HIP error", "illegal instruction was encountered", "too many resources requested",
        "no kernel image is available", "CUDA Error",
        # the runtime's words for a driver older than the PTX, and for GPUs without peer access
        "PTX was compiled with an unsupported toolchain", "peer access is not supported between",
        # collective communication, whoever reports it (its own words, torch's wrapper)
        "DistBackendError", "ncclSystemError", "ncclInternalError", "ncclRemoteError",
        "ncclInvalidUsage", "NCCL_ERROR_", "communicator was aborted", "Timeout at NCCL work",
        # torch's warning that the wheel lacks the device's architecture
        "is not compatible with the current PyTorch installation",
        # Level Zero and the unified runtime (Intel GPUs) name their errors so
        "UR_RESULT_ERROR_", "ZE_RESULT_ERROR_", "DEVICE_LOST"),
    # libstdc++ quotes its assertions with ' (`Assertion '__n < this->size()' failed.`)
    *_t(K.CRASH, "Assertion `", "Assertion '", "Assertion failed", "LLVM ERROR:", "LLVM error :",
        "error in backend:", "UNREACHABLE executed",
        "Segmentation fault", "Stack dump:", "PLEASE submit a bug report",
        "terminate called after throwing", "Fatal Python error", "SIGSEGV", "SIGABRT",
        "Bus error", "AddressSanitizer", "core dumped", "symbol lookup error",
        # the loader refusing a binary: a missing library or library version
        "' not found (required by", "cannot open shared object file", "undefined symbol: ",
        "died with <Signals.SIG",
        # Windows' loader by its code (the message is in the system's language): a DLL, or one it
        # depends on, not found (126), or a procedure missing from one (127)
        "[WinError 126]", "[WinError 127]", "or one of its dependencies"),
    # LLVM's stack dump lists what the tool was running when it crashed (`4. Running pass
    # 'CodeGen Prepare' on function '@j'`), even when a quote kept neither its head nor an assertion
    *_t(K.CRASH, "Running pass '", "Running pass \"", verify=r"^\s*\d+\.\s+Running pass ['\"]"),
    # a quote that cut the loader's line before `(required by ...)`
    *_t(K.CRASH, "' not found", verify=r"version `[\w.]+' not found"),
    *_t(K.COMPILER_ERROR, ": error: ", "fatal error: ", "fatal error:\n", "CMake Error", "ptxas fatal", "fatal   : ",
        verify=_NOT_FILECHECK),
    # nvcc's own fatal errors however a log or a person spaced and cased them (`nvcc fatal :
    # Unsupported gpu architecture 'compute_86'`, `Nvcc fatal : Value 'sm_75' is not defined`)
    *_t(K.COMPILER_ERROR, "nvcc fatal", "Nvcc fatal", "NVCC fatal", verify=r"(?i)nvcc fatal\s*:"),
    *_t(K.FILECHECK, *_FILECHECK_PHRASES),
    *_t(K.EXCEPTION, "Traceback (most recent call last):", "\nE   "),
])

# Footers and interpreter teardown are found in the same single pass as the triggers: a parse
# window with none of them in it is not searched again when it is cleaned.
_MARKS = (*_FOOTERS_LIST, "Exception ignored in")
_MATCHER = ahocorasick_rs.BytesAhoCorasick([t.literal for t in TRIGGERS] + [m.encode() for m in _MARKS],
                                           implementation=ahocorasick_rs.Implementation.DFA)
_N_TRIGGERS = len(TRIGGERS)
_FOOTER_BYTES = ahocorasick_rs.BytesAhoCorasick([m.encode() for m in _FOOTERS_LIST])
_KINDS = {t.kind for t in TRIGGERS}
MAX_MARKS = 4096  # positions of footers kept; past that, windows are searched as before


def _is_teardown(buf: bytes, pos: int) -> bool:
    """A traceback printed by `Exception ignored in ...` (interpreter teardown): noise."""
    lo = buf.rfind(b"\n", 0, pos)
    prev = buf.rfind(b"\n", 0, max(lo, 0))
    return lo > 0 and b"Exception ignored in" in buf[prev + 1: lo]


def _on_footer(buf: bytes, pos: int) -> bool:
    """Whether the hit at `pos` is part of a footer: a footer starts before it on its line, and
    the line holds no error before that footer (a table row may carry the error, then the
    footer: `test | Class | OutOfMemoryError: ... To execute this test, run ...`)."""
    lo = buf.rfind(b"\n", 0, pos) + 1
    hi = buf.find(b"\n", pos)
    line = buf[lo: hi if hi >= 0 else len(buf)]
    if len(line) >= MAX_LINE:
        return False
    found = _FOOTER_BYTES.find_matches_as_indexes(line)
    return bool(found) and (found[0][1] <= pos - lo or not _keeps_head(line[:found[0][1]].decode("utf-8", "replace")))


def _keeps_head(head: str) -> bool:
    """Whether the text before a footer on its line is an error of its own: a few words that say
    error (not a logger's `[W123 ProcessGroupNCCL.cpp:1168] Warning: WARNING:`)."""
    return len(head.split()) >= 4 and (_HEAD_ERROR.search(head) is not None
                                       or bool(_TRIGGER_TEXT.find_matches_as_indexes(head)))


# (any trigger's words say error too: `Tried to allocate 16.00 GiB` starts a window at its hit)
_TRIGGER_TEXT = ahocorasick_rs.AhoCorasick([t.literal.decode() for t in TRIGGERS])
_HEAD_ERROR = re.compile(r"(?i)error\b|exception\b|\bfail|out of memory")


def _verified(buf: bytes, pos: int, rx: re.Pattern[str]) -> bool:
    """Whether the hit's line matches `rx`; a line longer than MAX_LINE is looked at within
    MAX_LINE either side of the hit (a megabyte line of triggers must not cost a megabyte per hit)."""
    lo = max(buf.rfind(b"\n", max(0, pos - MAX_LINE), pos) + 1, pos - MAX_LINE)
    hi = buf.find(b"\n", pos, pos + MAX_LINE)
    return rx.search(buf[lo: hi if hi >= 0 else min(len(buf), pos + MAX_LINE)].decode("utf-8", "replace")) is not None


# A trigger's words fire a kind only where they report an event.  A logger's INFO or DEBUG line
# reports none (`INFO setting Timeout to 30s`), and within a program error's quotes they are a
# name or a value (`AttributeError: ... no attribute 'Timeout'`, `AssertionError: 'CUDA out of
# memory' not found in ...`), whatever the words.
_LEVEL = re.compile(r"(?:^|[\s\[(|:])(INFO|DEBUG|TRACE|WARNING|WARN|ERROR|CRITICAL|FATAL|SEVERE)\b|"
                    r"(?:^|[\s\[])([IWEF])\d{4} \d\d:\d\d")
_PROGRAM_ERROR = re.compile(r"(?:^|[\s:>])(?:E\s+)?(?:[\w.]+\.)?(?:AttributeError|KeyError|NameError|TypeError|IndexError|"
                            r"AssertionError|UnboundLocalError)\b|^\s*(?:E\s+)?assert\b")
_QUOTED = re.compile(r"(?<![\w'])'[^'\n]*'(?![\w'])|\"[^\"\n]*\"")
_FRAME_LINE = re.compile(rb'^\s*(File) "[^"\n]*", line \d+, in \S+\s*$')
INCIDENTAL_SPAN = 2000  # characters of the hit's line looked at, before and after it
MAX_INCIDENTAL = 256    # incidental hits set aside in one chunk; past that, hits count as before


def _incidental(buf: bytes, pos: int, trig: Trigger) -> bool:
    """Whether the trigger's hit at `pos` is incidental (see above): on an INFO or DEBUG line,
    or inside quotes on a program error's line."""
    lo = max(buf.rfind(b"\n", 0, pos) + 1, pos - INCIDENTAL_SPAN)
    hi = buf.find(b"\n", pos, pos + INCIDENTAL_SPAN)
    head = buf[lo:pos].decode("utf-8", "replace")
    level = None
    for level in _LEVEL.finditer(head):
        pass
    if level is not None and (level[1] in ("INFO", "DEBUG", "TRACE") or level[2] == "I"):
        return True
    if lo > 0 and buf[lo - 1:lo] == b"\n" and head[:1].isspace():
        # a traceback's source line, indented under its frame: code, not an event
        prev = buf[max(buf.rfind(b"\n", 0, lo - 1) + 1, lo - 1 - INCIDENTAL_SPAN):lo - 1]
        frame = _FRAME_LINE.match(prev)
        if frame and len(head) - len(head.lstrip()) > frame.start(1):
            return True
    if b"'" in trig.literal or b"`" in trig.literal or b'"' in trig.literal or not _PROGRAM_ERROR.search(head):
        return False
    line = buf[lo: hi if hi >= 0 else min(len(buf), pos + INCIDENTAL_SPAN)].decode("utf-8", "replace")
    at = len(head)
    return any(m.start() < at < m.end() for m in _QUOTED.finditer(line))


# A kind counts only when its last hit is within this many lines before the last hit of all.
DEFAULT_REACH = 400
REACH_BYTES = 64 * 1024
# A runner fault is the failure only when it is the last thing that happened: a "Connection
# reset ... retrying" early in a job, before a real traceback, is not.
INFRA_REACH = 3        # lines before the last other hit
INFRA_TO_END = 40      # lines before the end of the log


@dataclass(slots=True)
class _Hit:
    kind: FailureKind
    line: int               # 1-based line of the hit
    pos: int                # byte offset of the hit
    before: bytes
    after: bytearray
    need: int               # bytes of `after` still to come from later chunks
    label: str = ""         # the trigger's label (strong runner faults)


@dataclass(slots=True)
class Scanner:
    """Feed chunks of a log; `finish()` returns its signature.  Memory stays bounded."""

    hits: dict[FailureKind, _Hit] = field(default_factory=dict)
    carry: bytes = b""
    lines_before_carry: int = 0  # newlines before the start of `carry`
    size: int = 0
    held: bytes = b""  # an ANSI escape cut by the chunk boundary
    marks: list[int] = field(default_factory=list)  # where footers and teardown start
    marks_from: int = 0  # marks before this offset were dropped (too many to keep)
    end: int = 0  # offset of the end of what was scanned, colour codes removed

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.size += len(chunk)
        chunk = self._strip_colours(self.held + chunk)
        for hit in self.hits.values():
            if hit.need:
                take = chunk[: hit.need]
                hit.after += take
                hit.need -= len(take)
        buf = self.carry + chunk
        self.end += len(chunk)
        seen = len(self.carry)  # matches that end inside the carry were found last time
        base = self.end - len(buf)  # offsets count the log without its colour codes
        matches = _MATCHER.find_matches_as_indexes(buf, overlapping=True)
        marks = [base + start for idx, start, end in matches if idx >= _N_TRIGGERS and end > seen]
        if marks:
            self._mark(marks)
        found: dict[FailureKind, tuple[int, str]] = {}
        skipped = refused = 0
        for idx, start, end in reversed(matches):
            if end <= seen:
                break
            if idx >= _N_TRIGGERS:
                continue
            trig = TRIGGERS[idx]
            if trig.kind in found:
                continue
            if trig.verify:
                # (bounded: past MAX_INCIDENTAL refusals in a chunk, such hits are refused unread)
                if refused >= MAX_INCIDENTAL or not _verified(buf, start, trig.verify):
                    refused += 1
                    continue
            if skipped < MAX_INCIDENTAL and _incidental(buf, start, trig):
                skipped += 1  # (bounded: a chunk of nothing but such lines costs no more)
                continue
            if trig.kind is K.EXCEPTION and _is_teardown(buf, start):
                continue
            if _on_footer(buf, start):  # `... to enable device-side assertions.` is no CUDA error
                continue
            found[trig.kind] = (start, trig.label)
            if len(found) == len(_KINDS):
                break
        # line numbers: one count over the buffer, hit after hit
        line, at = self.lines_before_carry + 1, 0
        for kind, (pos, label) in sorted(found.items(), key=lambda kv: kv[1][0]):
            line += buf.count(b"\n", at, pos)
            at = pos
            after = bytearray(buf[pos:pos + AFTER])
            self.hits[kind] = _Hit(kind, line, base + pos, buf[max(0, pos - BEFORE):pos], after,
                                   AFTER - len(after), label)
        keep = max(BEFORE, TAIL)
        if len(buf) > keep:
            self.lines_before_carry += buf.count(b"\n", 0, len(buf) - keep)
            self.carry = buf[-keep:]
        else:
            self.carry = buf

    def _mark(self, marks: list[int]) -> None:
        self.marks = sorted(self.marks + marks)
        if len(self.marks) > MAX_MARKS:
            drop = len(self.marks) - MAX_MARKS // 2
            self.marks_from = self.marks[drop - 1] + 1
            del self.marks[:drop]

    def has_marks(self, lo: int, hi: int) -> bool | None:
        """Whether a footer or teardown line starts in bytes lo..hi (None: not known)."""
        if lo < self.marks_from:
            return None
        i = bisect.bisect_left(self.marks, lo)
        return i < len(self.marks) and self.marks[i] < hi

    def _strip_colours(self, chunk: bytes) -> bytes:
        # coloured pytest output (`E` lines in red) must match the same triggers as plain
        self.held = b""
        if b"\x1b" not in chunk:
            return chunk
        cut = chunk.rfind(b"\x1b", max(0, len(chunk) - 32))
        if cut >= 0 and not _ANSI_BYTES.match(chunk, cut):
            chunk, self.held = chunk[:cut], chunk[cut:]
        return _ANSI_BYTES.sub(b"", chunk)

    def finish(self) -> Signature:
        if not self.hits:
            return self._fallback()
        total = self.lines_before_carry + self.carry.count(b"\n") + 1
        infra = self.hits.get(K.INFRA)
        others = [h for h in self.hits.values() if h.kind is not K.INFRA]
        if infra and not infra.label and (total - infra.line > INFRA_TO_END
                                          or any(h.line > infra.line + INFRA_REACH for h in others)):
            infra = None
        if infra and not infra.label and others and _detail_of_error(infra):
            infra = None
        if infra and infra.label and total - infra.line > DEFAULT_REACH:
            infra = None
        if infra and infra.label == _OOM_KILLER and _killed_by_itself(infra):
            infra = None
        if not others and infra is None:
            return self._fallback()
        last = max(others, key=lambda h: h.pos) if others else None
        near = [h for h in others if last and h.line >= last.line - DEFAULT_REACH
                and h.pos >= last.pos - REACH_BYTES] + ([infra] if infra else [])
        best = min(near, key=lambda h: PRIORITY.index(h.kind))
        raw_before, raw_after = best.before[-PARSE_WINDOW:], bytes(best.after[:PARSE_WINDOW])
        before = clean_window(raw_before.decode("utf-8", "replace"),
                              self.has_marks(best.pos - len(raw_before), best.pos))
        after = clean_window(raw_after.decode("utf-8", "replace"),
                             self.has_marks(best.pos, best.pos + len(raw_after)))
        excerpt = _excerpt(before, after)
        env = environment(before + after)
        if best.label:  # a strong runner fault: the family is the signature
            label = _cause_of_cancel(before) if best.label == _CANCELLED else best.label
            if label == _OOM_KILLER:
                label = _oom_victim(_line_at(before, after))
            elif label == "out of disk space" and _ON_SHM.search(_line_at(before, after) + after[:3000]):
                label = _SHM
            text = f"{K.INFRA.value}: {label}"
            if label.startswith("rate limited"):  # which hub or registry said no
                host = _host_near(before, after)
                text += f": {host}" if host else ""
            elif label.startswith("This environment is externally managed"):
                # the system whose Python it is: the package manager its message names
                manager = _PACKAGE_MANAGER.search(after[:4000])
                text += f": {manager[1].lower()}" if manager else ""
            elif label.startswith("network between nodes"):  # the transport's status code
                code = _IB_STATUS.search(_line_at(before, after))
                text += f": status {code[1]}" if code else ""
            return Signature(K.INFRA, text, excerpt, best.line, env)
        key = PARSERS[best.kind](before, after)
        if key is None:  # the parser found nothing usable: take the hit's own line
            key = _line_at(before, after)
        text = _signature_text(best.kind, key)
        return Signature(best.kind, _on_arch(best.kind, text, before + after), excerpt, best.line, env)

    def _fallback(self) -> Signature:
        """No trigger: the last line of the end of the log that says error/failed."""
        tail = self.carry
        window = tail[-FALLBACK_TAIL:]
        text = window.decode("utf-8", "replace")
        if not text.strip() and not tail.decode("utf-8", "replace").strip():
            return Signature(K.NO_OUTPUT, f"{K.NO_OUTPUT.value}: the log is empty", "", 0)
        lines_before = self.lines_before_carry + tail.count(b"\n", 0, len(tail) - len(window))
        # control bytes never sit inside a UTF-8 sequence: deleting them from the bytes is
        # deleting them from the text, and much faster than str.translate
        plain = (strip_ansi(text) if b"\x1b" in window
                 else window.translate(None, _CONTROL_BYTES).decode("utf-8", "replace"))
        cleaned = clean_window(plain, self.has_marks(self.end - len(window), self.end))
        pytest = _pytest_lines(cleaned)
        if pytest is not None:
            # pytest's `E` lines behind a prefix the scan could not see through (a runner's
            # timestamp, a rank): once the prefixes are gone, what the trigger would have found
            before, after = cleaned[:pytest], cleaned[pytest:]
            sig_text = _signature_text(K.EXCEPTION, PARSERS[K.EXCEPTION](before, after) or _line_at(before, after))
            line = lines_before + cleaned.count("\n", 0, pytest) + 2
            return Signature(K.EXCEPTION, _on_arch(K.EXCEPTION, sig_text, cleaned), _excerpt(before, after),
                             line, environment(cleaned))
        key, offset, found = generic_line(cleaned)
        if offset >= 0:
            key = with_test(key, found)
        line = lines_before + (offset + 1 if offset >= 0 else text.count("\n") + 1)
        excerpt = strip_ansi("\n".join(text.rsplit("\n", EXCERPT_LINES // 2)[-(EXCERPT_LINES // 2):])
                             [-EXCERPT_CHARS:]).strip("\n")
        kind = K.EXCEPTION if _EXCEPTION_LINE.match(key.lstrip("_*`")) else K.GENERIC
        if kind is K.EXCEPTION and offset > 0:  # a traceback whose header was cut off
            lines = cleaned.split("\n")
            key = with_frame(key, frames_above(lines, offset), "\n".join(lines[max(0, offset - 200):offset]))
        return Signature(kind, _on_arch(kind, _signature_text(kind, key), cleaned), excerpt, line,
                         environment(cleaned))


_DETAIL_HEAD = re.compile(rb"(?i)(?:^|[\s\]>|:])last error\s*:\s*$")


def _detail_of_error(hit: _Hit) -> bool:
    """A network error on the line after an error's `Last error:` (NCCL prints the transport's
    last failure under the collective failure it raised): the detail of that error, which
    keys the failure, not a runner fault of its own."""
    lines = [ln for ln in hit.before.rsplit(b"\n", 4)[:-1] if ln.strip()]
    return bool(lines) and _DETAIL_HEAD.search(lines[-1][-200:]) is not None


def _pytest_lines(text: str) -> int | None:
    """The offset of the `\n` before the last of pytest's `E` lines in `text`, when it is within
    the last DEFAULT_REACH lines (as the scan's own hit would be), else None."""
    at = text.rfind("\nE   ")
    if at < 0 or text.count("\n", at) > DEFAULT_REACH:
        return None
    return at


_SHUTTING_DOWN = re.compile(rb"(?i)shutting down|terminating (?:the )?(?:worker|process)")


def _killed_by_itself(hit: _Hit) -> bool:
    """A bare `Killed` right after the process said it was shutting down (vLLM's engine kills its
    workers after one of them failed): the failure is what made it shut down, not the OOM killer."""
    if bytes(hit.after[:hit.after.find(b"\n") if b"\n" in hit.after else len(hit.after)]).strip() != b"Killed":
        return False
    lines = [ln for ln in hit.before.rsplit(b"\n", 6)[:-1] if ln.strip()]
    return bool(lines) and _SHUTTING_DOWN.search(lines[-1]) is not None


# gcc's and collect2's own words when the OOM killer took a compiler or the linker; a cgroup's
# OOM kill (slurm's `Detected 1 oom-kill event(s)`, Kubernetes' `OOMKilled`, the kernel's `Memory
# cgroup out of memory`) is a job past its own limit, not a machine out of memory
_BUILD_VICTIM = re.compile(r"fatal error: Killed signal|terminated with signal 9 \[Killed\]|"
                           r"signal terminated program (?:cc1|cc1plus|cicc|ptxas|as|ld|lld)\b|"
                           # the kernel's own line naming a compiler or linker as the process it killed
                           r"Killed process \S+ \((?:cc1|cc1plus|cicc|ptxas|nvcc|as|ld|ld\.lld|lld|"
                           r"clang(?:\+\+)?(?:-\d+)?|g\+\+|gcc|c\+\+|rustc|ninja|make)\)")
_CGROUP_VICTIM = re.compile(r"(?i)oom-kill event|OOMKilled|cgroup out[- ]of[- ]memory|Memory cgroup out of memory")


def _oom_victim(line: str) -> str:
    """The OOM killer's label for the hit's line: which kind of process it killed."""
    if _BUILD_VICTIM.search(line):
        return _BUILD_KILLED
    return _LIMIT_KILLED if _CGROUP_VICTIM.search(line) else _OOM_KILLER


_LABELLED = tuple((t.literal.decode(), t.label) for t in TRIGGERS if t.label and t.label != _CANCELLED
                  and t.verify is None)


_LABELLED_VERIFIED = tuple((re.compile(t.verify), t.label) for t in TRIGGERS
                           if t.label and t.label != _CANCELLED and t.verify is not None)


def _cause_of_cancel(before: str) -> str:
    """A runner cancels a job after what made it do so (a shutdown signal, a full disk, a rate
    limit it retried against): that runner fault, when the lines before say it, else the
    cancellation."""
    tail = before[-8000:]
    found = max(((tail.rfind(lit), label) for lit, label in _LABELLED), default=(-1, ""))
    lines = _lines_from(tail)
    for rx, label in _LABELLED_VERIFIED:
        for line_start, line in lines:
            if line_start > found[0] and rx.search(line):
                found = (line_start, label)
    return found[1] if found[0] >= 0 else _CANCELLED


def _lines_from(text: str) -> list[tuple[int, str]]:
    """The lines of the last MAX_CANCEL_LINES lines of `text`, with where each starts."""
    out, end = [], len(text)
    for _ in range(MAX_CANCEL_LINES):
        if end <= 0:
            break
        start = text.rfind("\n", 0, end - 1) + 1
        out.append((start, text[start:end].strip()[:MAX_LINE]))
        end = start
    return out


MAX_CANCEL_LINES = 40  # lines before a cancellation looked at for a labelled fault that needs a check


_ON_SHM = re.compile(r"/dev/shm\b|shared memory segment|\bshm(?:utils)?\.(?:h|cc)\b")
_PACKAGE_MANAGER = re.compile(r"(?i)\b(apk|apt|brew|dnf|yum|pacman|zypper|conda|nix)(?: install| add|\)| only)")
_IB_STATUS = re.compile(r"completion (?:with error |from peer .*?with status=)(\d+)")
_URL_HOST = re.compile(r"https?://([\w.-]+\.[a-z]{2,})(?=[/:\s'\")]|$)")


# one service under several domains: its registry, its docs and its API answer for one limit
# a container image's registry, as a pull or a build names the image (`public.ecr.aws/x/y:1`)
_IMAGE_HOST = re.compile(r"(?:docker pull|FROM|Pulling from|image)\s+[\"']?([a-z0-9-]+(?:\.[a-z0-9-]+)+)/[\w./-]+")
_SERVICE_DOMAINS = {"docker.io": "docker.com", "hf.co": "huggingface.co"}


def _service(host: str) -> str:
    """The service a host belongs to: its registrable domain (`registry-1.docker.io` and
    `www.docker.com` are Docker Hub, `cdn-lfs.huggingface.co` the Hugging Face hub)."""
    parts = host.lower().rstrip(".").split(".")
    domain = ".".join(parts[-2:])
    return _SERVICE_DOMAINS.get(domain, domain)


# the client a log names, for a limit whose URL the quote cut: the service it talks to
_CLIENTS = ((re.compile(r"huggingface_hub|\bhf_hub_|HF_TOKEN"), "huggingface.co"),
            # Amazon ECR's own words for its limit, or its registry's host
            (re.compile(r"toomanyrequests: Rate exceeded|public\.ecr\.aws|\.dkr\.ecr\."), "ecr.aws"),
            (re.compile(r"(?i)\bminiconda|\bconda\b|CondaHTTPError|repodata\.json"), "anaconda.com"),
            (re.compile(r"torch[/.]hub\b|api\.github\.com|github\.com/"), "github.com"),
            (re.compile(r"(?i)\bdocker (?:pull|run|build)\b|Error response from daemon"), "docker.com"),
            (re.compile(r"\bpip (?:install|download)\b|pypi\.org"), "pypi.org"))


def _host_near(before: str, after: str) -> str:
    """The service of the URL on the hit's line, else on the lines around it (a registry's or
    hub's name: `huggingface.co`, `docker.com`), else of the client the log names."""
    line = _line_at(before, after)
    found = _URL_HOST.search(line)
    if found is not None:
        return _service(found[1])
    near = "\n".join(before.rsplit("\n", 6)[-6:] + after.split("\n", 6)[:6])
    hosts = _URL_HOST.findall(near) or _IMAGE_HOST.findall(near)
    if hosts:
        return _service(hosts[-1])
    wide = before[-6000:] + after[:2000]
    return next((service for rx, service in _CLIENTS if rx.search(wide)), "")


def _on_arch(kind: FailureKind, text: str, window: str) -> str:
    """`text`, plus the device's architecture when the log names one and the error is one whose
    cause depends on it (a missing kernel image, a resource limit, a library or collective
    failure): the same words on two GPUs are two failures, and only then."""
    if kind is not K.CUDA_ERROR and not ENV_SENSITIVE.search(text):
        return text
    where = env_key(text, window)
    return f"{text} [on {where}]"[:MAX_SIGNATURE + 40] if where else text


def _line_at(before: str, after: str) -> str:
    return before[before.rfind("\n") + 1:] + after.split("\n", 1)[0]


def _excerpt(before: str, after: str) -> str:
    head = before.rsplit("\n", EXCERPT_LINES // 2)[-(EXCERPT_LINES // 2):]
    tail = after.split("\n", EXCERPT_LINES // 2)[: EXCERPT_LINES // 2]
    text = "\n".join(head)[-EXCERPT_CHARS // 2:] + "\n".join(tail)[: EXCERPT_CHARS // 2]
    return strip_ansi(text).strip("\n")


def _signature_text(kind: FailureKind, key: str) -> str:
    inner = unwrapped(key) if kind is K.CRASH else None
    if inner:  # a loader's error re-raised by Dynamo or Inductor: the loader's error
        key = inner
    if _BUILD_WRAPPER.search(key[:300]):
        key = _NINJA_STOPPED
    return f"{kind.value}: {normalize(key)}"[:MAX_SIGNATURE]


# torch's extension builder re-raises ninja's failure in its own words (`RuntimeError: Error
# compiling objects for extension`, `Error building extension 'name'`): when no compiler error
# is quoted above it, it says what ninja's last line says, one failure whoever printed it
_BUILD_WRAPPER = re.compile(r"^(?:\w+: )?Error (?:compiling objects for|building) extension\b")
_NINJA_STOPPED = "ninja: build stopped: subcommand failed."


# ----- normalization -------------------------------------------------------------------------

_ANSI_BYTES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
# (pattern, replacement, strings one of which it needs to match; "0" stands for any digit)
_RULES: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = tuple(
    (re.compile(p), r, tuple(need.split("|"))) for p, r, need in (
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>", "-"),
    (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<ts>", ":"),
    (r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>", ":"),
    (r"\b0x[0-9a-fA-F]+\b", "<addr>", "0x"),
    (r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b", "<hex>", "0"),
    (r"\b(?:tmp|pytest-)[\w-]{5,}", "tmp*", "tmp|pytest-"),
    # LLVM SelectionDAG node ids, xdist workers, ranks, pid/tid folders
    (r"\b(t|gw|rank|pid_|tid_|worker)\d+(?:_\d+)*\b", r"\1N", "0"),
    # a test's parameters (`test_x.py::test_mm[shape0-4]`) are not where it failed
    (r"(\.py::[\w:]+)\[[^\]\s']*\]", r"\1", "::"),
    # generated names (inductor's cache files, hashes): long mixes of letters and digits
    (r"\b(?=[a-z0-9]*\d)(?=[a-z0-9]*[a-z])[a-z0-9]{20,}\b", "<hash>", "0"),
    (r"(?<![\w.])[-+]?\d+(?:\.\d+)*(?:[eE][-+]?\d+)?", "N", "0"),
))


_DIGIT = re.compile(r"\d")
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CONTROL_BYTES = bytes([*range(9), *range(11, 32), 0x7f])
_CONTROL = dict.fromkeys(c for c in range(32) if c not in (9, 10)) | {0x7f: None}


def strip_ansi(text: str) -> str:
    """Text without ANSI colour codes and control characters (newlines and tabs kept)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    # str.translate is fast on ASCII only; elsewhere it looks up every character
    return text.translate(_CONTROL) if text.isascii() else _CONTROL_CHARS.sub("", text)


# Paths keep their last part only (runners check out in different folders).  Possessive, and a
# replacement that never fails once it matched: linear in the line length (see issue 14: the
# old pattern backtracked quadratically on `/~/~/~...`).
_PATH = re.compile(r"(?<![\w.:])(?:[A-Za-z]:)?(?:[\w.+@~-]*[/\\])++[\w.+@-]*")


_ESCAPE = re.compile(r"[^/\\]*\\[ntr0]")  # `12\n`: a printed escape after a value, not a path


def _last_part(m: re.Match[str]) -> str:
    if _ESCAPE.fullmatch(m[0]):
        return m[0]
    parts = re.split(r"[/\\]", m[0])
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2]:
        # a number is an index, not a name: gtest's `Suite/Test.Name/29`, `/proc/1234`
        return f"{parts[-2]}/{parts[-1]}"
    return m[0] if len(parts) < 2 or not parts[-1] else parts[-1]


MAX_LINE = 2000  # characters of one line looked at: untrusted logs may hold megabyte lines


@functools.lru_cache(maxsize=4096)
def normalize(text: str) -> str:
    """Error text without what changes between runs: addresses, numbers, paths, times, colours.

    Cached: the failures of one run mostly share a handful of errors."""
    text = _strip_prefixes(strip_ansi(text)[:MAX_SIGNATURE * 4])
    if "\u2018" in text or "\u2019" in text or "\u201c" in text or "\u201d" in text:
        # gcc quotes with ‘’ in a UTF-8 locale and with '' in the C locale; a forum's editor
        # curls a pasted log's quotes: one error either way
        text = text.translate(_TYPOGRAPHIC_QUOTES)
    if "CMake Error" in text:
        # CMake's message goes on with what to do about it (`Compatibility with CMake < 3.5 has
        # been removed from CMake. Update the VERSION argument ...`), which quotes cut anywhere
        text = _CMAKE_FIRST_SENTENCE.sub(r"\1", text)
    if " :: " in text:
        # lit names a failed test in its banner (`**** TEST 'Clang :: x.cpp' FAILED ****`) and in
        # its summary (`FAIL: Clang :: x.cpp (12 of 3400)`): one failure, whichever a quote kept
        text = _LIT_FAILED.sub(r"lit test failed: \1\2", text)
    if "command not found" in text:
        # a shell that runs `VAR=value cmd` as a command named `VAR=value` (lit's internal shell):
        # which variable the test set is the test's
        text = _ASSIGNMENT_RUN.sub("'<VAR=value>': command not found", text)
    if "." in text:
        text = _QUALIFIED.sub(r"\1", text)
    # an error code names the error (`Triton Error [ZE]: 0x70000004`): kept, unlike other numbers
    if ":" in text:
        text = _ERROR_CODE.sub(_error_code, text)
    if "HTTP" in text:
        text = _HTTP_STATUS.sub(r"HTTP code-n\2", text)
    if "object has no attribute" in text:
        # a model wrapper (DDP, DataParallel, FSDP, torch.compile's module) does not forward the
        # wrapped module's attributes: which attribute the code asked for is the code's, not the cause
        text = _WRAPPER_ATTRIBUTE.sub(r"\1 object has no attribute <of the wrapped module>", text)
    if "NCCL Error" in text:  # older torch: `NCCL Error 2: unhandled system error`
        text = _NCCL_ERROR_CODE.sub("NCCL error: ", text)
    if " : " in text:  # `RuntimeError : message` (a notebook's or logger's spacing)
        text = _SPACED_COLON.sub(r"\1: ", text)
    if ".inc" in text:
        # a generated header (TableGen's `*.inc`) not there yet: the build ran its user before its
        # generator; which of a target's generated headers it met first is chance
        text = _GENERATED_HEADER.sub(r"\1*.inc\1\2", text)
    if "satisfies the requirement" in text:
        # pip says it twice: `Could not find a version that satisfies the requirement X (from
        # versions: ...)`, then `No matching distribution found for X`; a quote keeps either
        text = _PIP_NO_VERSION.sub(r"No matching distribution found for \1", text)
    if "than" in text or " or " in text:
        # a version a requirement names is the environment's, not a count (`gcc versions later
        # than 11 are not supported`, `CMake 3.20 or higher is required`)
        text = _REQUIRED_VERSION.sub(r"v\g<0>", text)
    if ".tmp" in text:
        # a temporary file's name is a pid and a random suffix; which file a cache or writer lost
        # is chance: `No such file or directory: '<a temporary file>'` (and where it was going)
        text = _TEMP_FILE.sub("'<a temporary file>'", text)
    if "/" in text or "\\" in text:
        text = _PATH.sub(_last_part, text)
    if "_Z" in text:
        text = _MANGLED.sub(_namespace_of, text)
    # a rule is tried only when its text can match (the rules never add a digit)
    digits = _DIGIT.search(text) is not None
    for rx, repl, needs in _RULES:
        if any(digits if need == "0" else need in text for need in needs):
            text = rx.sub(repl, text)
    # a sentence's full stop is the printer's (`... different CUDA versions.`, without it when a
    # logger or a quote dropped it): not part of the error
    return _FULL_STOP.sub("", _unquote(" ".join(text.split())))


_LIT_FAILED = re.compile(r"^(?:\*{3,} ?TEST '([^'\n]{1,400} :: [^'\n]{1,400})' FAILED ?\*{3,}|"
                         r"FAIL: ([^\n]{1,400} :: \S{1,400})(?: \(\d+ of \d+\))?)$")
_ASSIGNMENT_RUN = re.compile(r"'[A-Za-z_]\w{0,100}=[^'\n]{0,400}': command not found")
_TYPOGRAPHIC_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_CMAKE_FIRST_SENTENCE = re.compile(r"(CMake Error[^:\n]{0,200}: [^\n]{1,400}?[a-z)]\.)\s+[A-Z][^\n]*$")
_FULL_STOP = re.compile(r"(?<=[A-Za-z)\]'\"])\.$")


# A C++ symbol as the loader prints it (`_ZN3c104cuda9SetDeviceEi`): which one of a library's
# symbols is missing says little (the extension was built against another release of it); the
# library's namespace says which (`c10::*`, torch's).
_MANGLED = re.compile(r"(?<=undefined symbol: )_Z\w{1,600}")
_MANGLED_HEAD = re.compile(r"_ZN?[KVRL]*(?:(St)|(\d{1,3}))")


_ONE_LIBRARY = {"c10": "torch", "at": "torch", "caffe2": "torch", "torch": "torch"}


def _namespace_of(m: re.Match[str]) -> str:
    head = _MANGLED_HEAD.match(m[0])
    if head is None:
        return m[0]
    if head[1]:
        return "std::*"
    name = m[0][head.end():head.end() + int(head[2])]
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return m[0]
    # PyTorch's C++ API lives in several namespaces of one library: an extension built against
    # another torch misses symbols in any of them
    return f"{_ONE_LIBRARY.get(name, name)}::*"


def _error_code(m: re.Match[str]) -> str:
    return f"{m[1]}code-{'x' if m[2].startswith('0x') else 'n'}{m[2].removeprefix('0x')}"


def _unquote(text: str) -> str:
    """Quoting around an error (`"..."`, a `> ` quote) is the reporter's, not the error's."""
    if text.startswith("> "):
        text = text[2:]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`_":  # (`_..._`: Markdown's emphasis)
        text = text[1:-1]
    # a Markdown code span or a JSON string the quote cut at one end (`message\``, `message\\`)
    if text.endswith("\\") or (text.endswith("`") and text.count("`") % 2 == 1):
        text = text.rstrip("`\\")
    return text.strip()


_WRAPPER_ATTRIBUTE = re.compile(r"('(?:DistributedDataParallel|DataParallel|FullyShardedDataParallel|"
                                r"OptimizedModule|DeepSpeedEngine)') object has no attribute '\w+'")
_NCCL_ERROR_CODE = re.compile(r"NCCL Error \d+: ")
_TEMP_FILE = re.compile(r"'[^'\n]{0,400}\.tmp\b[^'\n]{0,200}'(?: -> '[^'\n]{0,400}')?")
_SPACED_COLON = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)) : ")
_GENERATED_HEADER = re.compile(r"(['\"`]?)[\w.-]{1,200}\.inc\1((?::)? (?:file not found|No such file or directory))")
_PIP_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+).*")
# an HTTP status names the error too (`HTTP Error 404`, `HTTP 429`)
_HTTP_STATUS = re.compile(r"(HTTP (?:Error |[Ss]tatus:? )?)(\d{3})\b")
_REQUIRED_VERSION = re.compile(r"(?i)(?<=versions (?:later|newer|older) than )(\d+(?:\.\d+)*)|"
                               r"(?<=version (?:later|newer|older) than )(\d+(?:\.\d+)*)|"
                               r"(\d+(?:\.\d+)+)(?= or (?:later|higher|newer|above) (?:is )?required)")
_ERROR_CODE = re.compile(r"((?:Error \[\w+\]|error code|errno|Code):\s*)(0x[0-9a-fA-F]+|\d+)\b")
# `torch.cuda.OutOfMemoryError:` and `OutOfMemoryError:` are one exception type
_QUALIFIED = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)+([A-Z]\w*(?:Error|Exception|Resources|Failed)\b"
                        r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+(?=: ))")
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b:?")

_FOOTERS = _FOOTERS_LIST
_FOOTER_MATCHER = ahocorasick_rs.AhoCorasick(list(_FOOTERS))
# Prefixes CI runners put before every line: timestamps, ranks, lit's `# | `, nix's `pkg> `.
_PREFIXES = (r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]?"
             r"|(?:[A-Z][a-z]{2} \d\d |\d{4}/\d\d/\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?[ \t]?"
             # Open MPI's tag of a rank's output: `[1,0]<stderr>:`
             r"|\[\d+,\d+\]<std(?:out|err)>: ?"
             r"|\[(?:rank|default)\d+\]: ?"
             # a process's tag: Ray's and vLLM's workers `(VllmWorker pid=123)`, `(raylet, ip=10.0.0.1)`
             r"|\((?:[\w.-]+,? )?(?:pid=\d+|ip=[\d.]+)(?:, ip=[\d.]+)?\) |\(raylet(?:, ip=[\d.]+)?\) "
             # glog in brackets (`[rank0]:[W1206 18:44:12.7 ProcessGroupNCCL.cpp:607] `)
             r"|\[[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?(?: \d+)? [\w./-]+:\d+\] ?"
             # vLLM's logger: `ERROR 06-13 07:35:59 [core.py:517] `, `INFO 08-13 04:39:39 engine.py:400] `
             r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[\w./-]+:\d+\]|[\w./-]+:\d+\]) "
             # a compose service (`vllm-1  | `), a runner's step marker, docker build's step
             r"|[\w.-]{1,40} +\|(?:[ \t]|(?=\n)|$)|##\[(?:error|warning|group|endgroup|debug|notice)\]| *#\d+ \d+\.\d+ "
             # a job's or platform's tag in brackets before docker build's step (`[linux/amd64] #12 3.4 `)
             r"|\[[\w .:/-]{0,40}\] (?=#\d+ \d+\.\d+ )"
             # gtest's verdict column: `[  FAILED  ] Suite.Test` names a test, the error is elsewhere
             r"|\[ +(?:FAILED|OK|RUN|PASSED|SKIPPED) +\] "
             # NCCL's own: `host:pid:tid [dev] `, and the source line its warnings name
             # (`host:pid:tid [1] proxy.cc:1119 NCCL WARN ...`)
             r"|[\w.-]+:\d+:\d+ \[\d+\] (?:[\w./-]{1,80}\.(?:cc|cu|c|cpp|h):\d+ (?=NCCL ))?"
             # glog and torch logging: `E0912 11:54:57.366000 1121181 torch/x.py:2100] [7/0] `
             r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\] (?:\[[\d/]+\] )?"
             # TensorFlow's and XLA's logging: `2024-05-01 12:00:00.123456: E external/xla/x.cc:535] `
             r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] [\w./-]+:\d+\] "
             # bracketed or logging timestamps, pytest-xdist's worker tag
             r"|\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?\] ?|\[\d\d:\d\d:\d\d(?:[.,]\d+)?\] ?"
             r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? (?:- [\w.]+ - (?:[A-Z]+ - )?)?|\[gw\d+\] ?"
             # ctest's test number when it runs tests in parallel: `209: `
             r"|\d{1,5}: "
             # Buildkite's and other pasted logs' column: `  | [2025-08-08T10:26:49Z] `
             r"| {0,4}\| (?=\[|\d{4}-)"
             r"|# \| ?|[\w.-]{1,20}> )+")
_LINE_PREFIX = re.compile("^" + _PREFIXES, re.M)
# the same after a newline: a literal first character lets the regex engine jump from line to
# line instead of trying `^` at every character
_NL_PREFIX = re.compile("\n" + _PREFIXES)


def _strip_prefixes(text: str) -> str:
    return _NL_PREFIX.sub("\n", "\n" + text)[1:]


def _drop_footers(text: str) -> str:
    found = _FOOTER_MATCHER.find_matches_as_indexes(text)
    if not found:
        return text
    # one search over the window, then the lines that hold a match are cut out (from the
    # footer on, when an error of its own stands before it on the line)
    out, last = [], 0
    for _idx, start, _end in found:
        if start < last:
            continue
        lo = text.rfind("\n", 0, start) + 1
        hi = text.find("\n", start)
        hi = len(text) if hi < 0 else hi
        out.append(text[last:lo])
        if _keeps_head(text[lo:start]):
            out.append(text[lo:start].rstrip() + "\n")
        last = hi + 1
    out.append(text[last:])
    return "".join(out)


# What the interpreter prints while it shuts down, after the test has failed: noise.
_TEARDOWN = re.compile(r"^Exception ignored in[^\n]*\n(?:Traceback[^\n]*\n)?(?:[ \t][^\n]*\n)*[^\n]*$",
                       re.M)


def clean_window(text: str, has_marks: bool | None = None) -> str:
    """Log text as the parsers want it: lines capped, runner prefixes, footers, teardown gone.

    `has_marks` False says the scan found no footer or teardown line in this window."""
    if "\r" in text:  # a Windows log's line ends; a progress bar's returns end a line too
        text = text.replace("\r\n", "\n")
        text = (text[:-1] if text.endswith("\r") else text).replace("\r", "\n")
    if _has_long_line(text):
        text = "\n".join(ln[:MAX_LINE] for ln in text.split("\n"))
    if (text.startswith("> ") or "\n>" in text) and "\n" in text.strip("\n") \
            and _NOT_QUOTED.search(text, text.find("\n") + 1) is None or _QUOTED_LINE.fullmatch(text):
        # a log pasted as a Markdown quote: every line (past the window's first, which it may
        # cut) starts with `>`; one level of it goes, pytest's own `>` lines stay under it
        text = _QUOTE.sub("", text)
    # runners prefix every line of their part of the log: lines sampled across the window tell
    if _NL_PREFIX.search("\n" + _sample_lines(text)):
        text = _strip_prefixes(text)
    text = strip_shared_prefixes(text)
    if has_marks is False:
        return text
    text = _drop_footers(text)
    return _TEARDOWN.sub("", text) if "Exception ignored in" in text else text


# ----- prefixes of any shape: what every line of a block starts with --------------------------
# A process, a runner or a logger may put a tag of any shape before each line it relays
# (`(EngineCore_DP0 pid=2321) `, `Dec  6 18:47:06 node-3 python[123]: `, `[pod/job-7f9c/trainer] `).
# No list of shapes covers them all: such a tag is what consecutive lines of a block share, up
# to a space, once digits are set aside (times, pids and ranks change from line to line), while
# what follows it is the block's own text, indented here and not there (a traceback's frames
# under its header).  Repeated content (make's `make[2]: *** `, ninja's `[3/16] `, a stack
# dump's `#0 `) is never indented one line and not the next, and is left alone.
PREFIX_SCAN = 200      # characters of a line compared
MIN_PREFIX_RUN = 3     # lines that must share a tag
_DIGITS_FOLD = str.maketrans("0123456789", "0000000000")
_TAG_MARK = re.compile(r"[\d()\[\]<>|:]")
_LOCATION_TAG = re.compile(r"^\S+\.\w+:\d+(?::\d+)?:$")  # `file.mlir:12:5:`: a diagnostic's own


def _common(a: str, b: str) -> int:
    """The length of the common prefix of `a` and `b` (at most PREFIX_SCAN): a binary search of
    slice comparisons, each in C."""
    if not a or not b or a[0] != b[0]:
        return 0
    n = min(len(a), len(b), PREFIX_SCAN)
    if a[:n] == b[:n]:
        return n
    lo, hi = 1, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _tag_end(folded: str, limit: int) -> int:
    """The length of the longest tag of `folded` within its first `limit` characters: it ends
    at a blank after a non-blank or at one of `:])|>`, holds a digit, a bracket or a `:`/`|`,
    and is no comment or location; 0 when there is none."""
    k = limit
    for _ in range(MAX_TAG_ENDS):  # the rightmost few ends only: bounded work per line
        k = max(folded.rfind(c, 0, k) for c in " \t:])|>") + 1
        if k <= 0:
            return 0
        if folded[k - 1] in " \t" and (k < 2 or folded[k - 2] in " \t"):
            k -= 1
            continue
        tag = folded[:k].strip()
        if (len(tag) >= 2 or tag == "|") and tag[0] != "#" and _TAG_MARK.search(tag) \
                and not _LOCATION_TAG.match(tag):
            return k
        k -= 1
    return 0


MAX_TAG_ENDS = 16


def strip_shared_prefixes(text: str) -> str:
    """`text` without the tags its blocks of lines share (see above); linear in its length."""
    if "\n" not in text:
        return text
    lines = text.split("\n")
    folded = text.translate(_DIGITS_FOLD).split("\n")  # (digits for digits: offsets stay)
    # common prefix of each line with the next
    common = [_common(folded[i], folded[i + 1]) for i in range(len(lines) - 1)] + [0]
    out: list[str] = []
    i = 0
    changed = False
    while i < len(lines):
        # the run of lines from i that share a tag, and the end of the longest tag they share
        j, end = i, _tag_end(folded[i], common[i]) if common[i] > 1 else 0
        while end and j < len(lines) - 1:
            if common[j] < end:
                shorter = _tag_end(folded[i], common[j]) if common[j] > 1 else 0
                if not shorter:
                    break
                end = shorter
            j += 1
        if j - i + 1 < MIN_PREFIX_RUN:
            end = 0
        if end:
            rest = [ln[end:] for ln in lines[i:j + 1]]
            # (a tag padded to a width: `INFO:     `)
            pad = min((len(r) - len(r.lstrip(" \t")) for r in rest if r.strip()), default=0)
            rest = [r[pad:] for r in rest]
            # a block's own text: a line that starts with a word, another indented under it (not
            # the columns of a table, right-aligned numbers)
            if any(r[:2] == "  " or r[:1] == "\t" for r in rest) and any(r[:1].isalpha() for r in rest):
                out += rest
                changed = True
                i = j + 1
                continue
        out += lines[i:j + 1]
        i = j + 1
    return "\n".join(out) if changed else text


# a line that is neither empty nor quoted; the quote's marker (`> `, `>` on a blank line)
_NOT_QUOTED = re.compile(r"^[^>\n]", re.M)
_QUOTE = re.compile(r"^> ?", re.M)
# a quote of one line (pytest's `>` before a failing statement is followed by more spaces)
_QUOTED_LINE = re.compile(r"> {1,3}[^\s>][^\n]*\n?")


def _has_long_line(text: str) -> bool:
    """Whether a line is longer than MAX_LINE, without splitting: such a line covers a whole
    aligned block of MAX_LINE // 2 characters that holds no newline."""
    step = MAX_LINE // 2
    return len(text) > MAX_LINE and any(text.find("\n", i, i + step) < 0
                                        for i in range(0, len(text) - step + 1, step))


def _sample_lines(text: str) -> str:
    """Eight lines at either end and sixteen across the window, one a line."""
    if len(text) <= 4096 and text.count("\n") < 40:
        return text
    head = text.split("\n", 8)[:8]
    tail = text.rsplit("\n", 8)[-8:]
    step = len(text) // 16
    across = []
    for i in range(1, 16):
        lo = text.rfind("\n", 0, i * step) + 1
        hi = text.find("\n", lo)
        across.append(text[lo: hi if hi >= 0 else len(text)])
    return "\n".join(head + tail + across)


# ----- entry points --------------------------------------------------------------------------

def iter_chunks(source: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    while chunk := source.read(size):
        yield chunk


def scan(chunks: Iterable[bytes]) -> Signature:
    """The signature of a log given as chunks of bytes (any encoding; invalid UTF-8 is fine)."""
    scanner = Scanner()
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def signature_of(log: bytes | str | BinaryIO) -> Signature:
    """The signature of a whole log: bytes, text or a binary stream."""
    if isinstance(log, str):
        log = log.encode("utf-8", "surrogateescape")
    if isinstance(log, bytes):
        log = io.BytesIO(log)
    return scan(iter_chunks(log))


def signature_of_file(path: Path) -> Signature:
    with path.open("rb") as f:
        return scan(iter_chunks(f))


WINDOW_LINES = (400, 60)           # lines kept before and after a log's error line
WINDOW_CHARS = (48 * 1024, 16 * 1024)


def log_window(path: Path, line: int) -> str:
    """The part of a log around its error line (`Signature.line`, 1-based; 0: the end), capped:
    the text a later version of these rules keys the failure again from, once the log is gone.
    Read forward in chunks, like `scan`."""
    before, after = WINDOW_CHARS
    with path.open("rb") as f:
        if line <= 0:
            f.seek(max(0, path.stat().st_size - before - after))
            return f.read().decode("utf-8", "replace")
        first = max(1, line - WINDOW_LINES[0])
        last = line + WINDOW_LINES[1]
        at = 1                 # the line number at the start of `buf`
        buf = b""
        for chunk in iter_chunks(f):
            buf += chunk
            if at < first:
                n = buf.count(b"\n")
                if at + n < first:
                    at, buf = at + n, buf[buf.rfind(b"\n") + 1:] if n else buf
                    buf = buf[-(before + after):] if len(buf) > before + after else buf  # a huge line
                    continue
                buf, at = buf[_nth_newline(buf, first - at) + 1:], first
            if buf.count(b"\n") >= last - at + 1:
                break
    end = _nth_newline(buf, last - at + 1)
    window = buf[:end] if end >= 0 else buf
    split = _nth_newline(window, line - at) + 1 if line > at else 0
    return (window[:split][-before:] + window[split:][:after]).decode("utf-8", "replace")


def _nth_newline(buf: bytes, n: int) -> int:
    """The index of the `n`th newline of `buf` (1-based), -1 when it has fewer."""
    pos = -1
    for _ in range(n):
        pos = buf.find(b"\n", pos + 1)
        if pos < 0:
            return -1
    return pos
