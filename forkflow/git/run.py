"""The only place forkflow starts git processes."""
from __future__ import annotations

import os
import subprocess
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
