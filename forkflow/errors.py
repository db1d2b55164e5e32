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
