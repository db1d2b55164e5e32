"""`Repo`: the git operations forkflow needs, each one a call through `run.py`; ref reads and
compare-and-swap updates through libgit2 where it can (`refs.py`)."""
from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path

from forkflow.errors import GitError, UserError
from forkflow.git.parse import parse_log_z
from forkflow.git.refs import LibRefs, LockedRef
from forkflow.git.run import refuse_option_like, run_git, run_git_bytes
from forkflow.models import Commit, Sha

LOG_FORMAT = "%H%x1f%P%x1f%ct%x1f%an%x1f%B"
_MISSING_OBJECT = re.compile(
    r"bad object|missing (blob|tree|commit)|(could not|unable to) read (tree |blob |commit )?[0-9a-f]{7,}|"
    r"did not receive expected object|invalid object|is corrupt|not a valid object|"
    r"could not fetch [0-9a-f]{7,} from promisor remote",
    re.I,
)


def _missing_objects_error(e: GitError) -> UserError | None:
    if _MISSING_OBJECT.search(e.stderr):
        return UserError(
            f"the repository is missing objects ({e.reason}); a partial or damaged clone cannot be "
            "read offline: run `git fetch --refetch` (or re-clone without --filter) and retry"
        )
    return None


class Repo:
    """A git repository on disk (a fork's checkout or a bare mirror)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._refs: LibRefs | None | bool = False  # False: not opened yet

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path}  # libgit2's handle stays in its process

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

    def lib_refs(self) -> LibRefs | None:
        if self._refs is False:
            self._refs = LibRefs.open(self.path, self.git_dir)
        return self._refs if isinstance(self._refs, LibRefs) else None

    @classmethod
    def open(cls, path: Path | str) -> Repo:
        """Open the repository at or above `path`, or raise a UserError saying what to do."""
        p = Path(path)
        if not p.exists():
            raise UserError(f"{p} does not exist; run forkflow inside your fork's checkout or pass --repo PATH")
        try:
            top = run_git("rev-parse", "--show-toplevel", cwd=p).strip()
            root = Path(top) if top else p
        except GitError as e:
            try:  # a bare repository has no top level
                if run_git("rev-parse", "--is-bare-repository", cwd=p).strip() == "true":
                    return cls(p.resolve())
            except GitError:
                pass
            raise UserError(
                f"{p} is not a git repository; run forkflow inside your fork's checkout or pass --repo PATH"
            ) from e
        return cls(root)

    # -- plain calls -------------------------------------------------------
    def git(self, *args: str, input: str | None = None, check: bool = True,
            env: dict[str, str] | None = None) -> str:
        try:
            return run_git(*args, cwd=self.path, input=input, check=check, env=env)
        except GitError as e:
            missing = _missing_objects_error(e)
            if missing is not None:
                raise missing from e
            raise

    def git_bytes(self, *args: str, input: bytes | None = None) -> bytes:
        try:
            return run_git_bytes(*args, cwd=self.path, input=input)[1]
        except GitError as e:
            missing = _missing_objects_error(e)
            if missing is not None:
                raise missing from e
            raise

    @property
    def git_dir(self) -> Path:
        d = Path(self.git("rev-parse", "--git-common-dir").strip())
        return d if d.is_absolute() else (self.path / d).resolve()

    # -- work trees ----------------------------------------------------------
    def worktrees(self) -> list[tuple[Path, str | None]]:
        """Each work tree of the repository, the main one first: (path, the branch ref checked out
        there, None when detached or bare)."""
        out: list[tuple[Path, str | None]] = []
        for line in self.git("worktree", "list", "--porcelain", check=False).splitlines():
            if line.startswith("worktree "):
                out.append((Path(line.split(" ", 1)[1]), None))
            elif line.startswith("branch ") and out:
                out[-1] = (out[-1][0], line.split(" ", 1)[1])
        return out

    def add_worktree(self, path: Path, rev: str) -> None:
        """A detached work tree of `rev` at `path` (which must not exist or be empty)."""
        self.git("worktree", "add", "--detach", "--quiet", str(path), rev)

    def remove_worktree(self, path: Path) -> None:
        """Remove the work tree at `path`, local changes and all; no error when it is gone."""
        self.git("worktree", "remove", "--force", str(path), check=False)

    def prune_worktrees(self) -> None:
        """Forget work trees whose folders are gone."""
        self.git("worktree", "prune", check=False)

    # -- facts ---------------------------------------------------------------
    def is_shallow(self) -> bool:
        return self.git("rev-parse", "--is-shallow-repository").strip() == "true"

    def is_partial(self) -> bool:
        out = self.git("config", "--get-regexp", r"^(extensions\.partialclone|remote\..*\.promisor)$",
                       check=False)
        return bool(out.strip())

    def remotes(self) -> list[str]:
        return self.git("remote").split()

    def remote_url(self, name: str) -> str | None:
        out = self.git("config", "--get", f"remote.{name}.url", check=False).strip()
        return out or None

    def add_remote(self, name: str, url: str) -> None:
        refuse_option_like(name, "remote name")
        refuse_option_like(url, "remote URL")
        self.git("remote", "add", "--", name, url)

    def fetch(self, remote: str, branch: str) -> None:
        refuse_option_like(remote, "remote")
        refuse_option_like(branch, "branch")
        try:
            self.git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote,
                     f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}")
        except GitError as e:
            err = e.reason
            if "couldn't find remote ref" in e.stderr:
                raise UserError(
                    f"upstream branch '{branch}' does not exist on remote '{remote}'; "
                    "pass the right one with --upstream-branch"
                ) from e
            raise UserError(
                f"cannot fetch from remote '{remote}' ({err}); check the URL with "
                f"`git remote get-url {remote}` and your network, then retry"
            ) from e

    def resolve(self, rev: str) -> Sha | None:
        refuse_option_like(rev, "revision")  # `--until --output=FILE` is not a revision
        out = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip()
        return Sha(out) if out else None

    def merge_base(self, a: str, b: str) -> Sha | None:
        refuse_option_like(a, "revision")
        refuse_option_like(b, "revision")
        out = self.git("merge-base", a, b, check=False).strip()
        return Sha(out) if out else None

    def commit_date(self, rev: str) -> int:
        refuse_option_like(rev, "revision")
        return int(self.git("show", "-s", "--format=%ct", rev).strip())

    def rev_before(self, rev: str, unix_time: int) -> Sha | None:
        refuse_option_like(rev, "revision")
        out = self.git("rev-list", "-1", f"--before={unix_time}", rev, check=False).strip()
        return Sha(out) if out else None

    def log(self, *rev_args: str, first_parent: bool = False, reverse: bool = True) -> list[Commit]:
        """Commits selected by rev_args, oldest first by default (topological)."""
        args = ["log", "-z", f"--format={LOG_FORMAT}", "--topo-order"]
        if reverse:
            args.append("--reverse")
        if first_parent:
            args.append("--first-parent")
        raw = self.git_bytes(*args, *rev_args, "--")
        return parse_log_z(raw)

    def changed_files(self, shas: Iterable[Sha]) -> dict[Sha, tuple[str, ...]]:
        """Paths each commit changes against its first parent."""
        shas = list(shas)
        if not shas:
            return {}
        raw = self.git_bytes("diff-tree", "--stdin", "-r", "--root", "--name-only", "-z",
                             "-m", "--first-parent", "--no-renames",
                             input=("\n".join(shas) + "\n").encode())
        wanted = frozenset(shas)
        out: dict[Sha, list[str]] = {}
        current: list[str] | None = None
        for tok in raw.split(b"\0"):
            if not tok:
                continue
            text = tok.decode("utf-8", "surrogateescape")
            if len(text) == 40 and all(c in "0123456789abcdef" for c in text) and text in wanted:
                current = out.setdefault(Sha(text), [])
                continue
            if current is not None:
                current.append(text.lstrip("\n"))
        return {s: tuple(out.get(s, [])) for s in shas}

    def patch_ids(self, shas: Iterable[Sha]) -> dict[Sha, str]:
        """`git patch-id --stable` of each commit against its first parent; a commit whose diff
        cannot be read (a blob this clone lacks and cannot fetch) has none."""
        shas = list(shas)
        if not shas:
            return {}
        try:
            return self._patch_ids(shas)
        except UserError:  # missing objects: the commits git can still read, half by half
            if len(shas) == 1:
                return {}
            mid = len(shas) // 2
            return {**self.patch_ids(shas[:mid]), **self.patch_ids(shas[mid:])}

    def _patch_ids(self, shas: list[Sha]) -> dict[Sha, str]:
        diff = self.git_bytes("diff-tree", "--stdin", "-r", "--root", "-p", "-m", "--first-parent",
                              "--no-renames", input=("\n".join(shas) + "\n").encode())
        raw = self.git_bytes("patch-id", "--stable", input=diff).decode()
        out: dict[Sha, str] = {}
        for line in raw.splitlines():
            pid, sha = line.split()
            out[Sha(sha)] = pid
        return out

    def update_ref(self, ref: str, new: Sha, old: Sha | None, message: str = "forkflow") -> bool:
        """Move `ref` to `new` only if it still points at `old` (compare-and-swap).

        `old=None` means the ref must not exist yet.  Returns False when another writer won.
        """
        refs = self.lib_refs()
        if refs is not None:
            try:
                moved = refs.update(ref, new, old, message)
            except LockedRef as e:
                raise self._locked(ref) from e
            if moved is not None:
                return moved
        expected = old if old is not None else "0" * 40
        try:
            self.git("update-ref", "-m", message, ref, new, expected)
        except GitError as e:
            if ".lock': File exists" in e.stderr:  # not a lost race: a lock file is in the way
                raise self._locked(ref) from e
            if "cannot lock ref" in e.stderr or "is at" in e.stderr or "but expected" in e.stderr:
                return False
            raise
        return True

    def _locked(self, ref: str) -> UserError:
        lock = self.git_dir / f"{ref}.lock"
        return UserError(f"{ref} is locked ({lock} exists: a git command is running on it, or one "
                         f"was killed); if none is running, delete {lock} and run again")

    def clear_stale_ref_lock(self, ref: str, stale_after: float = 2.0) -> bool:
        """Remove `ref`'s lock file once it has outlived any git command (a killed `update-ref`
        leaves it behind, and every later update of the ref fails).  A lock younger than
        `stale_after` seconds is waited for; True when one was removed."""
        lock = self.git_dir / f"{ref}.lock"
        deadline = time.monotonic() + stale_after + 1.0
        while True:
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                return False
            if age >= stale_after:
                lock.unlink(missing_ok=True)
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def read_ref(self, ref: str) -> Sha | None:
        refs = self.lib_refs()
        if refs is not None and (found := refs.read(ref)) is not False:
            return found
        out = self.git("rev-parse", "--verify", "--quiet", ref, check=False).strip()
        return Sha(out) if out else None

    def merge_file(self, ours: bytes, base: bytes, theirs: bytes,
                   labels: tuple[str, str, str] = ("ours", "base", "theirs")) -> tuple[int, bytes]:
        """`git merge-file -p --diff3` of three contents; returns (number of conflicts, merged text)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="forkflow-merge-") as tmp:
            names = []
            for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                p = Path(tmp) / name
                p.write_bytes(data)
                names.append(str(p))
            rc, out, err = run_git_bytes(
                "merge-file", "-p", "--diff3", "-L", labels[0], "-L", labels[1], "-L", labels[2],
                *names, cwd=tmp, check=False)
        if rc >= 128:
            raise GitError(["git", "merge-file"], rc, "", err.decode("utf-8", "replace"))
        return rc, out

    def is_ancestor(self, maybe: str, of: str) -> bool:
        """Whether `maybe` is `of` or one of its ancestors (False when either is unknown)."""
        if maybe.startswith("-") or of.startswith("-"):
            return False
        rc, _, _ = run_git_bytes("merge-base", "--is-ancestor", maybe, of, cwd=self.path, check=False)
        return rc == 0
