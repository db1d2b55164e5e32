"""Symbols (functions, classes, methods, MLIR ops, TableGen records) and the lines they span.  [pure]

Python and C/C++ are read with tree-sitter; TableGen and MLIR with a scanner of top-level
definitions; any other file falls back to the function context git prints in hunk headers.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from forkflow.planning.model import TOP_LEVEL


class Lang(str, enum.Enum):
    PYTHON = "python"
    CPP = "cpp"
    TABLEGEN = "tablegen"
    MLIR = "mlir"


_EXT = {
    ".py": Lang.PYTHON, ".pyi": Lang.PYTHON,
    ".c": Lang.CPP, ".h": Lang.CPP, ".cc": Lang.CPP, ".cpp": Lang.CPP, ".cxx": Lang.CPP,
    ".hpp": Lang.CPP, ".hh": Lang.CPP, ".hxx": Lang.CPP, ".cu": Lang.CPP, ".cuh": Lang.CPP,
    ".inc": Lang.CPP,
    ".td": Lang.TABLEGEN,
    ".mlir": Lang.MLIR,
}
MAX_PARSE_BYTES = 2_000_000  # generated files bigger than this are treated file-level


def language_of(path: str) -> Lang | None:
    dot = path.rfind(".")
    return _EXT.get(path[dot:].lower()) if dot >= 0 else None


@dataclass(frozen=True, slots=True)
class Definition:
    name: str  # qualified within the file: `Class.method` (Python), `ns::Class::method` (C++)
    start: int  # first line, 1-based
    end: int  # last line, inclusive


@lru_cache(maxsize=None)
def _parser(lang: Lang) -> Any:
    import tree_sitter

    if lang is Lang.PYTHON:
        import tree_sitter_python as grammar
    else:
        import tree_sitter_cpp as grammar  # type: ignore[no-redef]
    return tree_sitter.Parser(tree_sitter.Language(grammar.language()))


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8", "replace") if node is not None else ""


def _py_defs(node: Any, prefix: str) -> Iterator[Definition]:
    for child in node.named_children:
        target, outer = child, child
        if child.type == "decorated_definition":
            target = child.child_by_field_name("definition")
        if target is not None and target.type in ("function_definition", "class_definition"):
            name = prefix + _text(target.child_by_field_name("name"))
            yield Definition(name, outer.start_point[0] + 1, outer.end_point[0] + 1)
            body = target.child_by_field_name("body")
            if body is not None:
                yield from _py_defs(body, name + ".")


_CPP_SCOPES = ("class_specifier", "struct_specifier", "union_specifier", "enum_specifier")


def _cpp_declarator_name(node: Any) -> str:
    while node is not None and node.type not in (
            "identifier", "qualified_identifier", "field_identifier", "destructor_name",
            "operator_name", "type_identifier"):
        node = node.child_by_field_name("declarator")
    return _text(node)


def _cpp_defs(node: Any, prefix: str) -> Iterator[Definition]:
    for child in node.named_children:
        t = child.type
        if t == "function_definition":
            name = _cpp_declarator_name(child.child_by_field_name("declarator"))
            if name:
                yield Definition(prefix + name, child.start_point[0] + 1, child.end_point[0] + 1)
        elif t in _CPP_SCOPES:
            name_node = child.child_by_field_name("name")
            body = child.child_by_field_name("body")
            if name_node is not None and body is not None:
                name = prefix + _text(name_node)
                yield Definition(name, child.start_point[0] + 1, child.end_point[0] + 1)
                yield from _cpp_defs(body, name + "::")
        elif t == "namespace_definition":
            body = child.child_by_field_name("body")
            ns = _text(child.child_by_field_name("name"))
            if body is not None:
                yield from _cpp_defs(body, f"{prefix}{ns}::" if ns else prefix)
        elif t in ("template_declaration", "linkage_specification", "declaration_list",
                   "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                   "field_declaration_list", "declaration"):
            yield from _cpp_defs(child, prefix)


_TD_TOP = re.compile(rb"^(?:def|defm|class|multiclass|defset|defvar)\s+([A-Za-z_][\w.]*)", re.M)
_MLIR_TOP = re.compile(
    rb"^\s*(?:[\w.]+\.)?func(?:\.func)?\s+(?:(?:private|public|nested)\s+)?@([\w$.\-]+)"
    rb"|^\s*(?:builtin\.)?module\s+@([\w$.\-]+)", re.M)


def _scan_top_level(content: bytes, pattern: re.Pattern[bytes]) -> list[Definition]:
    """Each top-level definition runs until the next one starts (or the end of the file)."""
    starts: list[tuple[int, str]] = []
    for m in pattern.finditer(content):
        name = next(g for g in m.groups() if g is not None).decode("utf-8", "replace")
        starts.append((content.count(b"\n", 0, m.start()) + 1, name))
    last = content.count(b"\n") + 1
    out = []
    for i, (line, name) in enumerate(starts):
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else last
        out.append(Definition(name, line, max(line, end)))
    return out


def definitions(path: str, content: bytes) -> list[Definition] | None:
    """Every definition in the file with its line span; None when the language is not read."""
    lang = language_of(path)
    if lang is None or len(content) > MAX_PARSE_BYTES or b"\0" in content[:8000]:
        return None
    if lang is Lang.TABLEGEN:
        return _scan_top_level(content, _TD_TOP)
    if lang is Lang.MLIR:
        return _scan_top_level(content, _MLIR_TOP)
    tree = _parser(lang).parse(content)
    walk = _py_defs if lang is Lang.PYTHON else _cpp_defs
    return list(walk(tree.root_node, ""))


def line_owners(defs: list[Definition]) -> dict[int, str]:
    """Line -> name of the innermost definition around it (lines outside every definition are absent)."""
    owners: dict[int, tuple[int, str]] = {}
    for d in defs:
        span = d.end - d.start
        for line in range(d.start, d.end + 1):
            have = owners.get(line)
            if have is None or span <= have[0]:
                owners[line] = (span, d.name)
    return {line: name for line, (_, name) in owners.items()}


def symbols_at(path: str, owners: dict[int, str], lines: Iterable[int]) -> set[str]:
    """The innermost definition around each line, as `path::name` (`path::<top-level>` outside)."""
    return {f"{path}::{owners.get(line, TOP_LEVEL)}" for line in lines}


def header_symbol(path: str, header: str) -> str:
    """A symbol from a hunk header's function context (`@@ -1 +1 @@ void f()`), for other languages."""
    context = header.split("@@", 2)[-1].strip() if header.count("@@") >= 2 else ""
    return f"{path}::{context[:80] if context else TOP_LEVEL}"


def parses_cleanly(path: str, content: bytes) -> bool | None:
    """Whether the file parses without syntax errors; None when its language is not parsed."""
    lang = language_of(path)
    if lang not in (Lang.PYTHON, Lang.CPP):
        return None
    return _parses(lang, content)


@lru_cache(maxsize=32)
def _parses(lang: Lang, content: bytes) -> bool:
    """Cached: the resolvers and the guardrails check the same sides and merges of one conflict
    again (2.9 of the resolvers' 5.3 s on a real backlog went to parsing)."""
    return not bool(_parser(lang).parse(content).root_node.has_error)
