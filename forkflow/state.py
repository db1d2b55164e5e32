"""Where forkflow keeps its own state: `<git-common-dir>/forkflow/`, out of the work tree.

The store (`forkflow.db` by default), L1 logs, run artifacts, the replay's scratch repositories,
the dashboard's actions.log, the markdown issue sink's files and the L1 work trees live there.
No checkout, pick or work-tree update writes under a repository's git directory, so nothing an
upstream commit carries can replace them (a commit adding `.forkflow/forkflow.db-journal` was
rolled back into the store when the state lived in `<checkout>/.forkflow/`).  The common
directory is shared by every work tree of the repository, as the ingest lock is.

`migrate_state` moves a checkout's old `.forkflow/` there the first time forkflow opens the fork.
"""
from __future__ import annotations

import errno
import fcntl
import filecmp
import os
import shutil
from pathlib import Path

from forkflow.config import STATE_DIR
from forkflow.errors import UserError
from forkflow.git.repo import Repo

OLD_STATE_DIR = ".forkflow"  # where the state lived, inside the work tree, before it moved
STORE_NAME = "forkflow.db"
_INCOMING = ".incoming-"
MOVED_MARK = "moved-out-of-work-tree"  # written once the old folder is moved (or there was none)  # a copy across file systems, renamed into place once whole


def state_dir(where: Repo | Path) -> Path:
    """The folder of forkflow's state for the repository at `where` (not created here)."""
    repo = where if isinstance(where, Repo) else Repo(Path(where))
    return repo.git_dir / STATE_DIR


def default_store_url(state: Path) -> str:
    """The store's URL when neither `--store`, FORKFLOW_STORE nor `[store] url` names one."""
    return f"sqlite:///{state / STORE_NAME}"


def migrate_state(repo: Repo, old_root: Path) -> str | None:
    """Move `<old_root>/.forkflow/` into the state folder; one line saying so, None when there was nothing.

    Runs once per repository: a mark in the state folder says it is done (a fork set up after this
    change gets the mark at once), so upstream content under `.forkflow/` is never taken in.  Each
    entry is moved by a rename (or copied beside its place and renamed into it, across file
    systems) before the old one is removed, and the mark is written last, so a run killed midway
    is completed by the next one.  Files git tracks under the old folder are repository content,
    not forkflow's: they stay.
    Raises UserError when an entry is in both places with different content (two stores)."""
    new = state_dir(repo)
    if (new / MOVED_MARK).exists():  # moved once: a `.forkflow/` that shows up later is not forkflow's
        return None
    old = old_root.resolve() / OLD_STATE_DIR
    new.mkdir(parents=True, exist_ok=True)
    with open(new / ".migrate.lock", "w") as lock:  # two forkflows opening the fork at once: one moves
        fcntl.flock(lock, fcntl.LOCK_EX)
        moved = 0
        if old.is_dir() and not old.is_symlink() and not (new / MOVED_MARK).exists():
            tracked = _tracked_under(repo, old)
            moved = _merge_into(old, new, tracked)
            ignore = old / ".gitignore"
            if not any(p != ignore for p in old.iterdir()) and ignore not in tracked:
                shutil.rmtree(old, ignore_errors=True)
        (new / MOVED_MARK).write_text(f"{old}\n", encoding="utf-8")  # last: a run killed before it moves the rest
    if not moved:
        return None
    return f"moved forkflow's state from {old} to {new}, out of the work tree that upstream commits are written to"


def _tracked_under(repo: Repo, old: Path) -> set[Path]:
    out = repo.git("ls-files", "-z", "--cached", "--full-name", "--", str(old), check=False)
    return {repo.path / name for name in out.split("\0") if name}


def _is_dir(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink()


def _merge_into(src_dir: Path, dst_dir: Path, tracked: set[Path]) -> int:
    """Move what `src_dir` holds (less what git tracks) into `dst_dir`, merging folders; how many moved."""
    moved = 0
    # a store's journal and write-ahead log go before the store itself: never a store without them
    for src in sorted(src_dir.iterdir(), key=lambda p: (p.name == STORE_NAME, p.name)):
        if src in tracked or src.name.startswith(_INCOMING):
            continue
        if src.name == ".gitignore" and src_dir.name == OLD_STATE_DIR:
            continue  # what init wrote to keep the old folder out of commits: it goes with the folder
        dst = dst_dir / src.name
        if _is_dir(src) and (_is_dir(dst) or any(t.is_relative_to(src) for t in tracked)):
            dst.mkdir(exist_ok=True)
            moved += _merge_into(src, dst, tracked)
            if not any(src.iterdir()):
                src.rmdir()
            continue
        moved += _move(src, dst)
    return moved


def _move(src: Path, dst: Path) -> int:
    if os.path.lexists(dst):
        if src.is_file() and dst.is_file() and not src.is_symlink() and filecmp.cmp(src, dst, shallow=False):
            src.unlink()  # a run killed after the rename into place: the old copy is all that is left
            return 1
        what = "forkflow store" if src.name == STORE_NAME else "file"
        raise UserError(f"both {src} and {dst} exist and differ (a {what} in the old and the new state "
                        f"folder); keep one of them (move the other away) and run forkflow again")
    try:
        os.replace(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise UserError(f"cannot move {src} to {dst} ({e.strerror}); move it by hand and run forkflow "
                            "again") from e
        _copy_then_rename(src, dst)
    return 1


def _copy_then_rename(src: Path, dst: Path) -> None:
    """Across file systems: a whole copy beside `dst`, renamed into place, then the original removed."""
    tmp = dst.with_name(_INCOMING + dst.name)
    if _is_dir(tmp):
        shutil.rmtree(tmp)  # a copy a killed run left half-made
    elif os.path.lexists(tmp):
        tmp.unlink()
    if _is_dir(src):
        shutil.copytree(src, tmp, symlinks=True)
        os.replace(tmp, dst)
        shutil.rmtree(src)
    else:
        shutil.copy2(src, tmp, follow_symlinks=False)
        os.replace(tmp, dst)
        src.unlink()
