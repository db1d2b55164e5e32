"""Conflict kinds, diff3 regions, and the rerere-like key of a conflict.  [pure]

Conflicted text comes from `git merge-file --diff3` with the labels below; it is split into
clean segments and conflict regions.  A resolution may only change the regions.
"""
from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

OURS_LABEL, BASE_LABEL, THEIRS_LABEL = "fork", "base", "upstream"
_OPEN, _BASE, _SEP, _CLOSE = (f"<<<<<<< {OURS_LABEL}", f"||||||| {BASE_LABEL}", "=======",
                              f">>>>>>> {THEIRS_LABEL}")
MARKER_LINE = re.compile(r"^(<{7}|\|{7}|={7}|>{7})( |$)", re.M)
GITLINK = 0o160000


class ConflictKind(str, enum.Enum):
    CONTENT = "content"  # both sides changed the same lines
    ADD_ADD = "add/add"  # both sides added the path with different content
    DELETE_MODIFY = "delete/modify"  # one side deleted what the other changed
    BINARY = "binary"
    SUBMODULE = "submodule"  # both sides moved a submodule pointer
    MODE = "mode"  # file type or mode differs (symlink vs file, executable bit)
    RENAME = "rename"  # the sides disagree on the path

    @property
    def is_text(self) -> bool:
        return self in (ConflictKind.CONTENT, ConflictKind.ADD_ADD)


def classify(base: tuple[int, str] | None, ours: tuple[int, str] | None, theirs: tuple[int, str] | None,
             is_binary: bool) -> ConflictKind:
    """Kind of a conflicted path from each side's (mode, path); None means absent on that side."""
    present = [s for s in (base, ours, theirs) if s is not None]
    if any(mode == GITLINK for mode, _ in present):
        return ConflictKind.SUBMODULE
    if ours is None or theirs is None:
        return ConflictKind.DELETE_MODIFY
    if len({p for _, p in present}) > 1:
        return ConflictKind.RENAME
    if is_binary:
        return ConflictKind.BINARY
    if ours[0] != theirs[0] and base is not None and ours[0] != base[0] and theirs[0] != base[0]:
        return ConflictKind.MODE
    if base is None:
        return ConflictKind.ADD_ADD
    return ConflictKind.CONTENT


@dataclass(frozen=True, slots=True)
class Region:
    base: str
    ours: str
    theirs: str


Segment = str | Region


def parse_marked(text: str) -> tuple[Segment, ...] | None:
    """Split diff3 output into clean text and regions; None if the markers are malformed."""
    out: list[Segment] = []
    clean: list[str] = []
    state = "clean"
    parts: dict[str, list[str]] = {"ours": [], "base": [], "theirs": []}
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if state == "clean" and bare == _OPEN:
            out.append("".join(clean))
            clean = []
            parts = {"ours": [], "base": [], "theirs": []}
            state = "ours"
        elif state == "ours" and bare == _BASE:
            state = "base"
        elif state in ("ours", "base") and bare == _SEP:
            state = "theirs"
        elif state == "theirs" and bare == _CLOSE:
            out.append(Region("".join(parts["base"]), "".join(parts["ours"]), "".join(parts["theirs"])))
            state = "clean"
        elif state == "clean":
            clean.append(line)
        else:
            parts[state].append(line)
    if state != "clean":
        return None
    out.append("".join(clean))
    return tuple(out)


def regions(segments: Sequence[Segment]) -> list[Region]:
    return [s for s in segments if isinstance(s, Region)]


def conflict_key(segments: Sequence[Segment]) -> str:
    """Identity of a conflict for recorded resolutions: its regions' two sides, not its path."""
    h = hashlib.sha256()
    for r in regions(segments):
        h.update(r.ours.encode("utf-8", "surrogateescape") + b"\0")
        h.update(r.theirs.encode("utf-8", "surrogateescape") + b"\0\0")
    return h.hexdigest()


def extract_regions(segments: Sequence[Segment], text: str) -> list[str] | None:
    """What `text` puts in each region, if it keeps every clean segment in place; else None."""
    clean = [s for s in segments if isinstance(s, str)]
    if len(clean) == 1:  # no regions: nothing may change
        return [] if text == clean[0] else None
    if not text.startswith(clean[0]) or not text.endswith(clean[-1]):
        return None
    end = len(text) - len(clean[-1])
    pos = len(clean[0])
    if pos > end:
        return None
    out: list[str] = []
    for seg in clean[1:-1]:
        at = text.find(seg, pos, end)
        if at < 0:
            return None
        out.append(text[pos:at])
        pos = at + len(seg)
    out.append(text[pos:end])
    return out


def fill_regions(segments: Sequence[Segment], texts: Sequence[str]) -> str:
    """The file with each region replaced by its resolved text."""
    it = iter(texts)
    return "".join(s if isinstance(s, str) else next(it) for s in segments)


def has_markers(text: str) -> bool:
    return MARKER_LINE.search(text) is not None
