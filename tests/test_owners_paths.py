"""Owners where no stored conflict can be blamed (a merge's next conflict, the demo's list): the
fork's people, never the maintainers named in the CODEOWNERS the fork inherited."""
from __future__ import annotations

from pathlib import Path

from forkflow.context import open_context
from forkflow.render import conflict_owners
from forkflow.testing.gitrepo import ForkBuilder


def test_owners_of_paths_come_from_the_fork_not_inherited_codeowners(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"CODEOWNERS": "* @ptillet\n", "lib/a.py": "A = 1\n"}, "Initial (#1)")
    fork = builder.branch_fork().path
    builder.fork_commit({"lib/a.py": "A = 10  # ours\n"}, "[fork] tune a")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    ctx = open_context(fork)
    owner = conflict_owners(ctx)
    assert owner("", ["lib/a.py"]) == "Finn Fork"  # the fork's own commit to it, not upstream's @ptillet
    (fork / "forkflow.toml").write_text((fork / "forkflow.toml").read_text() + '\n[owners]\n"lib/**" = ["@kernels-team"]\n')
    assert conflict_owners(open_context(fork))("", ["lib/a.py"]) == "@kernels-team"
    assert owner("", ["never/touched.py"]) == "-"
    ctx.store.dispose()


def test_the_demo_names_the_forks_engineer(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("demo", "--keep", str(tmp_path / "d"))
    assert r.rc == 0, r.err
    assert "Ada Upstream" not in r.out.split("conflicts kept for a person")[-1]
