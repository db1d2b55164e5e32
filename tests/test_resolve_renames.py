"""One side only renamed identifiers in lines the other side edited."""
from __future__ import annotations

from pathlib import Path

from forkflow.conflicts.resolvers.renames import follow_rename, renaming
from forkflow.conflicts.resolvers.structural import StructuralResolver
from tests.test_conflicts import make_case

BASE = ("#include <a>\n\nvoid f(CTAEncodingAttr enc) {\n  auto l = getCTALayoutOf(enc);\n  use(l);\n}\n"
        "\nint other() { return 1; }\n")
OURS = ("#include <a>\n\nvoid f(CTAEncodingAttr enc) {\n  auto l = getCTALayoutOf(enc, /*fork=*/true);\n"
        "  use(l);\n}\n\nint other() { return 1; }\n")
THEIRS = ("#include <a>\n\nvoid f(CGAEncodingAttr enc) {\n  auto l = getCGALayoutOf(enc);\n  use(l);\n}\n"
          "\nint other() { return 1; }\n")


def test_renaming_is_identifier_substitutions_only() -> None:
    assert renaming("f(a_old, x)\n", "f(a_new, x)\n") == {"a_old": "a_new"}
    assert renaming("f(a_old, x)\n", "f(a_new, x, y)\n") is None  # an edit, not a rename
    assert renaming("flag = True\n", "flag = False\n") is None  # a value, not a name
    assert renaming("echo one\n", "echo two\n") is None  # a single word: as often a value
    assert renaming("f(abc)\n", "f(abc)\n") is None


def test_upstream_rename_follows_the_forks_edit(tmp_path: Path) -> None:
    r = StructuralResolver()
    p = r.propose(make_case(tmp_path, BASE, OURS, THEIRS, path="x.cpp"))
    assert p is not None and p.content is not None, r.last_reason
    assert b"getCGALayoutOf(enc, /*fork=*/true)" in p.content and b"void f(CGAEncodingAttr enc)" in p.content
    assert "renamed" in p.note


def test_rename_declines_when_the_old_name_is_still_used_or_a_name_keeps_the_old_word() -> None:
    base = "g(A_SHARED);\n"
    assert follow_rename(base, "g(A_SHARED_1D);\n", "g(A_SHARED, fork);\n", "h(A_SHARED);\ng(A_SHARED_1D);\n") is None
    assert follow_rename(base, "g(A_SHARED_1D);\n", "g(A_SHARED, fork);\n", "g(A_SHARED_1D);\n") == "g(A_SHARED_1D, fork);\n"
    # the fork's line has CTALayout, a name carrying the word the rename replaced: judgement needed
    assert follow_rename("x = getCTA();\n", "x = getCGA();\n", "CTALayout = getCTA();\n", "x = getCGA();\n") is None


def test_upstream_rename_with_rewrapping_is_renamed_first_then_merged(tmp_path: Path) -> None:
    base = "def f(cfg):\n    x = compute_tile(cfg, 1)\n    return x\n"
    ours = "def f(cfg):\n    x = compute_tile(cfg, 1, fork=True)\n    return x\n"
    theirs = "def f(cfg):\n    x = compute_block(cfg,  1)\n    return x\n"  # renamed and re-spaced
    r = StructuralResolver()
    p = r.propose(make_case(tmp_path, base, ours, theirs, path="k.py"))
    assert p is not None and p.content is not None, r.last_reason
    assert b"x = compute_block(cfg, 1, fork=True)" in p.content and "renamed" in p.note
