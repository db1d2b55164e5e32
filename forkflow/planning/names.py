"""Names a diff defines and uses, from its added and removed lines only.  [pure]

A pending commit depends on an earlier one when its added lines use a name (function, class,
TableGen record, MLIR op class, macro) that the earlier one's added lines define and its removed
lines did not (new, or renamed to).  Reading only the diff keeps this linear in the size of the
backlog; parsing whole files with tree-sitter cost 26 s of a 43 s plan on a real fork.
"""
from __future__ import annotations

import re
from forkflow.planning.symbols import Lang, language_of

MIN_NAME = 5  # shorter names (`init`, `size`) are too common to mean one definition

_PY_DEF = re.compile(r"(?m)^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_TD_DEF = re.compile(r"(?m)^\s*(?:def|defm|class|multiclass)\s+([A-Za-z_]\w*)")
_CPP_DEF = re.compile(
    r"(?m)^\s*(?:class|struct|enum(?:\s+class)?|using|namespace)\s+([A-Za-z_]\w*)"
    r"|^\s*#\s*define\s+([A-Za-z_]\w*)"
    r"|^(?:[\w:<>,\*&]+[ \t]+)+[\*&]*(?:[A-Za-z_]\w*::)*([A-Za-z_]\w*)[ \t]*\([^;\n]*$")  # at column 0
_MLIR_DEF = re.compile(r"(?m)^\s*(?:tt\.)?func(?:\.func)?\s+(?:\w+\s+)?@([\w$.\-]+)")
_PATTERNS = {Lang.PYTHON: _PY_DEF, Lang.TABLEGEN: _TD_DEF, Lang.CPP: _CPP_DEF, Lang.MLIR: _MLIR_DEF}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{%d,}" % (MIN_NAME - 1))
_KEYWORDS = frozenset({
    "return", "static", "const", "while", "switch", "sizeof", "typename", "template", "virtual", "inline",
    "override", "public", "private", "protected", "struct", "class", "unsigned", "signed", "double",
    "float", "assert", "import", "from", "lambda", "yield", "raise", "except", "finally", "global",
    "nonlocal", "constexpr", "explicit", "operator", "default", "delete", "extern", "volatile",
    "include", "define", "ifdef", "ifndef", "endif", "pragma", "false", "true", "nullptr", "None",
    "True", "False", "self", "print", "range", "super", "isinstance", "getattr", "setattr", "tuple",
    "value", "values", "result", "builder", "context", "module", "string", "int32_t", "int64_t",
    "uint32_t", "uint64_t", "size_t", "auto", "void", "bool", "llvm", "mlir", "triton", "torch",
})


def definitions_in(path: str, text: str) -> set[str]:
    """Names that the lines of `text` (from file `path`) define, each at the start of a line."""
    lang = language_of(path)
    pattern = _PATTERNS.get(lang) if lang is not None else None
    if pattern is None:
        return set()
    out: set[str] = set()
    for m in pattern.finditer(text):
        name = next((g for g in m.groups() if g), "")
        if len(name) >= MIN_NAME and name not in _KEYWORDS:
            out.add(name)
    return out


_PROSE = (".md", ".rst", ".txt", ".html", ".adoc")


def is_prose(path: str) -> bool:
    """Documentation: its lines may name an API, but nothing builds or runs against them (a README
    documenting `get_data` does not wait for the commit that adds it)."""
    name = path.rsplit("/", 1)[-1]
    return name.lower().endswith(_PROSE) and name != "CMakeLists.txt"


def identifiers_in(text: str) -> set[str]:
    """Identifiers of at least MIN_NAME characters in `text`, keywords aside."""
    return set(_IDENT.findall(text)) - _KEYWORDS
