"""Trivial conflicts: both sides made the same change, whitespace-only differences, and unions of
import/include lists.  [pure]"""
from __future__ import annotations

import re

from forkflow.conflicts.case import ConflictCase, decode, encode
from forkflow.conflicts.classify import Region, fill_regions, regions
from forkflow.conflicts.redefined import redefined
from forkflow.conflicts.resolvers import Proposal
from forkflow.planning.symbols import Lang, language_of

_IMPORT = re.compile(r"^\s*(#\s*include\s*[<\"]|import\s+\w|from\s+[\w.]+\s+import\s)")


def _ws(text: str) -> str:
    return "".join(text.split())


def _ws_indented(text: str) -> str:
    """`_ws` that keeps each line's indentation: in Python a statement moved into a block (or out
    of one) changes what the code does, though only whitespace changed."""
    return "\n".join(f"{len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())} {_ws(line)}"
                     for line in text.splitlines() if line.strip())


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines(keepends=True) if line.strip()]


def _is_import_block(text: str) -> bool:
    lines = _lines(text)
    return all(_IMPORT.match(line) for line in lines)


def _module(line: str) -> str:
    """What an import or include line imports from: `a.b` of `from a.b import c`, `<x>` of `#include <x>`."""
    words = line.replace("#", " ").split()
    return words[1] if len(words) > 1 else line.strip()


def _import_union(r: Region) -> str | None:
    if not (_is_import_block(r.ours) and _is_import_block(r.theirs) and _is_import_block(r.base)):
        return None
    ours, theirs, base = _lines(r.ours), _lines(r.theirs), set(_lines(r.base))
    added_o, added_t = set(ours) - base, set(theirs) - base
    if added_o and added_t and added_o != added_t and (added_o <= added_t or added_t <= added_o):
        # one side already has the other's new imports (picked earlier) and more of its own, which
        # the other side's change may make unneeded: on fbtriton the one such union was wrong
        return None
    dropped = {line for line in base if line not in ours or line not in theirs}
    if any(_module(x) == _module(line) and x != line for line in dropped for x in ours + theirs):
        return None  # one side dropped an import the other edited (moved elsewhere?): not a union
    merged = [line for line in ours if line not in dropped]
    merged += [line for line in theirs if line not in merged and line not in dropped]
    if ours == sorted(ours) and theirs == sorted(theirs):
        merged.sort()
    return "".join(merged)


def resolve_region(r: Region, indent_matters: bool = False) -> tuple[str, str] | None:
    """(resolved text, which rule) for one region, or None when it is not trivial.  With
    `indent_matters` (Python) a change of indentation is not a whitespace-only change."""
    if r.ours == r.theirs:
        return r.ours, "same change on both sides"
    ws = _ws_indented if indent_matters else _ws
    if ws(r.ours) == ws(r.theirs):
        return r.theirs, "whitespace-only difference"
    if ws(r.base) == ws(r.ours):
        return r.theirs, "the fork changed only whitespace"
    if ws(r.base) == ws(r.theirs):
        return r.ours, "upstream changed only whitespace"
    union = _import_union(r)
    if union is not None:
        return union, "union of import/include lists"
    return None


class TrivialResolver:
    name = "trivial"

    def propose(self, case: ConflictCase) -> Proposal | None:
        if not case.kind.is_text or not case.segments:
            return None
        if case.region_count == 0:  # libgit2 saw a conflict that git's own merge settles
            return Proposal(encode(fill_regions(case.segments, [])), "git merge-file merges it cleanly")
        if len({b"\r\n" in x for x in (case.ours, case.theirs) if x is not None}) > 1:
            return None  # CRLF on one side only: "whitespace-only" would mix line endings in one file
        texts: list[str] = []
        rules: list[str] = []
        python = language_of(case.path) is Lang.PYTHON
        for r in regions(case.segments):
            hit = resolve_region(r, python)
            if hit is None:
                return None
            texts.append(hit[0])
            rules.append(hit[1])
        merged = fill_regions(case.segments, texts)
        if redefined(case.path, merged, decode(case.ours) or "", decode(case.theirs) or "") is not None:
            return None  # each side added the same name in different places: see conflicts.redefined
        return Proposal(encode(merged), "; ".join(dict.fromkeys(rules)))
