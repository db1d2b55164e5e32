"""In-memory cherry-picking with libgit2's three-way tree merge: no work tree, no index file.

Picking upstream commit C onto tree T is the merge of T and C's tree with C's mainline parent
as the ancestor (what `git cherry-pick -m 1` does), computed by `Repository.merge_trees`.
Results are tree ids; commits are written only for a unit that is ready to be validated.

With `batch_writes=True` every object the picker writes (trees of each pick, blobs of
resolutions, commits) is held in memory until `flush()` writes them all as one pack: one file
instead of a loose object file per tree and commit, and the trees of in-memory probes that
nothing keeps are never written at all.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import os
import re
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pygit2

from forkflow.errors import UserError
from forkflow.git.reads import settle_for_picks
from forkflow.models import Sha
from forkflow.planning.lines import Dependency, DepKind

GITLINK = 0o160000
TREE_MODE = 0o040000
settle_for_picks()  # libgit2's process settings for picking (reads.py)
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
LOOSE_MAX = 2000  # a unit's new objects up to this many are written as loose files, more as a pack
KEEP_BYTES = 256 << 20  # objects a flush leaves unwritten stay readable in memory up to this size
_OBJECT_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


class PickStatus(str, enum.Enum):
    APPLIED = "applied"
    EMPTY = "empty"  # the change is already in the tree: nothing to pick
    CONFLICT = "conflict"
    MISSING = "missing"  # a blob the merge needs is not in this clone (nor fetchable)
    REFUSED = "refused"  # it would write a tree entry git refuses to check out (`..`, `.git`)


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a conflicted path: blob (or gitlink) id, file mode and path on that side."""

    oid: str
    mode: int
    path: str

    @property
    def is_submodule(self) -> bool:
        return self.mode == GITLINK


@dataclass(frozen=True, slots=True)
class PathConflict:
    """A path the merge could not settle; a missing side means deleted (or never there)."""

    path: str
    base: Side | None
    ours: Side | None  # the fork
    theirs: Side | None  # the upstream commit


@dataclass(frozen=True, slots=True)
class PickStep:
    sha: Sha
    status: PickStatus
    tree: str  # the tree after the step (unchanged for EMPTY, CONFLICT and MISSING)
    conflicts: tuple[PathConflict, ...] = ()
    missing: str = ""  # for MISSING and REFUSED, one line: "blob <id> (<path>) is not in this clone"


# path -> resolved content, or None to delete the path
Resolutions = Mapping[str, bytes | None]
Signature = pygit2.Signature  # a commit's author or committer


@dataclass(frozen=True, slots=True)
class UnitPick:
    """Picking a sequence of upstream commits onto one base tree."""

    tree: str
    applied: tuple[Sha, ...] = ()
    empty: tuple[Sha, ...] = ()
    conflicted: tuple[PickStep, ...] = ()  # conflicts, and picks that need a blob this clone lacks
    resolved: dict[Sha, Resolutions] = field(default_factory=dict)
    held: dict[Sha, Dependency] = field(default_factory=dict)  # left out: depends on one left out


Entry = tuple[str, int]  # (object id, file mode) of a path in a tree


class _NeedsMerge(Exception):
    """The fast path cannot express this pick; the full three-way merge will."""


@functools.lru_cache(maxsize=4096)
def _word(name: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name) + rb"(?![A-Za-z0-9_])")


def _raw_name(entry: pygit2.Object) -> bytes:
    """A tree entry's name as stored (not every name is UTF-8)."""
    raw = entry.raw_name
    assert raw is not None  # an entry of a tree always has one
    return raw


def _file_entry(tree: pygit2.Tree, path: str) -> Entry | None:
    """The entry of a file (or submodule) at `path`; None for a folder or nothing."""
    try:
        obj = tree[path]
    except (KeyError, TypeError, ValueError):
        return None
    mode = int(obj.filemode)
    return None if mode == 0o040000 else (str(obj.id), mode)


def _entry(tree: pygit2.Tree, path: str) -> Entry | None:
    try:
        obj = tree[path]
    except (KeyError, TypeError, ValueError, UnicodeError):
        return None
    return str(obj.id), int(obj.filemode)


def merged_mode(base: pygit2.IndexEntry | None, ours: pygit2.IndexEntry | None,
                theirs: pygit2.IndexEntry | None) -> pygit2.enums.FileMode:
    """The file mode a three-way merge gives a resolved path: the side that changed the mode wins
    (upstream making a script executable survives a content conflict); the fork's when both did."""
    if ours is not None and theirs is not None and base is not None and ours.mode == base.mode:
        return theirs.mode
    return next(e.mode for e in (ours, theirs, base) if e is not None)


def _is_unsafe(path: str) -> bool:
    """A path with an empty, `.` or `..` component, or a `.git` one (as Windows and macOS fold names)."""
    for part in path.split("/"):
        folded = part.lower().rstrip(". ")
        if part in ("", ".", "..") or folded in (".git", "git~1"):
            return True
    return False


# forkflow's own files in a fork's tree: its config at the root, and its old state folder anywhere
OWN_FOLDER = ".forkflow"
OWN_CONFIG = "forkflow.toml"


def own_file(path: str) -> bool:
    """A path that is forkflow's own (folded as `_is_unsafe` folds names): an upstream commit that
    touches one is held for a person, never picked nor merged (docs/security.md)."""
    parts = [part.lower().rstrip(". ") for part in path.split("/")]
    return OWN_FOLDER in parts or parts == [OWN_CONFIG]


def touches_own_files(paths: Iterable[str]) -> str:
    """Why a commit changing `paths` is held back ("" when it touches none of forkflow's own files)."""
    own = sorted(p for p in paths if own_file(p))
    if not own:
        return ""
    more = f" and {len(own) - 1} more" if len(own) > 1 else ""
    return f"touches forkflow's own files ({own[0]}{more}): a person decides"


def _side_of(path: str, entry: Entry | None) -> Side | None:
    return Side(entry[0], entry[1], path) if entry is not None else None


def _side(entry: pygit2.IndexEntry | None) -> Side | None:
    if entry is None:
        return None
    return Side(str(entry.id), int(entry.mode), str(entry.path))


class MissingBlob(LookupError):
    """A blob a conflict names is not in the repository, nor fetchable."""


class _MemoryObjects(pygit2.OdbBackend):
    """Objects written since the last flush, in memory; first in the object database's order, so
    every write lands here and reads of fresh objects are served from here."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[pygit2.Oid, tuple[int, bytes]] = {}
        self.size = 0  # bytes held
        self.log: list[pygit2.Oid] | None = None  # when a list, each object written is also named here

    def drop(self, oids: Sequence[pygit2.Oid] | None = None) -> None:
        """Forget `oids` (all objects when None)."""
        if oids is None:
            self.objects.clear()
            self.size = 0
            return
        for oid in oids:
            kept = self.objects.pop(oid, None)
            if kept is not None:
                self.size -= len(kept[1])

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        try:
            return self.objects[oid]
        except KeyError:
            raise KeyError(oid) from None

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        kind, data = self.read_cb(oid)
        return kind, len(data)

    def read_prefix_cb(self, oid: pygit2.Oid | str) -> tuple[int, bytes, pygit2.Oid]:
        # pygit2 loads a blob's data by prefix lookup, with the full id: without this a blob held
        # here read as missing (NotFoundError) once a conflict named it (a replay of a real fork)
        found = self.exists_prefix_cb(oid)
        kind, data = self.objects[found]
        return kind, data, found

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return oid in self.objects

    def exists_prefix_cb(self, oid: pygit2.Oid | str) -> pygit2.Oid:
        prefix = str(oid)
        if len(prefix) == pygit2.GIT_OID_HEXSZ:
            full = pygit2.Oid(hex=prefix)
            if full in self.objects:
                return full
        elif (hits := [o for o in self.objects if str(o).startswith(prefix)]) and len(hits) == 1:
            return hits[0]  # short ids are for people: rare, so a scan
        raise KeyError(oid)

    def write_cb(self, oid: pygit2.Oid, data: bytes, kind: int) -> None:
        if oid not in self.objects:
            self.objects[oid] = (kind, bytes(data))
            self.size += len(data)
            if self.log is not None:
                self.log.append(oid)

    def refresh_cb(self) -> None:
        pass

    def __iter__(self) -> Iterator[pygit2.Oid]:
        return iter(list(self.objects))


_Conflicted = tuple[str, str, pygit2.Index] | None  # the last conflicted tree merge, for resolve()
# ... of a path merge: (tree, sha, the clean paths' entries, the conflicted paths)
_PathConflicted = tuple[str, str, dict[str, Entry | None], tuple[str, ...]] | None


GIT_RENAME_LIMIT = 7000  # git's merge.renameLimit when neither it nor diff.renameLimit is set (merge-ort)


def rename_limit(repo: pygit2.Repository) -> int:
    """The rename sources a tree merge examines: the repository's merge.renameLimit, else its
    diff.renameLimit, else git's default.  libgit2's own default is far lower, so a fork far behind
    upstream (lacking more files than that) met modify/delete conflicts where `git cherry-pick`
    follows the rename: on fbtriton's backlog of 2026-04-30 an upstream move of a plugin example
    from lib/Plugins/ to examples/plugins/ held back 12 commits git picks cleanly."""
    for key in ("merge.renameLimit", "diff.renameLimit"):
        try:
            value = int(str(repo.config[key]))
        except (KeyError, ValueError, pygit2.GitError):
            continue
        if value > 0:
            return value
    return GIT_RENAME_LIMIT


def merge_trees(repo: pygit2.Repository, ancestor: str | pygit2.Tree, ours: str | pygit2.Tree,
                theirs: str | pygit2.Tree, *, renames: bool = True,
                favor: pygit2.enums.MergeFavor = pygit2.enums.MergeFavor.NORMAL,
                limit: int | None = None) -> pygit2.Index:
    """`Repository.merge_trees` with git's rename limit (`rename_limit`): libgit2 takes it from
    the merge options only, which pygit2 does not expose, so the options are set here; a pygit2
    without those internals falls back to its own merge (libgit2's limit)."""
    flags = pygit2.enums.MergeFlag.FIND_RENAMES if renames else pygit2.enums.MergeFlag(0)
    try:
        from pygit2.errors import check_error
        from pygit2.ffi import C, ffi
        from pygit2 import index as index_module

        trees = [t if isinstance(t, pygit2.Tree) else repo.get(t) for t in (ancestor, ours, theirs)]
        if not all(isinstance(t, pygit2.Tree) for t in trees):
            raise KeyError("not a tree")
        any_repo: Any = repo
        opts: Any = any_repo._merge_options(favor, flags, pygit2.enums.MergeFileFlag.DEFAULT)
        opts.target_limit = limit if limit is not None else rename_limit(repo)
        ptrs = [ffi.new("git_tree **") for _ in trees]
        for ptr, tree in zip(ptrs, trees):
            ffi.buffer(ptr)[:] = cast(Any, tree)._pointer[:]
        cindex = ffi.new("git_index **")
        check_error(C.git_merge_trees(cindex, any_repo._repo, ptrs[0][0], ptrs[1][0], ptrs[2][0], opts))
        from_c: Any = index_module.Index.from_c
        return cast(pygit2.Index, from_c(repo, cindex))
    except (ImportError, AttributeError, TypeError):
        return repo.merge_trees(ancestor, ours, theirs, favor=favor, flags=flags)


class MemoryPicker:
    """Picks upstream commits onto trees of one repository's object database."""

    def __init__(self, path: Path | str, *, batch_writes: bool = False) -> None:
        try:
            self.repo = pygit2.Repository(str(path))
        except pygit2.GitError as e:
            raise UserError(f"{path} is not a git repository ({e}); pass --repo PATH") from e
        self._trees: dict[str, str] = {}
        self._deltas: dict[str, list[tuple[str, Entry | None, Entry | None]]] = {}
        self._paths: dict[str, Sequence[str]] = {}  # sha -> the paths it changes (know_paths)
        self._memory: _MemoryObjects | None = None
        self._objects: str | None = None  # the objects folder, once known
        self._folders: set[str] = set()  # its fan-out folders made (or found) so far
        self._basenames: dict[str, int] = {}  # file name -> count in the fork tip's tree
        self._merged: dict[tuple[str, str, str], Entry | None] = {}  # (base, ours, theirs) blob ids -> merge
        self._names: dict[tuple[str, bytes], bool] = {}  # (blob id, name) -> the blob has the name
        self._conflicted: _Conflicted = None  # the last conflicted merge, for resolve()
        self._path_conflicted: _PathConflicted = None
        self._picking: tuple[str, str] | None = None  # (onto tree, the commit's parent tree) of a path pick
        self._old_paths: frozenset[str] = frozenset()  # the files of the fork point (know_fork_point)
        self._rename_limit = rename_limit(self.repo)
        if batch_writes:
            self._memory = _MemoryObjects()
            self.repo.odb.add_backend(self._memory, 1000)

    def forget_writes(self, over: int = 0) -> None:
        """Drop the objects written in memory (and the merges that named them) once they hold more
        than `over` bytes: for a picker whose results are read and never landed."""
        if self._memory is not None and self._memory.size > over:
            self._memory.drop()
            self._merged.clear()

    @property
    def pending_writes(self) -> int:
        """Objects written since the last `flush()` that only this process can see."""
        return len(self._memory.objects) if self._memory is not None else 0

    def flush(self, roots: Sequence[str] | None = None) -> None:
        """Write the objects held in memory as one pack, so that git (and other processes) see them.

        With `roots`, only what they reach is written (a bundle's candidate commit reaches its
        final trees, not the trees of every pick on the way: packing those cost 0.18 s a unit
        on a real fork, issue 11); the rest stays in memory (up to KEEP_BYTES), where the probe's
        merged blobs serve the landing's picks of the same files (1,400 file merges of a real
        fork's run were merges the probe had made already)."""
        if self._memory is None or not self._memory.objects:
            return
        objects = self._memory.objects
        wanted = list(objects) if roots is None else self._reachable(roots)
        if len(wanted) < len(objects) and self._memory.size - sum(len(objects[o][1]) for o in wanted) > KEEP_BYTES:
            # over the cap: write the rest too; a tree or merge still in use may name any of them, and an
            # object forgotten here was a blob a later conflict could not read (a replay of a real fork)
            wanted = list(objects)
        if roots is not None and len(wanted) <= LOOSE_MAX:
            for oid in wanted:  # a few objects: loose files, which need no repack later
                self._write_loose(oid, *objects[oid])
        elif wanted:
            pack = pygit2.PackBuilder(self.repo)
            pack.set_threads(1)
            for oid in wanted:
                pack.add(oid)
            pack.write()
        self._memory.drop(None if len(wanted) == len(objects) else wanted)

    def _write_loose(self, oid: pygit2.Oid, kind: int, data: bytes) -> None:
        """One loose object file, written read-only then renamed in place: four system calls (a
        path check, a folder made, a chmod per object cost 1.4 ms an object on a real fork).
        An object already on disk never gets here: libgit2 writes nothing it finds stored."""
        hex_ = str(oid)
        if self._objects is None:
            self._objects = str(self._objects_dir())
        folder = f"{self._objects}/{hex_[:2]}"
        if hex_[:2] not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(hex_[:2])
        tmp = f"{folder}/tmp_obj_forkflow_{os.getpid()}_{hex_[:8]}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o444)
        except FileExistsError:  # left by a killed run of the same process id
            os.unlink(tmp)
            fd = os.open(tmp, flags, 0o444)
        try:
            view = memoryview(zlib.compress(_OBJECT_TYPES[kind] + b" %d\0" % len(data) + data, 1))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, f"{folder}/{hex_[2:]}")

    def _objects_dir(self) -> Path:
        gitdir = Path(self.repo.path)
        common = gitdir / "commondir"  # a linked work tree keeps its objects in the main one
        if common.exists():
            gitdir = (gitdir / common.read_text().strip()).resolve()
        return gitdir / "objects"

    def _reachable(self, roots: Sequence[str]) -> list[pygit2.Oid]:
        assert self._memory is not None
        objects = self._memory.objects
        out: list[pygit2.Oid] = []
        seen: set[pygit2.Oid] = set()
        stack = [pygit2.Oid(hex=r) for r in roots]
        while stack:
            oid = stack.pop()
            if oid in seen or oid not in objects:
                continue  # on disk already
            seen.add(oid)
            out.append(oid)
            obj = self.repo.get(oid)
            if isinstance(obj, pygit2.Commit):
                stack.append(obj.tree_id)
            elif isinstance(obj, pygit2.Tree):
                stack.extend(entry.id for entry in obj)
        return out

    def commit_tree(self, sha: str) -> str:
        cached = self._trees.get(sha)
        if cached is None:
            cached = str(self._commit(sha).tree_id)
            self._trees[sha] = cached
        return cached

    def _commit(self, sha: str) -> pygit2.Commit:
        obj = self.repo.get(sha)
        if not isinstance(obj, pygit2.Commit):
            raise UserError(f"{sha} is not a commit in {self.repo.path}; fetch upstream and retry")
        return obj

    def mainline_tree(self, sha: str) -> str:
        """The tree a pick diffs against: the first parent's (the mainline of a merge)."""
        c = self._commit(sha)
        return str(c.parents[0].tree_id) if c.parents else EMPTY_TREE

    def tree(self, oid: str) -> pygit2.Tree:
        """The tree object `oid`, from memory or the object database."""
        obj = self.repo.get(oid)
        if not isinstance(obj, pygit2.Tree):
            raise KeyError(oid)
        return obj

    def ref_target(self, name: str) -> Sha | None:
        """The commit a ref points at, read in-process (a `git rev-parse` per unit cost 12 s of an
        ingest); None when there is no such ref.  ValueError when libgit2 cannot read it."""
        try:
            ref = self.repo.references.get(name)
            return Sha(str(ref.resolve().target)) if ref is not None else None
        except (KeyError, pygit2.GitError) as e:
            raise ValueError(f"cannot read {name}: {e}") from e

    def pick(self, onto_tree: str, sha: Sha) -> PickStep:
        """Pick one commit onto a tree; never raises for conflicts (they are the result)."""
        return self._pick(onto_tree, sha)

    def _pick(self, onto_tree: str, sha: Sha) -> PickStep:
        unsafe = next((path for path, _, after in self._changes(sha) if after is not None and _is_unsafe(path)), None)
        if unsafe is not None:  # a checkout of it would fail (or write outside the work tree)
            return PickStep(sha, PickStatus.REFUSED, onto_tree,
                            missing=f"refused: it adds the path {unsafe!r}, which git will not check out")
        own = touches_own_files(path for path, _, _ in self._changes(sha))
        if own:  # the fork's config, or what would land where forkflow kept its store (a hot journal)
            return PickStep(sha, PickStatus.REFUSED, onto_tree, missing=own)
        fast = self._fast_pick(onto_tree, sha)
        if fast is not None:
            return fast
        try:
            return self._path_pick(onto_tree, sha)
        except (_NeedsMerge, UnicodeError):
            pass  # a rename, a file where the fork has a folder, a non-UTF-8 name: the whole-tree merge
        except (KeyError, pygit2.GitError) as e:
            absent = self.absent_blobs(onto_tree, sha)
            if absent and self._fetch(absent):
                return self.pick(onto_tree, sha)
            if absent:
                more = f" and {len(absent) - 1} more" if len(absent) > 1 else ""
                return PickStep(sha, PickStatus.MISSING, onto_tree, missing=(
                    f"blob {absent[0][0][:12]} ({absent[0][1]}){more} is not in this clone and could not be fetched"))
            return PickStep(sha, PickStatus.MISSING, onto_tree,
                            missing=f"an object is not in this clone ({e}); fetch it and run again")
        return self._tree_pick(onto_tree, sha)

    def _tree_pick(self, onto_tree: str, sha: Sha) -> PickStep:
        try:
            index = self._merge(onto_tree, sha)
        except (KeyError, pygit2.GitError) as e:
            try:  # a blob elsewhere in the tree, read only to look for renames: merge without
                index = self._merge(onto_tree, sha, renames=False)
            except (KeyError, pygit2.GitError):
                return PickStep(sha, PickStatus.MISSING, onto_tree,
                                missing=f"an object is not in this clone ({e}); fetch it and run again")
        if index.conflicts is not None:
            conflicts = tuple(
                PathConflict(next(e.path for e in (b, o, t) if e is not None), _side(b), _side(o), _side(t))
                for b, o, t in index.conflicts)
            if all(c.ours is None and c.base is not None for c in conflicts):
                followed = self._git_pick(onto_tree, sha)  # each a path the fork lacks: a rename git may follow
                if followed is not None:
                    return PickStep(sha, PickStatus.EMPTY if followed == onto_tree else PickStatus.APPLIED, followed)
            self._conflicted = (onto_tree, sha, index)
            return PickStep(sha, PickStatus.CONFLICT, onto_tree, conflicts)
        tree = str(index.write_tree(self.repo))
        status = PickStatus.EMPTY if tree == onto_tree else PickStatus.APPLIED
        return PickStep(sha, status, tree)

    def _git_pick(self, onto_tree: str, sha: Sha) -> str | None:
        """git's own merge of the pick (merge-ort: `git merge-tree --write-tree` of a commit of
        `onto_tree` whose parent is `sha`'s and `sha`): the tree when it merges cleanly, else None.

        Asked only where every path libgit2 left conflicted is one the fork lacks: git's rename
        detection follows moves that libgit2's similarity misses (fbtriton's backlog of 2026-04-30:
        upstream moved lib/Plugins/ to examples/plugins/ while the fork kept the old folder, and 12
        commits git picks cleanly were held).  Two git processes, for a few picks a run."""
        commit = self._commit(sha)
        if len(commit.parents) != 1:
            return None
        from forkflow.git.run import run_git_bytes

        self.flush([onto_tree])  # git reads it from the object database
        cwd = self.repo.path
        rc, out, _ = run_git_bytes("-c", "user.name=forkflow", "-c", "user.email=forkflow@localhost",
                                   "commit-tree", onto_tree, "-p", str(commit.parents[0].id), "-m", "pick base",
                                   cwd=cwd, check=False, timeout=120)
        if rc != 0:
            return None
        rc, out, _ = run_git_bytes("merge-tree", "--write-tree", "--no-messages", out.decode().strip(), sha,
                                   cwd=cwd, check=False, timeout=300)
        if rc != 0 or not out.split():
            return None  # a conflict there too (1), or a git without --write-tree (129)
        tree = out.split()[0].decode()
        return tree if isinstance(self.repo.get(tree), pygit2.Tree) else None

    # -- the path merge: a three-way merge of only the paths the commit changes ------------
    def _path_pick(self, onto_tree: str, sha: Sha) -> PickStep:
        """Cherry-pick as git does it, limited to the commit's own paths: every other path keeps the
        fork's entry, so only the changed files are read (a blob missing elsewhere in a partial
        clone is never needed).  Renames are not followed: a rename is a deletion and an addition,
        which conflicts where the fork changed the old path (held back, never merged wrongly)."""
        ours = self.repo.get(onto_tree)
        assert isinstance(ours, pygit2.Tree)
        updates: dict[str, Entry | None] = {}
        conflicts: list[PathConflict] = []
        changes = self._changes(sha)
        adds = any(before is None for _, before, _ in changes)
        self._picking = (onto_tree, self.mainline_tree(sha))
        if not self._basenames:
            self._index_names(ours)
        for path, before, after in changes:
            current = _entry(ours, path)
            if current == after:
                continue
            if current == before:
                updates[path] = after
                continue
            if after is None and not adds and current is not None and before is not None:
                merged = None  # the commit deletes a file the fork changed, and moves nothing
            elif current is None and before is not None and after is not None \
                    and (renamed := self._folder_rename(path, sha, changes)) is not None:
                updates.update(renamed)  # the change lands on the fork's older name of the file
                continue
            else:
                merged = self._merge_path(path, before, current, after)
            if merged is None:
                conflicts.append(PathConflict(path, _side_of(path, before), _side_of(path, current),
                                              _side_of(path, after)))
            elif merged != current:
                updates[path] = merged
        if conflicts:
            self._conflicted = None
            self._path_conflicted = (onto_tree, sha, updates, tuple(c.path for c in conflicts))
            return PickStep(sha, PickStatus.CONFLICT, onto_tree, tuple(conflicts))
        if not updates:
            return PickStep(sha, PickStatus.EMPTY, onto_tree)
        tree = self._apply(ours, updates) or EMPTY_TREE
        return PickStep(sha, PickStatus.EMPTY if tree == onto_tree else PickStatus.APPLIED, tree)

    def _index_names(self, tree: pygit2.Tree) -> None:
        """File names of the first tree picked onto (the fork tip): where the fork may have moved a file."""
        stack = [tree]
        while stack:
            for entry in stack.pop():
                if entry.filemode == pygit2.enums.FileMode.TREE:
                    sub = self.repo.get(entry.id)
                    if isinstance(sub, pygit2.Tree):
                        stack.append(sub)
                else:
                    self._basenames[str(entry.name)] = self._basenames.get(str(entry.name), 0) + 1
        self._basenames.setdefault("", 0)

    def _may_be_renamed(self, path: str, ours: Entry | None, theirs: Entry | None, base: Entry | None) -> bool:
        """Whether a rename could turn this modify/delete into a merge (then the whole-tree merge,
        with rename detection, decides; 35 ms a pick on a real fork, so only then).

        The fork moved the file: a file of the same name lives elsewhere in the fork, or the fork
        has a file of the same kind in the same folder that the commit's parent lacks (an earlier
        upstream rename the fork does not have yet, as `ProxFence` -> `ProxyFence`).  The commit
        moved it: the commit adds a path."""
        if base is None:
            return False
        if ours is None:
            folder, _, name = path.rpartition("/")
            return self._basenames.get(name, 0) > 0 or self._new_sibling(folder, name)
        return True  # theirs is None: the caller checks the commit's additions first

    def know_fork_point(self, sha: str) -> None:
        """The merge base of the fork and upstream: its files are the names an upstream rename the
        fork lacks can have left in the fork."""
        tree = self._commit(sha).tree
        paths: set[str] = set()
        stack: list[tuple[str, pygit2.Tree]] = [("", tree)]
        while stack:
            prefix, t = stack.pop()
            for entry in t:
                if entry.filemode == pygit2.enums.FileMode.TREE:
                    sub = self.repo.get(entry.id)
                    if isinstance(sub, pygit2.Tree):
                        stack.append((f"{prefix}{entry.name}/", sub))
                else:
                    paths.add(f"{prefix}{entry.name}")
        self._old_paths = frozenset(paths)

    def _folder_rename(self, path: str, sha: str, changes: Sequence[tuple[str, Entry | None, Entry | None]]
                       ) -> dict[str, Entry | None] | None:
        """A change to `path`, which the fork has under an older name in the same folder (an upstream
        rename it lacks): the merge of that folder alone, where libgit2 finds the rename (over the
        whole tree it looks at no more than 200 rename sources, and a fork far behind upstream
        lacks more files than that).  The entries of the paths the commit does not change, or
        None when no such rename is found or the folder merges with a conflict."""
        folder, _, name = path.rpartition("/")
        if not self._new_sibling(folder, name) or self._picking is None:
            return None
        trees = []
        for tree_id in (self.mainline_tree(sha), self._picking[0], self.commit_tree(sha)):
            tree = self.repo.get(tree_id)
            try:
                sub = tree[folder] if folder and isinstance(tree, pygit2.Tree) else tree
            except KeyError:
                return None
            if not isinstance(sub, pygit2.Tree):
                return None
            trees.append(sub)
        try:
            index = merge_trees(self.repo, trees[0], trees[1], trees[2], limit=self._rename_limit)
        except (KeyError, pygit2.GitError):
            return None
        if index.conflicts is not None:
            return None
        prefix = f"{folder}/" if folder else ""
        own = {p for p, _, _ in changes}
        ours = {prefix + str(e.name): (str(e.id), int(e.filemode)) for e in trees[1]
                if e.filemode != pygit2.enums.FileMode.TREE}
        merged = {prefix + str(e.path): (str(e.id), int(e.mode)) for e in index if "/" not in str(e.path)}
        if path in merged:
            return None  # no rename found: the change stays a modify/delete
        out: dict[str, Entry | None] = {p: e for p, e in merged.items() if p not in own and ours.get(p) != e}
        return out or None

    def _new_sibling(self, folder: str, name: str) -> bool:
        """The fork has, in `folder`, a file of the same kind that upstream had at the fork point and
        the commit's parent lacks: upstream renamed (or removed) it and the fork has not followed."""
        if self._picking is None or not self._old_paths:
            return False
        ours, parent = (self.repo.get(t) for t in self._picking)
        if not isinstance(ours, pygit2.Tree) or not isinstance(parent, pygit2.Tree):
            return False
        try:
            mine, theirs = (t / folder if folder else t for t in (ours, parent))
        except KeyError:
            return False
        if not isinstance(mine, pygit2.Tree):
            return False
        before = {e.name for e in theirs} if isinstance(theirs, pygit2.Tree) else set()
        kind = name[name.rfind("."):] if "." in name else name
        prefix = f"{folder}/" if folder else ""
        return any(e.name not in before and str(e.name).endswith(kind) and f"{prefix}{e.name}" in self._old_paths
                   for e in mine)

    def _merge_path(self, path: str, base: Entry | None, ours: Entry | None,
                    theirs: Entry | None) -> Entry | None:
        """The merged entry of one path, or None for a conflict (deletions go through the tree merge)."""
        if ours is None or theirs is None or base is None:
            if self._may_be_renamed(path, ours, theirs, base):
                raise _NeedsMerge(path)  # the tree merge finds renames
            return None  # modify/delete or add/add that no rename explains: a conflict
        if GITLINK in (base[1], ours[1], theirs[1]):
            return None
        mode = theirs[1] if ours[1] == base[1] else ours[1] if theirs[1] == base[1] else None
        if mode is None:
            return None
        if ours[0] == base[0]:
            return theirs[0], mode
        if theirs[0] == base[0] or ours[0] == theirs[0]:
            return ours[0], mode
        key = (base[0], ours[0], theirs[0])
        if key in self._merged:  # the probe merged it already (its blob may be gone with a flush)
            hit = self._merged[key]
            if hit is None:
                return None
            if pygit2.Oid(hex=hit[0]) in self.repo.odb:
                return hit[0], mode
        merged = self._merge_contents(path, base, ours, theirs, mode)
        self._merged[key] = merged
        return merged

    def _merge_contents(self, path: str, base: Entry, ours: Entry, theirs: Entry, mode: int) -> Entry | None:
        try:
            result = self.repo.merge_file_from_index(
                pygit2.IndexEntry(path, pygit2.Oid(hex=base[0]), pygit2.enums.FileMode(base[1])),
                pygit2.IndexEntry(path, pygit2.Oid(hex=ours[0]), pygit2.enums.FileMode(ours[1])),
                pygit2.IndexEntry(path, pygit2.Oid(hex=theirs[0]), pygit2.enums.FileMode(theirs[1])))
        except RuntimeError:  # no merged text: a binary file changed on both sides
            return None
        except UnicodeDecodeError:  # pygit2 hands back text only: let the whole-tree merge write it
            raise _NeedsMerge(path) from None
        if isinstance(result, str) or not result.automergeable:
            return None
        data = result.contents
        return self._put(3, data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data), mode

    # -- the fast path: every path the commit changes is untouched by the fork ------------
    def _changes(self, sha: str) -> list[tuple[str, Entry | None, Entry | None]]:
        """(path, before, after) of every path the commit changes against its mainline parent."""
        cached = self._deltas.get(sha)
        if cached is None and sha in self._paths:
            cached = self._changes_of_paths(sha, self._paths[sha])
        if cached is None:
            # only ids, modes and paths are read: no blob is loaded to tell binary from text
            diff = self.repo.diff(self.mainline_tree(sha), self.commit_tree(sha),
                                  flags=pygit2.enums.DiffOption.SKIP_BINARY_CHECK)
            cached = []
            for d in diff.deltas:
                old = None if d.status_char() == "A" else (str(d.old_file.id), int(d.old_file.mode))
                new = None if d.status_char() == "D" else (str(d.new_file.id), int(d.new_file.mode))
                cached.append((d.new_file.path if new else d.old_file.path, old, new))
            self._deltas[sha] = cached
        return cached

    def know_paths(self, paths: Mapping[str, Sequence[str]]) -> None:
        """The paths each commit changes (its shape, from `git diff-tree`): its changes are then read by
        looking these up in two trees, not by diffing them (3 ms a commit on a real fork)."""
        self._paths.update(paths)

    def _changes_of_paths(self, sha: str, paths: Sequence[str]) -> list[tuple[str, Entry | None, Entry | None]] | None:
        old, new = self.repo.get(self.mainline_tree(sha)), self.repo.get(self.commit_tree(sha))
        if not isinstance(old, pygit2.Tree) or not isinstance(new, pygit2.Tree):
            return None
        out: list[tuple[str, Entry | None, Entry | None]] = []
        for path in sorted(paths):
            try:
                before, after = (_file_entry(t, path) for t in (old, new))
            except UnicodeError:  # a name git printed that pygit2 cannot look up: diff instead
                return None
            if before != after:
                out.append((path, before, after))
        return out if out or not paths else None

    def _fast_pick(self, onto_tree: str, sha: str) -> PickStep | None:
        """When the fork left every changed path as the commit's parent had it, the three-way merge
        is the commit's own change: apply it to the touched folders only.  None: take the full merge."""
        ours = self.repo.get(onto_tree)
        assert isinstance(ours, pygit2.Tree)
        updates: dict[str, Entry | None] = {}
        for path, before, after in self._changes(sha):
            current = _entry(ours, path)
            if current == after:
                continue  # already there
            if current != before:
                return None  # the fork changed this path too: a real merge
            updates[path] = after
        if not updates:
            return PickStep(Sha(sha), PickStatus.EMPTY, onto_tree)
        try:
            tree = self._apply(ours, updates)
        except (_NeedsMerge, UnicodeError):  # non-UTF-8 names go through libgit2's merge
            return None
        return PickStep(Sha(sha), PickStatus.APPLIED, tree or EMPTY_TREE)

    def overlay_step(self, base: pygit2.Tree, overlay: dict[str, Entry | None], sha: str) -> PickStatus | None:
        """Probe a pick against `base` plus pending `overlay` changes without writing anything.

        Updates the overlay and returns APPLIED or EMPTY when the fast path holds; None when
        a real merge is needed (the caller writes the overlay out and merges)."""
        updates: dict[str, Entry | None] = {}
        if any(after is not None and _is_unsafe(path) or own_file(path) for path, _, after in self._changes(sha)):
            return None
        for path, before, after in self._changes(sha):
            current = overlay[path] if path in overlay else _entry(base, path)
            if current == after:
                continue
            if current != before:
                return None
            updates[path] = after
        overlay.update(updates)
        return PickStatus.APPLIED if updates else PickStatus.EMPTY

    def write_overlay(self, base: pygit2.Tree, overlay: dict[str, Entry | None]) -> str:
        """The tree of `base` with the overlay's changes, written to the object database."""
        if not overlay:
            return str(base.id)
        return self._apply(base, dict(overlay)) or EMPTY_TREE

    def _apply(self, tree: pygit2.Tree | None, updates: dict[str, Entry | None]) -> str | None:
        """Write the tree with `updates` applied (only the folders on the way are rewritten)."""
        entries: dict[bytes, tuple[bytes, int]] = {} if tree is None else {
            _raw_name(e): (e.id.raw, e.filemode) for e in tree}
        below: dict[str, dict[str, Entry | None]] = {}
        for path, entry in updates.items():
            head, sep, rest = path.partition("/")
            if sep:
                below.setdefault(head, {})[rest] = entry
                continue
            name = head.encode("utf-8", "surrogateescape")
            if entry is None:
                entries.pop(name, None)
            else:
                existing = entries.get(name)
                if existing is not None and existing[1] == TREE_MODE:
                    raise _NeedsMerge(path)  # a file where the fork has a folder
                entries[name] = (bytes.fromhex(entry[0]), entry[1])
        for head, sub_updates in below.items():
            name = head.encode("utf-8", "surrogateescape")
            existing = entries.get(name)
            if existing is not None and existing[1] != TREE_MODE:
                raise _NeedsMerge(head)  # a folder where the fork has a file
            subtree = self.repo.get(pygit2.Oid(raw=existing[0])) if existing is not None else None
            oid = self._apply(subtree if isinstance(subtree, pygit2.Tree) else None, sub_updates)
            if oid is None:
                entries.pop(name, None)
            else:
                entries[name] = (bytes.fromhex(oid), TREE_MODE)
        if not entries:
            return None
        # git's order: names as bytes, a folder's as if it ended in "/"
        order = sorted(entries, key=lambda n: n + b"/" if entries[n][1] == TREE_MODE else n)
        return self._put(2, b"".join(b"%o %s\0%s" % (entries[n][1], n, entries[n][0]) for n in order))

    def _put(self, kind: int, data: bytes) -> str:
        """Write an object.  With batch writes it is hashed here and kept in memory: libgit2's own
        write rescans every pack folder (the alternates' too) for each object it has not seen,
        which was most of a real fork's ingest's system time (issue 11)."""
        if self._memory is None:
            return str(self.repo.odb.write(kind, data))
        oid = pygit2.Oid(raw=hashlib.sha1(_OBJECT_TYPES[kind] + b" %d\0" % len(data) + data).digest())
        self._memory.write_cb(oid, data, kind)
        return str(oid)

    def absent_blobs(self, onto_tree: str, sha: str) -> list[tuple[str, str]]:
        """(blob id, path) of the blobs a merge of this pick reads that the object database lacks."""
        ours = self.repo.get(onto_tree)
        out: list[tuple[str, str]] = []
        for path, before, after in self._changes(sha):
            current = _entry(ours, path) if isinstance(ours, pygit2.Tree) else None
            for entry in (before, after, current):
                if entry is not None and entry[1] != GITLINK and pygit2.Oid(hex=entry[0]) not in self.repo.odb:
                    out.append((entry[0], path))
        return sorted(set(out))

    def _fetch(self, absent: list[tuple[str, str]]) -> bool:
        """Have git bring absent blobs (a partial clone fetches them from its promisor remote); True
        when they all came."""
        from forkflow.git.run import run_git_bytes

        if not self._is_partial():
            return False
        run_git_bytes("cat-file", "--batch", cwd=self.repo.path,
                      input="".join(f"{oid}\n" for oid, _ in absent).encode(), check=False)
        return all(pygit2.Oid(hex=oid) in self.repo.odb for oid, _ in absent)

    def _is_partial(self) -> bool:
        try:
            return bool(self.repo.config["extensions.partialclone"])
        except KeyError:
            return any(e.name.endswith(".promisor") for e in self.repo.config if e.name.startswith("remote."))

    def _merge(self, onto_tree: str, sha: str, renames: bool = True) -> pygit2.Index:
        ancestor = self.mainline_tree(sha)
        return merge_trees(self.repo, ancestor, onto_tree, self.commit_tree(sha), renames=renames,
                           limit=self._rename_limit)

    def resolve(self, onto_tree: str, sha: Sha, resolutions: Resolutions) -> str:
        """The tree of a conflicted pick with each conflicted path set to its resolution."""
        kept, self._conflicted = self._conflicted, None
        by_path, self._path_conflicted = self._path_conflicted, None
        if kept is None or kept[:2] != (onto_tree, sha):
            kept = None
            if by_path is None or by_path[:2] != (onto_tree, sha):
                try:
                    step = self._path_pick(onto_tree, sha)
                except (_NeedsMerge, UnicodeError):
                    step = None
                if step is not None and step.status is not PickStatus.CONFLICT:
                    return step.tree
                by_path, self._path_conflicted = self._path_conflicted, None
            if by_path is not None and by_path[:2] == (onto_tree, sha):
                missing = sorted(set(by_path[3]) - set(resolutions))
                if missing:
                    raise ValueError(f"no resolution for {', '.join(missing)}")
                return self._resolve_paths(onto_tree, sha, by_path[2], resolutions)
        # the merge `pick` just did, when it is this one (merge_trees is deterministic); used once
        index = kept[2] if kept is not None and kept[:2] == (onto_tree, sha) else self._merge(onto_tree, sha)
        conflicts = index.conflicts
        if conflicts is None:
            return str(index.write_tree(self.repo))
        pending = {next(e.path for e in trio if e is not None): trio for trio in conflicts}
        missing = sorted(set(pending) - set(resolutions))
        if missing:
            raise ValueError(f"no resolution for {', '.join(missing)}")
        for path, (b, o, t) in pending.items():
            content = resolutions[path]
            del conflicts[path]
            if content is None:
                if path in index:
                    index.remove(path)
                continue
            oid = self.repo.create_blob(content)
            index.add(pygit2.IndexEntry(path, oid, merged_mode(b, o, t)))
        return str(index.write_tree(self.repo))

    def _resolve_paths(self, onto_tree: str, sha: Sha, updates: dict[str, Entry | None],
                       resolutions: Resolutions) -> str:
        ours = self.repo.get(onto_tree)
        assert isinstance(ours, pygit2.Tree)
        changes = {path: (before, after) for path, before, after in self._changes(sha)}
        out = dict(updates)
        for path, content in resolutions.items():
            if content is None:
                out[path] = None
                continue
            current, (before, after) = _entry(ours, path), changes.get(path, (None, None))
            mode = next(e[1] for e in (current, after, before, ("", 0o100644)) if e is not None)
            if current is not None and after is not None and before is not None and current[1] == before[1]:
                mode = after[1]
            out[path] = (self._put(3, content), mode)
        return self._apply(ours, out) or EMPTY_TREE

    def blob(self, oid: str) -> bytes:
        """A blob's bytes; `MissingBlob` when the repository lacks it (a partial or damaged clone)."""
        data: bytes | None
        try:
            obj = self.repo.get(oid)
            data = None if obj is None else obj.data if isinstance(obj, pygit2.Blob) else b""
        except (KeyError, pygit2.GitError):  # pygit2 reads a blob's data on first use, not in get()
            data = None
        if data is None:
            raise MissingBlob(f"blob {oid[:12]} is not in this clone")
        return data

    def merge_text(self, base: Side | None, ours: Side, theirs: Side,
                   labels: tuple[str, str, str]) -> bytes | None:
        """`git merge-file -p --diff3 -L ours -L base -L theirs` of three blobs, by libgit2's copy of
        git's xdiff in this process (a `git merge-file` process each cost 1 s of a real ingest);
        None when libgit2 cannot merge them (a binary side), or when this pygit2's C interface is not
        the one this was written against: the caller then asks git."""
        try:
            return self._merge_text(base, ours, theirs, labels)
        except (AttributeError, TypeError, ImportError):
            return None

    def _merge_text(self, base: Side | None, ours: Side, theirs: Side,
                    labels: tuple[str, str, str]) -> bytes | None:
        from pygit2 import ffi, C  # libgit2's C interface; pygit2 offers no labels or diff3 style

        opts = ffi.new("git_merge_file_options *")
        opts.version = 1
        keep = [ffi.new("char[]", label.encode("utf-8", "surrogateescape")) for label in labels]
        opts.our_label, opts.ancestor_label, opts.their_label = keep
        opts.flags = C.GIT_MERGE_FILE_STYLE_DIFF3
        entries = [None if side is None else pygit2.IndexEntry(
            "file", pygit2.Oid(hex=side.oid), pygit2.enums.FileMode(side.mode)) for side in (base, ours, theirs)]
        refs = [ffi.NULL if e is None else e._to_c() for e in entries]  # (entry, its path) kept alive
        result = ffi.new("git_merge_file_result *")
        err = C.git_merge_file_from_index(result, self.repo._repo, *(r if r is ffi.NULL else r[0] for r in refs), opts)
        if err < 0:
            return None
        try:
            return bytes(ffi.buffer(result.ptr, result.len)) if result.ptr != ffi.NULL else b""
        finally:
            C.git_merge_file_result_free(result)

    def waits_for(self, blocking: Sequence[Dependency], tree: str, sha: Sha | None = None) -> Dependency | None:
        """The dependency on a held-back commit that keeps a commit from being picked onto `tree`.

        A textual one (lines, a whole file) does only when the pick conflicts: a clean merge shows
        the lines it reads are in the fork already.  A name is waited for unless `tree` has it in
        a file the defining commit changes, or in a file the waiting commit `sha` changes (the
        name is known there already); a revert always waits for what it reverts."""
        for d in blocking:
            if d.kind is DepKind.REVERT:
                return d
            if d.kind is DepKind.SYMBOL and not self._has_name(tree, d, d.on) \
                    and (sha is None or not self._has_name(tree, d, sha)):
                return d
        return None

    def modifies_missing(self, sha: str, tree_id: str) -> bool:
        """Whether the commit changes a file that the tree lacks (a delete/modify when it is
        picked onto that tree, renames aside); read from ids and paths only, no merge."""
        tree = self.repo.get(tree_id)
        if not isinstance(tree, pygit2.Tree):
            return False
        return any(before is not None and after is not None and _entry(tree, path) is None
                   for path, before, after in self._changes(sha))

    def conflicts_where(self, tree_id: str, sha: Sha, blocking: Sequence[Dependency]) -> bool:
        """Whether picking `sha` onto the tree conflicts in a file whose lines (or whole) it takes
        from a commit held back, told by merging that file alone: the pick of a commit that waits
        conflicts there nearly always (2026-04-01: 315 of 334), and it waits whatever its other
        files do, so they need no merge (a conflicting pick merged five files on average).  Only a
        content conflict of a file all three sides have counts (the one the whole pick would find
        there, renames or not); False says nothing: the caller picks."""
        wanted = {d.where.rsplit(":", 1)[0] if d.kind is DepKind.LINES else d.where
                  for d in blocking if d.kind in (DepKind.LINES, DepKind.FILE)}
        if not wanted:
            return False
        tree = self.repo.get(tree_id)
        if not isinstance(tree, pygit2.Tree):
            return False
        for path, before, after in self._changes(sha):
            if path not in wanted or before is None or after is None:
                continue
            current = _entry(tree, path)
            if current is None or GITLINK in (before[1], current[1], after[1]) \
                    or len({before[0], current[0], after[0]}) < 3 or len({before[1], current[1], after[1]}) > 1:
                continue  # no content merge, or not one that only a content conflict stops
            try:
                if self._merge_path(path, before, current, after) is None:
                    return True
            except (_NeedsMerge, KeyError, pygit2.GitError):
                continue  # the whole pick says
        return False

    def _has_name(self, tree_id: str, d: Dependency, where: str) -> bool:
        tree = self.repo.get(tree_id)
        if not isinstance(tree, pygit2.Tree):
            return False
        name = d.where.split(" ", 1)[0].encode()
        word = _word(name)
        for path, _, after in self._changes(where):
            entry = _entry(tree, path) if after is not None else None
            if entry is None or entry[1] == GITLINK:
                continue
            key = (entry[0], name)
            if key not in self._names:
                try:
                    blob = self.repo.get(entry[0])
                    data = blob.data if isinstance(blob, pygit2.Blob) else b""
                    self._names[key] = name in data and word.search(data) is not None
                except (KeyError, pygit2.GitError):  # a blob this clone lacks says nothing
                    self._names[key] = False
            if self._names[key]:
                return True
        return False

    def pick_sequence(self, base_tree: str, shas: Sequence[Sha],
                      resolve: Callable[[PickStep, str], Resolutions | None] | None = None,
                      stop_on_conflict: bool = False,
                      depends: Mapping[Sha, Sequence[Dependency]] | None = None,
                      held_before: Collection[Sha] = (),
                      visit: Callable[[int, str], None] | None = None) -> UnitPick:
        """Pick commits in order onto a tree; conflicted ones are resolved or left out, and so is
        every later one that depends on one left out (here or in `held_before`), naming what it
        waits for (see `waits_for`); `visit(i, tree)` is told the tree each `shas[i]` comes onto."""
        pick = self.pick
        tree = base_tree
        applied: list[Sha] = []
        empty: list[Sha] = []
        conflicted: list[PickStep] = []
        resolved: dict[Sha, Resolutions] = {}
        held: dict[Sha, Dependency] = {}
        out: set[Sha] = set(held_before)
        for i, sha in enumerate(shas):
            if visit is not None:
                visit(i, tree)
            blocking = [d for d in (depends or {}).get(sha, ()) if d.on in out]
            hard = self.waits_for(blocking, tree, sha)
            if hard is not None:
                held[sha] = hard
                out.add(sha)
                continue
            if blocking and self.conflicts_where(tree, sha, blocking):
                held[sha] = blocking[0]  # its conflict is what it waits for (no need to merge the rest)
                out.add(sha)
                continue
            step = pick(tree, sha)
            if blocking and step.status in (PickStatus.CONFLICT, PickStatus.MISSING, PickStatus.REFUSED):
                held[sha] = blocking[0]  # its conflict is what it waits for
                out.add(sha)
                continue
            if step.status is PickStatus.CONFLICT and resolve is not None:
                fix = resolve(step, tree)
                if fix is not None:
                    after = self.resolve(tree, sha, fix)
                    if after == tree:  # the resolution keeps the tree as it was: already applied
                        empty.append(sha)
                        continue
                    tree = after
                    resolved[sha] = fix
                    applied.append(sha)
                    continue
            if step.status in (PickStatus.CONFLICT, PickStatus.MISSING, PickStatus.REFUSED):
                conflicted.append(step)
                out.add(sha)
                if stop_on_conflict:
                    break
            elif step.status is PickStatus.EMPTY:
                empty.append(sha)
            else:
                applied.append(sha)
                tree = step.tree
        return UnitPick(tree, tuple(applied), tuple(empty), tuple(conflicted), resolved, held)

    # -- writing commits ---------------------------------------------------
    def committer(self) -> pygit2.Signature:
        name = os.environ.get("GIT_COMMITTER_NAME")
        email = os.environ.get("GIT_COMMITTER_EMAIL")
        if not (name and email):
            try:
                sig = self.repo.default_signature
                name, email = name or sig.name, email or sig.email
            except (KeyError, pygit2.GitError):
                name, email = name or "forkflow", email or "forkflow@localhost"
        return pygit2.Signature(name, email)

    def author(self, sha: str) -> pygit2.Signature:
        return self._commit(sha).author

    def raw_message(self, sha: str) -> tuple[bytes, str | None]:
        c = self._commit(sha)
        return c.raw_message, c.message_encoding

    def write_commit(self, tree: str, parent: Sha, message: bytes, author: pygit2.Signature | None = None,
                     encoding: str | None = None) -> Sha:
        """Write a commit object (no ref moves); returns its sha.  With batch writes, `flush()` before
        git needs it."""
        committer = self.committer()
        oid = pygit2.Oid(hex=tree)
        parents: list[str | pygit2.Oid] = [pygit2.Oid(hex=parent)]
        if encoding:
            return Sha(str(self.repo.create_commit(None, author or committer, committer, message, oid, parents,
                                                   encoding)))
        return Sha(str(self.repo.create_commit(None, author or committer, committer, message, oid, parents)))
