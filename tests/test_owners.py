"""Owners are the fork's: `[owners]`, the fork's own CODEOWNERS rules, else the authors of the
fork's lines in the region (blame, picks of upstream commits left out); never the CODEOWNERS the
fork inherited from upstream."""
from __future__ import annotations

from pathlib import Path

from forkflow.conflicts import owners
from forkflow.testing.gitrepo import ForkBuilder
from tests.test_conflict_loop import _big

UPSTREAM_OWNERS = "* @upstream-lead\n/docs/ @upstream-docs\n"
FAY = {"GIT_AUTHOR_NAME": "Fay Fork", "GIT_AUTHOR_EMAIL": "fay@fork.example"}


def _fork_commit_by(builder: ForkBuilder, who: dict[str, str], files: dict[str, str], subject: str) -> None:
    builder.f.write(files)
    builder.f.git("commit", "-q", "-m", subject, env={**builder.f.env(), **who})


def _fork(cli, builder: ForkBuilder, fork_owners: str | None = None, toml: str = "",  # type: ignore[no-untyped-def]
          picked_region: bool = False) -> Path:
    """Upstream has CODEOWNERS naming its maintainers; the fork inherits it (and may add its own
    rules); Fay changes f50 (or, with `picked_region`, a pick of upstream #5 adapted by the fork
    holds f50, and Fay changes only f5); upstream #10 changes f50: a conflict."""
    builder.upstream_commit({"big.py": _big({}), ".github/CODEOWNERS": UPSTREAM_OWNERS}, "Initial (#1)")
    builder.branch_fork()
    if picked_region:
        five = builder.upstream_commit({"big.py": _big({50: "    return 51\n"})}, "Bump f50 (#5)")
        builder.pick(five, extra={"big.py": _big({50: "    return 51  # adapted in the pick\n"})})
        _fork_commit_by(builder, FAY, {"big.py": _big({5: "    return 55\n", 50: "    return 51  # adapted in the pick\n"})},
                        "[fork] f5")
        builder.upstream_commit({"big.py": _big({50: "    return 52\n"})}, "Tune f50 (#10)")
    else:
        _fork_commit_by(builder, FAY, {"big.py": _big({50: "    return 5000  # fork\n"})}, "[fork] f50")
        builder.upstream_commit({"big.py": _big({50: "    return 500\n"})}, "Tune f50 (#10)")
    if fork_owners is not None:
        _fork_commit_by(builder, FAY, {".github/CODEOWNERS": fork_owners}, "[fork] our owners")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n' + toml)
    assert cli("ingest", "--land", repo=fork).rc == 4
    return fork


def _owners(cli, fork: Path) -> tuple[list[str], str]:  # type: ignore[no-untyped-def]
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    return c["owners"], c["owners_source"]


def test_fork_rules_drop_what_upstream_has() -> None:
    fork = owners.parse_codeowners("# ours\n* @upstream-lead\n/big.py @fork-team  # ours\n/docs/ @upstream-docs\n")
    theirs = owners.parse_codeowners(UPSTREAM_OWNERS)
    rules = owners.fork_rules(fork, [theirs])
    assert rules == (("*", ()), ("/big.py", ("@fork-team",)), ("/docs/", ()))
    assert owners.Owners(("@fork-team", "Fay Fork"), owners.BLAME).names("fay")
    assert not owners.Owners(("@fork-team",), owners.BLAME).names("")


def test_owners_are_the_authors_of_the_forks_lines_not_upstreams_codeowners(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder)
    assert _owners(cli, fork) == (["Fay Fork"], owners.BLAME)
    out = " ".join(cli("conflicts", repo=fork).out.split())
    assert "@upstream-lead" not in out and "Fay Fork" in out


def test_the_forks_own_codeowners_rule_names_the_owner(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, fork_owners=UPSTREAM_OWNERS + "/big.py @fork-team\n")
    assert _owners(cli, fork) == (["@fork-team"], owners.CODEOWNERS)
    # an inherited rule after the fork's wins for its paths in CODEOWNERS, and names nobody here
    builder2 = ForkBuilder(builder.root.parent / "second")
    fork2 = _fork(cli, builder2, fork_owners="/big.py @fork-team\n" + UPSTREAM_OWNERS)
    assert _owners(cli, fork2) == (["Fay Fork"], owners.BLAME)


def test_owners_table_in_forkflow_toml_comes_first(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, fork_owners="/big.py @fork-team\n",
                 toml='\n[owners]\n"**/*.md" = "docs-people"\n"big.py" = ["@kay", "lee"]\n')
    assert _owners(cli, fork) == (["@kay", "lee"], owners.TABLE)
    doc = cli("conflicts", "show", "1", "--json", repo=fork).json()
    assert doc["owner"] == "@kay, lee" and doc["age_days"] is not None


def test_a_pick_of_upstream_is_not_the_forks_line(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    """The region's fork lines came from a pick (an upstream author's work): blame names nobody,
    and the fork's own commits to the file name Fay."""
    fork = _fork(cli, builder, picked_region=True)
    assert _owners(cli, fork) == (["Fay Fork"], owners.COMMITS)


def test_a_bad_owners_table_is_one_line_naming_the_key(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[owners]\n"src/" = 3\n')
    r = cli("conflicts", repo=fork)
    assert r.rc == 1 and len(r.err.strip().splitlines()) == 1 and "owners" in r.err and "must be a list" in r.err, r.err
