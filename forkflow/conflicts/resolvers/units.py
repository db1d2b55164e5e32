"""The unit model of insertions: whether lines one side added are whole units (functions, test
functions, class members, includes/imports, `case`s, TableGen records, MLIR ops, `// -----` test
cases), what they name, and whether two sides' insertions at one place can both be kept.  [pure]
"""
from __future__ import annotations

from forkflow.conflicts.resolvers.matcher import SequenceMatcher
import re

from forkflow.planning.symbols import Lang, parses_cleanly


def norm(lines: tuple[str, ...] | list[str]) -> list[str]:
    """The non-blank lines, stripped."""
    return [x.strip() for x in lines if x.strip()]


_IMPORT_LINE = re.compile(r"^\s*(#\s*include\s*[<\"]|import\s+\w|from\s+[\w.]+\s+import\s)")


def holds_insertion(ours: tuple[str, ...], theirs: tuple[str, ...]) -> tuple[tuple[str, ...], str] | None:
    """(lines, rule) when one side's insertion already holds every line of the other's, in order:
    that side took the other's addition earlier (a pick, or an earlier version of it) and built on it."""
    o, t = norm(ours), norm(theirs)
    if not o or not t or o == t:
        return None
    if all(_IMPORT_LINE.match(x) for x in o + t):
        # one side already has the other's import and more of its own, which the other side's change
        # may make unneeded (trivial's union of import lists declines the same)
        return None
    if _subsequence(t, o):
        return ours, "the fork's insertion already holds upstream's"
    if _subsequence(o, t):
        return theirs, "upstream's insertion already holds the fork's"
    return None


def _subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(x in it for x in small)


_LIT = re.compile(r"^\s*(//|#|;)\s*(RUN|XFAIL|REQUIRES|UNSUPPORTED):")


def ordered(ours: tuple[str, ...], theirs: tuple[str, ...]) -> tuple[str, ...]:
    """The fork's units first (as its engineers did in 12 of the 14 files this rule settled on the
    picks up to 2026-04-30; the two others now decline), except that lit's RUN lines lead."""
    def runs(lines: tuple[str, ...]) -> bool:
        return any(_LIT.match(x) and "RUN:" in x for x in lines)
    return theirs + ours if runs(theirs) and not runs(ours) else ours + theirs


_NAME = re.compile(r"^\s*(?:async\s+)?(?:def|class|defm?|multiclass)\s+([A-Za-z_][\w.]*)"
                   r"|^\s*(?:tt\.func|func\.func|llvm\.func)\s+(?:\w+\s+)*@([\w.$]+)"
                   r"|^\s*#\s*include\s*([<\"][^>\"]+[>\"])"
                   r"|^\s*(?:import\s+([\w.]+)|from\s+([\w.]+)\s+import)"
                   r"|^\s*case\s+([^:]+):"
                   r"|^\s*(?:[\w:<>,*&\s]+?)\b([A-Za-z_]\w*)\s*\([^;]*\)\s*(?:const\s*)?(?:override\s*)?\{?\s*$")
_CPP_CLASS = re.compile(r"^\s*(?:template\s*<[^>]*>\s*)?(?:class|struct)\s")
_PY_SCOPE = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_SPLIT = re.compile(r"^\s*//\s*-----\s*$")


_KEYWORDS = {"if", "for", "while", "switch", "return", "catch", "sizeof", "assert"}


def names(lines: list[str], lang: Lang | None = None) -> set[str]:
    """Names the lines define or import (functions, classes, records, ops, includes, cases), each
    with its class and scope inside the lines (`Cls.method`, `test_x.kernel`, `Op::verify`), so that
    same-named members of different classes are told apart.  MLIR ops after a `// -----` line are
    their own test case's and name nothing the other cases could clash with."""
    out = set()
    py_scope: list[tuple[int, str]] = []  # (indent, name) of the enclosing defs and classes
    cpp_scope: list[tuple[int, str]] = []  # (brace depth inside, name) of the enclosing classes
    depth = 0
    pending: str | None = None  # a class whose body has not opened yet
    for line in lines:
        if lang is Lang.MLIR and _SPLIT.match(line):
            break
        m = _NAME.match(line)
        if lang is Lang.PYTHON and line.strip():
            indent = len(line) - len(line.lstrip())
            while py_scope and py_scope[-1][0] >= indent:
                py_scope.pop()
            s = _PY_SCOPE.match(line)
            if s:
                out.add(".".join([n for _, n in py_scope] + [s.group(2)]))
                py_scope.append((indent, s.group(2)))
                continue
        if lang is Lang.CPP:
            if _CPP_CLASS.match(line) and "(" not in line and ";" not in line:
                # `class LLVM_ABI Name final : public Base {`: the last word before the base list or body
                words = re.split(r"(?<!:):(?!:)|\{", line.split(">", 1)[-1] if "template" in line else line)[0].split()
                pending = next((w for w in reversed(words) if w != "final" and re.fullmatch(r"[A-Za-z_]\w*", w)),
                               None)
            opened = line.count("{") - line.count("}")
            if pending is not None and "{" in line:
                cpp_scope.append((depth + 1, pending))
                pending = None
            depth += opened
            while cpp_scope and depth < cpp_scope[-1][0]:
                cpp_scope.pop()
        if m:
            name = next(g for g in m.groups() if g)
            if name in _KEYWORDS or (m.group(7) and lang not in (Lang.CPP, None)):
                continue  # a C-like function head only in C/C++ (in Python it is a call)
            if lang is Lang.CPP and m.group(7):
                head = line[:m.start(7)].split()
                if head and head[-1].endswith("::"):  # `LogicalResult Op::verify()`: qualified
                    name = head[-1].lstrip("*&") + name
                elif cpp_scope:
                    name = "::".join([n for _, n in cpp_scope] + [name])
            out.add(name)
    return out


def _balanced(text: str, lang: Lang | None = None) -> bool:
    text = re.sub(r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", "", text)
    comment = r"//[^\n]*" if lang is Lang.MLIR else r"//[^\n]*|#[^\n]*"  # MLIR's `#` is an attribute
    text = re.sub(comment, "", text) if "//" in text or "#" in text else text
    return all(text.count(a) == text.count(b) for a, b in ("()", "[]", "{}"))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def is_unit(lines: list[str], lang: Lang | None) -> bool:
    """Whether added lines are complete units (no statement or block cut in two)."""
    code = [x for x in lines if x.strip()]
    if not code:
        return True
    text = "".join(lines)
    if not _balanced(text, lang):
        return False
    if lang is Lang.PYTHON:
        first = _indent(code[0])
        if any(_indent(x) < first for x in code):
            return False
        body = "".join(x[first:] if len(x) > first else x.lstrip(" ") for x in lines)
        if code[0].lstrip().startswith(("elif", "else", "except", "finally")):
            return False
        return parses_cleanly("unit.py", body.encode("utf-8", "surrogateescape")) is not False
    if lang is Lang.CPP:
        last = code[-1].rstrip()
        return last.endswith((";", "}", "{", ":", ",", ")")) or code[-1].lstrip().startswith(("#", "//"))
    return True


def _ends_in_comment(lines: list[str], lang: Lang | None) -> bool:
    """Whether the last code line is a comment (lit's directives aside)."""
    code = [x for x in lines if x.strip()]
    return bool(code) and is_comment(code[-1], lang) and not _LIT.match(code[-1])


_COMMENT_LINE = re.compile(r"^\s*(//|/\*|\*(?!/)|#(?!\s*(include|if|ifdef|ifndef|else|elif|endif|define|undef|pragma)\b))")
# what lit and FileCheck read in an MLIR test's comments: RUN lines, CHECK lines (any prefix:
# `CHECK-LABEL:`, `GFX950-COUNT-2:`) and -verify-diagnostics' `expected-error @below {{...}}`
_DIRECTIVE = re.compile(r"^\s*//\s*(?:[A-Z][A-Z0-9_]*(?:-[A-Z0-9_]+)*:|expected-[\w-]+\s*(?:@[\w+-]+)?\s*\{\{)")


def is_comment(line: str, lang: Lang | None = None) -> bool:
    """Whether the line is a comment.  In MLIR, lit's and FileCheck's directives are the test's code,
    and a `#` line is an attribute alias (`#blocked = #ttg.blocked<...>`), not a comment."""
    if lang is Lang.MLIR:
        return line.lstrip().startswith("//") and not _DIRECTIVE.match(line)
    return bool(_COMMENT_LINE.match(line))


_AROUND = re.compile(r"\b(above|below)\b", re.IGNORECASE)


def _refers_around(lines: list[str], lang: Lang | None) -> bool:
    """Whether a comment of the insertion refers to its neighbours ("rename to match above"): its
    place among the other side's units is then not free.  (lit's `expected-error @below` is code.)"""
    return any(is_comment(x, lang) and _AROUND.search(x) for x in lines)


def units_clash(ours: list[str], theirs: list[str], lang: Lang | None) -> str | None:
    """Why two insertions at one place cannot both be kept in order (fork's first), or None."""
    if lang is None:
        return "both sides inserted at one place, in a file with no unit model"
    if not (is_unit(ours, lang) and is_unit(theirs, lang)):
        return "both sides inserted at one place, and not whole units"
    if _ends_in_comment(ours, lang) or _ends_in_comment(theirs, lang):
        # git cut the units across a comment that heads the code after it (a section banner): the
        # engineers' order of such insertions was not the fork's-first one
        return "both sides inserted at one place, one ending in a comment that heads the next unit"
    if _refers_around(ours, lang) or _refers_around(theirs, lang):
        return "both sides inserted at one place, and a comment refers to the lines around it"
    if norm(ours) and norm(theirs) and (set(norm(ours)) <= set(norm(theirs))
                                          or set(norm(theirs)) <= set(norm(ours))):
        return "both sides inserted overlapping lines at one place"
    if SequenceMatcher(None, norm(ours), norm(theirs), autojunk=False).ratio() > 0.5:
        return "both sides inserted similar code at one place (two versions of one change?)"
    same = names(ours, lang) & names(theirs, lang)
    if same:
        return f"both sides define {sorted(same)[0]} at one place"
    if lang is Lang.PYTHON and ours and theirs:
        first_o = next((_indent(x) for x in ours if x.strip()), 0)
        first_t = next((_indent(x) for x in theirs if x.strip()), 0)
        if first_o != first_t:
            return "the inserted units sit at different nesting levels"
    return None
