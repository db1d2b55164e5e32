"""A merge that defines one thing twice: each side added it, in different places.  [pure]

On fbtriton, upstream added an op (a TableGen record, a test kernel) that the fork had already
added under the same name elsewhere in the file; a resolution keeping both regions compiles to a
duplicate definition.  Python and TableGen only: C++ overloads and MLIR split-file tests repeat
names legitimately.
"""
from __future__ import annotations

import re
from collections import Counter

from forkflow.planning.symbols import Lang, language_of

_PY = re.compile(r"^([ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)
_TD = re.compile(r"^(?:def|defm|class|multiclass)[ \t]+(\w+)", re.M)


def _definitions(lang: Lang, text: str) -> Counter[str]:
    if lang is Lang.PYTHON:  # each name with its enclosing defs and classes: `A.f` and `B.f` differ
        out: Counter[str] = Counter()
        scope: list[tuple[int, str]] = []
        for m in _PY.finditer(text):
            while scope and scope[-1][0] >= len(m.group(1)):
                scope.pop()
            scope.append((len(m.group(1)), m.group(2)))
            out[".".join(n for _, n in scope)] += 1
        return out
    return Counter(m.group(1) for m in _TD.finditer(text))


def redefined(path: str, result: str, ours: str, theirs: str) -> str | None:
    """A name the result defines more often than either side does, or None."""
    lang = language_of(path)
    if lang not in (Lang.PYTHON, Lang.TABLEGEN):
        return None
    got, o, t = (_definitions(lang, x) for x in (result, ours, theirs))
    for name, n in got.items():
        if n > max(o[name], t[name]):
            return name
    return None
