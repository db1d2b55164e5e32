"""A merge on the code's syntax tree, the approach of structured merge tools such as Mergiraf.  [pure]

Each side's file is cut into its members (functions, classes, declarations, includes and imports,
TableGen records, MLIR functions and `// -----` test cases), each with the comments and blank
lines before it.  Members are matched across base, fork and upstream by identity (their kind and
name: `def:f`, `class:K`, `fn:ns::f`, `include:<x.h>`, `def TTG_Op`), not by position, so edits
to different members merge whatever git's line alignment made of them.  Per member: the side that
changed it wins; a member both sides changed is merged again inside (members of a class body or a
namespace by identity, else git-style by lines, which must not conflict).  A member one side added
goes after the member it follows on that side.  It declines, naming why: a member both sides added,
or added at the same place; one side deleting a member the other changed; the sides ordering the
same members differently; a side that does not cut into members (a parse error at the top, a
member without a boundary); lines that still conflict inside a member; and a result that changes
lines outside git's conflict regions (the guardrails' rule), defines a name twice or no longer
parses.

C++ and Python are parsed with the installed tree-sitter grammars; TableGen and MLIR, which have
none here, are cut at lines where the bracket depth returns to zero.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forkflow.conflicts.case import ConflictCase, decode
from forkflow.conflicts.classify import extract_regions
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.structural import Declined, Files, merged_file, text_declines, unparsed
from forkflow.planning.symbols import Lang, _parser, language_of

MAX_DEPTH = 3  # class in namespace in namespace


@dataclass(frozen=True, slots=True)
class Member:
    key: str
    text: str  # with the comments and blank lines before it
    inner: Any = None  # the tree node whose members can be merged again (a class body, a namespace)
    start: int = 0  # where `text` starts in its side's file (bytes)


@dataclass(frozen=True, slots=True)
class Cut:
    members: tuple[Member, ...]
    rest: str  # what follows the last member (trailing comments, blank lines)


# -- cutting a side into members -----------------------------------------------------------------
def _name(node: Any, field: str = "name") -> str:
    n = node.child_by_field_name(field) if node is not None else None
    return bytes(n.text).decode("utf-8", "replace") if n is not None else ""


def _norm(text: str) -> str:
    return " ".join(text.split())


def _py_key(node: Any, text: str) -> tuple[str, Any]:
    target = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
    if target is not None and target.type == "function_definition":
        return f"def:{_name(target)}", None
    if target is not None and target.type == "class_definition":
        return f"class:{_name(target)}", target.child_by_field_name("body")
    if node.type in ("import_statement", "import_from_statement", "future_import_statement"):
        return f"import:{_norm(text)}", None
    if node.type == "expression_statement" and node.named_children and node.named_children[0].type == "assignment":
        return f"let:{_name(node.named_children[0], 'left')}", None
    return f"stmt:{_norm(text)}", None


def _cpp_declarator(node: Any) -> str:
    d = node.child_by_field_name("declarator")
    while d is not None and d.type not in ("identifier", "field_identifier", "qualified_identifier",
                                           "operator_name", "destructor_name", "template_function"):
        inner = d.child_by_field_name("declarator")
        if inner is None:
            found = [c for c in d.named_children if c.type in ("identifier", "field_identifier",
                                                                 "qualified_identifier", "operator_name",
                                                                 "destructor_name")]
            d = found[0] if found else None
            break
        d = inner
    return bytes(d.text).decode("utf-8", "replace") if d is not None else ""


def _cpp_key(node: Any, text: str) -> tuple[str, Any]:
    t = node.type
    if t == "template_declaration":
        inner = [c for c in node.named_children if c.type not in ("template_parameter_list",)]
        if inner:
            key, body = _cpp_key(inner[-1], text)
            return f"template:{key}", body
    if t == "function_definition":
        return f"fn:{_cpp_declarator(node)}:{_norm(_params(node))}", None
    if t in ("class_specifier", "struct_specifier", "union_specifier", "enum_specifier"):
        return f"{t}:{_name(node)}", node.child_by_field_name("body") if t != "enum_specifier" else None
    if t == "namespace_definition":
        return f"namespace:{_name(node)}", node.child_by_field_name("body")
    if t in ("declaration", "field_declaration"):
        spec = node.child_by_field_name("type")
        if spec is not None and spec.type in ("class_specifier", "struct_specifier") and spec.child_by_field_name("body"):
            return f"{spec.type}:{_name(spec)}", spec.child_by_field_name("body")
        name = _cpp_declarator(node)
        if name:
            return f"decl:{name}:{_norm(_params(node))}", None
    if t == "preproc_include":
        return f"include:{_name(node, 'path')}", None
    if t in ("preproc_def", "preproc_function_def"):
        return f"define:{_name(node)}", None
    return f"{t}:{_norm(text)}", None


def _params(node: Any) -> str:
    """A function's parameter list (overloads are different members)."""
    d = node.child_by_field_name("declarator")
    while d is not None:
        p = d.child_by_field_name("parameters")
        if p is not None:
            return bytes(p.text).decode("utf-8", "replace")
        d = d.child_by_field_name("declarator")
    return ""


_SKIP = ("comment", "{", "}", ":", ";", "access_specifier")


def _members(src: bytes, container: Any, lang: Lang, start: int, end: int) -> Cut:
    """The members of a tree node's children between byte offsets start and end, each with the
    lines before it; a member ends at the end of its last line."""
    nodes = [c for c in container.children if c.type not in ("comment", "{", "}", ";")
             and c.start_byte >= start and c.end_byte <= end and c.is_named]
    out: list[Member] = []
    at = start
    seen: dict[str, int] = {}
    for n in nodes:
        if n.type == "ERROR" or n.has_error and lang is Lang.PYTHON:
            raise Declined("a side does not cut into members (a parse error)")
        stop = src.find(b"\n", n.end_byte)
        stop = end if stop < 0 or stop >= end else stop + 1
        if stop <= at:  # two members on one line: no boundary to cut at
            raise Declined("two members share a line")
        if src[n.end_byte:stop].strip() not in (b"", b";", b",") and not src[n.end_byte:stop].strip().startswith((b"//", b"#")):
            raise Declined("a member is followed by code on its last line")
        text = src[at:stop].decode("utf-8", "surrogateescape")
        own = src[n.start_byte:n.end_byte].decode("utf-8", "surrogateescape")
        key, inner = (_py_key if lang is Lang.PYTHON else _cpp_key)(n, own)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = f"{key}#{seen[key]}"
        out.append(Member(key, text, inner, at))
        at = stop
    return Cut(tuple(out), src[at:end].decode("utf-8", "surrogateescape"))


_TD_KEY = re.compile(r"^\s*(def|defm|class|multiclass|defset|foreach|defvar|include|let)\s+([^\s:<{;]+)")
_MLIR_KEY = re.compile(r"(?:func\.func|tt\.func|llvm\.func|gpu\.func|module)\s+(?:public\s+|private\s+)?(@[\w.$-]+)")


def _brackets(line: str) -> int:
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = line.split("//", 1)[0]
    return sum(line.count(c) for c in "{([<" if c != "<") - sum(line.count(c) for c in "})]" if c != ">")


def _line_members(text: str, lang: Lang) -> Cut:
    """TableGen and MLIR: a member ends on a line where the bracket depth is back at zero and the
    line ends a record (`}` or `;`), or on an MLIR `// -----` separator; comments and blank lines
    go with the member after them."""
    lines = text.splitlines(keepends=True)
    out: list[Member] = []
    seen: dict[str, int] = {}
    cur: list[str] = []
    depth = 0
    has_code = False
    for line in lines:
        cur.append(line)
        s = line.strip()
        if lang is Lang.MLIR and s.startswith("// -----"):
            has_code = True
        elif not s or s.startswith("//"):
            continue
        else:
            has_code = True
            depth += _brackets(line)
            if depth < 0:
                raise Declined("unbalanced brackets")
        if depth == 0 and has_code and (s.endswith(("}", ";")) or s.startswith("// -----")
                                        or (lang is Lang.TABLEGEN and s.startswith("include"))):
            body = "".join(cur)
            m = _TD_KEY.search(body) if lang is Lang.TABLEGEN else _MLIR_KEY.search(body)
            key = " ".join(m.groups()) if m else f"text:{_norm(body)}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key = f"{key}#{seen[key]}"
            out.append(Member(key, body))
            cur, has_code = [], False
    if depth != 0 or has_code:
        raise Declined("a member does not end (brackets open at the end of the file)")
    return Cut(tuple(out), "".join(cur))


class _Side:
    def __init__(self, text: str, lang: Lang) -> None:
        self.text = text
        self.src = text.encode("utf-8", "surrogateescape")
        self.lang = lang
        self.tree = _parser(lang).parse(self.src) if lang in (Lang.PYTHON, Lang.CPP) else None

    def cut(self) -> Cut:
        if self.tree is None:
            return _line_members(self.text, self.lang)
        root = self.tree.root_node
        return _members(self.src, root, self.lang, 0, len(self.src))


# -- merging -------------------------------------------------------------------------------------
def merge3(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> list[str] | None:
    """git's line merge (diff3, no context): None where both sides changed the same lines."""
    def blocks(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int]]:
        return [tuple(m) for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()]  # type: ignore[misc]

    am, bm = blocks(base, ours), blocks(base, theirs)
    sync: list[tuple[int, int, int, int]] = []
    i = j = 0
    while i < len(am) and j < len(bm):
        ab, ao, an = am[i]
        bb, bt, bn = bm[j]
        lo, hi = max(ab, bb), min(ab + an, bb + bn)
        if lo < hi:
            sync.append((lo, hi, ao + lo - ab, bt + lo - bb))
        if ab + an < bb + bn:
            i += 1
        else:
            j += 1
    sync.append((len(base), len(base), len(ours), len(theirs)))
    out: list[str] = []
    zb = zo = zt = 0
    for bs, be, os_, ts in sync:
        b, o, t = list(base[zb:bs]), list(ours[zo:os_]), list(theirs[zt:ts])
        if b == o:
            out += t
        elif b == t or o == t:
            out += o
        else:
            return None
        out += base[bs:be]
        zb, zo, zt = be, os_ + (be - bs), ts + (be - bs)
    return out


class _Merge:
    def __init__(self, lang: Lang, sides: tuple[_Side, _Side, _Side]) -> None:
        self.lang = lang
        self.sides = sides
        self.rules: list[str] = []

    def members(self, cuts: tuple[Cut, Cut, Cut], depth: int) -> str:
        b, o, t = ({m.key: m for m in c.members} for c in cuts)
        ok, tk = [m.key for m in cuts[1].members], [m.key for m in cuts[2].members]
        common_o = [k for k in ok if k in t]
        common_t = [k for k in tk if k in o]
        if common_o != common_t:
            raise Declined("the sides order the same members differently")
        for k in b:
            if k not in o and k in t and t[k].text != b[k].text:
                raise Declined(f"the fork deleted a member upstream changed ({k.split(':')[0]})")
            if k not in t and k in o and o[k].text != b[k].text:
                raise Declined(f"upstream deleted a member the fork changed ({k.split(':')[0]})")
        added_o = {k for k in ok if k not in b}
        added_t = [k for k in tk if k not in b]
        if added_o & set(added_t):
            raise Declined("both sides added the same member")
        order = [k for k in ok if not (k in b and k not in t)]  # the fork's order, upstream's deletions out
        anchors: dict[str | None, list[str]] = {}  # upstream's additions, by the member they follow
        for idx, k in enumerate(tk):
            if k in added_t:
                prev = next((p for p in reversed(tk[:idx]) if p in o), None)
                anchors.setdefault(prev, []).append(k)
        out_keys: list[str] = []
        for at, anchor in enumerate([None, *order]):  # order[at] follows `anchor`
            if anchor is not None:
                out_keys.append(anchor)
            new = anchors.get(anchor, [])
            if new:
                if at < len(order) and order[at] in added_o:
                    raise Declined("both sides added members at one place")
                out_keys += new
        text = []
        for k in out_keys:
            text.append(self.member(b.get(k), o.get(k), t.get(k), depth))
        rest = [c.rest for c in cuts]
        tail = rest[1] if rest[0] == rest[2] else rest[2] if rest[0] == rest[1] else None
        if tail is None:
            merged = merge3(rest[0].splitlines(True), rest[1].splitlines(True), rest[2].splitlines(True))
            if merged is None:
                raise Declined("both sides changed the lines after the last member")
            tail = "".join(merged)
        return "".join(text) + tail

    def member(self, b: Member | None, o: Member | None, t: Member | None, depth: int) -> str:
        if o is None or t is None:
            return (o or t).text  # type: ignore[union-attr]  # added by one side
        if o.text == t.text:
            return o.text
        if b is None:
            raise Declined("both sides added the same member")
        if b.text == o.text:
            return t.text
        if b.text == t.text:
            return o.text
        inside = ""
        if depth < MAX_DEPTH and all(m.inner is not None for m in (b, o, t)):
            try:
                return self.inner(b, o, t, depth)
            except Declined as d:
                inside = f"; inside it: {d}"
        merged = merge3(b.text.splitlines(True), o.text.splitlines(True), t.text.splitlines(True))
        if merged is None:
            raise Declined(f"both sides changed the same lines of a member ({o.key.split(':')[0]}{inside})")
        self.rules.append("a member both sides changed, merged by lines inside it")
        return "".join(merged)

    def inner(self, b: Member, o: Member, t: Member, depth: int) -> str:
        """A member both sides changed whose body has members: (head, members by identity, end)."""
        cuts, heads, ends = [], [], []
        for m, side in zip((b, o, t), self.sides):
            size = len(m.text.encode("utf-8", "surrogateescape"))
            lo, hi = m.inner.start_byte, m.inner.end_byte
            if self.lang is Lang.PYTHON:  # a block starts at its first statement: from that line on
                lo = side.src.rfind(b"\n", 0, lo) + 1
            else:  # after the line of the body's `{`; the `}` line is what follows the last member
                nl = side.src.find(b"\n", lo)
                lo = nl + 1 if 0 <= nl < hi else hi
            if not m.start <= lo <= hi <= m.start + size:
                raise Declined("a member's body is not inside it")
            cuts.append(_members(side.src, m.inner, self.lang, lo, hi))
            heads.append(side.src[m.start:lo])
            ends.append(side.src[hi:m.start + size])
        head = _pick(heads, "head")
        end = _pick(ends, "end")
        body = self.members((cuts[0], cuts[1], cuts[2]), depth + 1)
        self.rules.append("members of a class or namespace merged by identity")
        return head.decode("utf-8", "surrogateescape") + body + end.decode("utf-8", "surrogateescape")


def _pick(parts: list[bytes], what: str) -> bytes:
    base, ours, theirs = parts
    if ours == theirs or base == theirs:
        return ours
    if base == ours:
        return theirs
    raise Declined(f"both sides changed a member's {what}")


class SyntaxResolver:
    """The syntax-tree merge (see the module's docstring)."""

    name = "syntax"

    def __init__(self) -> None:
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        self.last_reason = text_declines(case) or unparsed(case) or ""
        if self.last_reason:
            return None
        lang = language_of(case.path)
        if lang is None:
            self.last_reason = "no syntax for this file's language"
            return None
        texts = [decode(x) or "" for x in (case.base, case.ours, case.theirs)]
        sides = (_Side(texts[0], lang), _Side(texts[1], lang), _Side(texts[2], lang))
        merge = _Merge(lang, sides)
        try:
            cuts = (sides[0].cut(), sides[1].cut(), sides[2].cut())
            merged = merge.members(cuts, 0)
        except Declined as d:
            self.last_reason = str(d)
            return None
        found = extract_regions(case.segments, merged)
        if found is None:
            self.last_reason = "the tree merge changes lines outside git's conflict regions"
            return None
        content, self.last_reason = merged_file(case, list(found), Files.of(case))
        if content is None:
            return None
        rules = ["each side changed other members, merged by identity", *merge.rules]
        return Proposal(content, "; ".join(dict.fromkeys(rules[1:] or rules)))
