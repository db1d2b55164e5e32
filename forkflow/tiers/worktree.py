"""Cached work trees: one detached `git worktree` per fork commit, reused while it is clean.

They live under the repository's git dir (`<git-common-dir>/forkflow/worktrees/<sha>`), out
of the user's checkout, so `git status` stays quiet.  A cached tree is reused only when its
HEAD is still the commit and no tracked file was modified; build outputs (ignored or
untracked files) are kept on purpose, which is what makes the cache worth having.  The least
recently used trees beyond `keep` are removed, but never one another forkflow still works in:
`using` holds a shared lock on the tree (`<sha>.use`) for as long as the caller works there, and
pruning skips a tree whose lock it cannot take alone.  A file lock serialises concurrent
forkflows' checkouts.
"""
from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.models import Sha

KEEP = 6


class WorktreeCache:
    def __init__(self, repo: Repo, keep: int = KEEP) -> None:
        self.repo = repo
        self.keep = keep
        self.root = repo.git_dir / "forkflow" / "worktrees"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _is_reusable(self, path: Path, sha: Sha) -> bool:
        if not (path / ".git").exists():
            return False
        try:
            head = Repo(path).git("rev-parse", "HEAD").strip()
            dirty = Repo(path).git("status", "--porcelain", "--untracked-files=no").strip()
        except (GitError, UserError):
            return False
        return head == sha and not dirty

    def checkout(self, sha: Sha) -> Path:
        """A work tree of `sha` (a full commit sha), created or reused; see `using` to keep it."""
        with self.using(sha) as path:
            return path

    @contextmanager
    def using(self, sha: Sha) -> Iterator[Path]:
        """A work tree of `sha`, created or reused, that no other forkflow removes until the block ends."""
        path = self.root / sha
        with self._locked():
            use = open(self.root / f"{sha}.use", "w")  # noqa: SIM115 - held past this block, closed below
            fcntl.flock(use, fcntl.LOCK_SH)  # taken under the cache lock: no prune sees the tree unused
            try:
                self._prepare(path, sha, use)
            except BaseException:
                use.close()
                raise
        try:
            yield path
        finally:
            use.close()  # releases the shared lock

    def _prepare(self, path: Path, sha: Sha, use: IO[str]) -> None:
        if self._is_reusable(path, sha):
            os.utime(path)
            return
        if path.exists() and self._busy(use):
            raise UserError(f"the work tree of {sha[:12]} ({path}) is in use by another forkflow run and has "
                            "changes to tracked files; run again when that run ends")
        self._remove(path)
        try:
            self.repo.git("worktree", "add", "--detach", "--force", str(path), sha)
        except GitError as e:
            raise UserError(f"cannot check out {sha[:12]} into a work tree ({e.reason}); "
                            f"free disk space or remove {self.root} and retry") from e
        self._prune(keep_also=path)

    @staticmethod
    def _busy(use: IO[str]) -> bool:
        """Whether another process holds the tree besides our shared lock `use`: ours upgrades to
        exclusive only when no other holder remains (under the cache lock: no new holder comes)."""
        try:
            fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(use, fcntl.LOCK_SH)
        return False

    def _remove(self, path: Path) -> None:
        if path.exists() or path.is_symlink():
            self.repo.git("worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)
        self.repo.git("worktree", "prune", check=False)

    def _prune(self, keep_also: Path) -> None:
        trees = [p for p in self.root.iterdir() if p.is_dir() and p != keep_also]
        trees.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for old in trees[max(0, self.keep - 1):]:
            with open(self.root / f"{old.name}.use", "w") as use:
                try:
                    fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # another forkflow works in it: pruned by a later checkout
                self._remove(old)
            (self.root / f"{old.name}.use").unlink(missing_ok=True)

