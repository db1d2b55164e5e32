"""No silent config: every unknown key or section of forkflow.toml is an error with its line (issue 12)."""
from __future__ import annotations

import pytest

from forkflow.config import parse_config
from forkflow.errors import UserError

BASE = '[upstream]\nremote = "upstream"\n\n[fork]\nbranch = "main"\n'


@pytest.mark.parametrize(("extra", "key", "line"), [
    ('\n[ingest]\nl1_comand = "make test"\n', "ingest.l1_comand", 8),
    ('\n[triage]\nreruns = 2\nmin_clean_rerun = 1\n', "triage.min_clean_rerun", 9),
    ('\n[validation]\njobz = 2\n', "validation.jobz", 8),
    ('\n[bisect]\ncomand = "x"\n', "bisect.comand", 8),
    ('\n[ingest.agent]\ncommand = "a"\nmodle = "m"\n', "ingest.agent.modle", 9),
    ('\n[[ingest.chain]]\nname = "ws"\npath = ["a/**"]\n', "ingest.chain.path", 9),
    ('\n[ledger]\nmarker = []\n', "ledger.marker", 8),
])
def test_config_unknown_key_names_key_and_line(extra: str, key: str, line: int) -> None:
    with pytest.raises(UserError) as e:
        parse_config(BASE + extra)
    assert f"forkflow.toml:{line}: key '{key}'" in str(e.value)


def test_config_unknown_section_names_its_line() -> None:
    with pytest.raises(UserError, match=r"forkflow.toml:7: unknown section or key 'ingets'"):
        parse_config(BASE + "\n[ingets]\nmax_bundle = 3\n")


def test_config_every_documented_key_loads() -> None:
    text = BASE + (
        '\n[ingest]\nl1_command = "x"\nmax_bundle = 5\nland = "review"\nuntested_paths = ["docs/**"]\n'
        '\n[ingest.agent]\ncommand = "a"\n\n[[ingest.chain]]\nname = "ws"\npaths = ["a/**"]\n'
        '\n[triage]\nreruns = 2\nsink = "markdown"\n\n[validation]\njobs = 2\n\n[bisect]\ncommand = "x"\n'
        '\n[ledger]\nopt_out = ["\\\\[no-port\\\\]"]\n')
    cfg = parse_config(text)
    assert cfg.ledger.opt_out == ("\\[no-port\\]",)


def test_init_writes_fork_name_so_a_moved_checkout_keeps_its_history(builder, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    builder.upstream_commit({"lib/a.py": "A = 1\n"}, "Add a (#1)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    assert f'name = "{fork.name}:main"' in (fork / "forkflow.toml").read_text()
    sha = builder.upstream.head()
    assert cli("decide", sha, "--skip", "--reason", "not needed", repo=fork).rc == 0
    moved = tmp_path / "renamed-checkout"
    shutil.move(str(fork), moved)
    row = cli("status", "--json", "--commits", repo=moved).json()["commits"][-1]
    assert row["disposition"] == "SKIPPED" and row["decided_by"] == "person"


def test_store_url_that_names_nothing_is_an_error(builder, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    typo = tmp_path / "forkfow.db"
    r = cli("status", "--store", f"sqlite:///{typo}", repo=fork)
    assert r.rc == 1 and f"no forkflow store at {typo}" in r.err and not typo.exists()
