"""Deterministic checks every proposed resolution must pass before it is used.  [pure]

No conflict markers, changes only inside the conflicted regions, and the file still parses for
languages forkflow parses.  (The unit's L1 gate is the last guardrail; landing runs it.)
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from forkflow.conflicts.case import ConflictCase, decode
from forkflow.conflicts.classify import ConflictKind, extract_regions, has_markers, regions
from forkflow.planning.symbols import parses_cleanly


@dataclass(frozen=True, slots=True)
class GuardrailCheck:
    ok: bool
    reason: str
    regions: tuple[str, ...] = ()  # the resolved text of each region, when ok


def check(case: ConflictCase, content: bytes | None, fork_file: bytes | None = None) -> GuardrailCheck:
    """Accept or reject a proposed resolution of one conflicted path, saying why.  `fork_file`:
    the fork's own file the result must keep parsing like, when the case's `ours` is not it (a
    case rebuilt from a marked file has the merge's clean hunks in it: `case_from_marked`)."""
    if content is None:
        if case.kind is ConflictKind.DELETE_MODIFY:
            return GuardrailCheck(True, "deletes the path, as one side did")
        return GuardrailCheck(False, "deletes the path, but neither side deleted it")
    if case.kind is ConflictKind.DELETE_MODIFY:
        if content == (case.ours if case.ours is not None else case.theirs):
            return GuardrailCheck(True, "keeps the changed side's file as it is")
        return GuardrailCheck(False, "keeps the path, with content the changed side does not have")
    if not case.kind.is_text:
        return GuardrailCheck(False, f"{case.kind.value} conflicts are left to a person")
    if b"\0" in content:
        return GuardrailCheck(False, "the result is binary (NUL bytes)")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        sides = [decode(case.ours) or "", decode(case.theirs) or ""]
        if all(_is_utf8(s) for s in sides):
            return GuardrailCheck(False, "the result is not UTF-8 text")
        text = content.decode("utf-8", "surrogateescape")
    sides = [decode(x) or "" for x in (case.ours, case.base, case.theirs)]
    if _new_marker_lines(text, sides):
        return GuardrailCheck(False, "conflict markers left in the result")
    found = extract_regions(case.segments, text)
    if found is None:
        return GuardrailCheck(False, "changes outside the conflicted regions")
    for answer, region in zip(found, regions(case.segments)):
        if _new_marker_lines(answer, [region.ours, region.base, region.theirs]):
            return GuardrailCheck(False, "conflict markers left in the result")
    baseline = fork_file if fork_file is not None else case.ours or b""
    if parses_cleanly(case.path, content) is False and parses_cleanly(case.path, baseline) is not False:
        return GuardrailCheck(False, f"{case.path} no longer parses")
    return GuardrailCheck(True, "no markers, only the conflicted regions changed, parses", tuple(found))


def _new_marker_lines(text: str, sides: list[str]) -> bool:
    """Whether `text` has a marker-like line that none of `sides` has.  Checked on the answer
    itself: a side that already holds a Markdown underline `=======` must not let an answer full
    of `<<<<<<<`/`>>>>>>>` through (issue 13, item 2)."""
    if not has_markers(text):
        return False
    known = {m.group(0) for side in sides for m in _MARKER_FULL_LINE.finditer(side)}
    return any(m.group(0) not in known for m in _MARKER_FULL_LINE.finditer(text))


_MARKER_FULL_LINE = re.compile(r"^(?:<{7}|\|{7}|={7}|>{7})(?: [^\n]*)?$", re.M)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
