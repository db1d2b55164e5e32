"""Per-kind parsers: given the text before and after a trigger hit, the key lines.  [pure]

Each parser returns the raw key text (normalized later by `signature.normalize`), or None when
it finds nothing better than the hit's own line.  `after` starts at the hit.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import ahocorasick_rs

from forkflow.triage.models import FailureKind

Parser = Callable[[str, str], "str | None"]

_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)', re.M)
_SHORT_FRAME = re.compile(r"^(\S+?\.py):\d+: in (\S+)\s*$", re.M)
_PYTEST_LOC = re.compile(r"^(\S+?\.py):\d+: (?:in )?([\w.]+)\s*$", re.M)
_SYMBOL = re.compile(r"^\s*#\d+\s+0x[0-9a-fA-F]+\s+(?:in\s+)?(.+?)(?:\s+\(/|\s+/|\s+\(\S*\+0x|$)")
_SKIP_FRAME = re.compile(r"llvm::sys::|SignalHandler|__restore_rt|\braise\b|\babort\b|__assert_fail|"
                         r"libc\.so|__GI_|_start\b|__libc_start|PrintStackTrace|RunSignalHandlers|"
                         r"^\?\?|0x[0-9a-f]+$|pthread_kill|^(?:main|clang_main|cc1_main|call_init|"
                         r"ExecuteCC1Tool|mlir::asMainReturnCode|mlir::MlirOptMain)\b|"
                         r"CrashRecovery|\(/lib/|libc-start")
_INNER_ERROR = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b")
_GENERIC = re.compile(r"(?i)\b(error|errors|fail|failed|failure|fatal|abort|aborted|exception|panic)\b|"
                      # runtimes' status names: `UR_RESULT_ERROR_DEVICE_LOST`, `CUDA_ERROR_LAUNCH_FAILED`
                      r"_ERROR_[A-Z]|\bERROR_[A-Z]")
_SUMMARY_BAR = re.compile(r"^\s*[=_-]{3,}.*[=_-]{3,}\s*$|short test summary|^\s*\d+ (?:failed|passed)|"
                          r"\b(?i:0|no) (?i:errors?|failures?|failed)\b|"
                          # the runners' closing counts: unittest, lit, ctest
                          r"^FAILED \((?:failures|errors)=|^\s*(?:Failed|Unresolved|Timed Out)(?: Tests \(\d+\))?:\s*\d*$|"
                          r"^Errors while running CTest|^The following tests FAILED|^\s*\d+ - \S+ \([\w ]+\)\s*$|"
                          # pass rates and counts a log's tail prints
                          r"(?i:pass(?:ing)?[ _-]?rate)|^\s*(?i:total|tests?|passed|failed|errors?|skipped)\s*[:=]\s*\d+\s*[,;|]")


def _basename(path: str) -> str:
    return re.split(r"[/\\]", path)[-1]


def _hit_line(before: str, after: str) -> str:
    return before[before.rfind("\n") + 1:] + after.split("\n", 1)[0]


def _from_hit(after: str) -> str:
    return after.lstrip("\n").split("\n", 1)[0]


_CLOSE = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLAUSE_END = re.compile(r"[.,;](?=\s|$)")
_REPR = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\((['\"])([^'\"\n]*)\2\)")
_PARENTHESISED = re.compile(r" \([^()]*\)")
_OPENERS = re.compile(r"[(\[{<`\"']")


def _first_sentence(text: str) -> str:
    """The message up to its first clause, without parenthesised details: what follows a `. `,
    `, ` or `; ` outside quotes and brackets, and what stands in ` (...)`, is detail (sizes,
    limits, paths, hints) that changes with the run and the version (`out of resource: shared
    memory, Required: 98304, ...`, `out of memory (allocated: 3.2 GB, ...)`).  An error code
    named in the detail (`PI_ERROR_INVALID_BINARY`, `hipErrorNoBinaryForGpu`) is kept."""
    head = _clause(text[:600])
    if len(head) < min(len(text), 600) and ("_" in text or "Error" in text or "Status" in text):
        code = _ERROR_CODE_NAME.search(text, 0, 600)
        if code and code[0] not in head:
            return f"{head} [{code[0]}]"
    if len(head) < min(len(text), 600) and "errno" in text:
        # the system error a socket or file call got (`(errno: 13 - Permission denied)`): what
        # went wrong, where the sentence only says what failed
        errno = _ERRNO_DETAIL.search(text, 0, 600)
        if errno and errno[0] not in head:
            return f"{head} [errno: {errno[1]} - {errno[2]}]"
    return head


_ERRNO_DETAIL = re.compile(r"\(errno: (\d+) - ([A-Za-z][\w ]{0,60})\)")


_ERROR_CODE_NAME = re.compile(r"\b(?:[A-Z][A-Z0-9]*_)+(?:ERROR|RESULT|STATUS)(?:_[A-Z0-9]+)+\b|"
                              r"\b(?:cuda|hip|cu|nccl|ze)(?:Error|Status)[A-Z]\w*")


def _clause(text: str) -> str:
    if "('" in text or '("' in text:  # `AssertionError('msg')`, an exception as repr() prints it
        text = _REPR.sub(r"\1: \3", text)
    if " (" in text:
        stripped = _PARENTHESISED.sub("", text)
        cut = stripped.find(" (")  # one left open: the text was cut inside it
        stripped = stripped[:cut] if cut >= 0 else stripped
        # a message that is all parentheses (`Error:  ('"pkg" could not be found', 404)`, a
        # tuple as Python prints it) is no detail: it is the message
        if not stripped.rstrip().endswith(":"):
            text = stripped
    end = _CLAUSE_END.search(text)
    if end is None:
        return text
    if not _OPENERS.search(text, 0, end.start()):  # nothing quoted before it: cut there
        return text[: end.start() + 1].rstrip(",;")
    stack: list[str] = []
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "`\"":
            quote = ch
        elif ch == "'" and (i == 0 or not text[i - 1].isalnum()):
            quote = ch
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif not stack and ch in ".,;" and text[i + 1: i + 2] in ("", " ", "\t", "\n"):
            return text[: i + 1].rstrip(",;")
    return text


# Library frames are never where a failure is: the assertion helpers of torch and unittest,
# pytest, the Dynamo/Inductor machinery that re-raises (issue 14).
_LIBRARY = re.compile(r"(?:site|dist)-packages/(?:torch/(?:testing|_dynamo|_inductor|_functorch)|_pytest|"
                      r"pluggy|unittest)|/lib/python3[.\d]*/(?!site-|dist-)|torch/testing/_comparison\.py|"
                      r"torch/testing/_internal/")
# Messages that say too little to tell causes apart: the innermost project frame is added.
_GENERIC_MESSAGE = re.compile(r"^\s*(?:Tensor-likes are not (?:close|equal)!|Scalars are not (?:close|equal)!|"
                              r"PassManager::run failed|assert \w+$|True is not false|False is not true|"
                              r"\S+ not raised|$|"
                              # a resource limit names the resource, not the kernel that needs it
                              r"out of resource: [\w ]+$|"
                              # a message that only introduces a block it did not quote (`at 80:4:`)
                              r".*:\s*$)")
# Wrappers that re-raise another error: the wrapped error is the signature.
_WRAPPER = re.compile(r"^(?:[\w.]+\.)?(?:BackendCompilerFailed: backend='\w+' raised:|InductorError:|"
                      r"LoweringException:|TorchRuntimeError: Failed running [^:]*:|"
                      r"Exception: Caused by sample input at index \d+:)\s*")


def _project_frame(frames: list[tuple[str, str, str]], strict: bool = False) -> tuple[str, str] | None:
    """The innermost frame outside the libraries, else (not `strict`) the innermost one."""
    for path, base, func in reversed(frames):
        if not _LIBRARY.search(path.replace("\\", "/")):
            return base, func
    return (frames[-1][1], frames[-1][2]) if frames and not strict else None


# The test a failure belongs to, as the runner named it: pytest's `dir/test_x.py::Class::test`
# (its module) and unittest's `ERROR: test_x (module.Class)` or `FAIL: Class.test_x` (its class).
_PYTEST_ID = re.compile(r"([\w.-]+\.py)::[\w\[]")
# after a literal newline, so the regex engine jumps from line to line
_UNITTEST_HEAD = re.compile(r"\n(?:ERROR|FAIL)(?: \[[\d.]+m?s\])?: (?:\w+ \((?:[\w.]*\.)?(\w+)\)|(\w+)\.\w+[ \t]*(?=\n|$))")


# a test another line reports as passed or skipped is not the one that failed
_PASSED = re.compile(r"PASS|SKIP|XFAIL")
# after a literal newline, so the regex engine jumps from line to line
_ID_LINE = re.compile(r"\n(?![^\n]*(?:PASS|SKIP|XFAIL))([^\n]*\.py::[^\n]*)")


def test_unit(text: str) -> str | None:
    """The last test named in `text`: its module file (pytest) or its class (unittest)."""
    tail = "\n" + text[-8000:]
    best: tuple[int, str] | None = None
    pos = tail.rfind(".py::")
    if pos >= 0:  # only the line of the last pytest id of a test that did not pass
        lo = tail.rfind("\n", 0, pos) + 1
        hi = tail.find("\n", pos)
        start, line = lo, tail[lo: len(tail) if hi < 0 else hi]
        if _PASSED.search(line):  # the lines before, in one pass (rarely needed)
            last = None
            for last in _ID_LINE.finditer(tail, 0, lo):
                pass
            start, line = (last.start() + 1, last[1]) if last else (-1, "")
        found = list(_PYTEST_ID.finditer(line))
        if found:
            best = (start, found[-1][1])
    heads = list(_UNITTEST_HEAD.finditer(tail))
    if heads and (best is None or heads[-1].start() >= best[0]):
        best = (heads[-1].start(), heads[-1][1] or heads[-1][2])
    if best is None:
        # a report's row or list entry that names the test by its module's dotted path
        # (`inductor.test_torchinductor.GPUTests,test_x`, `test.dist.test_fsdp.TestFSDP | test_x`)
        dotted = None
        for dotted in _DOTTED_TEST.finditer(tail):
            pass
        if dotted:
            return f"{dotted[1]}.py"
    return best[1] if best else None


# a test module in a dotted path, followed by its class
_DOTTED_TEST = re.compile(r"(?<![\w/-])(test_\w+)\.[A-Z]\w*(?=[\s,|.]|$)")


def with_test(key: str, line: str) -> str:
    """`key` taken from `line` (`FAILED dir/test_x.py::test - AssertionError`), plus the test's
    module when the message alone says too little."""
    if key == line or not _GENERIC_MESSAGE.match(key.partition(": ")[2]):
        return key
    unit = test_unit(line)
    return f"{key} @ {unit}" if unit else key


def _where(frames: list[tuple[str, str, str]], before: str) -> str | None:
    """Where a failure whose message says too little is: its innermost project frame, else the
    test it belongs to, else its innermost frame."""
    frame = _project_frame(frames, strict=True)
    if frame:
        return None if frame[1] == "<module>" else f"{frame[0]}:{frame[1]}"
    unit = test_unit(before)
    if unit:
        return unit
    frame = _project_frame(frames)
    return f"{frame[0]}:{frame[1]}" if frame and frame[1] != "<module>" else None


def parse_traceback(before: str, after: str) -> str | None:
    """The exception line of the last Python traceback; its innermost project frame when the
    message alone says too little."""
    frames: list[tuple[str, str, str]] = []
    lines = after.split("\n")
    for i, line in enumerate(lines[1:], 1):
        m = _FRAME.match(line)
        if m:
            frames.append((m[1], _basename(m[1]), m[2]))
            continue
        if not line.strip() or line[:1] in (" ", "\t") or line.startswith("Traceback") \
                or _SEPARATOR.match(line):
            continue
        wrapped = unwrapped(line.strip())
        message = _exception_message(wrapped or line.strip(), "\n".join(lines[i:i + 40]))
        # (the error a wrapper re-raises on its line is read whole, before the message is cut)
        inner = message if wrapped else _unwrap(message, lines[i + 1:i + 6])
        if wrapped:
            message = ""
        if inner != message:  # a wrapper: its frames are the wrapper's; the error's come before
            earlier = [(m[1], _basename(m[1]), m[2]) for m in _FRAME.finditer(before[-8000:])]
            return with_frame(inner, earlier, before)
        # import-time errors name the importing module: the message is the signature
        return with_frame(message, frames, before, "\n".join(lines[i + 1:i + 12]))
    # a log cut inside the traceback: where it was, else (only a harness's frames, as torch's
    # distributed tests print them) the test it belongs to
    frame = _project_frame(frames, strict=True)
    unit = None if frame else test_unit(before)
    if unit:
        return f"traceback cut @ {unit}"
    frame = frame or _project_frame(frames)
    return f"traceback cut @ {frame[0]}:{frame[1]}" if frame else None


# a line of only punctuation (`--` between a pasted log's parts, `....`): never an exception
_SEPARATOR = re.compile(r"^[-=_~*#.+| ]+$")
_ELISION = re.compile(r"^(?:[-=_~*#.+| ]+|\[(?:\.\.\.|…)\]|…)$")


def frames_above(lines: list[str], i: int) -> list[tuple[str, str, str]]:
    """The traceback frames printed just above line `i` (a traceback whose header was cut)."""
    frames: list[tuple[str, str, str]] = []
    j = i - 1
    # (a frame's line may have lost its indentation to a prefix taken off every line)
    while j >= 0 and i - j < 80 and (lines[j][:1] in (" ", "\t") or not lines[j].strip()
                                     or lines[j].startswith('File "')):
        m = _FRAME.match(lines[j])
        if m:
            frames.append((m[1], _basename(m[1]), m[2]))
        j -= 1
    return frames[::-1]


# MLIR's pass manager: `Pipeline failed while executing [`TritonGPUPipeline` on 'builtin.module'
# operation]`, or without the brackets
_FAILED_PASS = re.compile(r"Pipeline failed while executing \[?`?([\w.:-]+)")


def with_frame(message: str, frames: list[tuple[str, str, str]], before: str = "",
               following: str = "") -> str:
    """`message`, plus where it happened (`_where`) when the message alone says too little."""
    _type, _, text = message.partition(": ")
    if not _GENERIC_MESSAGE.match(text) or " @ " in text:  # located once is enough
        return message
    if text.startswith("PassManager::run failed"):
        # MLIR names the pass that failed on stderr, before or after the exception
        found = _FAILED_PASS.findall(before[-4000:] + "\n" + following[:2000])
        if found:
            return f"PassManager::run failed in {found[-1]}"
    where = _where(frames, before)
    return f"{message} @ {where}" if where else message


def unwrapped(line: str) -> str | None:
    """The error a wrapper re-raises on its own line (`InductorError: ImportError: ...`), else None."""
    m = _WRAPPER.match(line)
    if not m:
        return None
    rest = line[m.end():].strip()
    return rest if _is_error_line(rest) else None


def _unwrap(message: str, following: list[str]) -> str:
    """The error a wrapper re-raises (on its line or the next), else the wrapper's own words
    without the data it quotes (`Caused by sample input at index 3: SampleInput(...)`)."""
    m = _WRAPPER.match(message)
    if not m:
        return message
    rest = message[m.end():].strip()
    if _is_error_line(rest):
        return from_exception(rest)
    nxt = next((ln.strip() for ln in following if ln.strip()), "")
    if _is_error_line(nxt):
        return from_exception(nxt)
    return m[0].strip()


# A Python exception inside a log line, after whatever the logger put before it
_EXCEPTION_START = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|Exception|Error)"
                              r"(?<!Warning): ")


def _is_error_line(line: str) -> bool:
    return bool(_INNER_ERROR.match(line) or _EXCEPTION_START.match(line))


_VALIDATION_ITEM = "Value error, "


def from_exception(line: str) -> str:
    """`[16:10:42] ERROR OutOfResources: out of resource, Required: 98304` -> the exception and
    the first clause of its message; a line without one: its first clause."""
    if line.startswith(_VALIDATION_ITEM):
        # pydantic's item of a ValidationError: `Value error, <the message>`
        line = line[len(_VALIDATION_ITEM):]
    m = _EXCEPTION_START.search(line)
    if not m:
        failed = _FAILED_PASS.search(line) if "Pipeline failed" in line else None
        return f"PassManager::run failed in {failed[1]}" if failed else _first_sentence(line)
    exc = line[m.start():]
    return exc if exc.rstrip().endswith(":") else _first_sentence(exc)


def _exception_message(first: str, rest: str) -> str:
    """`Type: message`; when the message only introduces a block (`at 12:8:`), the error in it."""
    _type, _, msg = first.partition(": ")
    if msg and not msg.rstrip().endswith(":"):
        return _first_sentence(first)[:300]
    for line in rest.split("\n")[1:40]:
        if not line.strip():
            break
        if _INNER_ERROR.match(line):
            return f"{first} {_first_sentence(line.strip())}"[:300]
    return first[:300]


def parse_pytest(before: str, after: str) -> str | None:
    """pytest's `E` lines: the first of the last block, the failing statement, its location."""
    lines = before.split("\n") + [_from_hit(after)]
    end = len(lines) - 1
    start = end
    # the block goes on over `E` lines left blank (`E` alone between two paragraphs)
    while start > 0 and (lines[start - 1].startswith("E ") or lines[start - 1].rstrip() == "E"):
        start -= 1
    first = _unwrap(lines[start][1:].strip(), [ln[1:] for ln in lines[start + 1:start + 4]])
    if first.endswith(":"):  # `Exception occurred in X:` introduces the error on the next E line
        nxt = next((ln[1:].strip() for ln in lines[start + 1:start + 6] if ln[1:].strip()), "")
        first = f"{first} {nxt}".strip()
    first = _first_sentence(first)[:300]  # as for tracebacks: details after the first sentence vary
    stmt = ""
    for j in range(start - 1, max(-1, start - 40), -1):
        if lines[j].startswith(">"):
            stmt = lines[j][1:].strip()
            break
    _type, _, text = first.partition(": ")
    if not _GENERIC_MESSAGE.match(text if text else ""):
        return first
    context = "\n".join(lines[max(0, start - 200):start])
    if not stmt:  # --tb=short: no `>` line; the `file.py:N: in f` lines are the frames
        short = [(m[1], _basename(m[1]), m[2]) for m in _SHORT_FRAME.finditer("\n".join(lines[max(0, start - 80):start]))]
        if short:
            return with_frame(first, short, context, after[:4000])
    else:  # --tb=long: the same frames, so that both styles give one signature
        frames = _long_frames(context, after[len(_from_hit(after)):4000])
        if frames:
            return with_frame(first, frames, context, after[:4000])
    loc = _PYTEST_LOC.search(after[:4000])
    where = f" @ {_basename(loc[1])}: {loc[2]}" if loc else ""
    return f"{first} | {stmt}{where}" if stmt else f"{first}{where}"


_DEF = re.compile(r"^[>\s]*(?:async\s+)?def (\w+)\(")
_LONG_LOC = re.compile(r"^(\S+?\.py):\d+:(?: in (\w+)| .*)?$")


def _long_frames(before: str, after: str) -> list[tuple[str, str, str]]:
    """The frames of pytest's long traceback style: each entry's source (with its `def`),
    closed by `path:line: [message]`; the last entry is closed after the `E` lines."""
    frames: list[tuple[str, str, str]] = []
    func = ""
    for line in before.split("\n"):
        d = _DEF.match(line)
        if d:
            func = d[1]
            continue
        loc = _LONG_LOC.match(line)
        if loc:
            frames.append((loc[1], _basename(loc[1]), loc[2] or func or "?"))
            func = ""
    for line in after.split("\n", 8)[:8]:
        loc = _LONG_LOC.match(line.strip())
        if loc:
            frames.append((loc[1], _basename(loc[1]), loc[2] or func or "?"))
            break
    # without any function name (no `def` shown) the frames say less than the statement
    return frames if any(f[2] != "?" for f in frames) else []


def parse_filecheck(before: str, after: str) -> str | None:
    """The FileCheck diagnostic and the check line it could not match."""
    hit = _hit_line(before, after)
    rest = [ln.strip() for ln in after.split("\n")[1:6] if ln.strip()]
    if "is empty" in hit:
        cmd = next((ln for ln in after.split("\n")[:20] if "FileCheck command line" in ln), "")
        return f"{hit} | {_basename(cmd.split()[-1])}" if cmd else hit
    return f"{hit} | {rest[0]}" if rest else hit


_DIAGNOSTIC = re.compile(r"(?:^|[\s;:])((?:fatal )?error|fatal)\s*:\s*(.*)$")


def parse_compiler(before: str, after: str) -> str | None:
    """The first `error:` of the last burst of compiler diagnostics, without its location
    (the same broken API shows up in many files)."""
    hit = _hit_line(before, after)
    cmake = _CMAKE_ERROR.search(hit)
    if cmake:  # `CMake Error at file:line (command):` only says where: the message is under it
        return f"CMake Error: {_cmake_message(cmake[1], after)}"
    lines = before.split("\n")[-50:-1] + [hit]
    below = after.split("\n", 2)[1:2]
    for i, line in enumerate(lines):
        if re.search(r"CHECK[-\w]*:", line):
            continue
        m = _DIAGNOSTIC.search(line)
        nxt = lines[i + 1] if i + 1 < len(lines) else below[0] if below else ""
        if m and (": error: " in line or "fatal" in line) and (_hard_wrapped(lines, i, nxt)
                                                             or (not m[2].strip() and nxt.strip())):
            # (a diagnostic whose message is on the next line: `Dialect.h:12:10: fatal error:`)
            line = f"{line.rstrip()} {nxt.strip()}" if not m[2].strip() else line + nxt.rstrip()
            m = _DIAGNOSTIC.search(line)
        if m and (": error: " in line or "fatal" in line):
            if _LINK_SUMMARY.search(m[2]):  # the driver's summary: the linker's error is above it
                linker = next((ln for ln in reversed(lines[max(0, i - 20):i]) if _LINK_ERROR.search(ln)), None)
                if linker:
                    return _LINK_ERROR.search(linker)[0]  # type: ignore[index]
            header = _MISSING_HEADER.search(m[2])
            if header:  # gcc's and clang's words for it, a reporter's sentence after it
                return f"error: '{_basename(header[1] or header[2])}' file not found"
            if _UNINFORMATIVE.search(f"{m[1]}: {m[2]}"):
                continue  # a summary: the error is another line
            return f"{m[1]}: {m[2]}"
    diag = _DIAGNOSTIC.search(hit)
    if _UNINFORMATIVE.search(hit.strip()) or (diag and _UNINFORMATIVE.search(f"{diag[1]}: {diag[2]}")):
        # a summary (`error: backend compiler failed build.`) that a prefix's colon made look
        # like a located diagnostic: the error above it, as for any other summary line
        above = generic_line(before)
        if above[1] >= 0 and above[2].strip() != hit.strip():
            return above[0]
    return hit


WRAP_MIN = 60  # a terminal or a mail reader wraps at 72 to 132 columns, never below this


def _hard_wrapped(lines: list[str], i: int, nxt: str) -> bool:
    """Whether lines[i] was cut by a hard wrap (a log copied from a terminal or pasted into a
    narrow box): it is as long as two other lines of the window, all at least WRAP_MIN long,
    and the rest of it, on the next line, does not start a line of its own (no indent, no
    diagnostic)."""
    width = len(lines[i])
    if width < WRAP_MIN or sum(1 for ln in lines if len(ln) == width) < 3:
        return False
    return bool(nxt.strip()) and not nxt[:1].isspace() and _DIAGNOSTIC.search(nxt) is None


# a missing include: clang's `'cuda.h' file not found`, gcc's `cuda.h: No such file or directory`
_MISSING_HEADER = re.compile(r"^[`'\"]?(?:'([^'\s]+\.(?:h|hh|hpp|hxx|cuh|inc))' file not found|"
                             r"([^'\s:]+\.(?:h|hh|hpp|hxx|cuh|inc)): No such file or directory)")


_CMAKE_ERROR = re.compile(r"CMake Error(?: at \S+)?(?: \([\w-]+\))?:\s*(.*)$")


def _cmake_message(rest: str, after: str) -> str:
    """The message of a CMake error: on its line, else its indented lines below (to the first
    blank line), joined, its first sentence."""
    if rest.strip():
        return _first_sentence(rest.strip())
    body: list[str] = []
    for line in after.split("\n")[1:12]:
        if not line.strip():
            if body:
                break
            continue
        if not line[:1].isspace():
            break
        body.append(line.strip())
    return _first_sentence(" ".join(body)) if body else "(no message)"


# A link step's summary, and the linker's own error that it sums up
_LINK_SUMMARY = re.compile(r"ld returned \d+ exit status|linker command failed with exit code")
_LINK_ERROR = re.compile(r"(?:undefined reference to|cannot find -l|undefined symbol:|"
                         r"multiple definition of|cannot open (?:output )?file|relocation \S+ against)[^\n]*")


_LOCATED_ASSERTION = re.compile(r"^(?:[\w.+-]+: )?(?:\S+:\d+: )?([^\n]*?): (Assertion [`'][^\n]*?' failed)")


# `tool: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by tool)`: the
# version a binary asks for is the build host's, the fault (an older library) is the same
_LOADER_VERSION = re.compile(r"(?:([\w.+-]+): )?(?:[^\s:]*/)?([\w.+-]+\.so[.\d]*): version `([A-Z]+)_[\d.]+' "
                             r"not found(?: \(required by ([^\s)]+)\))?")
# the message of `assert(cond && "message")`, and a method's last two names (`Class::method`)
_ABORTED = re.compile(r"^\W*(?:\S+: )?(?:line \d+: +\d+ )?Aborted\b")
# Windows' loader by its code: 126 and 127 always, another code when the line loads a DLL
# (torch's own words name the DLL whatever the system's language: `Error loading "x.dll" or one of
# its dependencies`)
_WIN_CODE = re.compile(r"\[WinError (\d{1,5})\](?=[^\n]{0,400}\.dll)|\[WinError (12[67])\]")
_WIN_DLL = re.compile(r"\.dll[\"'\u201d]? or one of its dependencies")
_WIN_MEANING = {"126": "a DLL or one it depends on was not found", "127": "a procedure was not found in a DLL"}
_UNDEFINED_SYMBOL = re.compile(r"(?:^|[\s/:])([\w.+-]{1,200}\.(?:so|pyd|dylib)[.\d]{0,20})\s{0,8}: undefined symbol: ([\w$.@]{1,600})")
_ASSERT_MESSAGE = re.compile(r'&& "([^"]{8,})"\)*\'? failed$')
_METHOD = re.compile(r"(?:\w+::)?~?\w+$")
_FAULT_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+ in (\S+)', re.M)
_LOCATION = re.compile(r":\d+: ")  # the end of `file:line: `


def _lines_with(text: str, word: str) -> list[str]:
    """The lines of `text` that hold `word`, in order, without splitting the whole text."""
    out, pos = [], text.find(word)
    while pos >= 0:
        lo = text.rfind("\n", 0, pos) + 1
        hi = text.find("\n", pos)
        hi = len(text) if hi < 0 else hi
        out.append(text[lo:hi])
        pos = text.find(word, hi)
    return out


_CRASH_RULES = tuple(re.compile(rule) for rule in (
    r"(Assertion [`'][^\n]*?' failed)",
    r"(Assertion failed: [^\n]*)",
    r"(Assertion `[^\n]*)",
    # LLVM's fatal error as llc and opt print it, as clang prints it (`fatal error: error in
    # backend:`) and as lld-link prints it (`LLVM error : `): one error, one key
    r"(?:LLVM ERROR|LLVM error|error in backend) ?: ([^\n]*)",
    r"(UNREACHABLE executed at [^\n]*)",
    r"terminate called after throwing an instance of '([^']*)'\s*\n\s*what\(\):\s*([^\n]*)",
    # llvm::Error left unhandled: its message is the next line
    r"(Program aborted due to an unhandled Error:)\s*\n\s*([^\n]+)",
))
# LLVM's stack dump names what the tool was doing when it crashed: the innermost pass, else the
# tool and its input (`0.  Program arguments: bin/llc test/DebugInfo/fixed-point.ll -o -`)
_RUNNING_PASS = re.compile(r"^\s*\d+\.\s+Running pass (['\"])([^'\"\n]{1,200})\1", re.M)
_PROGRAM_ARGUMENTS = re.compile(r"^\s*0\.\s+Program arguments: (\S{1,500})(?: (?:-\S+ )*(\S{1,500}))?", re.M)


def parse_crash(before: str, after: str) -> str | None:
    """The assertion, fatal error or top stack frames of a native crash."""
    text = before[-16000:] + after[:16000]
    # an assertion in a template (llvm::cast, SmallVector::operator[]) is told apart by the
    # function it sits in: keep that, without the tool, file and line in front of it
    loader = _LOADER_VERSION.findall(text)
    if loader:  # the loader refusing a binary: which library lacks which symbol version
        tool, lib, name, by = loader[-1]
        by = _basename(by) or ("" if tool.endswith(("Error", "Exception")) else tool)
        return f"{lib}: version `{name}_*' not found" + (f" (required by {by})" if by else "")
    codes = [a or b for a, b in _WIN_CODE.findall(text)]
    if codes or _WIN_DLL.search(text):
        # the message after the code is in the system's language: the code is the error (torch's
        # own `Error loading "x.dll" or one of its dependencies` without one is the loader's 126)
        code = codes[-1] if codes else "126"
        return f"Windows loader error WinError code-n{code}: " + _WIN_MEANING.get(code, "loading a DLL")
    undefined = _UNDEFINED_SYMBOL.findall(text)
    if undefined:  # the loader: which binary lacks which symbol, whatever raised it (ImportError, OSError)
        lib, sym = undefined[-1]
        return f"{lib}: undefined symbol: {sym}"
    located = [m for ln in _lines_with(text, "Assertion") for m in _LOCATED_ASSERTION.findall(ln)]
    if located:
        func, assertion = located[-1]
        # the function is what follows the last `file:line: ` (a test runner may print the
        # test's name and the tool's before it); GCC's names for unnamed template parameters
        # (`<template-parameter-1-2>`) are dropped, as a Markdown quote of the log drops them
        ends = [m.end() for m in _LOCATION.finditer(func)]
        func = func[ends[-1]:] if ends else func
        func = re.sub(r"<template-parameter-[\d-]+>", "", func)
        func = re.sub(r"\[with ", "[", func).replace(";", ",").strip()
        said = _ASSERT_MESSAGE.search(assertion)
        # (a template's bindings, `[To = mlir::MemRefType]`, tell its callers apart: kept)
        if said and func and " [" not in func:
            # an assertion that says what it checks: its words and the method it sits in; the
            # expression, the return type and the namespaces around them change across versions
            # (`mlir::LogicalResult` became `llvm::LogicalResult`, `x.isa<T>()` became `isa<T>(x)`)
            name = _METHOD.search(func.split("(", 1)[0])
            return f"{name[0] if name else func}: Assertion \"{said[1]}\" failed"
        return f"{func}: {assertion}" if func else assertion
    for rule in _CRASH_RULES:
        found = rule.findall(text)
        if found:
            last = found[-1]
            if rule is _CRASH_RULES[3]:
                return f"LLVM ERROR: {last}"
            return " ".join(last) if isinstance(last, tuple) else last
    frames: list[str] = []
    for line in _lines_with(text, "#"):  # a stack frame: `#3 0x...`
        m = _SYMBOL.match(line)
        name = re.sub(r"\(.*", "", m[1]).strip() if m and not _SKIP_FRAME.search(m[1]) else ""
        if name[:1].isalpha() or name[:1] == "_":  # an unsymbolized frame (`(/bin/opt+0x12)`) names nothing
            frames.append(name)
        if len(frames) == 3:
            break
    if frames:
        return "crash in " + " < ".join(frames)
    passes = _RUNNING_PASS.findall(text)
    if passes:
        return f"crash in pass {passes[-1][1]}"
    program = _PROGRAM_ARGUMENTS.search(text)
    if program:
        what = _basename(program[2]) if program[2] else ""
        return f"crash of {_basename(program[1])}" + (f" on {what}" if what else "")
    fatal = re.findall(r"Fatal Python error: ([^\n]*)", text)
    if fatal and fatal[-1].strip() == "Aborted":
        # abort() is called by whatever printed why, just before
        last = before.split("\n")[-60:]
        reason, i = generic_key("\n".join(last))
        if reason and "Fatal Python error" not in reason:
            # a compiler's burst of diagnostics: its first error, as for a compiler error
            burst = parse_compiler("\n".join(last[:i]) + "\n", last[i]) if 0 <= i < len(last) else None
            if burst and _DIAGNOSTIC.match(burst) and burst != last[i]:
                return burst
            diag = _DIAGNOSTIC.search(reason)
            return f"{diag[1]}: {diag[2]}" if diag and "error" in diag[1] else reason
    if fatal:
        # an abort after another fatal error is that error's end, not its cause
        reason = next((f for f in reversed(fatal) if f.strip() != "Aborted"), fatal[-1])
        # where: the innermost project frame of the dump under the reason (faulthandler lists
        # the most recent call first, `File "x.py", line 12 in f`)
        at = text.rfind(f"Fatal Python error: {reason}")
        dump = text[at: at + 8000]
        dumped = [(p, _basename(p), f) for p, f in _FAULT_FRAME.findall(dump)][::-1]
        frame = _project_frame(dumped) if dumped else None
        if frame is None:
            py = _FRAME.findall(dump)
            frame = (_basename(py[0][0]), py[0][1]) if py else None
        return f"Fatal Python error: {reason}" + (f" @ {frame[0]}:{frame[1]}" if frame else "")
    hit = _hit_line(before, after)
    if _ABORTED.search(hit):
        # abort() after a library printed why (`rocBLAS error: Cannot read TensileLibrary.dat`):
        # that line, when the lines above hold one
        above = generic_line(before[:before.rfind("\n") + 1][-6000:])
        reason = above[2].strip()
        if above[1] >= 0 and not _ABORTED.search(reason) and not _NATIVE_FRAME.match(reason) \
                and (_GENERIC.search(reason) or _EXCEPTION_START.search(reason)):
            return above[0]
    # `clang-8: error: unable to execute command: ...`: the tool's name and version are not the error
    diag = _DIAGNOSTIC.search(hit)
    return f"{diag[1]}: {diag[2]}" if diag and "error" in diag[1] else None


# The CUDA/HIP runtime's own error strings: whatever prints them (torch, Triton, a C++ check
# macro), the same runtime error is the same failure.
_RUNTIME_ERRORS = re.compile(
    r"(?i)(no kernel image is available for execution on the device|an illegal memory access was "
    r"encountered|misaligned address|unspecified launch failure|illegal instruction was encountered|"
    r"too many resources requested for launch|invalid device function|invalid argument|"
    r"hipErrorNoBinaryForGpu|the provided PTX was compiled with an unsupported toolchain|"
    r"peer access is not supported between these two devices|"
    r"initialization error|operation not supported|out of memory)")
# The runtime's names for those errors (`cudaErrorUnsupportedPtxVersion`, `CUDA_ERROR_ILLEGAL_ADDRESS`):
# a check macro may print the name, the message or both; one error either way
_RUNTIME_NAMES = {
    "unsupportedptxversion": "the provided PTX was compiled with an unsupported toolchain",
    "nokernelimagefordevice": "no kernel image is available for execution on the device",
    "nobinaryforgpu": "no kernel image is available for execution on the device",
    "illegaladdress": "an illegal memory access was encountered",
    "invaliddevicefunction": "invalid device function",
    "peeraccessunsupported": "peer access is not supported between these two devices",
    "launchoutofresources": "too many resources requested for launch",
    "misalignedaddress": "misaligned address",
    "launchfailure": "unspecified launch failure", "launchfailed": "unspecified launch failure",
    "illegalinstruction": "an illegal instruction was encountered",
}
_RUNTIME_NAME = re.compile(r"\b(?:cudaError|CUDA_ERROR_)([A-Za-z_]{3,40})")


def parse_cuda(before: str, after: str) -> str | None:
    """The CUDA error text; for device-side asserts, the assertion too."""
    key = _from_hit(after)
    comm = collective(_hit_line(before, after))
    if comm:
        return comm + _nccl_warning(before, after, comm)
    if _NOT_COMPATIBLE.search(_hit_line(before, after)):
        # torch's warning that the build lacks the device's architecture: what the launch
        # will then say
        return "CUDA runtime error: no kernel image is available for execution on the device"
    canonical = _RUNTIME_ERRORS.search(_hit_line(before, after))
    named = _RUNTIME_NAME.search(_hit_line(before, after)) if canonical is None else None
    said = _RUNTIME_NAMES.get(named[1].replace("_", "").lower()) if named else None
    if said is not None and "device-side assert" not in key:
        canonical = _RUNTIME_ERRORS.search(said)
    if canonical and "device-side assert" not in key:
        runtime = "HIP" if re.search(r"\bHIP\b|hip[A-Z]", _hit_line(before, after)) else "CUDA"
        where = _launched_from(before, canonical[1]) if _KERNEL_FAULT.match(canonical[1]) else ""
        return f"{runtime} runtime error: " + canonical[1].lower() + where
    if "device-side assert" in key:
        asserts = re.findall(r"Assertion `(.*?)` failed|Assertion `(.*?)' failed", before[-16000:])
        if asserts:
            key += " | " + "".join(asserts[-1])
    return key


_NOT_COMPATIBLE = re.compile(r"with CUDA capability \S+ is not compatible with the current PyTorch")


# A kernel's own fault, unlike a missing device or binary (the machine's fault, wherever seen)
_KERNEL_FAULT = re.compile(r"(?i)an illegal memory|misaligned|unspecified launch|illegal instruction")


def _launched_from(before: str, error: str) -> str:
    """` @ file:function` of the innermost project frame of the traceback that ends where the
    runtime error is printed: one runtime error from two kernels is two failures."""
    text = before[-16000:]
    frame = _launch_frame(text)
    root = _chain_root(text)
    if frame is None and root is not None:  # re-raised by a wrapper: where it was first raised
        at = root.rfind(error)  # (other ranks' tracebacks may follow it)
        end = root.find("\n", at) if at >= 0 else -1
        frame = _launch_frame(root[:end] if end >= 0 else root)
    return f" @ {frame[0]}:{frame[1]}" if frame and frame[1] != "<module>" else ""


def _launch_frame(text: str) -> tuple[str, str] | None:
    lines = text.rstrip("\n").split("\n")
    frames = [f for f in frames_above(lines, len(lines) - 1) if not f[1].startswith("<")]
    if not frames:  # --tb=short: `dir/file.py:12: in func`
        frames = [(m[1], _basename(m[1]), m[2]) for m in _SHORT_FRAME.finditer("\n".join(lines[-80:]))]
    return _project_frame(frames, strict=True)


_CHAIN = re.compile(r"\n(?:The above exception was the direct cause of the following exception:|"
                    r"During handling of the above exception, another exception occurred:)")


def _chain_root(text: str) -> str | None:
    """In a chain of tracebacks, the text up to the end of the one before the last link: the
    error a wrapper re-raised, with its own frames."""
    found = None
    for found in _CHAIN.finditer(text):
        pass
    return text[:found.start()].rstrip() if found else None


def parse_oom(before: str, after: str) -> str | None:
    """The out-of-memory sentence, without the exception type or test id in front of it."""
    line = strip_test_prefix(_hit_line(before, after).strip())
    line = re.sub(r"^E\s+", "", line)  # pytest's `E` in front of an error line
    exc = _EXCEPTION_START.search(line)
    if exc and exc.start() > 0:  # what a table or logger put before the exception
        line = line[exc.start():]
    line = re.sub(r"^(?:[\w.]+(?:Error|Exception):\s*)+", "", line)
    return _first_sentence(line)


def parse_timeout(before: str, after: str) -> str | None:
    """Where the test hung: the innermost frame of the main thread, when a dump shows it."""
    text = before[-24000:] + after[:8000]
    main = text.rfind("Stack of MainThread")
    # without a dump, the traceback that reported the timeout ends just before the hit
    # (in a chain of tracebacks, those of the error that was re-raised)
    region = before[-8000:]
    root = _chain_root(region)
    if root is not None and not _project_frame(
            [(p, _basename(p), f) for p, f in _FRAME.findall(region[len(root):])], strict=True):
        region = root  # the last link is a wrapper's: the frames of what it re-raised
    frames = _FRAME.findall(text[main:] if main >= 0 else region + _hit_line(before, after))
    if not frames and main < 0:  # --tb=short: `dir/file.py:12: in func`
        frames = _SHORT_FRAME.findall(region)
    if main >= 0:
        section = re.split(r"\n[~+]{5,}", text[main:], maxsplit=2)
        frames = _FRAME.findall(section[1] if len(section) > 1 else section[0]) or frames
    if frames:
        framed = [(p, _basename(p), f) for p, f in frames]
        frame = _project_frame(framed, strict=True)
        if frame:
            return f"timeout in {frame[0]}:{frame[1]}"
        # only the harness's frames (`Process 0 terminated or timed out`): the test that hung
        unit = test_unit(before)
        frame = _project_frame(framed)
        if unit:
            return f"timeout in {unit}"
        if frame:
            return f"timeout in {frame[0]}:{frame[1]}"
    lit = lit_timeout(before[-4000:] + _hit_line(before, after))
    if lit:  # lit and ctest name the test that ran out of time: one group per test
        return lit
    locs = _PYTEST_LOC.findall(before[-8000:])
    if locs:
        return f"timeout in {_basename(locs[-1][0])}:{locs[-1][1]}"
    line = _hit_line(before, after)
    # no frame at all (`FAILED dir/test_x.py::test - Failed: Timeout >300.0s`): the test's module,
    # else every timeout of a run would be one group
    unit = test_unit(before[-8000:] + line)
    if unit:
        return f"timeout in {unit}"
    return "timeout" if re.search(r"(?i)timeout|timed out", line) else line


# A connection that failed: between a job's own processes (a collective's transport, a
# rendezvous store) or to a server it downloads from; the same words, two faults.
_CONNECTION = re.compile(r"(?i)Connection (?:reset|refused|timed out)|Remote end closed connection")
_BETWEEN_PROCESSES = re.compile(r"(?i)\b(?:gloo|nccl|rccl|c10d|ProcessGroup|rendezvous|TCPStore|"
                                r"init_process_group|torch\.distributed)\b")
_DOWNLOADING = re.compile(r"(?i)\b(?:urllib3?|requests\.exceptions|http\.client|huggingface_hub|hf_hub|"
                          r"download\w*|from_pretrained|pip install)\b|https?://")


def parse_infra(before: str, after: str) -> str | None:
    line = _first_sentence(_from_hit(after))
    if not _CONNECTION.search(line):
        return line
    near = before[-3000:] + after[:1500]
    if _BETWEEN_PROCESSES.search(near):
        return f"{line} (between the job's processes)"
    if _DOWNLOADING.search(near):
        return f"{line} (downloading)"
    return line


_TEST_PREFIX = re.compile(r"^(?:(?:FAILED|ERROR)\s+)?(?:\[[\d.]+m?s\]\s+)?\S*::\S+\s+-\s+")


def strip_test_prefix(line: str) -> str:
    """`FAILED path::test - Error: msg` -> `Error: msg`: the test id is never the signature."""
    return _TEST_PREFIX.sub("", line, count=1)


# `FAILURE: test_name` only names what failed; the error is on another line
# What a harness says when anything failed: never the error itself
# (also behind a runner's error marker: `##[error]`, `Error: `), and the build tools' own
# lines that a step failed (make, ninja, tox)
_UNINFORMATIVE = re.compile(r"(?i)^(?:##\[error\]\s*|error:\s*)?(?:(?:the )?(?:test|command|job|step)?\s*failed\.?$|"
                            r"exit code: -?\d+$|process completed with exit code|"
                            r"make(?:\[\d+\])?: \*\*\* |ninja: build stopped|"
                            # a device compiler's last word on a build whose error it printed above
                            r"(?:backend |device )?compiler failed(?: to)? build\.?$|build failed\.?$)|"
                            r"non-zero (?:exit )?status|exited with (?:exit )?code -?\d+|InvocationError for command|"
                            # lit's line under a RUN line's output: the output (or the test) is the error
                            r"^# error: command failed with exit status|"
                            # a line that points at the error above it (`Got fatal signal from worker
                            # processes, shutting down. See stack trace above for root cause issue.`)
                            r"\bsee (?:the )?(?:[\w-]+ ){0,3}above\b|"
                            # a line that points at a log elsewhere (`See log at x.txt for details.`)
                            r"\bsee\b.{0,120}\bfor (?:more |the )?details\b|"
                            # a tool's word that a command, step, job or target failed, saying no why
                            # (`error Command failed with exit code 1.`, `The step 'Run tests' failed`,
                            # tox's `py311: commands failed`, make's `recipe for target 'x' failed`)
                            r"\b(?:failed|exited|returned) with (?:exit )?(?:code|status) -?\d+\W*$|"
                            r"\b(?:step|job|commands?|target|task|stage)(?: '[^'\n]*'| \"[^\"\n]*\"| [\w.:/-]+)? failed\W*$|"
                            r"subprocess-exited-with-error|"
                            # a build system's verdict on a test or target: `//tests:unit FAILED in 12.3s`
                            r"^\S+ (?:FAILED|FAIL|Failed)(?: in (?:\d+ out of \d+ in )?[\d.]+\s*m?s)?\s*$")
_EXCEPTION_NAME = re.compile(r"[a-z](?:Error|Exception)\b")
# a native stack frame (`#4 0x00007fa0 abort abort.c:81:7`): where, never what went wrong
_NATIVE_FRAME = re.compile(r"^#\d+\s+0x[0-9a-fA-F]+\b")
_NAME_ONLY = re.compile(r"^(?:FAIL(?:ED|URE)?|ERROR)\s*:?\s*[\w.:/\[\]-]+$")
_WORDS = ahocorasick_rs.AhoCorasick(["error", "fail", "fatal", "abort", "exception", "panic"])
_WORDS_BYTES = ahocorasick_rs.BytesAhoCorasick([b"error", b"fail", b"fatal", b"abort", b"exception", b"panic"],
                                               implementation=ahocorasick_rs.Implementation.DFA)


def generic_key(text: str) -> tuple[str, int]:
    """The last line that says error/failed (or the last line at all), and its index."""
    key, index, _line = generic_line(text)
    return key, index


def generic_line(text: str) -> tuple[str, int, str]:
    """`generic_key`, and the line the key was taken from."""
    # searched from the end in blocks of whole lines: the line is usually near the end
    end, size = len(text), 2048
    counts: list[int] = []  # where the last closing counts of failures start, last first
    while end > 0:
        start = text.rfind("\n", 0, end - size) + 1 if end > size else 0
        found = _generic_line(text, start, end, counts)
        if found:
            return found
        end, size = start, size * 4
    if counts:
        # no line says what went wrong: a closing count of failures says more than the last line
        for lo in counts:
            found = _error_line(text, lo, True)
            if found:
                return found
    # (a quote's elisions and rules, `...`, `[...]`, `-----`, are not its last line)
    body = text.rstrip()
    while body and _ELISION.match(body[body.rfind("\n") + 1:].strip()):
        body = body[:max(0, body.rfind("\n"))].rstrip()
    text = body + "\n" if body else text
    lines = text.rstrip().rsplit("\n", 1)
    if lines and lines[-1].strip():
        last = lines[-1].strip()
        tail = text.rstrip().rsplit("\n", 80)[-80:]
        # (a frame's source line whose indentation a stripped prefix took: the line above is its frame)
        frames = frames_above(tail + [""], len(tail)) if last.startswith(("File ", "at ")) or \
            tail[-1][:1] in (" ", "\t") or (len(tail) >= 2 and _FRAME.match(tail[-2]) is not None) else []
        # (a generated module's top level, `<module>` of a cache file, is nowhere)
        frame = _project_frame([f for f in frames if not f[2].startswith("<")])
        if frame:
            # a quote that ends inside a traceback's frames, before its exception: where it was
            return f"traceback cut @ {frame[0]}:{frame[1]}", text.count("\n", 0, len(text.rstrip())), last
        section = _cut_in_test_source(tail)
        if section:
            # a quote that ends inside the source pytest prints of a failing test, before its `E`
            # lines: the test it stopped in (never its last line, often a lone bracket)
            return f"traceback cut @ {section}", text.count("\n", 0, len(text.rstrip())), last
        stack = text.rfind(_CMAKE_STACK)
        head = None
        for head in _CMAKE_HEAD.finditer(text, max(0, stack - 4000), stack) if stack >= 0 else ():
            pass
        if head:
            # a CMake error quoted without its `CMake Error at` line: the message under the file
            # and command it points at, before its call stack
            msg = _cmake_message("", text[head.start():stack])
            return f"CMake Error: {msg}", text.count("\n", 0, head.start()), head[0].strip()
        lit = _LIT_ID.match(last)
        if lit:
            # a lit test id with no error anywhere (an entry of `Failed Tests (5):`): what is
            # known is the suite and the directory of tests that failed together
            return f"lit tests failed in {lit[1]}{lit[2]}", text.count("\n", 0, len(text.rstrip())), last
        return from_exception(last), text.count("\n", 0, len(text.rstrip())), last
    return "", -1, ""


# pytest's header of a failing test's section: `____ TestConvolutions.test_conv[x] ____`
_SECTION = re.compile(r"^_{3,} ([\w.]+)(?:\[[^\]\n]*\])? _{3,}$")
_SOURCE_LINE = re.compile(r"^(?:\s*$|self = |>?\s{3,}\S)")


def _cut_in_test_source(tail: list[str]) -> str | None:
    """The test whose section the tail ends in, when every line after its header is the
    test's source as pytest prints it (indented, or `self = ...`), else None."""
    for i in range(len(tail) - 1, -1, -1):
        line = tail[i].strip()
        head = _SECTION.match(line)
        if head:
            return head[1]
        if not _SOURCE_LINE.match(tail[i]):
            return None
    return None


# CMake's account of where an error was raised, and the `file:line (command):` line above its message
_CMAKE_STACK = "\nCall Stack (most recent call first):"
_CMAKE_HEAD = re.compile(r"^\S+\.cmake:\d+ \([\w-]+\):[ \t]*$|^\S*CMakeLists\.txt:\d+ \([\w-]+\):[ \t]*$", re.M)

# lit's id of a test: `MLIR :: Dialect/Linalg/tile.mlir`, `TRITON :: TritonGPU/combine.mlir`
_LIT_ID = re.compile(r"^([A-Za-z][\w.+-]*(?: [\w.+-]+)* :: )((?:[^\s/]+/)*)[^\s/]+$")


def _generic_line(text: str, start: int, end: int, counts: list[int]) -> tuple[str, int, str] | None:
    """The last line of text[start:end] (whole lines) that says error/failed."""
    # one scan for the words, then only the lines that hold one are looked at, last first
    block = text[start:end]
    # ASCII (nearly every log): bytes, where offsets are those of the text and the DFA is fast
    found = (_WORDS_BYTES.find_matches_as_indexes(block.encode().lower()) if block.isascii()
             else _WORDS.find_matches_as_indexes(block.lower()))
    seen: set[int] = set()
    best: tuple[int, tuple[str, int, str]] | None = None
    for _idx, pos, _end in reversed(found):
        pos += start
        lo = text.rfind("\n", 0, pos) + 1
        if lo in seen:
            continue
        seen.add(lo)
        got = _error_line(text, lo)
        if got:
            head = _message_head(text, lo)
            if head is not None:  # a line of an exception's message, below its first
                got = _error_line(text, head) or got
                lo = head
            best = (lo, got)
            break
        if len(counts) < 8 and _is_count_at(text, lo):
            counts.append(lo)
    # an exception whose name says neither error nor exception (`OutOfResources: ...`), after
    # that line: one pass over what follows it, usually a few lines
    after = text.find("\n", best[0]) + 1 if best else start
    if (best is None or after > 0) and ": " in text[after:end]:
        # searched backwards, as a forward search of the reversed text: the regex engine jumps
        # to each ` :` and the first match is the last name
        region = text[after:end]
        m = _CAMEL_NAME_REVERSED.search(region[::-1])
        got = _error_line(text, text.rfind("\n", 0, after + len(region) - m.start()) + 1) if m else None
        if got:
            return got
    return best[1] if best else None


# `Name: ` with a CamelCase name of two humps or more, not a warning, reversed
_CAMEL_NAME_REVERSED = re.compile(r" :(?!gninraW)[a-z0-9]+[A-Z](?:[a-z0-9]*[A-Z])+(?![\w])")


_MESSAGE_START = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?<!Warning): \S")
# a line that starts its own report: an exception, a diagnostic, a runner's or a test's mark
_OWN_REPORT = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)\b|(?i:error|fatal|warning)\b|"
                         r"FAILED|PASSED|ERROR|##\[|\S+:\d+(?::\d+)?: |File \"|Traceback)")
MESSAGE_LINES = 8  # lines of one exception's message looked through, above the line chosen


def _message_head(text: str, lo: int) -> int | None:
    """Where the exception starts whose message goes on to the line at `lo` (`RuntimeError:
    Expected to have finished reduction ...`, then prose lines, the last one naming `error`):
    the lines between are its message, unbroken by a blank line; None when the line is a
    report of its own."""
    hi = text.find("\n", lo)
    if _OWN_REPORT.match(text[lo: len(text) if hi < 0 else hi].strip()):
        return None
    end = lo
    for _ in range(MESSAGE_LINES):
        if end <= 0:
            return None
        start = text.rfind("\n", 0, end - 1) + 1
        line = text[start:end - 1].strip()
        if not line:
            return None
        if _MESSAGE_START.match(line):
            return start
        if _OWN_REPORT.match(line):
            return None
        end = start
    return None


def _is_count_at(text: str, lo: int) -> bool:
    hi = text.find("\n", lo)
    return counts_only(text[lo: len(text) if hi < 0 else hi].strip())


def _error_line(text: str, lo: int, counts: bool = False) -> tuple[str, int, str] | None:
    """The key of the line starting at `lo` when it says what went wrong, else None (also for
    a closing count of failures, unless `counts`)."""
    hi = text.find("\n", lo)
    line = text[lo: len(text) if hi < 0 else hi].strip()
    # an exception line is the error even when its message sounds like a harness's
    # (`CalledProcessError: Command ... returned non-zero exit status 1`)
    found_exc = _EXCEPTION_START.search(line)
    # (a bare `Error: ` is also a runner's label: `Error: Process completed with exit code 1.`)
    exc = found_exc is not None and found_exc[0] != "Error: "
    if not line or not (exc or _GENERIC.search(line) or _EXCEPTION_NAME.search(line)) \
            or _SUMMARY_BAR.search(line) or _NAME_ONLY.match(line) or _NATIVE_FRAME.match(line) \
            or (not exc and (_UNINFORMATIVE.search(line) or (not counts and counts_only(line)))):
        return None
    following = text[hi + 1:hi + 8193].split("\n", 4)[:3] if hi >= 0 else []
    i = text.count("\n", 0, lo)
    nxt = next((ln.strip() for ln in following if ln.strip()), "")
    if line.endswith(":") and _EXCEPTION_START.search(nxt):
        # `Runtime error during autotuning:` introduces the error on the next line
        return from_exception(nxt), i, line
    if line.startswith("FAILED ") and " - " in line:
        return _unwrap(from_exception(line.split(" - ", 1)[1]), following), i, line
    error = strip_test_prefix(line)
    inner = unwrapped(error)  # read whole, before the message is cut
    return (from_exception(inner) if inner else _unwrap(from_exception(error), following)), i, line


# The words of a runner's closing count (`Tests failed: 3 of 120`, `ERROR: 3 test(s) failed`,
# `Executed 1 out of 1 test: 1 fails locally.`, `FAIL: 3/120 (2.5%)`): a line made of numbers
# and these words only counts failures, whatever its order; the error is elsewhere.
_COUNT_WORDS = frozenset(
    "test tests s case cases check checks suite suites failed failures failure fail fails failing error errors "
    "passed pass passes skipped xfailed xpassed warnings warning deselected selected total summary of out in "
    "ran run executed and with locally remotely result results ms sec secs seconds m min h".split())
_COUNT_FAIL = frozenset("failed failures failure fail fails failing error errors".split())
_COUNT_TOKEN = re.compile(r"[A-Za-z]+|\d+")


def counts_only(line: str) -> bool:
    """Whether `line` is a count of failures and nothing else (see `_COUNT_WORDS`)."""
    if len(line) > 200:
        return False
    tokens = _COUNT_TOKEN.findall(line.lower())
    words = [t for t in tokens if not t.isdigit()]
    return len(words) < len(tokens) and all(w in _COUNT_WORDS for w in words) \
        and any(w in _COUNT_FAIL for w in words)


def _dispatch_exception(before: str, after: str) -> str | None:
    if after.startswith("Traceback"):
        return parse_traceback(before, after)
    return parse_pytest(before, after)


PARSERS: dict[FailureKind, Parser] = {
    FailureKind.INFRA: parse_infra,
    FailureKind.TIMEOUT: parse_timeout,
    FailureKind.OOM: parse_oom,
    FailureKind.CUDA_ERROR: parse_cuda,
    FailureKind.CRASH: parse_crash,
    FailureKind.COMPILER_ERROR: parse_compiler,
    FailureKind.FILECHECK: parse_filecheck,
    FailureKind.EXCEPTION: _dispatch_exception,
}


# ----- a failure's environment -----------------------------------------------------------------
# The GPU architecture, driver, toolkit and package versions a log prints near its failure.  The
# same error text (a missing kernel image, a resource limit, an import error) has different causes
# on different GPUs and versions; the architecture the failure ran on tells them apart.

# a device's architecture: `sm_120`, `sm_90a`, `gfx942`, `compute capability 8.6`
_ARCH = re.compile(r"(?<![\w-])(sm_\d{2,3}[af]?|gfx\d{3,4}[a-z]?)(?![\w-])|"
                   r"(?i:compute capability)[: ]+\(?(\d{1,2})[.,] ?(\d)\b")
# (blanks between a name and its version are bounded and never cross a line: a window of blank
# lines after a name must not cost a search per blank)
# the packages of the field's serving and kernel stacks, as a log prints their version: a server's
# banner (`vLLM API server version 0.10.0`), a requirement (`xformers==0.0.28`), a wheel's or
# source tree's name (`flashinfer-0.1.1+cu121torch2.3`).  One pattern for all: one pass.
_PACKAGE_NAMES = ("vllm", "sglang", "flashinfer", "xformers", "flash[-_]attn", "transformers", "deepspeed", "jaxlib")
_PACKAGES = re.compile(r"(?i)(?<![\w.-])(" + "|".join(_PACKAGE_NAMES) + r")(?:(?: [a-z]+){0,3} version)?"
                       r"[ \t]{0,8}(?:==|:|-|[ \t])[ \t]{0,8}v?(\d+\.\d+(?:\.\d+)?)(?!\w)")


_PACKAGE_HINTS = tuple(n.split("[")[0] for n in _PACKAGE_NAMES)


def packages(text: str) -> list[str]:
    """`name version` of each of the field's packages `text` prints a version of, the first
    value of each, in order of appearance."""
    out: dict[str, str] = {}
    low = text.lower()
    if not any(n in low for n in _PACKAGE_HINTS):
        return []
    for m in _PACKAGES.finditer(text):
        name = m[1].lower().replace("_", "-")
        out.setdefault(name, f"{name} {m[2]}")
    return list(out.values())


_ENV_FACTS = (
    ("driver", re.compile(r"(?i)\bdriver version[ \t]{0,8}[:=]?[ \t]{0,8}(\d+)(?:\.\d+)*")),
    ("cuda", re.compile(r"(?i)\bcuda(?: version| runtime version| toolkit)?[ \t]{0,8}[:=]?[ \t]{0,8}v?(\d{2}\.\d)\b")),
    ("rocm", re.compile(r"(?i)\b(?:rocm|hip)(?: version)?[ \t]{0,8}[:=]?[ \t]{0,8}v?(\d\.\d)\b")),
    ("torch", re.compile(r"(?i)(?<![\w-])(?:torch|pytorch)(?:[ \t]+version)?[ \t]{0,8}(?:==|:|[ \t])[ \t]{0,8}v?(\d+\.\d+)\.\d")),
    ("triton", re.compile(r"(?i)(?<![\w-])(?:pytorch-)?triton(?:[ \t]+version)?[ \t]{0,8}(?:==|:|[ \t])[ \t]{0,8}v?(\d+\.\d+)\.\d")),
)


def architectures(text: str) -> list[str]:
    """The GPU architectures a log names as its device's, in order of appearance.  A line that
    lists three or more (`supports CUDA capabilities sm_50 sm_60 sm_70`) names a build's
    targets, not the device."""
    out: list[str] = []
    if "sm_" not in text and "gfx" not in text and "apability" not in text:
        return out
    for line in text.split("\n"):
        found = [m[1] or f"sm_{m[2]}{m[3]}" for m in _ARCH.finditer(line[:2000])]
        if 0 < len(set(found)) <= 2:
            out += [a for a in found if a not in out]
    return out


def environment(text: str) -> str:
    """The failure's environment as one line (`sm_120; driver 570; cuda 12.8; torch 2.7`), empty
    when the log prints none of it: the first value of each fact."""
    facts = architectures(text)[:2]
    for name, rx in _ENV_FACTS:
        m = rx.search(text)
        if m:
            facts.append(f"{name} {m[1]}")
    return "; ".join(facts + packages(text))


# a device's name when no architecture is printed: `Tesla V100-SXM2`, `RTX 5090`, `Arc A770`, `MI300X`
_DEVICE = re.compile(r"\b(?:(?:Tesla|Quadro) [A-Z]?\d{1,4}|(?:RTX|GTX) ?(?:PRO )?[A-Z]?\d{3,4}(?: Ti)?|"
                     r"Arc(?:\(TM\))? [AB]\d{3}|Data Center GPU (?:Max|Flex) \d{3,4}|MI\d{2,3}[AXH]?|"
                     r"Radeon (?:RX |Pro |PRO )?[A-Z]?\d{3,4}[A-Z]*|Jetson(?: AGX| Orin| Xavier| Nano)+|"
                     # data-centre parts, with a variant letter (`A10G`, `L40S`) or a CPU's (`GH200`, `GB200`)
                     r"(?<![\w-])G?[ABHL]\d{2,3}[GS]?(?=[-,;)]|\s|$)(?:[- ](?:SXM\d?|PCIe))?)\b")
# a driver too old says what it found: `(found version 11040)`; `Driver Version: 470.86`
_FOUND_VERSION = re.compile(r"found version (\d{4,5})\b")
_DRIVER_VERSION = re.compile(r"(?i)\bdriver version[ \t]{0,8}[:=]?[ \t]{0,8}(\d+)")
DRIVER_SENSITIVE = re.compile(r"(?i)driver|kernel image is invalid|PTX was compiled|unsupported toolchain")


def env_key(text: str, window: str) -> str:
    """What of the environment tells apart failures whose signature is `text`: for a driver's
    fault, the driver (or the CUDA version it supports); else the device's architecture, or its
    name when the log prints no architecture.  Empty when the log names none."""
    if DRIVER_SENSITIVE.search(text):
        found = _FOUND_VERSION.search(window)
        if found:
            n = int(found[1])
            return f"cuda {n // 1000}.{n % 1000 // 10}"
        drv = _DRIVER_VERSION.search(window)
        if drv:
            return f"driver {drv[1]}"
    arch = architectures(window)
    dev = None if arch else _DEVICE.search(window)
    where = arch[0] if arch else " ".join(dev[0].split()) if dev else ""
    if where:
        # a build without the device's kernels is the failure of that build on that device: the
        # toolkit and package versions the log prints of the build (never the driver's, which
        # no build depends on) tell two builds left without the same device apart
        return "; ".join([where] + _build_facts(window)) if _NO_KERNEL.search(text) else where
    # no device named: for a build without the device's kernels, the version of the package
    # built so (it fails the same way on every device that build left out)
    if not _NO_KERNEL.search(text):
        return ""
    first = _PACKAGES.search(window)
    return f"{first[1].lower().replace('_', '-')} {first[2]}" if first else ""


def _build_facts(window: str) -> list[str]:
    """`cuda 12.8`, `torch 2.7`...: the toolkit and package versions a log prints, the first
    value of each."""
    out = []
    for name, rx in _ENV_FACTS:
        if name != "driver":
            m = rx.search(window)
            if m:
                out.append(f"{name} {m[1]}")
    return out


_NO_KERNEL = re.compile(r"(?i)no kernel image|NoBinaryForGpu|invalid device function|not compatible with the current|"
                        r"unsupported gpu")


# Errors whose cause depends on where they ran: the device's architecture keys them apart.
ENV_SENSITIVE = re.compile(
    r"(?i)no kernel image|NoBinaryForGpu|invalid device function|not compatible with the current|"
    r"kernel image is invalid|gpu-name|gpu architecture|unsupported gpu|out of resource|Error \[ZE\]|"
    # ptxas's limits are the architecture's: registers, shared memory
    r"register allocation failed|too much shared data|"
    r"too many resources|undefined symbol|cannot open shared object|not found \(required by|"
    r"driver version is insufficient|driver.{0,40}too old|PTX was compiled|unsupported toolchain|"
    r"ImportError|ModuleNotFoundError|NCCL|RCCL")


# ----- collective communication ---------------------------------------------------------------

# What a collective-communication failure says went wrong, whatever wraps it (DistBackendError,
# `NCCL error in: file:line, ...`, the watchdog's abort with its timeout value).
_COLLECTIVE_REASON = re.compile(
    r"(?i)(unhandled system error|ncclSystemError|unhandled cuda error|internal (?:check )?error|invalid usage|"
    r"remote process exited or there was a network error|invalid argument|"
    r"(?:a )?network error or a remote process exiting|"
    r"watchdog caught collective operation timeout|collective operation timeout|"
    r"communicator was aborted|socket timeout|connection (?:closed|reset|refused)[\w ]*|"
    r"ncclUniqueId|Watchdog got stuck|heartbeat monitor|Timeout at NCCL work|"
    r"ran for \d+ milliseconds before timing out)")


def collective(line: str) -> str | None:
    """`NCCL error: <what went wrong>` for a collective-communication failure line, else None."""
    if not re.search(r"NCCL|RCCL|nccl[A-Z]|ProcessGroup|DistBackendError|c10d|Gloo", line):
        return None
    reason = _COLLECTIVE_REASON.search(line)
    if reason is None:
        return None
    what = reason[1].lower().replace("ncclsystemerror", "unhandled system error")
    if "remote process exiting" in what:  # ncclRemoteError's own words for the same fault
        what = "remote process exited or there was a network error"
    if "timing out" in what or "timeout at nccl" in what or "operation timeout" in what:
        what = "collective operation timeout"
    lib = "RCCL" if "RCCL" in line else "Gloo" if "Gloo" in line else "NCCL"
    return f"{lib} error: {what}"


# NCCL's own account of what failed (`misc/shmutils.cc:72 NCCL WARN Error while creating shared
# memory segment ...`), printed before or after the error its caller raises
_NCCL_WARN = re.compile(r"NCCL WARN (.+)")
# its account under the error it raised: `Last error:` and, on the next line, the transport's
# failure (`socketProgressOpt: Call to recv from 10.0.0.2<33759> failed : Connection reset by peer`)
_LAST_ERROR = re.compile(r"\nLast error:[ \t]*\n[ \t]*(?:\w+: )?([^\n]+)")


def _nccl_warning(before: str, after: str, comm: str) -> str:
    """`: <what NCCL warned of>` for a collective failure whose reason is generic (an unhandled
    system error has many causes, the warning names the one), the first warning around it."""
    if "timeout" in comm:
        return ""
    found = _NCCL_WARN.search(before[-8000:]) or _NCCL_WARN.search(after[:8000]) \
        or _LAST_ERROR.search(after[:2000])
    if found is None:
        return ""
    # without the files it names (`/dev/shm/nccl-8Xk2Qa`: a temporary name)
    return f": {_first_sentence(_PATH_ARG.sub('', found[1]).strip())}"


_PATH_ARG = re.compile(r"\s*(?<![\w.])/[^\s,;:()]+")


# lit's `TIMEOUT: Suite :: path/test.mlir (12 of 340)`, ctest's `Test #12: name ...***Timeout`
_LIT_TIMEOUT = re.compile(r"TIMEOUT: (.+? :: \S+)|Test +#\d+: (\S+) \.*\**Timeout")


def lit_timeout(text: str) -> str | None:
    """The test a lit or ctest timeout names (the last one)."""
    found = None
    for found in _LIT_TIMEOUT.finditer(text):
        pass
    return f"timeout in {found[1] or found[2]}" if found else None
