"""A work tree moved from commit to commit in-process (libgit2), as `git checkout --force --detach`
followed by `git clean -ffdx` would move it, for a caller that runs a command in it per commit."""
from __future__ import annotations

import shutil
from pathlib import Path

import pygit2

from forkflow.git.watch import TreeWatch


class WorkTreeMover:
    """Moves one work tree at a time; once libgit2 failed to move one, it never tries again and
    the caller moves the tree with git."""

    def __init__(self) -> None:
        self._wt: pygit2.Repository | None = None  # the work tree last moved, opened in this process
        self._usable = True  # moved by libgit2 until that fails once
        self._watch: TreeWatch | None = None  # what happened in the work tree since the last move
        self._watchable = True  # until a watch could not be had once

    @property
    def opened(self) -> bool:
        """A work tree is open in this process: the last move was libgit2's."""
        return self._wt is not None

    def forget(self) -> None:
        """The work tree is gone: the next move opens the one it is given."""
        self._wt = None
        self._unwatch()

    def _unwatch(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def move(self, tree: Path, rev: str) -> bool:
        """`git checkout --force --detach rev && git clean -ffdx` in `tree`, done by libgit2 in this
        process (two git processes a unit: 11% of an ingest's wall time on a loaded machine).  It
        rewrites only the paths that differ from the last commit or that the last command changed,
        so a path a sparse checkout or a partial clone left out stays out.  Not where git would
        run a filter driver (git-lfs and the like, which libgit2 does not run), and never again
        once it failed: False, and the caller has git do it.

        The scan for what the command changed (every file stat'ed, every folder read: 17 ms a
        move on a real fork) is skipped when the work tree's watch saw nothing happen in it since
        the last move (see `forkflow.git.watch`)."""
        if not self._usable:
            return False
        try:
            return self._move(tree, rev)
        finally:
            if not self._usable:
                self._unwatch()

    def _move(self, tree: Path, rev: str) -> bool:
        try:
            if self._wt is None:
                wt = pygit2.Repository(str(tree))
                if any(e.name.startswith("filter.") for e in wt.config):
                    self._usable = False
                    return False
                self._wt = wt
            commit = self._wt.get(rev)
            if not isinstance(commit, pygit2.Commit):
                raise KeyError(rev)
            head = self._wt.head.peel(pygit2.Commit)
            paths = {d.new_file.path for d in head.tree.diff_to_tree(commit.tree).deltas}
            quiet = self._watch is not None and self._watch.root == tree and not self._watch.changed()
            if not quiet:
                for path, flags in self._wt.status(untracked_files="normal", ignored=True).items():
                    if flags & _LEFT_BEHIND:
                        _remove(tree / path)
                    elif flags & _CHANGED and self._can_restore(head.tree, path):
                        paths.add(path)
            if paths:
                # the paths are literal: libgit2 would otherwise match each file against every one as a glob
                self._wt.checkout_tree(commit.tree, paths=sorted(paths), strategy=_LITERAL_FORCE)
            self._wt.set_head(commit.id)
            self._watch_after(tree, paths)
        except (pygit2.GitError, KeyError, OSError, ValueError):
            self._usable = False
            return False
        return True

    def _watch_after(self, tree: Path, paths: set[str]) -> None:
        """The work tree is as the commit has it: from here on, what happens in it is the command's."""
        if self._watch is not None and self._watch.root != tree:
            self._unwatch()
        if self._watch is None:
            self._watch = TreeWatch.start(tree) if self._watchable else None
            self._watchable = self._watch is not None
        elif not self._watch.add_parents(paths):
            self._unwatch()
            self._watchable = False
        else:
            self._watch.settle()  # this move's own writes

    def _can_restore(self, tree: pygit2.Tree, path: str) -> bool:
        """False for a file left out of the work tree whose blob this clone lacks (sparse, partial)."""
        assert self._wt is not None
        try:
            return tree[path].id in self._wt.odb
        except KeyError:
            return True  # not in the commit: the checkout removes it


_LITERAL_FORCE = pygit2.enums.CheckoutStrategy.FORCE | pygit2.enums.CheckoutStrategy.DISABLE_PATHSPEC_MATCH
_LEFT_BEHIND = pygit2.enums.FileStatus.WT_NEW | pygit2.enums.FileStatus.IGNORED
_CHANGED = (pygit2.enums.FileStatus.WT_MODIFIED | pygit2.enums.FileStatus.WT_DELETED
            | pygit2.enums.FileStatus.WT_TYPECHANGE | pygit2.enums.FileStatus.INDEX_NEW
            | pygit2.enums.FileStatus.INDEX_MODIFIED | pygit2.enums.FileStatus.INDEX_DELETED
            | pygit2.enums.FileStatus.INDEX_TYPECHANGE | pygit2.enums.FileStatus.INDEX_RENAMED)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
