"""Values of triage: failure kinds, signatures, failures, groups and their classifications."""
from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass, field


class FailureKind(str, enum.Enum):
    """Where in a log the signature was taken from, strongest evidence first in `PRIORITY`."""

    INFRA = "INFRA"                    # runner or machine fault, missing resource
    TIMEOUT = "TIMEOUT"
    OOM = "OOM"                        # host or device out of memory
    CUDA_ERROR = "CUDA_ERROR"          # CUDA / HIP / NCCL / cuBLAS runtime error
    CRASH = "CRASH"                    # assertion, LLVM ERROR, signal, stack dump
    COMPILER_ERROR = "COMPILER_ERROR"  # `file:line:col: error: ...` diagnostics
    FILECHECK = "FILECHECK"            # lit / FileCheck mismatch
    EXCEPTION = "EXCEPTION"            # the last Python exception (traceback or pytest E lines)
    GENERIC = "GENERIC"                # the last line that says error / failed
    NO_OUTPUT = "NO_OUTPUT"            # an empty log


PRIORITY: tuple[FailureKind, ...] = tuple(FailureKind)
_KIND_VALUES = frozenset(k.value for k in FailureKind)
_TYPED = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*): (.*)$", re.S)


class Classification(str, enum.Enum):
    """What a failure in a landing unit's run means for its author."""

    NEW = "NEW"                    # caused by this unit: blocks landing
    BROKEN_TRUNK = "BROKEN_TRUNK"  # already failing on the fork base or the latest trunk run
    FLAKY = "FLAKY"                # passes on rerun, or flips in history with this signature
    INFRA = "INFRA"                # runner or machine fault, not the unit's

    @property
    def order(self) -> int:
        """Authors see NEW first."""
        return list(Classification).index(self)


def signature_key(text: str) -> str:
    """The short stable id of a signature text (16 hex digits)."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Signature:
    """A failure's normalized error text, and where in the log it came from."""

    kind: FailureKind
    text: str       # normalized, e.g. "EXCEPTION: RuntimeError: CUDA error ... @ ops.py:launch"
    excerpt: str    # the raw lines around the error (decoded, capped), for people
    line: int = 0   # 1-based line of the error in the log, 0 when unknown
    # where it ran, as the log prints it near the error (`sm_120; driver 570; cuda 12.8`), for
    # people; the architecture, when it tells causes apart, is also in `text` (`... [on sm_120]`)
    env: str = ""

    @property
    def key(self) -> str:
        """The group id: of the normalized error text, not of the trigger that found it (the
        same error seen through a crash reporter or a compiler driver is the same failure),
        nor of the exception type when the message has three words or more (torch moved
        errors between types across versions; some logs print the message alone)."""
        kind, sep, rest = self.text.partition(": ")
        rest = rest if sep and kind in _KIND_VALUES else self.text
        typed = _TYPED.match(rest)
        if typed and len(typed[2].split()) >= 3:
            rest = typed[2]
        return signature_key(rest)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failing test (or job) of a run, with its signature."""

    test: str
    signature: Signature
    run_id: int | None = None
    job: str = ""


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failures that share one signature."""

    key: str
    signature: str
    kind: FailureKind
    failures: tuple[Failure, ...]

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(sorted({f.test for f in self.failures}))


class InfraFamily(str, enum.Enum):
    """Which kind of INFRA failure: the machine or runner, or the environment and toolchain.
    Both are INFRA (not the unit's fault; the gate wants them run again and passing before
    landing); they differ in what to do about them."""

    MACHINE = "machine"          # disk full, OOM killer, runner shutdown, network, rate limits
    ENVIRONMENT = "environment"  # wheel without the GPU's arch, driver too old, missing headers/libs


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A failure's classification and why."""

    failure: Failure
    classification: Classification
    reason: str
    reruns: tuple[bool, ...] = field(default=())  # True = passed on that rerun
    family: InfraFamily | None = None              # for INFRA: machine or environment
    action: str = ""                               # for INFRA: what to do about it
