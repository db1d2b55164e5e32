"""The lag resolver: a side that already has the other side's change, word for word, is kept; it
declines, saying why, everything else, and bad input."""
from __future__ import annotations

import time
from pathlib import Path

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.engine import deterministic_resolvers, resolve_case
from forkflow.conflicts.history import History
from forkflow.conflicts.resolvers.lag import LagResolver, holds
from forkflow.models import Sha
from tests.test_conflicts import make_case

HEAD = "#include <x>\n\nvoid f() {\n"
TAIL = "}\n\nvoid g() {}\n"


def _cpp(body: str) -> str:
    return HEAD + body + TAIL


def _propose(case: ConflictCase) -> tuple[bytes | None, str]:
    r = LagResolver()
    p = r.propose(case)
    if p is not None:
        assert guardrails.check(case, p.content).ok
    return (p.content, p.note) if p is not None else (None, r.last_reason)


def test_lag_keeps_the_fork_that_already_has_upstreams_change(tmp_path: Path) -> None:
    # the fork picked upstream's rename of create<Op> earlier and then added an argument; upstream's
    # commit picked now holds only the rename: git sees both sides change the line
    base = _cpp("  auto op = builder.create<Op>(loc, a);\n  use(op);\n")
    theirs = _cpp("  auto op = Op::create(builder, loc, a);\n  use(op);\n")
    ours = _cpp("  auto op = Op::create(builder, loc, a, fork);\n  use(op, fork);\n")
    case = make_case(tmp_path, base, ours, theirs, path="k.cpp")
    content, note = _propose(case)
    assert content == ours.encode() and "the fork's side already has" in note
    out = resolve_case(case, deterministic_resolvers(History()))
    assert out.resolved and out.resolver == "lag" and out.content == ours.encode()


def test_lag_keeps_upstream_that_extended_the_forks_early_pick(tmp_path: Path) -> None:
    base = "def f(x):\n    return g(x)\n"
    ours = "def f(x):\n    return g(x, cache=True)\n"
    theirs = "def f(x, y=None):\n    return g(x, cache=True, y=y)\n"
    content, note = _propose(make_case(tmp_path, base, ours, theirs))
    assert content == theirs.encode() and "upstream's side already has" in note


def test_lag_declines_when_the_sides_changed_different_words(tmp_path: Path) -> None:
    base = _cpp("  x = f(a, 2);\n")
    case = make_case(tmp_path, base, _cpp("  x = f(a, 3);\n"), _cpp("  x = h(a, 2);\n"), path="k.cpp")
    content, why = _propose(case)
    assert content is None and why == "neither side has the other's word-level change"
    # the same words at another place are not the same change
    assert not holds("a(b)\nc(d)\n", "a(b)\nc(d, x)\n", "a(b, x)\nc(d)\n")
    assert holds("a(b)\nc(d)\n", "a(b, x)\nc(d, y)\n", "a(b, x)\nc(d)\n")


def test_lag_declines_an_insertion_led_by_the_sides_own_lines(tmp_path: Path) -> None:
    # both sides inserted at one place; the fork's insertion ends with upstream's line, its own first:
    # whether the fork's own line stays, and where, is a person's call
    base = _cpp("  a();\n")
    ours = _cpp("  a();\n  fork_only();\n  b();\n")
    theirs = _cpp("  a();\n  b();\n")
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="k.cpp"))
    assert content is None and "own lines leading" in why
    # upstream's line first, the fork's after it: the fork's side is kept
    ours = _cpp("  a();\n  b();\n  fork_only();\n")
    content, _ = _propose(make_case(tmp_path, base, ours, theirs, path="k.cpp"))
    assert content == ours.encode()


def test_lag_settles_a_file_whose_other_regions_are_structural(tmp_path: Path) -> None:
    # region 1: the fork already has upstream's f2; region 2: both sides added a whole statement
    filler = "".join(f"int keep{i}();\n" for i in range(8))
    base = "int a = f(1);\n" + filler + "void h() {\n}\n"
    ours = "int a = f2(1, fork);\n" + filler + "void h() {\n  fork_setup(registry);\n}\n"
    theirs = "int a = f2(1);\n" + filler + "void h() {\n  upstream_init(ctx);\n}\n"
    case = make_case(tmp_path, base, ours, theirs, path="k.cpp")
    assert case.region_count == 2
    out = resolve_case(case, deterministic_resolvers(History()))
    assert out.resolved and out.resolver == "lag"
    assert out.content == (ours.replace("  fork_setup(registry);\n", "  fork_setup(registry);\n  upstream_init(ctx);\n")
                           ).encode()
    # a file whose every region is structural is the structural resolver's: lag declines it
    case = make_case(tmp_path, base, base.replace("}\n", "  fork_setup(registry);\n}\n"),
                     base.replace("}\n", "  upstream_init(ctx);\n}\n"), path="k.cpp")
    content, why = _propose(case)
    assert content is None and why == "neither side has the other's word-level change"


# -- bad input -------------------------------------------------------------------------------

def _case(kind: ConflictKind, base: bytes | None, ours: bytes | None, theirs: bytes | None,
          path: str = "f.bin") -> ConflictCase:
    return ConflictCase(Sha("b" * 40), "s", "s", path, kind, base, ours, theirs)


def test_lag_bad_input_declines_with_its_reason(tmp_path: Path) -> None:
    assert "binary" in _propose(_case(ConflictKind.BINARY, b"\0a", b"\0a\0b", b"\0c"))[1]
    assert "delete/modify" in _propose(_case(ConflictKind.DELETE_MODIFY, b"a\n", None, b"a b\n", "k.py"))[1]
    assert "rename" in _propose(_case(ConflictKind.RENAME, b"a\n", b"a b\n", b"a\n", "new/k.py"))[1]
    broken = "def a(:\n    return g(x)\n"
    case = make_case(tmp_path, broken, broken.replace("g(x)", "g(x, y, z)"), broken.replace("g(x)", "g(x, y)"))
    content, why = _propose(case)
    assert content is None and "does not parse before the merge" in why
    # CRLF on one side only: keeping a side would mix line endings in one file
    case = make_case(tmp_path, "x = g(a)\n", "x = g(a, b, c)\r\n", "x = g(a, b)\n")
    content, why = _propose(case)
    assert content is None and "CRLF on one side only" in why


def test_lag_fifty_thousand_lines_in_linear_time(tmp_path: Path) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(12_500))  # 50,000 lines
    base = body + "def tail():\n    return g(1)\n"
    ours = body + "def tail():\n    return g(1, cache=True, fork=True)\n"
    theirs = body + "def tail():\n    return g(1, cache=True)\n"
    case = make_case(tmp_path, base, ours, theirs)
    assert case.ours is not None and case.ours.count(b"\n") > 50_000
    start = time.process_time()
    content, _ = _propose(case)
    assert content == ours.encode()
    assert time.process_time() - start < 20  # seconds of CPU; a quadratic pass over 50,000 lines takes hours


def test_lag_declines_a_region_too_large_to_align_by_words(tmp_path: Path) -> None:
    # a rewrite of thousands of lines: word alignment is quadratic in the worst case
    base = "".join(f"x{i} = g({i})\n" for i in range(1_500))
    ours = base.replace("g(", "h(") + "tail = 1\n"
    theirs = base.replace("g(", "h(")
    case = make_case(tmp_path, base, ours, theirs)
    content, why = _propose(case)
    assert content is None and "more than 5000 words" in why
