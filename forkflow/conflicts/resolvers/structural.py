"""Structural conflicts: settled on the code's units, not on git's lines.  [pure]

Each conflict region is merged again at finer grain.  The changes each side made to the region's
base lines are taken apart; a region is settled when

- the two sides changed different lines that git only saw as one conflict because they touch
  (each side's change applies as it is);
- both sides added whole units at the same place (functions, test functions, class members,
  includes/imports, `case`s, TableGen records, MLIR ops or `// -----` test cases), none of them
  defining a name the other side defines: the fork's units first, then upstream's (the unit model
  is `units.py`); or one side's insertion already holds the other's: that one;
- one side inserted lines beside lines the other rewrote, and the insertion does not use what the
  rewrite removed: the insertion goes beside the rewrite;
- one side's change is already in the other side (the fork picked the same upstream change
  earlier, or moved the code and kept the edit): that side is kept;
- both sides made the same change (modulo whitespace);
- one side only renamed identifiers in lines the other edited (`renames.follow_rename`): the
  edit, renamed.

Anything else is declined, and `last_reason` says why.  Python and C/C++ are checked with
tree-sitter (both sides must parse before the merge, and each added unit must parse on its own);
TableGen, MLIR and other text use a line-and-block model (balanced brackets, whole lines).
"""
from __future__ import annotations

from forkflow.conflicts.resolvers.matcher import SequenceMatcher
import re
from collections.abc import Callable
from dataclasses import dataclass

from forkflow.conflicts.case import ConflictCase, decode, encode
from forkflow.conflicts.classify import Region, fill_regions, regions
from forkflow.conflicts.redefined import redefined
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.renames import follow_rename, renamed_first
from forkflow.conflicts.resolvers.tokens import Clash, fork_lags, merge_lines
from forkflow.conflicts.resolvers.trivial import resolve_region
from forkflow.conflicts.resolvers.units import holds_insertion, is_comment, is_unit, norm, ordered, units_clash
from forkflow.planning.symbols import Lang, language_of, parses_cleanly

MAX_REGION_LINES = 3_000  # a region larger than this is a rewrite, not a structural merge
MAX_FILE_BYTES = 4_000_000


@dataclass(frozen=True, slots=True)
class Change:
    """One side's change to a region's base lines: base[start:end] becomes `lines`."""

    start: int
    end: int
    lines: tuple[str, ...]

    @property
    def is_insertion(self) -> bool:
        return self.start == self.end


def changes(base: list[str], side: list[str]) -> list[Change]:
    """The side's edits of base, line by line (whitespace-only line differences count)."""
    sm = SequenceMatcher(None, base, side, autojunk=False)
    return [Change(i1, i2, tuple(side[j1:j2])) for op, i1, i2, j1, j2 in sm.get_opcodes() if op != "equal"]


class Files:
    """The whole files around the regions: each side's lines, and (read once, on first need) the
    words and call forms each side's file uses."""

    def __init__(self, ours: list[str], theirs: list[str]) -> None:
        self.ours, self.theirs = ours, theirs
        self._used: dict[int, tuple[set[str], set[str]]] = {}

    @classmethod
    def of(cls, case: ConflictCase) -> Files:
        return cls((decode(case.ours) or "").splitlines(), (decode(case.theirs) or "").splitlines())

    def used(self, side: int) -> tuple[set[str], set[str]]:
        """(words, call forms) of the fork's file (side 0) or upstream's (side 1)."""
        if side not in self._used:
            lines = self.theirs if side else self.ours
            self._used[side] = (_words(lines), _calls(lines))
        return self._used[side]


class Declined(Exception):
    """A region this resolver cannot settle; the message says why."""


def merge_region(r: Region, lang: Lang | None, files: Files, origin: str | None = None,
                 by_tokens: bool = False) -> tuple[str, str]:
    """(merged text, rule) of one region, or raises Declined."""
    ours_file, theirs_file = files.ours, files.theirs
    try:
        return _merge_region(r, lang, files, origin, by_tokens)
    except Declined:
        if max(r.base.count("\n"), r.ours.count("\n"), r.theirs.count("\n")) > MAX_REGION_LINES:
            raise
        # one side only renamed what the other edited: the edit with the renames applied
        renamed = follow_rename(r.base, r.theirs, r.ours, "\n".join(theirs_file))
        if renamed is not None:
            return renamed, "upstream only renamed what the fork edited: the fork's lines, renamed"
        renamed = follow_rename(r.base, r.ours, r.theirs, "\n".join(ours_file))
        if renamed is not None:
            return renamed, "the fork only renamed what upstream edited: upstream's lines, renamed"
        # upstream renamed and changed more (re-wrapped the lines): rename first, merge the rest
        first = renamed_first(r.base, r.theirs, r.ours, "\n".join(theirs_file))
        if first is not None:
            try:
                text, rule = _merge_region(Region(first[0], first[1], r.theirs), lang, files, None, False)
            except Declined:
                pass
            else:
                return text, f"upstream renamed what the fork edited, then {rule}"
        first = renamed_first(r.base, r.ours, r.theirs, "\n".join(ours_file))
        if first is not None:
            try:
                text, rule = _merge_region(Region(first[0], r.ours, first[1]), lang, files, None, False)
            except Declined:
                pass
            else:
                return text, f"the fork renamed what upstream edited, then {rule}"
        raise


def _merge_region(r: Region, lang: Lang | None, files: Files, origin: str | None,
                  by_tokens: bool) -> tuple[str, str]:
    ours_file, theirs_file = files.ours, files.theirs
    hit = resolve_region(r, lang is Lang.PYTHON)
    if hit is not None and not hit[1].startswith("union"):
        return hit
    base, ours, theirs = (r.base.splitlines(keepends=True), r.ours.splitlines(keepends=True),
                          r.theirs.splitlines(keepends=True))
    if max(len(base), len(ours), len(theirs)) > MAX_REGION_LINES:
        raise Declined(f"a region of more than {MAX_REGION_LINES} lines")
    # Where one side only reformatted the lines, the right answer is the other side's change in the
    # reformatted layout, which takes a formatter: taking either side was wrong about half the time
    # on fbtriton, so such regions are left to a person.
    co, ct = changes(base, ours), changes(base, theirs)
    merged = _interleave(base, co, ct, lang, files)
    if isinstance(merged, tuple):
        return merged
    kept = _subsumed(r, base, co, ct, files, lang)
    if kept is not None:
        return kept
    if origin is not None and fork_lags(r.base, r.ours, origin):
        return r.theirs, "the fork's side only lacks upstream changes it has not picked: upstream's lines"
    if by_tokens:
        try:
            return merge_lines(r.base, r.ours, r.theirs, origin), "the sides changed different words of the lines"
        except Clash as c:
            raise Declined(f"both sides changed the same lines differently ({c})") from None
    for who, side, other, side_file in (("the fork", r.ours, r.theirs, ours_file),
                                        ("upstream", r.theirs, r.ours, theirs_file)):
        if _moved_away(r.base, side, other, side_file, lang):
            raise Declined(f"{who} moved this code and the other side edited it: the edit must follow "
                           "the move, outside the conflict")
    if isinstance(merged, str):
        raise Declined(f"one side inserted lines beside lines the other rewrote, and {merged}")
    raise Declined("both sides changed the same lines differently")


def _interleave(base: list[str], co: list[Change], ct: list[Change], lang: Lang | None,
                files: Files) -> tuple[str, str] | str | None:
    """Apply both sides' changes when no two overlap; insertions at one place must be whole units.
    A string says why an insertion could not go beside the other side's rewrite it touches."""
    rule = "the sides changed different lines"
    items = sorted([(c.start, c.end, 0, c) for c in co] + [(c.start, c.end, 1, c) for c in ct],
                   key=lambda x: x[:3])
    out: list[str] = []
    pos = 0
    last: tuple[int, Change] | None = None  # the side and change that ended at `pos`
    i = 0
    while i < len(items):
        start, end, side, c = items[i]
        lines = c.lines
        if i + 1 < len(items):
            d_start, d_end, d_side, d = items[i + 1]
            if d_side != side and (d_start < end or (d_start == start and c.is_insertion and d.is_insertion)):
                if (start, end) == (d_start, d_end) and norm(lines) == norm(d.lines):
                    rule = "both sides made the same change"
                elif c.is_insertion and d.is_insertion:
                    ours, theirs = (c, d) if side == 0 else (d, c)
                    held = holds_insertion(ours.lines, theirs.lines)
                    if held is not None:
                        lines, rule = held
                    else:
                        why = units_clash(list(ours.lines), list(theirs.lines), lang)
                        if why is not None:
                            raise Declined(why)
                        lines = ordered(ours.lines, theirs.lines)
                        rule = "both sides added whole units at one place"
                else:
                    return None  # the sides changed the same lines
                i += 1
        if start < pos:
            return None
        if start == pos and last is not None and last[0] != side:
            # the sides' changes touch: git's conflict stands, unless one side only inserted lines
            # beside lines the other rewrote, and the insertion does not depend on what was rewritten
            if last[1].is_insertion == c.is_insertion:
                return None  # both rewrote (or both inserted, at different places) touching lines
            (ins, ins_side), rew = ((last[1], last[0]), c) if last[1].is_insertion else ((c, side), last[1])
            why = _beside(base, ins, rew, lang, lambda: files.used(1 - ins_side))
            if why is not None:
                return why
            rule = "an insertion beside lines the other side rewrote"
        last = (side, Change(start, end, tuple(lines)))
        out += base[pos:start]
        out += lines
        pos = end
        i += 1
    out += base[pos:]
    return "".join(out), rule


_WORD = re.compile(r"[A-Za-z_]\w*")
_CALL = re.compile(r"(\.|->|::)?\s*([A-Za-z_]\w*)\s*(<[^<>()]*>)?\s*\(")


def _words(lines: tuple[str, ...] | list[str]) -> set[str]:
    return {w for x in lines for w in _WORD.findall(x)}


def _calls(lines: tuple[str, ...] | list[str]) -> set[str]:
    """Call forms the lines use: `f(`, `.f(` (a member call), `::f(`, `.f<(` (with template arguments)."""
    return {(a.replace("->", ".") + f + ("<" if t else "") + "(")
            for x in lines for a, f, t in _CALL.findall(x)}


def _beside(base: list[str], ins: Change, rew: Change, lang: Lang | None,
            rewriter_uses: Callable[[], tuple[set[str], set[str]]]) -> str | None:
    """Why an insertion touching the other side's rewrite cannot simply go beside it, or None.
    `rewriter_uses`: the words and call forms of the rewriting side's whole file."""
    if not _code(ins.lines, lang):
        return "the insertion is blank or comments only"
    if not is_unit(list(ins.lines), lang):
        return "the insertion is not whole units"
    old = base[rew.start:rew.end]
    removed = _words(old) - _words(rew.lines)
    dropped = _calls(old) - _calls(rew.lines)
    if not _code(rew.lines, lang):  # a deletion: only names and calls gone from that side's whole file count
        file_words, file_calls = rewriter_uses()
        removed -= file_words
        dropped -= file_calls
    used = sorted(_words(ins.lines) & removed)
    if used:
        return f"the insertion uses {used[0]}, which the rewrite removed"
    gone = sorted(_calls(ins.lines) & dropped)
    if gone:
        return f"the insertion calls {gone[0]}, a form the rewrite stopped using"
    if set(_code(ins.lines, lang)) & set(_code(rew.lines, lang)):
        return "the insertion repeats the rewrite's lines"
    return None


def _subsumed(r: Region, base: list[str], co: list[Change], ct: list[Change], files: Files,
              lang: Lang | None) -> tuple[str, str] | None:
    """Keep one side when it already holds the other side's change (and not the reverse)."""
    o_has_t = _holds(r.ours, ct, base, lang) or _moved_with(r.ours, r.theirs, r.base, files.ours, lang)
    t_has_o = _holds(r.theirs, co, base, lang) or _moved_with(r.theirs, r.ours, r.base, files.theirs, lang)
    if o_has_t and not t_has_o:
        return r.ours, "the fork already has upstream's change"
    if t_has_o and not o_has_t:
        return r.theirs, "upstream's side already has the fork's change"
    return None


_COMMENT = re.compile(r"^\s*(//|#(?!\s*include)|/\*|\*)")


def _code(lines: list[str] | tuple[str, ...], lang: Lang | None = None) -> list[str]:
    """The lines that are not comments (in MLIR, lit's directives and `#` attribute aliases are code)."""
    if lang is Lang.MLIR:
        return [x for x in norm(lines) if not is_comment(x, lang)]
    return [x for x in norm(lines) if not _COMMENT.match(x)]


def _holds(side_text: str, other: list[Change], base: list[str], lang: Lang | None) -> bool:
    """Whether the other side's change is already in this side's region: the code it removed is
    gone from it and the code it added is in it (comment lines aside)."""
    here = set(_code(side_text.splitlines(), lang))
    added = [x for c in other for x in _code(c.lines, lang)]
    removed = [x for c in other for x in _code(base[c.start:c.end], lang) if x not in set(_code(c.lines, lang))]
    if not any(sum(ch.isalnum() for ch in x) >= 8 for x in added + removed):
        return False
    if not added and any(_edited(x, here) for x in removed):
        return False  # this side edited what the other deleted: a delete/modify of lines
    return all(x in here for x in added) and not any(x in here for x in removed)


def _edited(line: str, lines: set[str]) -> bool:
    """Whether some line is an edit of `line` (most of its characters kept)."""
    return any(SequenceMatcher(None, line, x, autojunk=False).ratio() > 0.6 for x in lines)


def _moved_with(side_text: str, other_text: str, base_text: str, side_file: list[str], lang: Lang | None) -> bool:
    """Whether this side moved the region's code away and its file holds the other side's version
    of it, word for word, elsewhere: the other side's edit already followed the move."""
    gone = _code(base_text.splitlines(), lang)
    other = _code(other_text.splitlines(), lang)
    if len(other) < 2 or any(x in set(_code(side_text.splitlines(), lang)) for x in gone):
        return False
    lines = _code(side_file, lang)
    n = len(other)
    return any(lines[i:i + n] == other for i in range(len(lines) - n + 1) if lines[i] == other[0])


def _moved_away(base_text: str, side_text: str, other_text: str, side_file: list[str], lang: Lang | None) -> bool:
    """Whether this side removed the region's code, which it has elsewhere, while the other edited it."""
    gone = [x for x in _code(base_text.splitlines(), lang) if x not in set(_code(side_text.splitlines(), lang))]
    if len(gone) < 3 or _code(other_text.splitlines(), lang) == _code(base_text.splitlines(), lang):
        return False
    lines = _code(side_file, lang)
    at = [i for i, x in enumerate(lines) if x == gone[0]]
    return any(lines[i:i + len(gone)] == gone for i in at)


def origin_regions(case: ConflictCase) -> list[str | None]:
    """Each region's lines at the fork point (case.origin), found by aligning the base's lines with
    the origin's; None where there is no origin.  The last case's answer is kept: the structural
    rules and the region-wise ones (lag, layout) ask for the same case in turn."""
    if _last_origins and _last_origins[0][0] is case:
        return list(_last_origins[0][1])
    out = _origin_regions(case)
    _last_origins[:] = [(case, out)]
    return list(out)


_last_origins: list[tuple[ConflictCase, list[str | None]]] = []  # the last case, and its answer


def _origin_regions(case: ConflictCase) -> list[str | None]:
    regs = regions(case.segments)
    if case.origin is None:
        return [None] * len(regs)
    base: list[str] = []
    spans = []
    for seg in case.segments:
        if isinstance(seg, str):
            base += seg.splitlines(keepends=True)
        else:
            start = len(base)
            base += seg.base.splitlines(keepends=True)
            spans.append((start, len(base)))
    origin = (decode(case.origin) or "").splitlines(keepends=True)
    ops = SequenceMatcher(None, base, origin, autojunk=False).get_opcodes()

    def at(x: int) -> int:  # where base line x (or the end, x == len(base)) sits in the origin
        for tag, i1, i2, j1, j2 in ops:
            if i1 <= x < i2:
                return j1 + (x - i1) if tag == "equal" else j1
        return len(origin)
    return ["".join(origin[at(a):at(b)]) if a < b else None for a, b in spans]


def text_declines(case: ConflictCase) -> str | None:
    """Why no region of this file can be merged as text, or None (the parse check aside: `unparsed`)."""
    if not case.kind.is_text:
        return f"a {case.kind.value} conflict has no text to merge"
    if not case.segments:
        return "no diff3 regions"
    if any(len(x or b"") > MAX_FILE_BYTES for x in (case.base, case.ours, case.theirs)):
        return f"a side is larger than {MAX_FILE_BYTES // 1_000_000} MB"
    if len({b"\r\n" in x for x in (case.ours, case.theirs) if x is not None}) > 1:
        return "line endings differ between the sides (CRLF on one side only)"
    return None


def unparsed(case: ConflictCase) -> str | None:
    """Which side of a Python file does not parse before the merge (tree-sitter-cpp stumbles on
    macros: C++ is checked after the merge instead)."""
    if language_of(case.path) is Lang.PYTHON:
        for name, data in (("fork's", case.ours), ("upstream's", case.theirs)):
            if data is not None and parses_cleanly(case.path, data) is False:
                return f"the {name} file does not parse before the merge"
    return None


class StructuralResolver:
    """Structural merges; `by_tokens` also merges edits of the same lines word by word (measured,
    not in ingest's chain: on fbtriton it was right about half the time, see docs/conflicts.md)."""

    name = "structural"

    def __init__(self, by_tokens: bool = False) -> None:
        self.last_reason = ""
        self.by_tokens = by_tokens
        if by_tokens:
            self.name = "tokens"

    def propose(self, case: ConflictCase) -> Proposal | None:
        # the parse check after the regions: most files decline on a region, and parsing both sides
        # of a large file cost more than all the region rules (1.3 of the resolvers' 3 s on a backlog)
        self.last_reason = text_declines(case) or ""
        if self.last_reason:
            return None
        lang = language_of(case.path)
        files = Files.of(case)
        texts: list[str] = []
        rules: list[str] = []
        for r, origin in zip(regions(case.segments), origin_regions(case)):
            try:
                text, rule = merge_region(r, lang, files, origin, self.by_tokens)
            except Declined as d:
                self.last_reason = str(d)
                return None
            texts.append(text)
            rules.append(rule)
        self.last_reason = unparsed(case) or ""
        if self.last_reason:
            return None
        content, self.last_reason = merged_file(case, texts, files)
        return None if content is None else Proposal(content, "; ".join(dict.fromkeys(rules)))


def merged_file(case: ConflictCase, texts: list[str], files: Files) -> tuple[bytes | None, str]:
    """The file with `texts` in its conflict regions, or (None, why not): a name each side added in
    another place is defined twice, or the merge does not parse where the fork's file does."""
    merged = fill_regions(case.segments, texts)
    twice = redefined(case.path, merged, "\n".join(files.ours), "\n".join(files.theirs))
    if twice is not None:
        return None, f"the merge defines {twice} twice (each side added it, in different places)"
    content = encode(merged)
    if parses_cleanly(case.path, content) is False and parses_cleanly(case.path, case.ours or b"") is not False:
        return None, "the merged file does not parse"
    return content, ""
