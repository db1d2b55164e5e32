"""`forkflow serve` started as a user starts it, for the tests that drive the dashboard over HTTP."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def forkflow_command() -> list[str]:
    exe = Path(sys.executable).parent / "forkflow"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]


@contextmanager
def serving(args: list[str], cwd: Path, probe: str, log_path: Path,
            env: Mapping[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`forkflow serve ARGS --port P` in `cwd`, once `probe` (a path) answers 200: (base URL, process);
    stopped (terminate, then kill) when the block ends.  Its output goes to `log_path`."""
    port = free_port()
    with log_path.open("w") as log:
        proc = subprocess.Popen([*forkflow_command(), "serve", *args, "--port", str(port)], cwd=cwd,
                                stdout=log, stderr=subprocess.STDOUT, text=True,
                                env=dict(env) if env is not None else None)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(base + probe, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("forkflow serve did not start: " + log_path.read_text())
            time.sleep(0.2)
        try:
            yield base, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
