"""A region merged token by token.  [pure]

Git merges lines; two edits of one line conflict even when they change different words of it
(upstream renaming `builder.create<Op>(...)` to `Op::create(builder, ...)` while the fork added an
argument).  Here each side's edits of the region's base are taken apart at the token level (words
and punctuation, whitespace aside) and applied together when no two touch.  Each token keeps the
whitespace it has on the side whose neighbour precedes it in the result.
"""
from __future__ import annotations

from forkflow.conflicts.resolvers.matcher import SequenceMatcher
import re
from dataclasses import dataclass
from functools import lru_cache

_TOKEN = re.compile(r"(\s*)(\w+|\S)")


@dataclass(frozen=True, slots=True)
class Text:
    """A text split into tokens, the whitespace before each, and the whitespace after the last."""

    words: tuple[str, ...]
    spaces: tuple[str, ...]
    tail: str

    @classmethod
    def of(cls, text: str) -> Text:
        return _text_of(text)


@lru_cache(maxsize=1024)
def _text_of(text: str) -> Text:
    """Cached: the lag and layout rules take each region's sides apart again and again (1,459 times
    for 74 conflicts of a real backlog, a sixth of the resolvers' time); a Text never changes."""
    words, spaces = [], []
    end = 0
    for m in _TOKEN.finditer(text):
        spaces.append(m.group(1))
        words.append(m.group(2))
        end = m.end()
    return Text(tuple(words), tuple(spaces), text[end:])


Edit = tuple[int, int, int, int]  # base[i1:i2] becomes side[j1:j2]


def align(base: tuple[str, ...], side: tuple[str, ...]) -> tuple[list[Edit], dict[int, int]]:
    """The side's token edits of base, and where each base token it kept is in the side."""
    sm = SequenceMatcher(None, base, side, autojunk=False)
    kept: dict[int, int] = {}
    edits: list[Edit] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            kept.update({i1 + k: j1 + k for k in range(i2 - i1)})
        else:
            edits.append((i1, i2, j1, j2))
    return edits, kept


class Clash(Exception):
    """The sides' token edits overlap or touch; the message says how."""


def merge_tokens(base: str, ours: str, theirs: str, origin: str | None = None) -> str:
    """Both sides' token edits of base applied together, or raises Clash.

    With `origin` (the region's lines at the fork point), a fork edit that restores the origin's
    words is an upstream change the fork has not picked, not the fork's own: it is left out, so
    upstream's words stand there."""
    b, o, t = Text.of(base), Text.of(ours), Text.of(theirs)
    co, o_kept = align(b.words, o.words)
    ct, t_kept = align(b.words, t.words)
    if origin is not None:
        lag = _lagging(b, o, Text.of(origin), co)
        if lag:
            co = [e for e in co if e not in lag]
            for i1, i2, _, _ in lag:  # the base's words stand where the fork lags
                o_kept.update({x: -1 for x in range(i1, i2)})
    _check(co, ct, o, t, b)
    items = sorted([(e, 0) for e in co] + [(e, 1) for e in ct])
    out: list[tuple[str, int | None, int | None]] = []  # (token, index in ours, index in theirs)
    pos = 0
    for (i1, i2, j1, j2), side in items:
        if i1 < pos:
            continue  # the same edit on both sides, applied once
        out += [(b.words[x], o_kept.get(x), t_kept.get(x)) for x in range(pos, i1)]
        out += [(o.words[j], j, None) if side == 0 else (t.words[j], None, j) for j in range(j1, j2)]
        pos = i2
    out += [(b.words[x], o_kept.get(x), t_kept.get(x)) for x in range(pos, len(b.words))]
    return _render(out, o, t)


_LAYOUT = frozenset(",()")  # what formatters add or drop: trailing commas, wrapping parentheses


def fork_lags(base: str, ours: str, origin: str) -> bool:
    """Whether every word the fork's side changed in base restores the origin's words: the fork
    never changed these lines (at most re-wrapped them), upstream did after the fork point and the
    fork has not picked that."""
    b, o, g = Text.of(base), Text.of(ours), Text.of(origin)
    if _code(o) == _code(g) and _code(b) != _code(g):
        return True
    co, _ = align(b.words, o.words)
    return bool(co) and len(_lagging(b, o, g, co)) == len(co)


def _code(text: Text) -> list[str]:
    return [w for w in text.words if w not in _LAYOUT]


def _lagging(b: Text, o: Text, origin: Text, co: list[Edit]) -> list[Edit]:
    """The fork's edits that are the same edit as base -> origin: the fork still has the old words."""
    back, _ = align(b.words, origin.words)
    undone = {(i1, i2, origin.words[j1:j2]) for i1, i2, j1, j2 in back}
    return [e for e in co if (e[0], e[1], o.words[e[2]:e[3]]) in undone]


def _names(words: tuple[str, ...]) -> set[str]:
    return {w for w in words if len(w) >= 4 and (w[0].isalpha() or w[0] == "_")}


def _check(co: list[Edit], ct: list[Edit], o: Text, t: Text, b: Text) -> None:
    new_o = _names(tuple(w for _, _, j1, j2 in co for w in o.words[j1:j2])) - set(b.words)
    new_t = _names(tuple(w for _, _, j1, j2 in ct for w in t.words[j1:j2])) - set(b.words)
    if new_o & new_t:  # two versions of one change (the fork picked an earlier form of it)
        raise Clash(f"both sides bring in {sorted(new_o & new_t)[0]}")
    for i1, i2, j1, j2 in co:
        for k1, k2, l1, l2 in ct:
            same = (i1, i2) == (k1, k2) and o.words[j1:j2] == t.words[l1:l2]
            if same:
                continue
            if k1 <= i2 and i1 <= k2:
                raise Clash("the sides' edits touch the same words")
            added_o, added_t = o.words[j1:j2], t.words[l1:l2]
            if len(added_o) >= 2 and added_o == added_t:
                raise Clash("both sides added the same words in different places")


def _render(out: list[tuple[str, int | None, int | None]], o: Text, t: Text) -> str:
    parts: list[str] = []
    prev: tuple[int | None, int | None] = (None, None)
    for word, jo, jt in out:
        if jo == -1:  # a base word where the fork lags: laid out as upstream has it
            jo = None
        if jo is not None and (prev[0] == jo - 1 or jt is None or prev[1] != jt - 1):
            space = o.spaces[jo]
        elif jt is not None:
            space = t.spaces[jt]
        else:
            space = " "
        parts.append(space + word)
        prev = (jo, jt)
    return "".join(parts) + o.tail


def merge_lines(base: str, ours: str, theirs: str, origin: str | None = None) -> str:
    """merge_tokens line by line, when each side edited the base's lines in place (as many lines on
    each side, each line its base line's edit); raises Clash otherwise.  Word alignment across lines
    of repetitive code (lists of similar calls, tables of layouts) is where word merges go wrong."""
    b, o, t = (x.splitlines(keepends=True) for x in (base, ours, theirs))
    g = origin.splitlines(keepends=True) if origin is not None else None
    if not len(b) == len(o) == len(t):
        raise Clash("the sides did not edit the lines in place")
    if g is not None and len(g) != len(b):
        g = None
    return "".join(merge_tokens(b[i], o[i], t[i], g[i] if g is not None else None) for i in range(len(b)))

