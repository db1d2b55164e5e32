"""The store's forks: the id every other table is keyed by, and the name a fork is known by.

A fork's name is its identity in a shared store: every clone of the fork must come to the same
one, or two clones take two locks and race.  `forkflow init` writes it into the tracked
`forkflow.toml` as `[fork] name`, made from the shared remote's URL and the fork branch
(`identity`), so a clone in a folder of any name finds the same fork."""
from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forkflow.store.schema import ForkRow

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@host:owner/repo.git


def normalise_remote(url: str) -> str:
    """A remote URL as every clone of it writes it: no scheme, user, password, port-less `:`
    (scp form), trailing `.git` or `/`; host in lower case.  `https://u:p@GitHub.com/a/b.git`,
    `git@github.com:a/b` and `ssh://git@github.com/a/b/` all give `github.com/a/b`.  [pure]"""
    u = url.strip()
    if _SCHEME.match(u):
        u = _SCHEME.sub("", u)
        host, sep, path = u.partition("/")
        host = host.rsplit("@", 1)[-1]
        u = host.lower() + sep + path
    elif (m := _SCP.match(u)) is not None and not u.startswith("/"):
        u = f"{m.group(1).lower()}/{m.group(2)}"
    u = u.rstrip("/")
    if u.endswith(".git"):
        u = u[:-4]
    return u.rstrip("/")


def identity(remote_url: str, branch: str) -> str:
    """The fork's name from its shared remote and branch: `github.com/meta/triton:main`.  [pure]"""
    return f"{normalise_remote(remote_url)}:{branch}"[:400]


def fork_id(s: Session, name: str, legacy: Sequence[str] = ()) -> int:
    """The id of the fork called `name`, created on first use.

    A store written before the fork had this name knows it by one of `legacy` (the checkout
    folder and branch): that row is renamed to `name`, so its history and decisions follow."""
    row = s.scalar(select(ForkRow).where(ForkRow.name == name))
    if row is None:
        for old in legacy:
            if old == name:
                continue
            renamed = s.execute(update(ForkRow).where(ForkRow.name == old).values(name=name))
            if getattr(renamed, "rowcount", 0) == 1:
                row = s.scalar(select(ForkRow).where(ForkRow.name == name))
                break
    if row is None:
        try:
            with s.begin_nested():  # two first runs may add the same fork at once: one wins
                row = ForkRow(name=name)
                s.add(row)
                s.flush()
        except IntegrityError:
            row = s.scalar(select(ForkRow).where(ForkRow.name == name))
            assert row is not None
    return row.id
