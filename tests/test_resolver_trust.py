"""A resolver rule's answer lands without a person only when the rule earned it on this fork's own
history: backtested on the fork's past hand-resolved picks (conflicts/trust.py)."""
from __future__ import annotations

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
    doc = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()["proposal"]
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


def test_a_fork_without_history_starts_with_every_rule_proposing(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, past=0, agree=True, trust="")  # the defaults: 95% over 10 cases
    assert cli("ingest", "--land", repo=fork).rc == 4
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["proposal_waiting"]
    r = cli("conflicts", "rules", repo=fork)
    assert r.rc == 0 and "every rule proposes" in r.out and ">= 95% precision over >= 10" in r.out


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
