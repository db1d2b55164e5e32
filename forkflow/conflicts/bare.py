"""A conflicted path of a pick as resolver input, without the fork's history: the sides'
contents, the kind of conflict, git's diff3 regions and the path at the fork point.

`conflicts/learn.py` builds these to learn from the fork's past picks; `conflicts/casework.py`
adds the fork's earlier resolutions of the same regions as examples.
"""
from __future__ import annotations

from dataclasses import replace

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import (
    BASE_LABEL,
    OURS_LABEL,
    Segment,
    THEIRS_LABEL,
    classify,
    conflict_key,
    parse_marked,
)
from forkflow.git.commits import file_at
from forkflow.git.pick import MemoryPicker, PathConflict, Side
from forkflow.git.repo import Repo
from forkflow.models import Sha


def _content(picker: MemoryPicker, side: Side | None) -> bytes | None:
    if side is None or side.is_submodule:
        return None
    return picker.blob(side.oid)


def bare_case(repo: Repo, picker: MemoryPicker, sha: Sha, conflict: PathConflict,
              fork_point: Sha | None = None, origin: bool = True) -> ConflictCase:
    """Contents of each side, the kind of conflict and, for text, git's diff3 regions and (unless
    `origin` is False) the path at the fork point (`fork_point`, else where the checked-out fork
    branch and the upstream commit meet)."""
    base, ours, theirs = (_content(picker, s) for s in (conflict.base, conflict.ours, conflict.theirs))
    binary = any(x is not None and b"\0" in x[:8000] for x in (base, ours, theirs))
    b, o, t = ((s.mode, s.path) if s else None for s in (conflict.base, conflict.ours, conflict.theirs))
    kind = classify(b, o, t, is_binary=binary)
    raw, _ = picker.raw_message(sha)
    message = raw.decode("utf-8", "replace")
    segments: tuple[Segment, ...] = ()
    key = ""
    if kind.is_text:
        labels = (OURS_LABEL, BASE_LABEL, THEIRS_LABEL)
        merged = None
        if base and ours is not None and theirs is not None:  # libgit2 leaves an empty base unlabelled
            assert conflict.ours is not None and conflict.theirs is not None
            merged = picker.merge_text(conflict.base, conflict.ours, conflict.theirs, labels)
        if merged is None:
            _, merged = repo.merge_file(ours or b"", base or b"", theirs or b"", labels)
        parsed = parse_marked(merged.decode("utf-8", "surrogateescape"))
        if parsed is not None:
            segments = parsed
            key = conflict_key(parsed)
    case = ConflictCase(sha, message.split("\n", 1)[0], message, conflict.path, kind, base, ours, theirs,
                        segments, key)
    if segments and origin:
        point = fork_point or repo.merge_base("HEAD", sha)
        case = replace(case, origin=file_at(picker, point, conflict.path) if point else None)
    return case
