"""How a person settles a stored conflict: with `forkflow conflicts resolve --file` when it is a
text conflict with regions to fill, else in git by hand (the CLI and the dashboard say the same)."""
from __future__ import annotations

import shlex

from forkflow.conflicts.classify import parse_marked
from forkflow.conflicts.records import ConflictInfo


def has_file_resolution(x: ConflictInfo) -> bool:
    """Whether `conflicts resolve --file` can settle it: a text conflict with regions to fill."""
    return bool(x.key) and bool(x.marked) and parse_marked(x.marked) is not None


_BY_KIND = {  # what settles each kind of path in a `git cherry-pick` that stopped on it
    "binary": "keep upstream's file (git checkout --theirs -- {p}) or the fork's (git checkout --ours -- {p}), "
              "then git add -- {p}",
    "delete/modify": "keep the file (git add -- {p}) or delete it (git rm -- {p})",
    "submodule": "point it at the commit you want (git update-index --cacheinfo 160000,COMMIT,{p})",
}


def by_hand(x: ConflictInfo, branch: str) -> str:
    """How to settle a conflict that has no text regions: pick the commit in git, marked with -x."""
    path = shlex.quote(x.path)
    step = _BY_KIND.get(x.kind, "make {p} what it should be, then git add -- {p}").format(p=path)
    return (f"in git by hand, on a checkout of {branch}: git cherry-pick -x {x.upstream_sha[:12]}; {step}; "
            "git cherry-pick --continue (the -x line tells forkflow it is picked)")
