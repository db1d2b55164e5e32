"""A resolver rule's answer lands without a person only when the rule earned it on this fork's own
history: backtested on the fork's past hand-resolved picks (conflicts/trust.py)."""
from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import pytest

from forkflow.conflicts.trust import RuleBook, TrustSettings, rules_of
from forkflow.testing.gitrepo import ForkBuilder

SPACED = "A = 1\nx  =  1\nB = 2\n"  # the fork re-spaced every file; upstream then tunes `x` in each


def _fork(cli, builder: ForkBuilder, past: int, agree: bool, trust: str = "min_cases = 2\n") -> Path:  # type: ignore[no-untyped-def]
    """A fork whose engineers hand-resolved `past` picks of the same kind of conflict (the fork
    changed only whitespace, upstream changed the value), as `trivial` would (`agree`) or not, and
    one more upstream commit of that kind pending."""
    names = [f"m{i}.py" for i in range(past + 1)]
    builder.upstream_commit({n: "A = 1\nx = 1\nB = 2\n" for n in names}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({n: SPACED for n in names}, "[fork] spacing")
    for i in range(past):
        up = builder.upstream_commit({names[i]: f"A = 1\nx = {100 + i}\nB = 2\n"}, f"Tune m{i} (#{10 + i})")
        builder.fetch()
        by_hand = f"A = 1\nx = {100 + i}\nB = 2\n" if agree else f"A = 1\nx  =  {200 + i}\nB = 2\n"
        builder.fork_commit({names[i]: by_hand}, f"Tune m{i} (#{10 + i})", f"(cherry picked from commit {up})")
    builder.upstream_commit({names[past]: "A = 1\nx = 999\nB = 2\n"}, "Tune the last one (#99)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(f'{sys.executable} -c pass')}\n\n[trust]\n{trust}")
    return fork


def _main_file(builder: ForkBuilder, name: str) -> str:
    return builder.f.git("show", f"main:{name}")


def _rule(cli, fork: Path) -> dict[str, object]:  # type: ignore[no-untyped-def]
    r = cli("conflicts", "rules", "--json", repo=fork)
    assert r.rc == 0, r.err
    (row,) = [x for x in r.json()["rules"] if "only whitespace" in x["rule"]]
    return row  # type: ignore[no-any-return]


def test_a_rule_the_forks_engineers_agreed_with_lands_alone(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, past=2, agree=True)
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    (unit,) = [u for u in r.json()["units"] if u["resolved_by"]]
    assert unit["status"] == "landed" and list(unit["resolved_by"].values()) == ["trivial"]
    assert _main_file(builder, "m2.py") == "A = 1\nx = 999\nB = 2\n"
    row = _rule(cli, fork)  # what ingest backtested and stored
    assert (row["cases"], row["identical"], row["different"], row["status"]) == (2, 2, 0, "trusted")
    assert str(row["rule"]).endswith("[Python]")


@pytest.mark.security
def test_a_rule_the_forks_engineers_overruled_waits_for_a_person(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, past=2, agree=False)
    before = builder.f.git("rev-parse", "main")
    assert cli("ingest", "--land", repo=fork).rc == 4  # a conflict waits on a person
    assert builder.f.git("rev-parse", "main") == before  # nothing landed without one
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["proposal_waiting"]
    text = cli("conflicts", "show", str(c["id"]), repo=fork).out
    shown = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()
    doc = shown["proposal"]
    assert shown["agent_attempts"] == [] and "agent attempt" not in text  # a rule's proposal is no agent's
    assert "only whitespace" in doc["rule"] and doc["record"].startswith("0 of 2 past answers")
    assert "-x  =  1" in doc["diff"] and "+x = 999" in doc["diff"]
    assert "rule proposal" in text and "0 of 2 past answers" in text and "+x = 999" in text
    assert f"--proposal {doc['hash']}" in text
    assert _rule(cli, fork)["status"] == "proposes"
    r = cli("conflicts", "approve", str(c["id"]), "--proposal", "0" * 12, repo=fork)
    assert r.rc == 1 and "changed since you read it" in r.err
    assert cli("conflicts", "approve", str(c["id"]), "--proposal", doc["hash"], repo=fork).rc == 0
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    (unit,) = [u for u in r.json()["units"] if u["resolved_by"]]
    assert list(unit["resolved_by"].values()) == ["recorded"]  # the person's approval, not the rule
    assert _main_file(builder, "m2.py") == "A = 1\nx = 999\nB = 2\n"


@pytest.mark.security
def test_a_fork_without_history_starts_with_every_rule_proposing(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, past=0, agree=True, trust="")  # the defaults: 95% over 10 cases
    assert cli("ingest", "--land", repo=fork).rc == 4
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["proposal_waiting"]
    r = cli("conflicts", "rules", repo=fork)
    assert r.rc == 0 and "every rule proposes" in r.out and ">= 95% precision over >= 10" in r.out
    assert "([trust] in forkflow.toml)" in r.out  # printed, not taken for markup


def test_a_dry_run_proposes_nothing_and_stores_nothing(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, past=1, agree=False, trust="min_cases = 1\n")
    assert cli("ingest", "--dry-run", repo=fork).rc in (0, 4)
    assert cli("conflicts", "--json", "--all", repo=fork).json()["conflicts"] == []
    from forkflow.context import open_context
    from forkflow.conflicts.rulebook import load_book

    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        assert load_book(s, ctx.fork_id) is None


@pytest.mark.parametrize("line, key", [("min_precision = 1.5", "trust.min_precision"),
                                       ("min_cases = -1", "trust.min_cases"),
                                       ("min_cases = true", "trust.min_cases"),
                                       ("most = 3", "most")])
def test_a_wrong_trust_setting_is_one_line_naming_it(cli, builder: ForkBuilder, line: str, key: str) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, past=0, agree=True, trust=line + "\n")
    before = builder.f.git("rev-parse", "main")
    for args in (("ingest", "--land"), ("conflicts", "rules")):
        r = cli(*args, repo=fork)
        assert r.rc != 0 and key.split(".")[-1] in r.err and "forkflow.toml" in r.err
        assert len(r.err.strip().splitlines()) == 1
    assert builder.f.git("rev-parse", "main") == before


def test_rules_are_named_without_what_names_the_file() -> None:
    assert rules_of("structural", "both sides added whole units at one place (2 functions); the fork's "
                    "insertion already holds `foo`'s 3 lines", "lib/a.cpp") == (
        "structural: both sides added whole units at one place [C++]",
        "structural: the fork's insertion already holds `X`'s N lines [C++]")
    assert rules_of("recorded", "settled as the fork did before (abc123)", "t.mlir") == (
        "history: settled as the fork did before [MLIR]",)
    book = RuleBook()
    book.add(["r"], True)
    book.add(["r"], True)
    assert book.status("r", TrustSettings(0.95, 2)) == "trusted"
    assert book.status("r", TrustSettings(0.95, 3)) == "proposes"  # too few cases yet
    book.add(["r"], False)
    assert book.status("r", TrustSettings(0.95, 2)) == "proposes"  # 2 of 3
    assert book.status("new", TrustSettings(0.95, 0)) == "trusted"  # min_cases = 0 opts out
    assert book.trusted(["r"], TrustSettings(0.5, 3))
    assert not book.trusted(["r", "new"], TrustSettings(0.5, 3))  # every rule of an answer must be trusted


def test_the_dashboard_shows_the_rules_and_a_rules_proposal(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from forkflow.context import open_context
    from forkflow.web.app import create_app

    fork = _fork(cli, builder, past=2, agree=False)
    with TestClient(create_app(open_context(fork), None)) as client:
        assert "no backtest yet" in client.get("/ingestion/rules").text
        assert cli("ingest", "--land", repo=fork).rc == 4
        (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
        doc = client.get("/api/ingestion/rules").json()
        (row,) = [r for r in doc["rules"] if "only whitespace" in r["rule"]]
        assert (row["cases"], row["identical"], row["different"], row["status"]) == (2, 0, 2, "proposes")
        page = client.get("/ingestion/rules")
        assert "Content-Security-Policy" in page.headers and "proposes" in page.text
        assert html.escape(str(row["rule"])) in page.text  # the rule names, escaped
        text = client.get(f"/ingestion/conflicts/{c['id']}").text
        shown = client.get(f"/api/ingestion/conflicts/{c['id']}").json()["proposal"]
        assert "rule proposal" in text and "0 of 2 past answers" in shown["record"] and "+x = 999" in text
        assert shown["rule"] == row["rule"]


# -- the syntax-tree merge -----------------------------------------------------------------------
def _conflict(tmp_path: Path, name: str, base: str, ours: str, theirs: str):  # type: ignore[no-untyped-def]
    """The case git's own diff3 merge makes of the three versions (it must conflict)."""
    from forkflow.conflicts.case import ConflictCase
    from forkflow.conflicts.classify import ConflictKind, parse_marked
    from forkflow.git.run import run_git
    from forkflow.models import Sha

    for n, text in (("base", base), ("ours", ours), ("theirs", theirs)):
        (tmp_path / n).write_text(text)
    marked = run_git("merge-file", "-p", "--diff3", "-L", "fork", "-L", "base", "-L", "upstream",
                     "ours", "base", "theirs", cwd=tmp_path, check=False)
    segments = parse_marked(marked)
    assert segments is not None and any(not isinstance(s, str) for s in segments), "git merges it cleanly"
    return ConflictCase(Sha("0" * 40), "s", "s", name, ConflictKind.CONTENT, base.encode(), ours.encode(),
                        theirs.encode(), segments, "key")


def test_syntax_merges_members_each_side_changed(tmp_path: Path) -> None:
    from forkflow.conflicts.resolvers.syntax import SyntaxResolver

    base = "int f(int x) {\n  return x;\n}\nint g() { return 1; }\n"
    ours = "int f(int x) {\n  return x;\n}\nint g() { return 2; }\n"  # the fork changed g
    theirs = "int f(int x) {\n  return x;\n}\nint h() { return 3; }\nint g() { return 1; }\n"  # upstream added h
    p = SyntaxResolver().propose(_conflict(tmp_path, "a.cpp", base, ours, theirs))
    assert p is not None and p.content == b"int f(int x) {\n  return x;\n}\nint h() { return 3; }\nint g() { return 2; }\n"
    base = "x = 1\ny = 2\n"
    p = SyntaxResolver().propose(_conflict(tmp_path, "a.py", base, "x = 1\ny = 3\n", "x = 5\ny = 2\n"))
    assert p is not None and p.content == b"x = 5\ny = 3\n"


def test_syntax_merges_a_class_both_sides_changed_by_its_members(tmp_path: Path) -> None:
    from forkflow.conflicts.resolvers.syntax import SyntaxResolver

    base = "class K:\n    def a(self):\n        return 1\n    def b(self):\n        return 2\n"
    ours = "class K:\n    def a(self):\n        return 10\n    def b(self):\n        return 2\n"
    theirs = "class K:\n    def a(self):\n        return 1\n    def c(self):\n        return 3\n    def b(self):\n        return 2\n"
    r = SyntaxResolver()
    p = r.propose(_conflict(tmp_path, "k.py", base, ours, theirs))
    assert p is not None, r.last_reason
    assert p.content == (b"class K:\n    def a(self):\n        return 10\n    def c(self):\n        return 3\n"
                         b"    def b(self):\n        return 2\n")


def test_syntax_merges_tablegen_records_by_name(tmp_path: Path) -> None:
    from forkflow.conflicts.resolvers.syntax import SyntaxResolver

    base = 'def A : Op<"a"> {\n  let x = 1;\n}\ndef B : Op<"b">;\n'
    ours = 'def A : Op<"a"> {\n  let x = 1;\n}\ndef B : Op<"b", [Pure]>;\n'
    theirs = 'def A : Op<"a"> {\n  let x = 1;\n}\ndef C : Op<"c">;\ndef B : Op<"b">;\n'
    p = SyntaxResolver().propose(_conflict(tmp_path, "Ops.td", base, ours, theirs))
    assert p is not None and p.content == ('def A : Op<"a"> {\n  let x = 1;\n}\ndef C : Op<"c">;\n'
                                           'def B : Op<"b", [Pure]>;\n').encode()


@pytest.mark.parametrize("base, ours, theirs, why", [
    ("def f():\n    return 1\n", "def f():\n    return 2\n", "def f():\n    return 3\n", "same lines of a member"),
    ("def f():\n    return 1\n\ndef g():\n    return 0\n", "def g():\n    return 0\n",
     "def f():\n    return 3\n\ndef g():\n    return 0\n", "deleted a member upstream changed"),
    ("x = 0\n", "x = 0\ndef f():\n    return 1\n", "x = 0\ndef f():\n    return 2\n", "both sides added the same member"),
])
def test_syntax_declines_what_takes_judgement(tmp_path: Path, base: str, ours: str, theirs: str, why: str) -> None:
    from forkflow.conflicts.resolvers.syntax import SyntaxResolver

    r = SyntaxResolver()
    assert r.propose(_conflict(tmp_path, "m.py", base, ours, theirs)) is None and why in r.last_reason


def test_version_keeps_the_forks_lines_that_hold_most_of_upstreams_change(tmp_path: Path) -> None:
    from forkflow.conflicts.resolvers.version import VersionResolver

    base = "a = 0\nx = f(a)\nb = 0\n"
    theirs = "a = 0\nx = g(a, scale)\nb = 0\n"  # upstream's final version
    ours = "a = 0\nx = g(a, scale, fork=True)\nb = 0\n"  # the fork took an earlier one and built on it
    r = VersionResolver()
    p = r.propose(_conflict(tmp_path, "v.py", base, ours, theirs))
    assert p is not None and p.content == ours.encode() and "most of upstream's change" in p.note
    ours = "a = 0\nx = f(a, fork=True)\nb = 0\n"  # the fork's own edit: none of upstream's words
    assert r.propose(_conflict(tmp_path, "v.py", base, ours, theirs)) is None
    assert "less than half" in r.last_reason


@pytest.mark.security
def test_a_rules_proposal_does_not_hide_the_agents(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.test_review_trust import _agent_fork

    fork, _mark, cid = _agent_fork(cli, builder, tmp_path)  # `version` answers too, after the agent
    doc = cli("conflicts", "show", str(cid), "--json", repo=fork).json()
    assert doc["proposal"]["backend"] == "command" and doc["proposal"]["rule"] is None
    assert any("the agent's proposal waits for a person instead" in t for t in doc["tried"])
