"""Review before landing: `[ingest] land = "review"` against the local fake forge (issue 12)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.git.run import run_git
from forkflow.landing.review import Member, describe
from forkflow.models import Sha
from tests.fakeforge import FakeForge
from tests.test_ingest import _demo_fork


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


@pytest.fixture
def fork(tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    fork = _demo_fork(tmp_path, cli)
    origin = tmp_path / "origin.git"
    run_git("clone", "-q", "--bare", str(fork), str(origin), cwd=tmp_path)
    _git(fork, "remote", "add", "origin", str(origin))
    return fork


@pytest.mark.parametrize("forge_kind", ["github", "gitlab"])
def test_review_proposes_units_then_lands_approved_ones(fork: Path, cli, forge_kind: str,  # type: ignore[no-untyped-def]
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeForge(tokens={"tok": "write"}, git_dir=str(fork.parent.parent / "origin.git")) as forge:
        monkeypatch.setenv("FORGE_TOKEN", "tok")
        key = "github_repo" if forge_kind == "github" else "gitlab_project"
        text = (fork / "forkflow.toml").read_text().replace(
            "\n[ingest]\n", "\n[ingest]\nland = \"review\"\n", 1)
        text += (f'\n[ingest.review]\nsink = "{forge_kind}"\n{key} = "team/triton"\n'
                 f'{forge_kind}_api = "{forge.url}/{forge_kind}"\n{forge_kind}_token_env = "FORGE_TOKEN"\n')
        (fork / "forkflow.toml").write_text(text)
        main = _git(fork, "rev-parse", "main")
        r = cli("ingest", "--land", "--json", repo=fork)
        assert r.rc in (4, 5), r.err
        doc = r.json()
        in_review = [u for u in doc["units"] if u["status"] == "in-review"]
        assert in_review and _git(fork, "rev-parse", "main") == main  # nothing lands before review
        pulls = forge.pulls("team/triton")
        assert len(pulls) == len(in_review)
        first = pulls[0]
        assert first["base"] == "main" and first["head"].startswith("forkflow/")
        assert "**L1:**" in first["body"] and "| upstream | PR |" in first["body"]
        assert _git(fork.parent.parent / "origin.git", "rev-parse", f"refs/heads/{first['head']}")
        # a second run proposes nothing twice: in-review commits are not planned again
        again = cli("ingest", "--land", "--json", repo=fork).json()
        assert len(forge.pulls("team/triton")) == len(pulls)
        assert {u["status"] for u in again["units"] if u["kind"] == "review"} == {"in-review"}
        if forge_kind == "github":  # a member's review of the head forkflow pushed (test_review_trust.py)
            forge.review("team/triton", first["number"], "maintainer")
        else:
            forge.member("team/triton", "maintainer")
            forge.approve("team/triton", first["number"], "maintainer")
        r = cli("ingest", "--land", "--json", repo=fork)
        landed = [u for u in r.json()["units"] if u["kind"] == "review" and u["status"] == "landed"]
        assert len(landed) == 1 and _git(fork, "rev-parse", "main") != main
        status = cli("status", "--json", "--commits", repo=fork).json()
        assert status["counts"]["picked"] > 0


def test_review_unit_rerun_is_proposed_not_landed(fork: Path, cli,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeForge(tokens={"tok": "write"}) as forge:
        monkeypatch.setenv("FORGE_TOKEN", "tok")
        text = (fork / "forkflow.toml").read_text().replace("\n[ingest]\n", "\n[ingest]\nland = \"review\"\n", 1)
        text += (f'\n[ingest.review]\nsink = "github"\ngithub_repo = "team/triton"\n'
                 f'github_api = "{forge.url}/github"\ngithub_token_env = "FORGE_TOKEN"\n')
        (fork / "forkflow.toml").write_text(text)
        main = _git(fork, "rev-parse", "main")
        doc = cli("ingest", "--land", "--json", repo=fork).json()
        failed = [u for u in doc["units"] if u["status"] == "failed"]
        assert failed, doc["units"]
        pulls = len(forge.pulls("team/triton"))
        l1 = next(line for line in text.splitlines() if line.startswith("l1_command"))
        (fork / "forkflow.toml").write_text(text.replace(l1, 'l1_command = "true"'))
        r = cli("ingest", "--unit", str(failed[0]["id"]), "--json", repo=fork)
        assert r.rc == 4, r.err  # the re-run unit waits on its review (docs/automation.md)
        assert [u["status"] for u in r.json()["units"]] == ["in-review"]
        assert len(forge.pulls("team/triton")) == pulls + 1 and _git(fork, "rev-parse", "main") == main


def test_review_description_lists_reasons_and_prs() -> None:
    body = describe("bundle-1", "bundle", [Member(Sha("a" * 40), "Fix x | y", 101, "low risk")],
                    "L1 PASS: 1 suite(s)", ["depends on chain ops-api"])
    assert "`aaaaaaaaaaaa` | #101 | Fix x \\| y | low risk" in body
    assert "Upstream PRs: #101" in body and "**Depends on:** depends on chain ops-api" in body


def test_review_config_errors(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = (fork / "forkflow.toml").read_text().replace("\n[ingest]\n", "\n[ingest]\nland = \"reviewed\"\n", 1)
    (fork / "forkflow.toml").write_text(text)
    r = cli("ingest", "--land", repo=fork)
    assert r.rc == 1 and "ingest.land" in r.err


def test_review_closed_defers_and_merged_fast_forwards(fork: Path, cli,  # type: ignore[no-untyped-def]
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    origin = fork.parent.parent / "origin.git"
    with FakeForge(tokens={"tok": "write"}) as forge:
        monkeypatch.setenv("FORGE_TOKEN", "tok")
        text = (fork / "forkflow.toml").read_text().replace("\n[ingest]\n", "\n[ingest]\nland = \"review\"\n", 1)
        text += (f'\n[ingest.review]\ngithub_repo = "team/triton"\ngithub_api = "{forge.url}/github"\n'
                 'github_token_env = "FORGE_TOKEN"\n')
        (fork / "forkflow.toml").write_text(text)
        cli("ingest", "--land", repo=fork)
        pulls = forge.pulls("team/triton")
        assert len(pulls) >= 2
        closed, merged = pulls[0], pulls[1]
        forge.set_pull("team/triton", closed["number"], state="closed")
        # the forge merges the second request: origin's main moves to the proposed commit
        head = _git(origin, "rev-parse", f"refs/heads/{merged['head']}")
        if _git(origin, "merge-base", head, "main") == _git(origin, "rev-parse", "main"):
            _git(origin, "update-ref", "refs/heads/main", head)
        forge.set_pull("team/triton", merged["number"], state="merged")
        doc = cli("ingest", "--land", "--json", repo=fork).json()
        review = {u["name"]: u for u in doc["units"] if u["kind"] == "review"}
        assert any(u["status"] == "closed" and "deferred" in u["summary"] for u in review.values())
        assert any(u["status"] == "landed" and "merged" in u["summary"] for u in review.values())
        rows = cli("status", "--json", "--commits", repo=fork).json()["commits"]
        assert any(c["decided_by"] == "person" and "review was closed" in c["reason"] for c in rows)
