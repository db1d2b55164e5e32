"""Exceptions.  Only broken situations raise; expected outcomes are return values."""
from __future__ import annotations


class ForkflowError(Exception):
    """Base class of every error forkflow raises on purpose."""


class UserError(ForkflowError):
    """Something the user can fix; the message says what is wrong and what to do."""


class GitError(ForkflowError):
    """A git command failed in a way that is not the user's to fix."""

    def __init__(self, cmd: list[str], returncode: int, stdout: str, stderr: str) -> None:
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(self._format())

    @property
    def reason(self) -> str:
        """git's own one-line reason: its first `fatal:`/`error:` line (later lines are advice)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        for line in lines:
            head, sep, rest = line.partition(":")
            if sep and head in ("fatal", "error") and rest.strip():
                return rest.strip()
        return lines[0] if lines else f"exit {self.returncode}"

    def _format(self) -> str:
        def block(name: str, text: str) -> str:
            text = text.strip()
            if not text:
                return f"{name}: (none)"
            return f"{name}:\n    " + text.replace("\n", "\n    ")

        return "\n".join(
            [
                f"command: {' '.join(self.cmd)}",
                f"return code: {self.returncode}",
                block("stdout", self.stdout[-4000:]),
                block("stderr", self.stderr[-4000:]),
            ]
        )


class StoreError(ForkflowError):
    """The store cannot be used (locked, newer schema, unreachable)."""
