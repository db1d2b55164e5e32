"""Where the workloads run (a CUDA GPU, Triton's CPU interpreter, or plain CPU) and which dtypes it has."""
from __future__ import annotations

import enum
import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forkflow.errors import UserError

if TYPE_CHECKING:
    import torch


class Backend(str, enum.Enum):
    CUDA = "cuda"                 # a CUDA GPU; Triton compiles for it
    INTERPRETER = "interpreter"   # TRITON_INTERPRET=1: Triton kernels run on the CPU in numpy
    CPU = "cpu"                   # no GPU and no interpreter: only PyTorch on the CPU


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """The device a workload runs on."""

    backend: Backend
    name: str
    capability: tuple[int, int] | None = None  # CUDA compute capability
    memory_bytes: int = 0

    @property
    def torch_device(self) -> str:
        return "cuda" if self.backend is Backend.CUDA else "cpu"

    def describe(self) -> str:
        cc = f", compute capability {self.capability[0]}.{self.capability[1]}" if self.capability else ""
        return f"{self.name} ({self.backend.value}{cc})"


# dtype name -> (minimum CUDA compute capability, what it is)
DTYPES: dict[str, tuple[tuple[int, int], str]] = {
    "fp32": ((7, 0), "float32"),
    "fp16": ((7, 0), "float16"),
    "bf16": ((8, 0), "bfloat16"),
    "fp8": ((8, 9), "float8_e4m3fn"),
}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a DTYPES name (`bf16` -> torch.bfloat16); imports torch."""
    import torch

    return getattr(torch, DTYPES[name][1])  # type: ignore[no-any-return]


NO_GPU = ("no CUDA GPU here (torch.cuda.is_available() is False); "
          "run it on a machine with an NVIDIA GPU")


def parse_dtypes(text: str) -> tuple[str, ...]:
    """`bf16,fp16` -> ("bf16", "fp16"), or a UserError naming the unknown one."""
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    for n in names:
        if n not in DTYPES:
            raise UserError(f"unknown dtype {n!r}; use one or more of {', '.join(DTYPES)}")
    if not names:
        raise UserError(f"no dtype given; use one or more of {', '.join(DTYPES)}")
    return names


def unsupported_reason(dtype: str, dev: DeviceInfo) -> str | None:
    """Why `dev` cannot run Triton kernels in `dtype`, or None when it can."""
    need, full = DTYPES[dtype]
    if dev.backend is Backend.CUDA:
        if dev.capability is not None and dev.capability < need:
            have = f"{dev.capability[0]}.{dev.capability[1]}"
            return (f"{dtype} ({full}) needs compute capability {need[0]}.{need[1]} or newer; "
                    f"{dev.name} has {have}")
        return None
    if dev.backend is Backend.CPU:
        return "Triton kernels need a CUDA GPU or TRITON_INTERPRET=1 (Triton's CPU interpreter)"
    return None


def use_interpreter_without_gpu() -> None:
    """Set TRITON_INTERPRET=1 when there is no GPU.

    Call it before triton is first imported: triton.language's own @jit helpers (tl.max,
    tl.sum...) choose between interpreter and compiler when triton loads, and the interpreter
    reads the variable again at every launch, so it stays set.
    """
    if os.environ.get("TRITON_INTERPRET") != "1" and not cuda_available():
        os.environ["TRITON_INTERPRET"] = "1"
    if os.environ.get("TRITON_INTERPRET") == "1":
        patch_interpreter_bf16_dot()


def patch_interpreter_bf16_dot() -> None:
    """Make the interpreter's tl.dot read bf16 operands as numbers.

    Triton's interpreter (3.6 to 3.9 at least) stores bf16 as uint16 bit patterns and hands those
    integers to np.matmul, so every bf16 tl.dot is garbage on CPU.  Widening bf16 to fp32 first is
    exact, and the dot accumulates in fp32 anyway.  A no-op where the interpreter is absent.
    """
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except ImportError:
        return
    builder: Any = getattr(interp, "InterpreterBuilder", None)
    if builder is None or getattr(builder.create_dot, "_forkflow_bf16", False):
        return
    original = builder.create_dot

    def widen(h: Any) -> Any:
        if h.dtype != tl.bfloat16:
            return h
        bits = np.asarray(h.data).astype(np.uint32) << np.uint32(16)
        return interp.TensorHandle(bits.view(np.float32), tl.float32)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
        return original(self, widen(a), widen(b), d, *rest)

    create_dot._forkflow_bf16 = True  # type: ignore[attr-defined]
    builder.create_dot = create_dot


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU here (imports torch)."""
    import torch

    return bool(torch.cuda.is_available())


def detect(triton: bool = True) -> DeviceInfo:
    """The device here; `triton=False` for workloads that use PyTorch alone."""
    import torch

    if triton and os.environ.get("TRITON_INTERPRET") == "1":
        return DeviceInfo(Backend.INTERPRETER, "Triton interpreter on CPU")
    if torch.cuda.is_available():
        p: Any = torch.cuda.get_device_properties(0)
        return DeviceInfo(Backend.CUDA, str(p.name), (int(p.major), int(p.minor)),
                          int(p.total_memory))
    return DeviceInfo(Backend.CPU, "CPU")


def missing_packages(names: Iterable[str]) -> tuple[str, ...]:
    """The import names among `names` that are not installed here."""
    return tuple(n for n in names if importlib.util.find_spec(n) is None)


def require_packages(names: Iterable[str], what: str) -> None:
    """Raise a UserError naming the missing packages of the `gpu` extra."""
    missing = missing_packages(names)
    if missing:
        raise UserError(f"{what} needs {', '.join(missing)}, not installed here; "
                        "run: pip install 'forkflow[gpu]'")


def environment() -> dict[str, str]:
    """What a measurement ran on: device, driver, CUDA, torch and triton versions, and the GPU's
    clocks where they can be read (NVML through nvidia-ml-py, else nvidia-smi).  Imports torch."""
    import platform

    import torch

    env: dict[str, str] = {"torch": str(torch.__version__), "python": platform.python_version()}
    try:
        import triton

        env["triton"] = str(triton.__version__)
    except ImportError:
        pass
    if not torch.cuda.is_available():
        env["device"] = "CPU"
        return env
    p: Any = torch.cuda.get_device_properties(0)
    env["device"] = str(p.name)
    env["cuda"] = str(torch.version.cuda or "")
    env.update(_clocks())
    return env


def _clocks() -> dict[str, str]:
    """Driver version and SM/memory clocks (current and maximum, MHz) of GPU 0, or {}."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            drv = pynvml.nvmlSystemGetDriverVersion()
            return {
                "driver": drv.decode() if isinstance(drv, bytes) else str(drv),
                "sm_clock_mhz": str(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "mem_clock_mhz": str(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
                "sm_clock_max_mhz": str(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "power_limit_w": str(pynvml.nvmlDeviceGetEnforcedPowerLimit(h) // 1000),
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001  (no NVML here: try nvidia-smi)
        pass
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=driver_version,clocks.sm,clocks.mem,"
                              "clocks.max.sm,power.limit", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    parts = [x.strip() for x in out.strip().splitlines()[0].split(",")] if out.strip() else []
    keys = ("driver", "sm_clock_mhz", "mem_clock_mhz", "sm_clock_max_mhz", "power_limit_w")
    return {k: v for k, v in zip(keys, parts) if v and "N/A" not in v}


class _Nvml:
    """The four NVML reads the sampler needs, through pynvml (nvidia-ml-py) or, without it,
    through libnvidia-ml.so.1 (which every driver installs) with ctypes."""

    def __init__(self) -> None:
        import ctypes

        try:
            import pynvml

            pynvml.nvmlInit()
            self._py: Any = pynvml
            self._h: Any = pynvml.nvmlDeviceGetHandleByIndex(0)
            return
        except Exception:  # noqa: BLE001  (no pynvml: the library itself)
            self._py = None
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        self._lib: Any = lib
        self._h = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self._h)) != 0:
            raise OSError("no GPU 0 in NVML")

    def _read(self, fn: str, *args: int) -> int:
        import ctypes

        v = ctypes.c_uint()
        if getattr(self._lib, fn)(self._h, *args, ctypes.byref(v)) != 0:
            raise OSError(f"{fn} failed")
        return int(v.value)

    def read(self) -> tuple[int, int, float]:
        """(SM clock MHz, temperature C, power W) now."""
        if self._py is not None:
            p = self._py
            return (int(p.nvmlDeviceGetClockInfo(self._h, p.NVML_CLOCK_SM)),
                    int(p.nvmlDeviceGetTemperature(self._h, p.NVML_TEMPERATURE_GPU)),
                    p.nvmlDeviceGetPowerUsage(self._h) / 1000.0)
        # NVML_CLOCK_SM = 1, NVML_TEMPERATURE_GPU = 0
        return (self._read("nvmlDeviceGetClockInfo", 1), self._read("nvmlDeviceGetTemperature", 0),
                self._read("nvmlDeviceGetPowerUsage") / 1000.0)

    def close(self) -> None:
        if self._py is not None:
            self._py.nvmlShutdown()
        else:
            self._lib.nvmlShutdown()


class ClockSampler:
    """Reads GPU 0's SM clock (MHz), temperature (C) and power (W) through NVML every `period_s`
    while in use, to say what the clocks did during a measurement; it reads only, never sets.
    Without NVML it records nothing."""

    def __init__(self, period_s: float = 0.01) -> None:
        self.period_s = period_s
        self.sm_mhz: list[int] = []
        self.temp_c: list[int] = []
        self.power_w: list[float] = []
        self._stop: Any = None
        self._thread: Any = None
        self._nvml: _Nvml | None = None

    def __enter__(self) -> ClockSampler:
        import threading

        try:
            self._nvml = _Nvml()
        except Exception:  # noqa: BLE001  (no NVML: nothing to read)
            return self
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        assert self._nvml is not None
        while not self._stop.is_set():
            try:
                sm, temp, power = self._nvml.read()
            except Exception:  # noqa: BLE001
                return
            self.sm_mhz.append(sm)
            self.temp_c.append(temp)
            self.power_w.append(power)
            self._stop.wait(self.period_s)

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        if self._nvml is not None:
            self._nvml.close()

    def summary(self) -> dict[str, float]:
        """Means over the samples (empty when nothing was read)."""
        if not self.sm_mhz:
            return {}
        return {"sm_mhz": sum(self.sm_mhz) / len(self.sm_mhz), "temp_c": sum(self.temp_c) / len(self.temp_c),
                "power_w": sum(self.power_w) / len(self.power_w), "reads": float(len(self.sm_mhz))}
