"""Probes measure one commit: the `Probe` protocol and `CommandProbe`, a user's command.

A measurement command runs in a temporary work tree of the commit (`git worktree add`) and
either writes the metrics JSON to the file named by `$FORKFLOW_METRICS_OUT` (or prints it):

    {"metrics": [{"name": "matmul_tflops", "value": 612.0, "unit": "TFLOP/s",
                  "better": "higher", "samples": [611.2, 612.0, 613.1]}]}

or, for pass/fail bisection, exits 0 for pass and anything else for fail.  Exit code 125
means "this commit cannot be tested" (a build break), as with `git bisect run`.
"""
from __future__ import annotations

import enum
import json
import math
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from forkflow.errors import GitError
from forkflow.git.repo import Repo
from forkflow.models import Better, Sha
from forkflow.process import run_shell

UNTESTABLE_RC = 125


class MeasureStatus(str, enum.Enum):
    OK = "ok"
    UNTESTABLE = "untestable"  # exit 125, the tree cannot be built or checked out
    MISSING = "missing"        # ran, but did not report the metric
    ERROR = "error"            # crashed or timed out: worth retrying


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one run of a probe on one commit gave."""

    status: MeasureStatus
    samples: tuple[float, ...] = ()
    passed: bool | None = None
    unit: str = ""
    better: Better | None = None
    detail: str = ""


class Probe(Protocol):
    """Measures one commit once (a run may give several samples)."""

    def measure(self, rev: Sha) -> Measurement: ...

    def close(self) -> None: ...


def parse_metrics(text: str, metric: str) -> Measurement:
    """The named metric from a metrics JSON document (MISSING when absent, ERROR when garbled)."""
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as e:
        return Measurement(MeasureStatus.ERROR, detail=f"output is not metrics JSON ({e})")
    rows = doc.get("metrics") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        return Measurement(MeasureStatus.ERROR, detail="output has no \"metrics\" list")
    for row in rows:
        if not isinstance(row, dict) or row.get("name") != metric:
            continue
        raw = row.get("samples") or [row.get("value")]
        try:
            samples = tuple(float(v) for v in raw)
        except (TypeError, ValueError):
            return Measurement(MeasureStatus.ERROR, detail=f"metric {metric!r} has non-numeric values")
        samples = tuple(v for v in samples if math.isfinite(v))
        if not samples:
            return Measurement(MeasureStatus.MISSING, detail=f"metric {metric!r} has no finite value")
        better = row.get("better")
        return Measurement(MeasureStatus.OK, samples, unit=str(row.get("unit", "")),
                           better=Better(better) if better in ("higher", "lower") else None)
    return Measurement(MeasureStatus.MISSING, detail=f"metric {metric!r} not reported")


class Worktrees:
    """Detached work trees of commits (prefix commits too: objects without a ref), made once each."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.root = Path(tempfile.mkdtemp(prefix="forkflow-bisect-"))
        self._trees: dict[Sha, Path] = {}
        self._lock = threading.Lock()

    def get(self, rev: Sha) -> Path | None:
        """The work tree of `rev`, or None when it cannot be checked out."""
        with self._lock:  # git worktree add takes repository locks: one at a time
            if rev in self._trees:
                return self._trees[rev]
            path = self.root / rev[:16]
            try:
                self.repo.git("worktree", "add", "--detach", "--force", str(path), rev)
            except GitError:
                return None
            self._trees[rev] = path
            return path

    def close(self) -> None:
        """Remove every work tree made here."""
        with self._lock:
            for path in self._trees.values():
                self.repo.git("worktree", "remove", "--force", str(path), check=False)
            self._trees.clear()
            self.repo.git("worktree", "prune", check=False)
            shutil.rmtree(self.root, ignore_errors=True)


class CommandProbe:
    """Runs a shell command in a temporary work tree of each commit."""

    def __init__(self, repo: Repo, command: str, metric: str | None, *, timeout: float = 1800,
                 env: dict[str, str] | None = None) -> None:
        self.repo = repo
        self.command = command
        self.metric = metric  # None: pass/fail by exit code
        self.timeout = timeout
        self.env = env or {}
        self.trees = Worktrees(repo)
        self._root = self.trees.root

    def measure(self, rev: Sha) -> Measurement:
        tree = self.trees.get(rev)
        if tree is None:
            return Measurement(MeasureStatus.UNTESTABLE, detail=f"cannot check out {rev[:12]}")
        fd, out_name = tempfile.mkstemp(prefix="metrics-", suffix=".json", dir=self._root)
        os.close(fd)
        out = Path(out_name)
        env = {**os.environ, **self.env, "FORKFLOW_REV": rev, "FORKFLOW_METRICS_OUT": str(out),
               "FORKFLOW_METRIC": self.metric or ""}
        done = run_shell(self.command, timeout=self.timeout, cwd=tree, env=env)
        if done.timed_out:
            out.unlink(missing_ok=True)
            return Measurement(MeasureStatus.ERROR, detail=f"timed out after {self.timeout:g} s")
        stdout, stderr = done.text()
        try:
            written = out.read_text() if out.stat().st_size else ""
        finally:
            out.unlink(missing_ok=True)
        tail = (stderr or stdout).strip().splitlines()[-1:]
        detail = f"exit {done.rc}" + (f": {tail[0][:200]}" if tail else "")
        if done.rc == UNTESTABLE_RC:
            return Measurement(MeasureStatus.UNTESTABLE, detail=detail)
        if self.metric is None:
            return Measurement(MeasureStatus.OK, passed=done.rc == 0, detail=detail)
        if done.rc != 0:
            return Measurement(MeasureStatus.ERROR, detail=detail)
        return parse_metrics(written or stdout, self.metric)

    def close(self) -> None:
        """Remove every work tree this probe made."""
        self.trees.close()
