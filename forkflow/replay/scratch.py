"""The scratch repository and store a replay works in: the user's checkout and store stay as they are.

The scratch repository is bare and borrows the user's objects (`objects/info/alternates`), so it
costs no copy; what forkflow writes while replaying (picked trees, candidate commits, refs) lands
in it.  Its store keeps the ledger, touch and patch-id caches between runs.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event

from forkflow.config import Config
from forkflow.git.repo import Repo
from forkflow.git.run import run_git
from forkflow.models import Sha
from forkflow.state import state_dir
from forkflow.store.session import Store


@dataclass(frozen=True, slots=True)
class Scratch:
    root: Path
    repo: Repo
    store: Store


def scratch_root(user: Repo) -> Path:
    return state_dir(user) / "replay"


def open_scratch(user: Repo, config: Config, slot: int = 0) -> Scratch:
    """The scratch repository under `<git-common-dir>/forkflow/replay/`, created on first use; one per
    worker `slot`."""
    root = scratch_root(user)
    name = "" if slot == 0 else f"-{slot}"
    path = root / f"repo{name}.git"
    if not (path / "HEAD").exists():
        path.mkdir(parents=True, exist_ok=True)
        run_git("init", "-q", "--bare", str(path), cwd=root)
        run_git("config", "gc.auto", "0", cwd=path)  # nothing repacks while a replay runs
        run_git("remote", "add", config.upstream_remote, str(user.path), cwd=path)
    common = Path(run_git("rev-parse", "--git-common-dir", cwd=user.path).strip())
    objects = (common if common.is_absolute() else user.path / common).resolve() / "objects"
    (path / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (path / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")
    store = Store.open(f"sqlite:///{root / f'scratch{name}.db'}")
    # a step writes a landing unit and a decision per commit, each its own transaction: without an
    # fsync per commit (the scratch store is disposable; a crash costs only cached work)
    event.listen(store.engine, "connect", _no_sync)
    store.engine.dispose()
    return Scratch(root, Repo(path), store)


def _no_sync(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA synchronous=OFF")
    cur.close()


def forget_objects(scratch: Scratch, keep: Sha | None = None, since: tuple[Sha, ...] = ()) -> None:
    """Drop what earlier steps wrote (packs and loose objects of picked trees and candidates).

    Everything the scratch repository holds itself is a by-product of a finished step: the
    commits a step starts from are the user's (borrowed), and results live in the store.
    Without this every landing unit leaves a pack, and object lookups slow down step after step.
    `keep`, grown from the commits `since`, is forkflow's carried branch: what it reaches that
    neither they nor the packs kept before hold is packed first (marked `.keep`), and stays."""
    objects = scratch.repo.path / "objects"
    packs = objects / "pack"
    kept = {f.name[: -len(".keep")] for f in packs.glob("*.keep")} if packs.is_dir() else set()
    if keep is None:
        kept = set()
    else:
        spare = scratch.root / "keep"
        shutil.rmtree(spare, ignore_errors=True)
        spare.mkdir()
        bases = [*since, *_kept_tips(scratch)]
        revs = "\n".join([keep, *(f"^{s}" for s in bases)]) + "\n"
        name = scratch.repo.git("pack-objects", "--revs", "--local", "-q", str(spare / "pack"), input=revs).strip()
        for f in spare.iterdir():
            f.replace(packs / f.name)
        (packs / f"pack-{name}.keep").write_text(keep + "\n", encoding="utf-8")
        kept.add(f"pack-{name}")
    for sub in objects.iterdir():
        if sub.name == "pack":
            for f in sub.iterdir():
                if f.name.split(".")[0] not in kept:
                    f.unlink(missing_ok=True)
        elif len(sub.name) == 2 and sub.is_dir():
            shutil.rmtree(sub, ignore_errors=True)


def _kept_tips(scratch: Scratch) -> list[str]:
    """The branch tips whose objects kept packs hold (each `.keep` file names its tip)."""
    packs = scratch.repo.path / "objects" / "pack"
    return [f.read_text(encoding="utf-8").strip() for f in packs.glob("*.keep")] if packs.is_dir() else []


def has_commit(scratch: Scratch, sha: str) -> bool:
    """Whether the scratch repository has the commit (a carried branch survives only in it)."""
    return bool(sha) and scratch.repo.git("rev-parse", "-q", "--verify", f"{sha}^{{commit}}",
                                          check=False).strip() == sha


def set_state(scratch: Scratch, config: Config, fork: Sha, upstream: Sha) -> None:
    """Point the scratch fork branch and upstream branch at a step's SHAs; forget forkflow's refs."""
    lines = [f"update {config.fork_ref} {fork}", f"update {config.upstream_ref} {upstream}"]
    refs = scratch.repo.git("for-each-ref", "--format=%(refname)", "refs/forkflow/").split()
    lines += [f"delete {ref}" for ref in refs]
    scratch.repo.git("update-ref", "--stdin", input="\n".join(lines) + "\n")
