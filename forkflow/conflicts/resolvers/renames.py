"""One side only renamed identifiers where the other side edited the lines.  [pure]

Upstream renames a type, a function or a variable across a file; the fork had edited some of the
lines that use it, and git's conflict stands.  The right answer is the fork's lines with upstream's
renames applied (or upstream's lines with the fork's).  It is given only when the renaming side's
change of the region is identifier-for-identifier substitutions of compound names (`getPartitionId`,
`tmem_acc`; a single word such as `one` is as often a value), every old name is gone from that
side's whole file (a name still used elsewhere was a change of what the code uses, not a rename),
and no identifier of the answer still carries a word the renames removed (`CTALayout` after
`CTAEncodingAttr` became `CGAEncodingAttr`: the engineers renamed such names too, which takes
judgement).
"""
from __future__ import annotations

from forkflow.conflicts.resolvers.matcher import SequenceMatcher
import re

TOKEN = re.compile(r"[A-Za-z_]\w*|\S")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_KEYWORDS = frozenset({"True", "False", "None", "true", "false", "nullptr", "and", "or", "not", "if", "else",
                       "return", "const", "auto", "int", "float", "bool", "void", "static", "inline"})


def renaming(base: str, side: str) -> dict[str, str] | None:
    """old name -> new name when the side's change of base is identifier substitutions only."""
    b, s = TOKEN.findall(base), TOKEN.findall(side)
    out: dict[str, str] = {}
    for op, i1, i2, j1, j2 in SequenceMatcher(None, b, s, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op != "replace" or i2 - i1 != j2 - j1:
            return None
        for old, new in zip(b[i1:i2], s[j1:j2]):
            if not (_IDENT.fullmatch(old) and _IDENT.fullmatch(new)) or out.get(old, new) != new:
                return None
            out[old] = new
    if not out or any(x in _KEYWORDS or y in _KEYWORDS or len(_words(x)) < 2 for x, y in out.items()):
        # True -> False, n -> m, `echo one` -> `echo two`: a single word is as often a value as a
        # name; the renames the rule was measured on were all of compound names (getPartitionId)
        return None
    return out


def rename(mapping: dict[str, str], text: str) -> str:
    return _IDENT.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def _removed_words(mapping: dict[str, str]) -> set[str]:
    """The words of the old names that the renames replaced (`cta` of CTAEncodingAttr -> CGAEncodingAttr)."""
    out: set[str] = set()
    for old, new in mapping.items():
        a, b = _words(old), _words(new)
        for op, i1, i2, _, _ in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op in ("replace", "delete"):
                out.update(a[i1:i2])
    return out


def follow_rename(base: str, renamer: str, editor: str, renamer_file: str) -> str | None:
    """The editor's lines with the renamer's renames applied, or None when the renamer's change is not
    a pure rename (see the module's docstring)."""
    mapping = renaming(base, renamer)
    if mapping is None or not any(re.search(rf"\b{re.escape(x)}\b", editor) for x in mapping):
        return None
    if set(TOKEN.findall(renamer_file)) & set(mapping):
        return None
    merged = rename(mapping, editor)
    gone = _removed_words(mapping)
    if any(w in gone for name in set(_IDENT.findall(merged)) for w in _words(name)):
        return None
    return merged


def renamed_first(base: str, renamer: str, editor: str, renamer_file: str) -> tuple[str, str] | None:
    """(base, editor) with the renames the renamer made among its other edits applied, so that what
    is left of the renamer's change can be merged with the editor's by the other rules; None when
    it renamed nothing on these terms (compound names, gone from its file, no replaced word left)."""
    b, s = TOKEN.findall(base), TOKEN.findall(renamer)
    mapping: dict[str, str] = {}
    for op, i1, i2, j1, j2 in SequenceMatcher(None, b, s, autojunk=False).get_opcodes():
        if op != "replace" or i2 - i1 != j2 - j1:
            continue
        for old, new in zip(b[i1:i2], s[j1:j2]):
            if _IDENT.fullmatch(old) and _IDENT.fullmatch(new) and len(_words(old)) >= 2 and old not in _KEYWORDS:
                if mapping.get(old, new) != new:
                    return None
                mapping[old] = new
    if not mapping or set(TOKEN.findall(renamer_file)) & set(mapping):
        return None
    new_base, new_editor = rename(mapping, base), rename(mapping, editor)
    gone = _removed_words(mapping)
    if new_base == base or any(w in gone for name in set(_IDENT.findall(new_editor)) for w in _words(name)):
        return None
    return new_base, new_editor
