"""Classify a landing unit's failures: NEW, BROKEN_TRUNK, FLAKY or INFRA.  [pure]

Order of the rules, each with the evidence it needs:

1. INFRA: the signature is a runner fault (no space, lost runner, no GPU...), or the job the
   test ran in was judged INFRA by validation (family `machine`), or an environment or
   toolchain fault (a wheel built without the GPU's architecture, a driver too old, missing
   headers or libraries: family `environment`).  `infra_family` tells them apart and
   `suggested_action` says what to do.  Where no rule names an environment fault, a model
   trained on real labelled failures may (`infra_model`): only at the probability where its
   own calls, cross-validated over causes, were right nine times in ten.
2. BROKEN_TRUNK: the same test failed with the same signature on the fork base or on the
   latest trunk run.  Such a failure cannot block a unit that did not cause it.
3. With automatic reruns: a failure that fails again on every rerun is NEW, even in a test
   known to be flaky (a real regression in a flaky test must not hide behind its history).
   One that passes on rerun is FLAKY when the test has flipped with this signature before,
   or when it passed on every one of at least `min_clean_reruns` reruns; otherwise it is NEW
   (an intermittent failure that this unit may have introduced).
4. Without reruns: FLAKY when history shows the test flipping with this signature, else NEW.

The last clause of 3 is what keeps real failures out of FLAKY: a failure the unit causes fails
on most reruns, a flaky test passes on nearly all (see benchmarks/bench_triage.py).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forkflow.triage import infra_model
from forkflow.triage.models import Classification, Diagnosis, Failure, FailureKind, InfraFamily, Signature
from forkflow.triage.signature import SIGNATURE_VERSION

C = Classification


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One earlier outcome of a test, in a run that is not the one being triaged."""

    rev: str
    passed: bool
    signature_key: str | None = None  # of the failure, when it failed
    run_id: int = 0                   # the run it was seen in (0: not known)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What is known beyond the failure itself."""

    trunk_failures: frozenset[tuple[str, str]] = frozenset()  # (test, signature key) red on trunk
    infra_tests: frozenset[str] = frozenset()                 # tests of jobs judged INFRA
    reruns: Mapping[str, tuple[bool, ...]] = field(default_factory=dict)  # test -> passed?
    history: Mapping[str, Sequence[HistoryPoint]] = field(default_factory=dict)  # oldest first
    # (test, signature key) -> why it is known flaky: the flaky memory of every tier
    # (`forkflow.triage.memory.flaky_reasons`)
    known_flaky: Mapping[tuple[str, str], str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FlakyPolicy:
    min_clean_reruns: int = 2   # all of at least this many reruns passed: FLAKY without history
    min_sandwiches: int = 2     # pass, fail-with-this-signature, pass on different revs


def has_flipped(history: Sequence[HistoryPoint], key: str, policy: FlakyPolicy = FlakyPolicy()) -> bool:
    """Has the test both failed with signature `key` and passed, in a way a fix cannot explain?

    Either at one revision (same code, both outcomes), or as a failure between two passes at
    least `policy.min_sandwiches` times (a regression that got fixed does that only once).
    """
    at_rev: dict[str, set[bool]] = {}
    for p in history:
        if p.passed or p.signature_key == key:
            at_rev.setdefault(p.rev, set()).add(p.passed)
    if any(len(v) == 2 for v in at_rev.values()):
        return True
    sandwiches = 0
    for a, b, c in zip(history, history[1:], history[2:]):
        if a.passed and c.passed and not b.passed and b.signature_key == key:
            sandwiches += 1
    return sandwiches >= policy.min_sandwiches


# ----- INFRA families and what to do ----------------------------------------------------------
# (pattern over the signature text, family, suggested action, strong), first match wins.  A
# strong rule makes any signature INFRA; the others only name the family of a runner fault
# (an INFRA signature).  Environment rules come first: a driver too old is reported through the
# same runtime as a kernel's fault.
E, M = InfraFamily.ENVIRONMENT, InfraFamily.MACHINE
_FAMILY_RULES: tuple[tuple[re.Pattern[str], InfraFamily, str, bool], ...] = tuple(
    (re.compile(p, re.I), fam, action, strong) for p, fam, action, strong in (
        (r"no kernel image is available|NoBinaryForGpu|NO_BINARY_FOR_GPU|not compatible with the current PyTorch|"
         r"is not defined for option 'gpu-(?:name|architecture)'|is not a recognized processor|"
         # a compiler too old for the device (`invalid target ID 'gfx1100'`, `unsupported option
         # '--offload-arch=gfx900'`)
         r"invalid target ID '(?:gfx|sm_)|Invalid offload arch combinations|unsupported option '--offload-arch|"
         r"unsupported (?:CUDA |HIP |AMDGPU )?gpu architecture|unknown target CPU '(?:gfx|sm_)|"
         r"invalid device function|InvalidDeviceFunction|HSA_STATUS_ERROR_INVALID_ISA|"
         # a library that ships no kernels for the device: rocBLAS and hipBLASLt's Tensile files
         r"TensileLibrary[\w.-]{0,80}: No such file|No paths matched \S{0,300}TensileLibrary|"
         r"Cannot read TensileLibrary",
         E, "rebuild the wheel (or install one built) for the GPU's architecture{arch}, or pin a release "
            "that ships it", True),
        (r"driver version is insufficient|driver on your system is too old|driver .{0,40}too old|"
         r"kernel image is invalid|PTX was compiled with an unsupported toolchain|UNSUPPORTED_PTX_VERSION|"
         r"driver does not support|INSUFFICIENT_DRIVER|InsufficientDriver|"
         # the kernel driver and the user-space library of different releases (NVML, the CUDA
         # runtime), or forward compatibility on a device that has none
         r"NVML: (?:\S+/)?library version mismatch|Driver/library version mismatch|"
         r"unsupported display driver / cuda driver combination|SYSTEM_DRIVER_MISMATCH|SystemDriverMismatch|"
         r"forward compatibility was attempted on non supported HW|COMPAT_NOT_SUPPORTED_ON_DEVICE|"
         # a container runtime's check of the image's requirement against the host's driver
         r"unsatisfied condition: cuda ?>=|please update your (?:GPU |NVIDIA )?driver|"
         # an NGC container's banner on a host whose driver is older than the image needs
         r"built for NVIDIA Driver Release \S+ or later|"
         # Level Zero's own codes: `ZE_RESULT_ERROR_UNSUPPORTED_VERSION`, or its hex as Triton's
         # `[ZE]` error prints it (0x78000002), and a dependency of the driver that is missing
         r"\b(?:ZE|UR)_RESULT_ERROR_(?:UNSUPPORTED_VERSION|DEPENDENCY_UNAVAILABLE)\b|"
         r"\[ZE\]: code-x(?:78000002|70020000)\b",
         E, "update the GPU driver on the runner, or pin a toolkit and wheel that its driver supports", True),
        # ptxas older than the PTX it is given: the toolkit's assembler is older than the compiler
        # (Triton, LLVM) that wrote the PTX
        (r"Unsupported \.version N|PTX \.version N does not support \.target|"
         r"SM version specified by \.target is higher than",
         E, "update the toolkit's ptxas (or point the build at a newer one), or pin a compiler whose PTX "
            "it accepts", True),
        # a binary for another platform: another CPU architecture, word size or object format
        (r"cannot execute binary file|wrong ELF class|invalid ELF header|"
         r"incompatible architecture \(have|file in wrong format",
         E, "install (or download) the build of the tool or library for the runner's platform and "
            "architecture", True),
        # the device is older than what the code requires (a compute capability, a generation)
        (r"requires a GPU with compute capability|(?:GPUs?|devices?) with compute capability (?:of )?at least|"
         r"\bonly supports? (?:\w+ ){0,3}GPUs? (?:or newer|and newer|with compute capability)|"
         r"compute capability (?:(?:below|less than|lower than) )?\S+ (?:is |are )?not supported",
         E, "run the test on a device the code supports (the architecture it needs), or skip it on this "
            "runner's device", True),
        # NumPy's C API of another major release than the extension was built against
        (r"numpy\.core\.multiarray failed to import|_ARRAY_API not found|compiled using NumPy \S+ cannot be run|"
         r"module compiled against (?:ABI|API) version",
         E, "pin NumPy to the major release the compiled extensions were built against (or rebuild them)", True),
        (r"(?:\.h|\.hpp|\.cuh)'? ?(?:file not found|: No such file or directory)",
         E, "install the missing headers (the toolkit's or library's development package) on the runner", True),
        (r"cannot open shared object file|' not found \(required by|\b(?:GLIBC(?:XX)?|CXXABI)_[\d*]|undefined symbol|"
         r"cannot find -l\w+|library not found for -l\w|symbol lookup error|DLL load failed|Library not loaded|"
         r"Could not find module '[^']*\.(?:dll|pyd)'|Could not load library \S+\.(?:so|dll)|"
         r"Unable to load any of \{|The specified module could not be found|Windows loader error|PTX JIT compiler library not found|JIT_COMPILER_NOT_FOUND",
         E, "install the library the binary was built against, or pin the package versions that match it", True),
        # a package the step imports that is not installed at all (a top-level name: a module of
        # the project itself is dotted, or built, and is the build's fault, not the runner's)
        (r"No module named '[A-Za-z_]\w*'(?!\.)|"
         # a system Python that refuses pip (PEP 668): the step installs outside a virtualenv
         r"externally-managed-environment|This environment is externally managed",
         E, "install the missing package in the job's environment (a virtualenv on a system Python), or "
            "pin it in the requirements the job installs", True),
        (r": command not found|is not recognized as an internal or external command|"
         r"No matching distribution found|Could not find a version that satisfies|"
         r"not available for the python version|requires a different Python|is not a supported wheel on this platform|"
         # a tool that does not run on this platform or interpreter release at all
         r"(?:is )?not (?:yet )?supported (?:on|for) (?:Python|Windows|macOS|Darwin)\b|Windows not yet supported|"
         # a package manager's solver: no set of versions satisfies every requirement
         r"UnsatisfiableError|PackagesNotFoundError|Could not solve for environment specs|"
         r"package versions have conflicting dependencies|The conflict is caused by",
         E, "install the missing tool or package on the runner, or pin versions that exist for it", True),
        # a toolchain's binary the job ran by name or path that is not there (Python's
        # FileNotFoundError for `nvcc`, `/usr/local/cuda/bin/nvcc`, `hipcc`, `cl`), and a compiler
        # that cannot find the toolkit's device libraries
        (r"No such file or directory: '(?:[^'\n]{0,300}[/\\])?(?:nvcc|hipcc|ptxas|nvlink|clang\+\+|clang|"
         r"gcc|g\+\+|cc|c\+\+|cl|cl\.exe|ninja|cmake|make|ld|icpx|dpcpp)'|"
         r"cannot find libdevice|cannot find ROCm device library|cannot find CUDA installation",
         E, "install the toolkit (compiler and device libraries) on the runner, or point the build at it "
            "(CUDA_HOME, --cuda-path, --rocm-path)", True),
        # a container started with GPUs on a host without NVIDIA's container runtime
        (r"could not select device driver \S{0,40} with capabilities: \[\[gpu\]\]",
         E, "install the NVIDIA Container Toolkit on the runner (and restart the container engine)", True),
        # a serialized TensorRT engine built by another TensorRT release or for another device
        (r"engine plan file is not compatible with this version of TensorRT|"
         r"engine plan file is generated on an incompatible device",
         E, "rebuild the TensorRT engine with the TensorRT release and on the device the job runs", True),
        # an installed package without a name the code imports: versions that do not match
        (r"ImportError: cannot import name '\w+' from '[\w.]+'",
         E, "pin the package versions that match (an installed package lacks a name the code imports)", True),
        (r"(?:or later|or newer|compatible) compiler is required|unsupported GNU version|"
         r"unsupported (?:Microsoft )?(?:clang|compiler|Visual Studio) version|"
         r"too old version of (?:GCC|Clang|the compiler)|We need (?:GCC|Clang) \S+ or (?:later|newer)|"
         r"CUDA_HOME environment variable is not set|No CUDA runtime is found|nvcc: not found|Failed to find CUDA|"
         r"Could not load any plugin|"
         # a JIT (Triton's launcher, Inductor's C++ wrapper) that finds no host compiler or no libcuda
         r"Failed to find C compiler|Compiler: \S+ is not found|libcuda\.so cannot (?:be )?found|"
         # an extension's operators missing from the torch it was loaded into (built for another one)
         r"operator \w+::\w+ does not exist|No such operator \w+::\w+|"
         r"Torch not compiled with CUDA enabled|requires \S+ (?:>=|==|<)|version conflict|ResolutionImpossible|"
         r"CMake Error: (?:\S+ ){0,12}?\S*(?:or higher is required|must be at least|is too old|version \S+ is required)|"
         r"Host \w+ version must be at least|"
         # a compiler or toolkit outside the range the build supports, or one it cannot find
         r"is (?:greater|less) than the (?:maximum|minimum) required version|"
         r"Microsoft Visual C\+\+ \S+ or greater is required|Ninja is required to load C\+\+ extensions|"
         r"error: command '[\w.+-]+' failed: No such file or directory|No CMAKE_\w+_COMPILER could be found|"
         r"(?-i:Could NOT find) \w+|is not defined for option 'std'|"
         r"only supported (?:on|with) (?:CUDA|ROCm|HIP) \S+ (?:and|or) (?:above|later|newer)|"
         # a tool or package's floor on what it runs with: `requires CUDA 11.4+`, `requires
         # Python 3.9 or later`, `requires GCC >= 9`
         r"requires (?:CUDA|ROCm|HIP|Python|GCC|Clang|CMake|LLVM|PyTorch|torch|NumPy)(?: version)? "
         r"(?:(?:N|\d[\d.]*)\+|>=|at least|(?:N|\d[\d.]*) or (?:later|newer|higher|above))|"
         # two binaries of one process built against different releases of a toolkit or library
         r"compiled with different CUDA (?:major )?versions|mismatches the version that was used to compile|"
         r"compiled\s+against (?:\S+ )?but (?:found|linked against) runtime version",
         E, "pin the compiler, toolkit and package versions the build expects", True),
        # any other error of a build's configure step: what it found on the runner (a target the
        # LLVM it was pointed at lacks, an architecture list the toolkit cannot build) is not
        # what the build expects
        (r"^(?:\w+: )?CMake Error\b",
         E, "check what the configure step found (the toolkit, the LLVM or library it was pointed at, the "
            "architecture list) against what the build expects, and pin it", True),
        # a package older or newer than the code that uses it: a model type an old library does
        # not know, a module without the attribute the code asks for (an API added or removed)
        (r"does not recognize this architecture|version of \S+ is (?:out of date|too old)|"
         r"AttributeError: module '[\w.]+' has no attribute",
         E, "pin the package versions that match (an installed package is older or newer than the code expects)", True),
        # a tool the step runs that is not installed: `anaconda: No such file or directory`,
        # `sh: 1: nvcc: not found` (a bare program name, no file extension)
        (r"^[A-Z_]+: (?:sh: \d+: )?[\w-]+: (?:No such file or directory|not found)$",
         E, "install the missing tool on the runner, or put it on the PATH the step uses", True),
        # a file the build or setup downloads that is not published (an LLVM tarball for this
        # platform, a wheel for this version)
        (r"HTTP code-n404|\b404 (?:Not Found|Client Error)",
         E, "pin a version (or platform) whose files are published, or build the missing one locally", True),
        # a server that refused or failed a download (storage without public access, a registry's
        # outage): the machine's network or the service, not the change
        (r"HTTP code-n(?:403|409|50[0-4])|Public access is not permitted",
         M, "retry the download later or from a mirror; check the runner's access to the storage or registry", True),
        (r"shared memory \(/dev/shm\) too small",
         M, "give the job's container a larger /dev/shm (docker --shm-size, or --ipc=host) or set "
            "NCCL_SHM_DISABLE=1, then re-run", True),
        (r"process or thread limit reached",
         M, "raise the runner's process and thread limits (ulimit -u, the container's pids limit) or run "
            "fewer jobs at once on it, then re-run", True),
        # a server's KV cache that the device's memory cannot hold at the configured length
        (r"maximum number of tokens that can be stored in KV cache|No available memory for the cache blocks",
         M, "run on a device with more memory, or lower max_model_len (or raise gpu_memory_utilization)", True),
        (r"disk full|low disk space|out of disk space|No space left on device",
         M, "free disk space on the runner (clean caches and old builds) or give the job a larger disk", True),
        (r"memory limit \(cgroup OOM kill\)",
         M, "raise the job's memory limit (its container's or scheduler's), or make it use less memory, then re-run",
         True),
        (r"OOM killer|virtual memory exhausted|LNK\d+: out of memory|Cannot allocate memory",
         M, "give the job more host memory or fewer parallel compile jobs (MAX_JOBS), then re-run", True),
        (r"HTTP (?:code-n)?429|rate limit|Too Many Requests",
         M, "retry later with backoff; authenticate, cache or mirror the hub or registry", True),
        # a port the job may not bind (below 1024 without the privilege): its configuration
        (r"(?:listen|bind)\b.*\berrno: (?:code-n)?13 - Permission denied",
         E, "configure a port the job may bind (1024 or above), or give the job the privilege", True),
        (r"port already in use|Address already in use",
         M, "give each job its own port (bind to port 0) or isolate the jobs, then re-run", True),
        # the network between nodes, as the collective library and its transports say it
        (r"(?:NCCL|RCCL|Gloo) error: (?:remote process exited|unhandled system error|connection|socket)|"
         r"NET/IB|Got completion with error|forcibly closed by the remote host",
         M, "check the network between nodes (interfaces, IB links, NCCL_SOCKET_IFNAME), then re-run", True),
        (r"NCCL watchdog|network error|Connection (?:reset|refused|closed|timed out)|Network is unreachable|"
         r"could not resolve host|name resolution",
         M, "check the network between the runner and the nodes or services it talks to, then re-run", False),
        (r"runner shut down|runner lost|job cancelled by the runner|lost communication|shutdown signal|preempted|NodeDied",
         M, "re-run the job; check the runner's health if it happens again", True),
        (r"no CUDA-capable device|No (?:CUDA|HIP|ROCm) GPUs are available|No XPU devices|Found no NVIDIA driver|NVIDIA-SMI has failed|ECC error|"
         r"fallen off the bus|DEVICE_LOST",
         M, "take the runner's GPU out of the pool and check it, then re-run elsewhere", True),
    ))
_MACHINE_DEFAULT = "re-run the job on a healthy runner"
# a failure the rules know to be the build's, whatever its words: a dotted module of the project
# missing (a top-level package missing is the environment's: `_FAMILY_RULES`)
_THE_BUILDS = re.compile(r"No module named '[A-Za-z_]\w*\.")
_ENVIRONMENT_DEFAULT = ("check the versions the job installs (toolkit, driver, compiler, wheels) against "
                        "what the log names, then pin or rebuild the one that differs")
# the device a signature names (`[on sm_120; cuda 12.8]`: the device first, then the build)
_ARCH_SUFFIX = re.compile(r" \[on ([^\];]+)[^\]]*\]$")
# A device out of memory is the machine's when the test cannot fit it (it asked for more than
# the device has) or another process holds the memory; otherwise it may be the change's.
_ASKED = re.compile(r"(?i)tried to allocate ([\d.]+) ?([KMGT]i?B)")
_TOTAL = re.compile(r"(?i)total capacity of ([\d.]+) ?([KMGT]i?B)")
_HELD_ELSEWHERE = re.compile(r"(?i)memory (?:is )?(?:in use|held) by (?:another|other) process|"
                             r"Process \d+ has [\d.]+ ?[KMGT]i?B memory in use")
_UNIT = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(m: re.Match[str]) -> float:
    return float(m[1]) * _UNIT[m[2][0].upper()]


def _device_too_small(excerpt: str) -> bool:
    asked, total = _ASKED.search(excerpt), _TOTAL.search(excerpt)
    return bool(asked and total and _bytes(asked) > _bytes(total)) or bool(_HELD_ELSEWHERE.search(excerpt)) \
        or _held_by_others(excerpt)


# torch's account of the device: `total capacity of 251.98 GiB of which 1.59 GiB is free. Of the
# allocated memory 19.52 GiB is allocated by PyTorch, and 978.00 MiB is reserved by PyTorch`
_FREE = re.compile(r"(?i)total capacity of ([\d.]+) ?([KMGT]i?B) of which ([\d.]+) ?([KMGT]i?B) is free")
# a number starts where no digit or dot precedes it: a run of digits is tried once, not from
# each of its characters (quadratic on a long run)
_OWN = re.compile(r"(?i)(?<![\d.])([\d.]+) ?([KMGT]i?B) is (?:allocated|reserved) by PyTorch")


def _held_by_others(excerpt: str) -> bool:
    """Whether most of the device is held by memory this process did not allocate: another
    process (an earlier test's, another job's) holds it, the machine's fault."""
    free = _FREE.search(excerpt)
    if free is None:
        return False
    own = _OWN.findall(excerpt)
    if not own:
        return False
    total = float(free[1]) * _UNIT[free[2][0].upper()]
    left = float(free[3]) * _UNIT[free[4][0].upper()]
    mine = sum(float(n) * _UNIT[u[0].upper()] for n, u in own)
    return total - left - mine > total / 2


# Environment faults whose own line is above the one the signature keeps (a library's loader
# that aborts the process: `Aborted (core dumped)`, a linker's `linker command failed`, a loader's
# error cut after its first clause, an operator's list of reasons): forms precise enough to be
# trusted anywhere in the excerpt, each a whole statement of the fault, never a lone token.
_EXCERPT_SIGNS = re.compile(
    r"HSA_STATUS_ERROR_INVALID_ISA|NoBinaryForGpu|NO_BINARY_FOR_GPU|no kernel image is available for execution|"
    r"TensileLibrary[\w.-]{0,80}: No such file|No paths matched \S{0,300}TensileLibrary|"
    r"Could not load library \S+\.(?:so|dll)|\bld: library not found for -l\w|"
    r"incompatible architecture \(have '|"
    r"requires a GPU with compute capability", re.I)
_EXCERPT_TAIL = 8000  # characters of an excerpt read for those forms
_OWN_FAMILY = frozenset({FailureKind.INFRA, FailureKind.OOM, FailureKind.TIMEOUT})


def _family_rule(sig: Signature) -> tuple[InfraFamily, str, bool] | None:
    text = sig.text
    rule = _text_rule(text)
    if rule is not None:
        return rule
    # (a runner's fault, a timeout or an out-of-memory keep their own family: a line above
    # them is not what stopped the job)
    tail = sig.excerpt[-_EXCERPT_TAIL:]
    sign = None if sig.kind in _OWN_FAMILY else _EXCERPT_SIGNS.search(tail)
    if sign is not None:
        start = tail.rfind("\n", 0, sign.start()) + 1
        end = tail.find("\n", sign.end())
        rule = _text_rule(tail[start:end if end >= 0 else len(tail)][:_EXCERPT_TAIL])
        if rule is not None and rule[0] is E:
            return rule
    if sig.kind is FailureKind.OOM and _device_too_small(sig.excerpt):
        return M, ("run the test on a device with more memory, or free the memory other processes "
                   "hold on the runner's GPU, then re-run"), True
    return None


def _text_rule(text: str) -> tuple[InfraFamily, str, bool] | None:
    for rx, fam, action, strong in _FAMILY_RULES:
        if rx.search(text):
            arch = _ARCH_SUFFIX.search(text)
            return fam, action.format(arch=f" ({arch[1]})" if arch else ""), strong
    return None


def rule_family(sig: Signature) -> InfraFamily | None:
    """The INFRA family the rules give a signature: `machine` for runner faults (every INFRA
    signature), `environment` for the environment and toolchain faults they name; else None."""
    rule = _family_rule(sig)
    if rule is not None and (rule[2] or sig.kind is FailureKind.INFRA):
        return rule[0]
    return M if sig.kind is FailureKind.INFRA else None


def model_read(sig: Signature) -> tuple[InfraFamily | None, float, tuple[str, ...]]:
    """What the shipped INFRA model calls a signature no rule names (`infra_model`): the family
    at its threshold or None, its probability, the words that weighed most.  A model trained
    on signatures of another version reads words those rules no longer write: it is not used.
    Nor where a rule says the failure is the build's (a module of the project missing)."""
    model = infra_model.shipped()
    if model is None or model.signature_version != SIGNATURE_VERSION or not model_speaks_for(sig):
        return None, 0.0, ()
    return model.read(sig)


def model_speaks_for(sig: Signature) -> bool:
    """Whether the model may call this signature INFRA: an exception or a generic error that no
    rule says is the build's."""
    return sig.kind in infra_model.KINDS and not _THE_BUILDS.search(sig.text)


@dataclass(frozen=True, slots=True)
class InfraVerdict:
    """What the rules, else the model, say of a signature: its INFRA family (None: not INFRA),
    what to do about it, and how it was read (empty for a rule; the model's probability)."""

    family: InfraFamily | None
    action: str = ""
    how: str = ""


def infra_verdict(sig: Signature) -> InfraVerdict:
    """The INFRA family and action of a signature, its rules read once (a hostile text costs them
    once): the rules' (`rule_family`), else the model's when it is sure enough (`model_read`)."""
    rule = _family_rule(sig)
    if rule is not None and (rule[2] or sig.kind is FailureKind.INFRA):
        return InfraVerdict(rule[0], rule[1])
    if sig.kind is FailureKind.INFRA:
        return InfraVerdict(M, _MACHINE_DEFAULT)
    fam, p, top = model_read(sig)
    if fam is None:
        return InfraVerdict(None)
    said = f" (read from its words: {', '.join(top)})" if top else ""
    return InfraVerdict(fam, (_MACHINE_DEFAULT if fam is M else _ENVIRONMENT_DEFAULT) + said,
                        f" (read from its words, {p:.2f})")


def infra_family(sig: Signature) -> InfraFamily | None:
    """The INFRA family of a signature (`infra_verdict`); None for anything else."""
    return infra_verdict(sig).family


def suggested_action(sig: Signature) -> str:
    """What to do about an INFRA failure, by family and kind (pin, rebuild the wheel for the
    architecture, update the driver, install headers, free disk...); empty for other failures."""
    return infra_verdict(sig).action


def classify_failure(f: Failure, ev: Evidence, policy: FlakyPolicy = FlakyPolicy()) -> Diagnosis:
    """The classification of one failure, with the reason in words."""
    key = f.signature.key
    infra = infra_verdict(f.signature)
    if infra.family is not None:
        what = "runner or machine fault" if infra.family is M else "environment or toolchain fault"
        return Diagnosis(f, C.INFRA, f"{what}{infra.how}: " + f.signature.text[:120], family=infra.family,
                         action=infra.action)
    if f.test in ev.infra_tests:
        return Diagnosis(f, C.INFRA, "validation judged the job an infrastructure failure", family=M,
                         action=_MACHINE_DEFAULT)
    if (f.test, key) in ev.trunk_failures:
        return Diagnosis(f, C.BROKEN_TRUNK, "fails the same way on the fork base or latest trunk run")
    memory = ev.known_flaky.get((f.test, key))
    flipped = memory is not None or has_flipped(ev.history.get(f.test, ()), key, policy)
    why = memory or "flipped before with this signature"
    reruns = ev.reruns.get(f.test, ())
    if reruns:
        passed = sum(reruns)
        if passed == 0:
            return Diagnosis(f, C.NEW, f"failed again on all {len(reruns)} reruns", reruns)
        if flipped:
            return Diagnosis(f, C.FLAKY, f"passed {passed} of {len(reruns)} reruns; {why}", reruns)
        if passed == len(reruns) and passed >= policy.min_clean_reruns:
            return Diagnosis(f, C.FLAKY, f"passed all {passed} reruns", reruns)
        return Diagnosis(f, C.NEW, f"intermittent: passed {passed} of {len(reruns)} reruns and never "
                       "flipped before; this unit may have introduced it", reruns)
    if flipped:
        return Diagnosis(f, C.FLAKY, f"{why} (no rerun)")
    return Diagnosis(f, C.NEW, "not red on trunk, not known flaky")


def classify(failures: Sequence[Failure], ev: Evidence,
             policy: FlakyPolicy = FlakyPolicy()) -> list[Diagnosis]:
    """Verdicts for every failure, NEW first (then by test)."""
    out = [classify_failure(f, ev, policy) for f in failures]
    return sorted(out, key=lambda v: (v.classification.order, v.failure.test))
