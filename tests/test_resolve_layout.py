"""The layout resolver: where one side only re-laid the lines out (another formatter), the other
side's change in that layout; it declines, saying why, everything else, and bad input."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import ConflictKind, Region
from forkflow.conflicts.engine import deterministic_resolvers, resolve_case
from forkflow.conflicts.history import History
from forkflow.conflicts.resolvers.layout import LayoutResolver, line_depths, settle_region
from forkflow.conflicts.resolvers.structural import Declined
from forkflow.planning.symbols import Lang
from forkflow.models import Sha
from tests.test_conflicts import make_case

HEAD = "import os\n\n\ndef f(layout, axis):\n"
TAIL = "    return layout\n\n\ndef g():\n    return 0\n"
BASE = HEAD + ("    _check(isinstance(layout, (SliceLayout, AutoLayout)),\n"
               "           lambda: f\"expected a SliceLayout, got: {layout}\")\n") + TAIL
# the fork's formatter: one argument a line, a trailing comma
FORK = HEAD + ("    _check(\n"
               "        isinstance(layout, (SliceLayout, AutoLayout)),\n"
               "        lambda: f\"expected a SliceLayout, got: {layout}\",\n"
               "    )\n") + TAIL


def _propose(case: ConflictCase) -> tuple[bytes | None, str]:
    r = LayoutResolver()
    p = r.propose(case)
    if p is not None:
        assert guardrails.check(case, p.content).ok
    return (p.content, p.note) if p is not None else (None, r.last_reason)


def test_layout_puts_upstreams_words_into_the_forks_layout(tmp_path: Path) -> None:
    theirs = BASE.replace("AutoLayout)", "AutoLayout, CoalescedLayout)")
    case = make_case(tmp_path, BASE, FORK, theirs)
    content, note = _propose(case)
    assert content == FORK.replace("AutoLayout)", "AutoLayout, CoalescedLayout)").encode()
    assert "only re-laid the lines out" in note and "in that layout" in note
    out = resolve_case(case, deterministic_resolvers(History()))
    assert out.resolved and out.resolver == "layout" and out.content == content


def test_layout_takes_upstreams_lines_where_it_rewrote_what_the_fork_re_laid(tmp_path: Path) -> None:
    base = "def warp_specialize(default_args, default_partition, worker_args, worker_partitions,\n" \
           "                    num_warps):\n    pass\n"
    fork = "def warp_specialize(\n    default_args,\n    default_partition,\n    worker_args,\n" \
           "    worker_partitions,\n    num_warps,\n):\n    pass\n"
    theirs = "def warp_specialize(functions_and_args, num_warps):\n    pass\n"
    content, note = _propose(make_case(tmp_path, base, fork, theirs))
    assert content == theirs.encode() and "its lines where it rewrote" in note


def test_layout_declines_what_is_not_layout(tmp_path: Path) -> None:
    # both sides changed words
    theirs = BASE.replace("AutoLayout)", "AutoLayout, CoalescedLayout)")
    content, why = _propose(make_case(tmp_path, BASE, FORK.replace("SliceLayout,", "SliceLayout2,"), theirs))
    assert content is None and why == "both sides changed words"
    # the same words, but a statement moved into the block above it: not layout in Python
    base = "def h(x):\n    if x:\n        a = 1\n    b = 2\n    return b\n"
    fork = "def h(x):\n    if x:\n        a = 1\n        b = 2\n    return b\n"
    theirs = "def h(x):\n    if x:\n        a = 1\n    b = 3\n    return b\n"
    with pytest.raises(Declined, match="re-indented Python statements"):
        settle_region(Region(base, fork, theirs), Lang.PYTHON)
    # upstream removed a whole line next to the ones the fork re-laid: whether it goes is judgement
    base = "Y = [5, 6,\n     7]\nZ = compute(Y)\n"
    fork = "Y = [\n    5,\n    6,\n    7,\n]\nZ = compute(Y)\n"
    theirs = "Y = [5, 6,\n     7]\n"
    content, why = _propose(make_case(tmp_path, base, fork, theirs))
    assert content is None and "removed whole lines" in why


def test_layout_line_depths_skip_strings_and_comments() -> None:
    text = 'a = f(\n  b, "(",\n  c)\nx = """\n(((\n"""\ny = [1,  # (\n 2]\nz = 1 + \\\n  2\n'
    assert line_depths(text) == [0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0]


# -- bad input -------------------------------------------------------------------------------

def _case(kind: ConflictKind, base: bytes | None, ours: bytes | None, theirs: bytes | None,
          path: str = "f.bin") -> ConflictCase:
    return ConflictCase(Sha("b" * 40), "s", "s", path, kind, base, ours, theirs)


def test_layout_bad_input_declines_with_its_reason(tmp_path: Path) -> None:
    assert "binary" in _propose(_case(ConflictKind.BINARY, b"\0a", b"\0a\0b", b"\0c"))[1]
    assert "delete/modify" in _propose(_case(ConflictKind.DELETE_MODIFY, b"a\n", None, b"a b\n", "k.py"))[1]
    assert "rename" in _propose(_case(ConflictKind.RENAME, b"a\n", b"a b\n", b"a\n", "new/k.py"))[1]
    broken = BASE + "def broken(:\n    pass\n"
    theirs = broken.replace("AutoLayout)", "AutoLayout, CoalescedLayout)")
    content, why = _propose(make_case(tmp_path, broken, FORK + "def broken(:\n    pass\n", theirs))
    assert content is None and "does not parse before the merge" in why
    theirs = BASE.replace("AutoLayout)", "AutoLayout, CoalescedLayout)")
    content, why = _propose(make_case(tmp_path, BASE, FORK.replace("\n", "\r\n"), theirs))
    assert content is None and "CRLF on one side only" in why


def test_layout_fifty_thousand_lines_in_linear_time(tmp_path: Path) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(12_500))  # 50,000 lines
    theirs = body + BASE.replace("AutoLayout)", "AutoLayout, CoalescedLayout)")
    case = make_case(tmp_path, body + BASE, body + FORK, theirs)
    assert case.ours is not None and case.ours.count(b"\n") > 50_000
    start = time.process_time()
    content, _ = _propose(case)
    assert content == (body + FORK.replace("AutoLayout)", "AutoLayout, CoalescedLayout)")).encode()
    assert time.process_time() - start < 20  # seconds of CPU; a quadratic pass over 50,000 lines takes hours
