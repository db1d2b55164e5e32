"""The structural resolver's rules on generated fixtures: each settles the shape it names, and
declines, saying why, where the merge is not unambiguous."""
from __future__ import annotations

from pathlib import Path

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.resolvers.structural import StructuralResolver
from tests.test_conflicts import make_case


def _propose(case: ConflictCase) -> tuple[bytes | None, str]:
    r = StructuralResolver()
    p = r.propose(case)
    return (p.content, p.note) if p is not None else (None, r.last_reason)


# -- an insertion beside lines the other side rewrote ----------------------------------------

BESIDE_BASE = "def f(x):\n    y = g(x)\n    return y\n"


def test_insertion_beside_a_rewrite_goes_beside_it(tmp_path: Path) -> None:
    ours = "def f(x):\n    y = g(x)\n    log(x)\n    return y\n"
    theirs = "def f(x):\n    y = g(x, scale=2)\n    return y\n"
    case = make_case(tmp_path, BESIDE_BASE, ours, theirs)
    assert case.region_count == 1  # git's touching edits conflict
    content, note = _propose(case)
    assert content == b"def f(x):\n    y = g(x, scale=2)\n    log(x)\n    return y\n", note
    assert note == "an insertion beside lines the other side rewrote"
    assert guardrails.check(case, content).ok
    # the same with the sides swapped: upstream inserts beside the fork's rewrite
    content, _ = _propose(make_case(tmp_path, BESIDE_BASE, theirs, ours))
    assert content == b"def f(x):\n    y = g(x, scale=2)\n    log(x)\n    return y\n"


def test_insertion_beside_a_deletion_keeps_names_the_deleting_side_still_has(tmp_path: Path) -> None:
    tail = "\n\ndef g(cap):\n    if cap:\n        return 1\n"
    base = "def f(cap):\n    if cap >= 9:\n        lower(cap)\n    return cap\n" + tail
    ours = "def f(cap):\n    if cap >= 9:\n        lower(cap)\n    if cap >= 10:\n        tune(cap)\n    return cap\n" + tail
    theirs = "def f(cap):\n    return cap\n" + tail  # upstream deleted the block; `cap`, `if` are still in its file
    content, note = _propose(make_case(tmp_path, base, ours, theirs))
    assert content == ("def f(cap):\n    if cap >= 10:\n        tune(cap)\n    return cap\n" + tail).encode(), note
    # the same insertion using `lower`, which the deletion took out of upstream's whole file
    ours = ours.replace("tune(cap)", "lower(cap + 1)")
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "uses lower, which the rewrite removed" in why


def test_insertion_using_a_word_the_rewrite_removed_declines(tmp_path: Path) -> None:
    base = "def f(x):\n    y = g(x)\n    return x\n"
    ours = "def f(x):\n    y = g(x)\n    log(y)\n    return x\n"
    theirs = "def f(x):\n    h(x)\n    return x\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "uses y, which the rewrite removed" in why


def test_insertion_using_a_call_form_the_rewrite_stopped_using_declines(tmp_path: Path) -> None:
    base = "void f() {\n  b.create<CondBrOp>(c, x, y);\n}\n"
    ours = "void f() {\n  b.create<BarrierOp>(c);\n  b.create<CondBrOp>(c, x, y);\n}\n"
    theirs = "void f() {\n  CondBrOp::create(b, loc, c, x, y);\n}\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="f.cpp"))
    assert content is None and "calls .create<(, a form the rewrite stopped using" in why


def test_insertion_repeating_the_rewrites_lines_declines(tmp_path: Path) -> None:
    base = "a = 1\nb = 2\nc = 3\n"
    ours = "a = 1\nb = 2\nd = 4\nc = 3\n"
    theirs = "a = 1\nd = 4\nc = 3\n"  # upstream replaced b by d; the fork added d beside b
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "repeats the rewrite's lines" in why


# -- an insertion that already holds the other side's ------------------------------------------

def test_insertion_that_holds_the_others_insertion_is_kept(tmp_path: Path) -> None:
    # the fork picked upstream's registration earlier and added its own after it
    base = "void reg(R &r) {\n  a(r);\n}\n"
    ours = "void reg(R &r) {\n  a(r);\n  llvm::inliner(r);\n  nvvm::inliner(r);\n  fork::dbg(r);\n}\n"
    theirs = "void reg(R &r) {\n  a(r);\n  llvm::inliner(r);\n  nvvm::inliner(r);\n}\n"
    case = make_case(tmp_path, base, ours, theirs, path="r.h")
    content, note = _propose(case)
    assert content == ours.encode() and note == "the fork's insertion already holds upstream's"
    assert guardrails.check(case, content).ok
    content, note = _propose(make_case(tmp_path, base, theirs, ours, path="r.h"))
    assert content == ours.encode() and note == "upstream's insertion already holds the fork's"


def test_include_lists_holding_the_others_include_decline(tmp_path: Path) -> None:
    # the fork's extra include may be one upstream's change makes unneeded: a person decides
    base = "#include \"a.h\"\n\nint x;\n"
    ours = "#include \"a.h\"\n#include \"gpu.h\"\n#include \"ws.h\"\n\nint x;\n"
    theirs = "#include \"a.h\"\n#include \"ws.h\"\n\nint x;\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="w.cpp"))
    assert content is None and "overlapping lines" in why
