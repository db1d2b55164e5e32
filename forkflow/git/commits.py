"""Commits and trees read and written in-process, through a `MemoryPicker`'s object database.

What replay and conflict learning do with libgit2 besides picking: a commit's parents, a file of
its tree, whether two trees agree on some paths, the fork-side-wins merge of a fork commit, and a
commit copied onto another parent.  Callers see shas, tree ids and bytes, never libgit2's objects.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pygit2

from forkflow.git.pick import MemoryPicker, PathConflict, Side, merge_trees
from forkflow.models import Sha

# what libgit2 raises when an object cannot be read (a partial clone, a damaged repository)
ObjectError = pygit2.GitError


def parents_of(picker: MemoryPicker, sha: str, *, strict: bool = False) -> tuple[Sha, ...] | None:
    """The commit's parents (each read, so a missing one raises); None when `sha` names no commit.

    With `strict`, a `sha` that names no object here raises KeyError."""
    commit = picker.repo[sha] if strict else picker.repo.get(sha)
    if not isinstance(commit, pygit2.Commit):
        return None
    return tuple(Sha(str(p.id)) for p in commit.parents)


def committed_file(picker: MemoryPicker, sha: str, path: str) -> bytes | None:
    """The content of `path` in the commit's tree; None when it is not a file there.

    Raises KeyError when `sha` names no object here, ObjectError when the blob cannot be read."""
    commit = picker.repo[sha]
    assert isinstance(commit, pygit2.Commit)
    try:
        obj = commit.tree[path]
    except KeyError:
        return None
    return obj.data if isinstance(obj, pygit2.Blob) else None


def file_at(picker: MemoryPicker, rev: str, path: str) -> bytes | None:
    """The content of `path` in the tree of commit `rev`; None when anything on the way is missing."""
    try:
        obj = picker.repo[rev].peel(pygit2.Commit).tree[path]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return obj.data if isinstance(obj, pygit2.Blob) else None


def changed_paths(picker: MemoryPicker, old_tree: str, new_tree: str) -> set[str]:
    """Every path, old or new name, that differs between the two trees."""
    paths: set[str] = set()
    for d in picker.repo.diff(old_tree, new_tree).deltas:
        paths |= {d.old_file.path, d.new_file.path}
    return paths


def same_entries(picker: MemoryPicker, tree: str, other: str, paths: Iterable[str]) -> bool:
    """Whether the two trees hold the same object with the same mode at each path (or both none)."""
    a, b = picker.repo.get(tree), picker.repo.get(other)
    assert isinstance(a, pygit2.Tree) and isinstance(b, pygit2.Tree)
    return all(_entry(a, p) == _entry(b, p) for p in paths)


def _entry(tree: pygit2.Tree, path: str) -> tuple[str, int] | None:
    try:
        obj = tree[path]
    except (KeyError, TypeError, ValueError):
        return None
    return str(obj.id), int(obj.filemode)


def merge_fork_side(picker: MemoryPicker, onto: Sha, sha: Sha) -> tuple[str, bool]:
    """The whole-tree merge (renames found) of commit `sha` onto commit `onto`, its own first parent
    as the base; where it conflicts, `sha`'s side wins each hunk, and a path still conflicted (a
    deletion on one side) takes `sha`'s side.  Returns (tree, whether anything conflicted)."""
    repo = picker.repo
    tip, commit = repo.get(onto), repo.get(sha)
    assert isinstance(tip, pygit2.Commit) and isinstance(commit, pygit2.Commit)
    base = commit.parents[0].tree if commit.parents else repo.get(repo.TreeBuilder().write())
    index = merge_trees(repo, base, tip.tree, commit.tree)
    forced = False
    if index.conflicts is not None:
        index = merge_trees(repo, base, tip.tree, commit.tree, favor=pygit2.enums.MergeFavor.THEIRS)
        if index.conflicts is not None:
            _take_theirs(index)
        forced = True
    return str(index.write_tree(repo)), forced


def _take_theirs(index: pygit2.Index) -> None:
    """Settle each conflicted path to the fork commit's side (deleted where the fork deleted it)."""
    conflicts = index.conflicts
    assert conflicts is not None
    entries = [(ancestor, ours, theirs) for ancestor, ours, theirs in conflicts]
    for ancestor, ours, theirs in entries:
        path = next(e.path for e in (theirs, ours, ancestor) if e is not None)
        del conflicts[path]
        if theirs is not None:
            index.add(pygit2.IndexEntry(theirs.path, theirs.id, theirs.mode))


def copy_commit(picker: MemoryPicker, sha: Sha, tree: str, parents: Sequence[Sha]) -> Sha:
    """A commit with `sha`'s author, committer and message on `tree` and `parents` (no ref moves)."""
    commit = picker.repo.get(sha)
    assert isinstance(commit, pygit2.Commit)
    oids: list[str | pygit2.Oid] = [pygit2.Oid(hex=p) for p in parents]
    new = picker.repo.create_commit(None, commit.author, commit.committer, commit.message,
                                    pygit2.Oid(hex=tree), oids)
    return Sha(str(new))


def merge_commits(picker: MemoryPicker, ours: Sha, theirs: Sha, *, write: bool = False) -> tuple[str, tuple[PathConflict, ...]]:
    """The whole-tree merge of commit `theirs` into commit `ours` (their merge base found as git
    finds it, renames found), in the picker's object database: (tree, conflicted paths).  With
    `write`, the tree of a clean merge is written; else, and when anything conflicts, it is ""."""
    index = picker.repo.merge_commits(ours, theirs)
    if index.conflicts is not None:
        return "", tuple(_path_conflict(*trio) for trio in index.conflicts)
    return (str(index.write_tree(picker.repo)) if write else ""), ()


def _side(e: pygit2.IndexEntry | None) -> Side | None:
    return Side(str(e.id), int(e.mode), str(e.path)) if e is not None else None


def _path_conflict(base: pygit2.IndexEntry | None, ours: pygit2.IndexEntry | None,
                   theirs: pygit2.IndexEntry | None) -> PathConflict:
    path = next(str(e.path) for e in (ours, theirs, base) if e is not None)
    return PathConflict(path, _side(base), _side(ours), _side(theirs))


def resolved_merge(picker: MemoryPicker, ours: Sha, theirs: Sha, resolutions: Mapping[str, bytes | None]) -> str:
    """The tree of the merge of `theirs` into `ours` with each conflicted path settled by
    `resolutions` (content, or None to delete it); a path left unsettled raises KeyError."""
    repo = picker.repo
    index = repo.merge_commits(ours, theirs)
    conflicts = index.conflicts
    if conflicts is not None:
        trios = [tuple(trio) for trio in conflicts]
        for base, mine, upstream in trios:
            path = next(str(e.path) for e in (mine, upstream, base) if e is not None)
            content = resolutions[path]
            mode = next(e.mode for e in (mine, upstream, base) if e is not None)
            del conflicts[path]
            if content is not None:
                index.add(pygit2.IndexEntry(path, repo.create_blob(content), mode))
    return str(index.write_tree(repo))


def write_merge(picker: MemoryPicker, tree: str, parents: Sequence[Sha], message: str) -> Sha:
    """A merge commit of `parents` on `tree` by the picker's committer (no ref moves)."""
    who = picker.committer()
    oids: list[str | pygit2.Oid] = [pygit2.Oid(hex=p) for p in parents]
    return Sha(str(picker.repo.create_commit(None, who, who, message, pygit2.Oid(hex=tree), oids)))
