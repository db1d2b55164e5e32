"""Reading and moving refs in-process through libgit2: the same loose and packed refs, lock files
and reflog as git, without a `git update-ref` or `git rev-parse` process per unit (257 and 199 of
them, about 3 s of a real fork's ingest, issue 11).

A ref update is a compare-and-swap: libgit2 takes `<ref>.lock`, checks that the ref still holds
the value read, writes, renames; a writer that moved it in between makes it fail.  What libgit2
does not do, git's `reference-transaction` hook, is what `update` leaves to git: a repository with
that hook, a symbolic ref, or one libgit2 cannot open goes through the `git` command (None here).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from forkflow.models import Sha

if TYPE_CHECKING:
    import pygit2


class LockedRef(Exception):
    """`<ref>.lock` is in the way: a git command holds the ref or was killed holding it."""


class LibRefs:
    """A repository's refs through libgit2, or None from `open` where git must do it."""

    def __init__(self, lib: pygit2.Repository) -> None:
        self.lib = lib

    @classmethod
    def open(cls, path: Path, common_dir: Path) -> LibRefs | None:
        """`path`'s refs, `common_dir` its git directory shared by all work trees (hooks live there)."""
        import pygit2  # not at start-up: `forkflow status` and the like never need it

        try:
            lib = pygit2.Repository(str(path))
            configured = lib.config["core.hooksPath"] if "core.hooksPath" in lib.config else None
        except (pygit2.GitError, KeyError, OSError, ValueError):
            return None
        hooks = Path(configured).expanduser() if configured else common_dir / "hooks"
        if not hooks.is_absolute():
            hooks = path / hooks
        if (hooks / "reference-transaction").exists():
            return None  # git runs that hook; libgit2 would not
        return cls(lib)

    @staticmethod
    def _full(ref: str) -> bool:
        return ref.startswith("refs/") or ref == "HEAD"

    def read(self, ref: str) -> Sha | None | Literal[False]:
        """The commit `ref` points at (peeled through symbolic refs); None when there is none; False
        when libgit2 cannot say (git is asked instead: a short name, a revision)."""
        if not self._full(ref):
            return False
        import pygit2

        try:
            found = self.lib.references.get(ref)
            if found is None:
                return None
            return Sha(str(found.resolve().target))
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            return False

    def update(self, ref: str, new: Sha, old: Sha | None, message: str) -> bool | None:
        """Move `ref` from `old` (None: it must not exist) to `new`: True when moved, False when
        another writer got there first, None when git must do it (a symbolic ref, a name libgit2
        refuses).  LockedRef when a lock file is in the way."""
        if not ref.startswith("refs/"):
            return None
        import pygit2

        try:
            current = self.lib.references.get(ref)
            if old is None:
                if current is not None:
                    return False
                self.lib.create_reference_direct(ref, pygit2.Oid(hex=new), False, message=message)
                return True
            if current is None:
                return False
            if current.type != pygit2.enums.ReferenceType.DIRECT:
                return None
            if str(current.target) != old:
                return False
            current.set_target(pygit2.Oid(hex=new), message)
            return True
        except pygit2.AlreadyExistsError:
            return False
        except OSError as e:
            if "failed to lock" in str(e):
                raise LockedRef(str(e)) from e
            return None
        except pygit2.GitError as e:
            if "does not match" in str(e) or "modified" in str(e):
                return False
            return None
        except (KeyError, ValueError, pygit2.InvalidSpecError):
            return None
