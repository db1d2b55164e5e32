"""The registry of the L1 work trees forkflow made: the only trees it ever prunes.

An L1 work tree is `tree` inside a temporary folder `forkflow-l1-*`.  Before `git worktree add`
makes it, it is written in the registry (`registry_dir(repo)`, one entry file per tree: its path,
its owner's pid and the mark its commands carry, `forkflow.process.RUN_MARK`), and its owner
holds an exclusive `flock` on that entry for as long as it lives.  An entry whose lock can be
taken belongs to a run that is gone (SIGKILL leaves no chance to clean up).

`prune_stale` removes exactly those trees and kills what still runs for them.  It never touches
a tree it did not register: a checkout whose path holds `forkflow-l1-` is nobody's L1 tree (the
path fragment once sent ingest to kill itself and remove the checkout's parent folder), a live
owner's tree stays (an ingest and a `replay --gate` at once), and neither the repository's own
work tree nor a folder above it is ever removed, whatever an entry says.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from forkflow.git.repo import Repo
from forkflow.process import kill_marked, new_mark, own_processes
from forkflow.state import state_dir

PREFIX = "forkflow-l1-"
TREE = "tree"
ENTRY_MAX = 65536  # an entry is a few hundred bytes; more is not one of ours
NEW_GRACE_S = 60.0  # an entry still under its temporary name is left alone this long


def registry_dir(repo: Repo) -> Path:
    """Where the registry of `repo` lives: forkflow's state folder in the git common directory,
    shared by every work tree of the repository (the one place that says it)."""
    return state_dir(repo) / "l1-trees"


class L1Tree:
    """One registered L1 work tree (`path`, not made yet), held by this process until `release`."""

    def __init__(self, repo: Repo, path: Path, mark: str, entry: Path, fd: int) -> None:
        self.repo, self.path, self.mark = repo, path, mark
        self._entry, self._fd = entry, fd

    def release(self) -> None:
        """Remove the tree and its folder, then its entry; the lock goes last."""
        if self._fd < 0:
            return
        _remove_tree(self.repo, self.path)
        try:
            self._entry.unlink()
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = -1


def register(repo: Repo) -> L1Tree:
    """A fresh L1 tree's place (an empty temporary folder) and its entry, held by this process."""
    reg = registry_dir(repo)
    reg.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    path, mark = folder / TREE, new_mark()
    doc = {"path": str(path), "pid": os.getpid(), "uid": os.getuid(), "mark": mark}
    # written and locked under a name prune does not read, then renamed: it never sees an
    # entry that is not locked yet
    tmp = reg / f".{folder.name}.new"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps(doc).encode())
        entry = reg / f"{folder.name}.json"
        os.replace(tmp, entry)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return L1Tree(repo, path, mark, entry, fd)


def prune_stale(repo: Repo) -> list[Path]:
    """Remove the registered L1 trees whose owner is gone and kill what still runs for them; the
    trees removed.  Unregistered trees, and trees of a live owner, are left alone."""
    reg = registry_dir(repo)
    removed: list[Path] = []
    if reg.is_dir():
        for entry in sorted(reg.iterdir()):
            if entry.suffix == ".new" and _younger_than(entry, NEW_GRACE_S):
                continue  # being written: its owner may not hold its lock yet
            if entry.suffix in (".json", ".new") and not entry.is_symlink():
                path = _prune_entry(repo, entry)
                if path is not None:
                    removed.append(path)
    repo.prune_worktrees()
    return removed


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.lstat().st_mtime < seconds
    except OSError:
        return True  # gone: nothing to do


def _prune_entry(repo: Repo, entry: Path) -> Path | None:
    try:
        fd = os.open(entry, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None  # released meanwhile
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # its owner lives
        if os.fstat(fd).st_nlink == 0:
            return None  # its owner released it while we waited
        doc = _read_entry(fd)
        path = _own_tree(repo, doc)
        if path is not None:
            kill_marked(str(doc["mark"]))
            kill_processes_in(path)
            _remove_tree(repo, path)
        entry.unlink(missing_ok=True)
        return path
    finally:
        os.close(fd)


def _read_entry(fd: int) -> dict[str, Any]:
    raw = os.read(fd, ENTRY_MAX + 1)
    try:
        doc = json.loads(raw.decode("utf-8")) if len(raw) <= ENTRY_MAX else None
    except ValueError:
        doc = None
    return doc if isinstance(doc, dict) else {}


def _own_tree(repo: Repo, doc: dict[str, Any]) -> Path | None:
    """The entry's tree when it has the shape forkflow gives its trees and lies outside the
    repository; None for anything else (nothing is killed or removed for it)."""
    raw, mark = doc.get("path"), doc.get("mark")
    if not isinstance(raw, str) or not isinstance(mark, str) or not mark:
        return None
    path = Path(raw)
    if not path.is_absolute() or path.name != TREE or not path.parent.name.startswith(PREFIX):
        return None
    if path.parent.is_symlink() or path.is_symlink():
        return None
    folder = Path(os.path.realpath(path.parent))
    mine = [Path(os.path.realpath(p)) for p in (repo.path, repo.git_dir)]
    if any(m.is_relative_to(folder) for m in mine):
        return None  # the checkout, its git directory, or a folder above them
    for tree, branch in repo.worktrees():
        if branch is not None and Path(os.path.realpath(tree)).is_relative_to(folder):
            return None  # a branch checked out there: a person's work tree, not an L1 one
    return path


def _remove_tree(repo: Repo, path: Path) -> None:
    """Remove the L1 tree `path` and then its folder, if that is left empty."""
    repo.remove_worktree(path)
    if path.exists() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass  # something else is in it: not ours to remove


def kill_processes_in(tree: Path) -> None:
    """SIGKILL every process of this user whose working directory is inside `tree` (Linux /proc)."""
    root = str(tree)
    for pid, folder in own_processes():
        try:
            cwd = os.readlink(os.path.join(folder, "cwd"))
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
