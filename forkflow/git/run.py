"""The only place forkflow starts git processes."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from forkflow.errors import GitError

# Pin what git prints so parsing never depends on the user's locale or config.
_ENV_OVERRIDES = {
    "LC_ALL": "C",
    "LANG": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
}


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_ENV_OVERRIDES)
    if extra:
        env.update(extra)
    return env


def run_git_bytes(
    *args: str,
    cwd: Path | str,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> tuple[int, bytes, bytes]:
    """Run `git args...` in cwd; return (rc, stdout, stderr) as bytes."""
    cmd = ["git", *args]
    try:
        proc = subprocess.run(
            cmd,
            cwd=str(cwd),
            input=input,
            capture_output=True,
            env=git_env(env),
            timeout=timeout,
        )
    except FileNotFoundError as e:  # git itself missing
        raise GitError(cmd, 127, "", f"git not found: {e}") from e
    if check and proc.returncode != 0:
        raise GitError(
            cmd,
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )
    return proc.returncode, proc.stdout, proc.stderr


def run_git(
    *args: str,
    cwd: Path | str,
    input: str | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> str:
    """Run `git args...` in cwd and return stdout decoded as UTF-8 (invalid bytes replaced)."""
    _, out, _ = run_git_bytes(
        *args,
        cwd=cwd,
        input=input.encode("utf-8", "surrogateescape") if input is not None else None,
        env=env,
        check=check,
        timeout=timeout,
    )
    return out.decode("utf-8", "replace")


def git_version() -> str:
    try:
        return run_git("--version", cwd=".").strip()
    except GitError as e:
        return f"unknown ({e.stderr.strip()})"
