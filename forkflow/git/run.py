"""The only place forkflow starts git processes."""
from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from forkflow.errors import GitError, UserError

# Pin what git prints so parsing never depends on the user's locale or config.
_ENV_OVERRIDES = {
    "LC_ALL": "C",
    "LANG": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
}


# Variables that point git at another repository, index or object store.  A git hook (or any
# caller) that runs forkflow exports some of them; left in place they make every call act on the
# hook's repository instead of the one forkflow opened.  Cleared as pre-commit's no_git_env() does;
# the author/committer identity and GIT_SSH*/GIT_ASKPASS stay (they say who and how, not where).
_LOCATION_VARS = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
    "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_IMPLICIT_WORK_TREE",
    "GIT_QUARANTINE_PATH", "GIT_GRAFT_FILE", "GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS",
    "GIT_SHALLOW_FILE", "GIT_INTERNAL_SUPER_PREFIX", "GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS",
})


def no_git_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without the variables that redirect git."""
    env = dict(os.environ if base is None else base)
    for name in _LOCATION_VARS:
        env.pop(name, None)
    return env


def refuse_option_like(value: str, what: str) -> str:
    """`value` unchanged, or a UserError when git would read it as an option (`--upload-pack=...`
    as a remote name or URL runs a command)."""
    if value.startswith("-"):
        raise UserError(f"{what} '{value}' starts with '-', which git would read as an option; "
                        "pass a remote name, URL or path that does not")
    return value


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = no_git_env()
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


class GitStream:
    """`git args...` whose output is read while git still writes it: iterate for chunks of stdout,
    then `rc` and `stderr`.  The caller parses while git works (on another core), where
    `run_git_bytes` waits for the whole output first.  Threads write `input` and drain stdout, so
    git never waits on a full pipe while the caller parses."""

    CHUNK = 1 << 16

    def __init__(self, *args: str, cwd: Path | str, input: bytes | None = None) -> None:
        self.cmd = ["git", *args]
        self.rc: int | None = None
        self.stderr = b""
        try:
            self._proc = subprocess.Popen(self.cmd, cwd=str(cwd), env=git_env(), stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError as e:
            raise GitError(self.cmd, 127, "", f"cannot run git: {e}") from e
        self._errors: list[bytes] = []
        self._chunks: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._feed, args=(input or b"",), daemon=True),
                         threading.Thread(target=self._drain_err, daemon=True),
                         threading.Thread(target=self._drain_out, daemon=True)]
        for t in self._threads:
            t.start()

    def _feed(self, data: bytes) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            stdin.close()
        except (BrokenPipeError, OSError):  # git stopped reading: its exit status says why
            pass

    def _drain_err(self) -> None:
        assert self._proc.stderr is not None
        self._errors.append(self._proc.stderr.read())

    def _drain_out(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            while chunk := os.read(stdout.fileno(), self.CHUNK):
                self._chunks.put(chunk)
        finally:
            self._chunks.put(b"")

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self._chunks.get():
            yield chunk
        self.rc = self._proc.wait()
        for t in self._threads:
            t.join()
        assert self._proc.stdout is not None
        self._proc.stdout.close()
        self.stderr = b"".join(self._errors)

    def close(self) -> None:
        """Stop git if the caller stopped reading early (a parse error), and reap it; a no-op once
        the output was read to its end."""
        if self.rc is not None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
        self.rc = self._proc.wait()
        for t in self._threads:
            t.join(timeout=5)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()


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
