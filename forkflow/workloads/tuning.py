"""Autotune once, then measure with the stored choice: L2 series that do not depend on the
autotuner's luck.

Triton's `@autotune` times its candidate configs in every new process and keeps the fastest; when
two candidates are within noise of each other, each process may keep another one, and the
kernel's speed moves by several percent between two runs of the same commit (8-9% was seen on
an H200 for a 4096^3 bf16 matmul).  A nightly series built on that mixes configs silently.

Here a choice is made once per `TuneKey` (kernel, shape, device, software version), written to a
JSON store, and reused by every later process.  The software version is the public part of the
torch and triton versions (`3.6.0+git1a2b3c` -> `3.6.0`), so the nightly runs over a Triton
fork's commits keep the same config, while a release bump tunes again; that new choice shows in
the metric's context (`config`), and `forkflow detect` reports it as an event of its own instead
of reading it as a regression or improvement.

The store is `$FORKFLOW_TUNE_STORE`, else `~/.cache/forkflow/tuning.json`; keep it on a disk that
outlives the runner (or commit it to the fork) so that the choice survives machines.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forkflow.workloads.junit import write_atomic

STORE_ENV = "FORKFLOW_TUNE_STORE"


@dataclass(frozen=True, slots=True)
class TuneKey:
    """What a choice is valid for."""

    kernel: str    # "matmul"
    shape: str     # "8192x8192x8192"
    dtype: str     # "bf16"
    device: str    # "NVIDIA H200"
    software: str  # "torch 2.11.0, triton 3.6.0"

    @property
    def text(self) -> str:
        return " | ".join((self.kernel, self.shape, self.dtype, self.device, self.software))


@dataclass(frozen=True, slots=True)
class Choice:
    """A stored choice: the config's parameters and what the tuning measured."""

    params: tuple[tuple[str, int], ...]    # BLOCK_M=128, ..., num_warps=8, num_stages=3
    tuned_at: int = 0                      # unix seconds
    timings_ms: tuple[tuple[str, float], ...] = ()  # every candidate's median, label -> ms

    @property
    def label(self) -> str:
        return config_label(dict(self.params))

    def to_json(self) -> dict[str, Any]:
        return {"params": dict(self.params), "tuned_at": self.tuned_at,
                "timings_ms": dict(self.timings_ms)}

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Choice:
        params = doc.get("params")
        if not isinstance(params, dict) or not all(isinstance(v, int) for v in params.values()):
            raise ValueError(f"bad stored choice {doc!r}")
        timings = doc.get("timings_ms") or {}
        return Choice(tuple(sorted((str(k), int(v)) for k, v in params.items())),
                      int(doc.get("tuned_at", 0)),
                      tuple((str(k), float(v)) for k, v in timings.items()))


def public_version(version: str) -> str:
    """`3.6.0+git1a2b3c` -> `3.6.0`: the local part names a build, not a release."""
    return version.split("+", 1)[0]


def software_version(torch_version: str, triton_version: str) -> str:
    return f"torch {public_version(torch_version)}, triton {public_version(triton_version)}"


# The order a config is written in: tile sizes first, then launch parameters.
_ORDER = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")


def config_label(params: Mapping[str, int]) -> str:
    """`BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 GROUP_M=8 num_warps=8 num_stages=3` (known keys first)."""
    keys = [k for k in _ORDER if k in params] + sorted(k for k in params if k not in _ORDER)
    return " ".join(f"{k}={params[k]}" for k in keys)


def default_store() -> Path:
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env)
    return Path.home() / ".cache" / "forkflow" / "tuning.json"


class TuneStore:
    """The JSON file of choices, keyed by `TuneKey.text`."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_store()

    def _read(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read the tuning store {self.path}: {e}; remove it to tune again") from e
        return doc if isinstance(doc, dict) else {}

    def get(self, key: TuneKey) -> Choice | None:
        doc = self._read().get(key.text)
        return None if doc is None else Choice.from_json(doc)

    def put(self, key: TuneKey, choice: Choice) -> None:
        doc = self._read()
        doc[key.text] = choice.to_json()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


def choose(candidates: Sequence[Mapping[str, int]], time_ms: Callable[[Mapping[str, int]], float],
           rounds: int = 2) -> Choice:
    """Time every candidate `rounds` times in alternation and keep the one with the lowest
    median; a candidate that fails (does not compile, out of resources) is left out."""
    got: dict[str, list[float]] = {}
    by_label = {config_label(c): c for c in candidates}
    for _ in range(rounds):
        for label, cand in by_label.items():
            if label in got and not got[label]:
                continue  # failed before
            try:
                got.setdefault(label, []).append(time_ms(cand))
            except Exception:  # noqa: BLE001  (a config the device refuses)
                got[label] = []
    timed = {label: sorted(v)[len(v) // 2] for label, v in got.items() if v}
    if not timed:
        raise RuntimeError("no candidate config ran")
    best = min(timed, key=lambda k: timed[k])
    return Choice(tuple(sorted(by_label[best].items())), int(time.time()),
                  tuple(sorted(timed.items())))


def stored_or_tuned(store: TuneStore, key: TuneKey, candidates: Sequence[Mapping[str, int]],
                    time_ms: Callable[[Mapping[str, int]], float], retune: bool = False) -> tuple[Choice, str]:
    """The stored choice for `key` ("stored"), or a new one tuned and stored now ("tuned")."""
    if not retune:
        found = store.get(key)
        if found is not None:
            return found, "stored"
    choice = choose(candidates, time_ms)
    store.put(key, choice)
    return choice, "tuned"
