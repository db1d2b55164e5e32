"""One writing `forkflow ingest` per repository at a time.

Two runs on one checkout would both land the same upstream commits, and the second one's
recovery step would settle the first one's units as interrupted.  The lock is `flock` on a file
in the git common directory (shared by every work tree of the repository); the OS drops it when
the process ends, SIGKILL included, so a killed run never leaves it behind.
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.store.locks import Lease, fork_write_lock
from forkflow.store.session import Store

LOCK_NAME = "forkflow-ingest.lock"


@contextmanager
def ingest_lock(repo: Repo) -> Iterator[None]:
    """Hold the repository's ingest lock for the block; a UserError at once when another run holds it."""
    path = repo.git_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes (PEP 446)
    except OSError as e:
        raise UserError(f"cannot open the ingest lock {path} ({e.strerror}); check the permissions of "
                        "the repository's git directory") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise UserError(f"another `forkflow ingest` is running on this repository (pid {pid}); wait for "
                            "it to finish, or stop it and run again (`--dry-run` works meanwhile)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def fork_lock(repo: Repo, store: Store, fork_id: int, what: str = "ingest") -> Iterator[Lease]:
    """The repository's ingest lock and the store's write lock of the fork (one writer per fork
    on a shared store, from any clone: store/locks.py), for the block; yields the lease each
    landing record and push proves (landing/shared.py)."""
    with ingest_lock(repo), fork_write_lock(store, fork_id, what) as lease:
        yield lease


def is_ingest_running(repo: Repo) -> bool:
    """Whether a writing run holds the repository's ingest lock at this moment.

    For messages and pre-checks only: a run may start right after the answer.  The probe holds
    a shared lock for an instant (never blocking); a run starting in that very instant is refused
    as if another one ran, and can simply be started again."""
    try:
        fd = os.open(repo.git_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:  # no lock file: no run ever took it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
