"""Whether anything in a work tree changed since a point in time, from Linux's inotify: a command
that wrote nothing leaves no event, and then the scan of every file for what it changed is moot.

Every folder of the tree is watched for writes, creations, deletions, moves and attribute changes,
and for any file opened for writing being closed (which covers writes through mmap, which
inotify does not report themselves).  Not seen: a file changed through a hard link from outside
the tree, or on a network file system by another machine; a work tree moved for a command is
not shared so."""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from collections.abc import Iterable
from pathlib import Path

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
MAX_DIRS = 20_000  # a tree with more folders is scanned, not watched (inotify watches are a shared budget)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


class TreeWatch:
    """The folders of one tree, watched; `changed()` says whether anything happened since `settle()`."""

    def __init__(self, fd: int, libc: ctypes.CDLL, root: Path) -> None:
        self._fd = fd
        self._libc = libc
        self.root = root
        self._wds: set[int] = set()  # the watches made (those of folders since removed too)

    @classmethod
    def start(cls, root: Path) -> TreeWatch | None:
        """Watch every folder under `root` (not `.git`); None where inotify is not to be had (not
        Linux, no watches left, too many folders)."""
        libc = _libc()
        if libc is None:
            return None
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            return None
        watch = cls(fd, libc, root)
        try:
            for folder, dirs, _ in os.walk(root):
                if folder == str(root):
                    dirs[:] = [d for d in dirs if d != ".git"]
                if not watch._add(folder):
                    watch.close()
                    return None
        except OSError:
            watch.close()
            return None
        watch.settle()
        return watch

    def _add(self, folder: str | Path) -> bool:
        if len(self._wds) >= MAX_DIRS:
            return False
        wd = int(self._libc.inotify_add_watch(self._fd, os.fsencode(folder), MASK))
        if wd < 0:
            # ENOENT/ENOTDIR: gone or not a folder, nothing to watch; anything else (ENOSPC: no watches left) is fatal
            return ctypes.get_errno() in (errno.ENOENT, errno.ENOTDIR)
        self._wds.add(wd)
        return True

    def add_parents(self, paths: Iterable[str]) -> bool:
        """Watch the folders of `paths` (relative to the root) too: a checkout may have made them
        (every folder it makes holds a file it wrote; watching a watched folder again is a no-op).
        False when a folder cannot be watched: stop using the watch then."""
        folders: set[str] = set()
        for path in paths:
            folder = path.rpartition("/")[0]
            while folder and folder not in folders:
                folders.add(folder)
                folder = folder.rpartition("/")[0]
        return all(self._add(self.root / folder) for folder in sorted(folders))

    def changed(self) -> bool:
        """Whether anything was written, made, removed or moved in the tree since `settle()`
        (an overflowed event queue holds events too: True)."""
        return self._drain()

    def settle(self) -> None:
        """Forget the events so far (the caller's own writes)."""
        self._drain()

    def _drain(self) -> bool:
        seen = False
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return seen
            if not data:
                return seen
            seen = True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
