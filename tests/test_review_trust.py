"""Who a review is: an approval binds to the proposal a person read, and review landing counts only
the fork's people on the request's latest head (the fake forge plays GitHub and GitLab)."""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from forkflow.git.run import run_git
from forkflow.landing.review import GitHubReview, GitLabReview, ReviewPolicy, ReviewSink, ReviewState
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder
from tests.fakeforge import FakeForge
from tests.test_ingest import _demo_fork, k_conflict_fork

# -- an approval binds to what was shown ---------------------------------------------------------

# the agent answers with the fork's line changed to what `answer.txt` (beside it) holds
AGENT = r'''
import json, pathlib, sys
req = json.load(sys.stdin)
line = (pathlib.Path(__file__).parent / "answer.txt").read_text()
head, rest = req["conflicted"].split("<<<<<<< fork\n")
tail = rest.split(">>>>>>> upstream\n")[1]
sys.stdout.write(head + line + tail)
'''
BENIGN = "    return 110\n"
HOSTILE = "    return __import__('os').system('touch %s') or 110\n"


def _agent_fork(cli, builder: ForkBuilder, tmp_path: Path) -> tuple[Path, Path, int]:  # type: ignore[no-untyped-def]
    """A fork whose one upstream commit conflicts; the agent proposed BENIGN. (fork, mark, conflict id)"""
    mark = tmp_path / "hostile-code-ran"
    fork = k_conflict_fork(cli, builder)
    agent = tmp_path / "agent" / "agent.py"
    agent.parent.mkdir()
    agent.write_text(AGENT)
    (agent.parent / "answer.txt").write_text(BENIGN)
    l1 = f"{sys.executable} -c 'import k; k.f()'"
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\n\n[ingest.agent]\n"
                f"command = {json.dumps([sys.executable, str(agent)])}\ntimeout = 30\n")
    assert cli("ingest", "--land", repo=fork).rc == 4  # the conflict waits on a person
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["proposal_waiting"]
    return fork, mark, int(c["id"])


def _replace_proposal(cli, fork: Path, tmp_path: Path, mark: Path) -> None:  # type: ignore[no-untyped-def]
    """A scheduled `ingest` runs while the person reads: the agent now answers something else."""
    (tmp_path / "agent" / "answer.txt").write_text(HOSTILE % mark)
    assert cli("ingest", "--land", repo=fork).rc == 4


def _shown(cli, fork: Path, cid: int) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(the text `conflicts show` prints, the proposal hash in its JSON)."""
    text = cli("conflicts", "show", str(cid), repo=fork).out
    doc = cli("conflicts", "show", str(cid), "--json", repo=fork).json()
    return text, doc["proposal"]["hash"]


def _recorded(cli, fork: Path) -> bool:  # type: ignore[no-untyped-def]
    """Whether the conflict was settled (an approval records a resolution and closes it)."""
    return not cli("conflicts", "--json", repo=fork).json()["conflicts"]


@pytest.mark.security
def test_approve_after_a_cron_replaced_the_proposal_is_refused(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path) -> None:
    fork, mark, cid = _agent_fork(cli, builder, tmp_path)
    text, read = _shown(cli, fork, cid)
    assert BENIGN.strip() in text and f"--proposal {read}" in text
    _replace_proposal(cli, fork, tmp_path, mark)
    r = cli("conflicts", "approve", str(cid), "--proposal", read, repo=fork)
    assert r.rc == 1 and "the proposal changed since you read it" in r.err
    assert f"forkflow conflicts show {cid}" in r.err and len(r.err.strip().splitlines()) == 1
    assert not _recorded(cli, fork)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert "landed" not in [u["status"] for u in doc["units"]] and not mark.exists()
    # read again: the new proposal has its own hash, and approving that one is recorded
    text, now = _shown(cli, fork, cid)
    assert now != read and "__import__('os')" in text
    r = cli("conflicts", "approve", str(cid), "--proposal", now, repo=fork)
    assert r.rc == 0, r.err
    assert _recorded(cli, fork)


@pytest.mark.security
def test_approve_without_the_hash_says_how_to_get_it(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fork, _mark, cid = _agent_fork(cli, builder, tmp_path)
    r = cli("conflicts", "approve", str(cid), repo=fork)
    assert r.rc == 1 and f"forkflow conflicts show {cid}" in r.err and "--proposal" in r.err
    r = cli("conflicts", "approve", str(cid), "--proposal", "0" * 12, repo=fork)
    assert r.rc == 1 and "changed since you read it" in r.err
    assert not _recorded(cli, fork)


@pytest.mark.security
def test_dashboard_approve_with_a_stale_hash_is_refused(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from forkflow.context import open_context
    from forkflow.web.app import create_app

    fork, mark, cid = _agent_fork(cli, builder, tmp_path)
    token = "operator-token-0123456789"
    log = tmp_path / "actions.log"
    with TestClient(create_app(open_context(fork), token, actions_log=log)) as client:
        page = client.get(f"/ingestion/conflicts/{cid}").text
        read = client.get(f"/api/ingestion/conflicts/{cid}").json()["proposal"]["hash"]
        assert f'name="proposal" value="{read}"' in page and "return 110" in page
        _replace_proposal(cli, fork, tmp_path, mark)
        # the form as the page rendered it before the cron run
        r = client.post(f"/ingestion/conflicts/{cid}/approve", data={"token": token, "proposal": read},
                        follow_redirects=False)
        assert r.status_code == 409 and "the proposal changed since you read it" in r.text
        assert not _recorded(cli, fork)
        refused = [json.loads(line) for line in log.read_text().splitlines()]
        assert refused[-1]["action"] == "conflict-approve" and refused[-1]["outcome"].startswith("refused")
        r = client.post(f"/ingestion/conflicts/{cid}/approve", data={"token": token}, follow_redirects=False)
        assert r.status_code == 409 and "--proposal" in r.text and not _recorded(cli, fork)
        page = client.get(f"/ingestion/conflicts/{cid}").text
        now = client.get(f"/api/ingestion/conflicts/{cid}").json()["proposal"]["hash"]
        assert now != read and f'name="proposal" value="{now}"' in page
        r = client.post(f"/ingestion/conflicts/{cid}/approve", data={"token": token, "proposal": now},
                        follow_redirects=False)
        assert r.status_code == 303
    assert _recorded(cli, fork)


# -- review means the fork's reviewers, on the head forkflow pushed ----------------------------------

HEAD = "c" * 40  # what forkflow pushed (the request's head unless a test moves it)
EARLIER = "b" * 40
REPO = "team/triton"


def _sink(forge: FakeForge, kind: str, policy: ReviewPolicy = ReviewPolicy()) -> tuple[ReviewSink, int]:
    """A review sink of `kind` on the fake forge and one open request whose head is HEAD."""
    sink: ReviewSink = (GitHubReview(REPO, "tok", f"{forge.url}/github", policy) if kind == "github"
                        else GitLabReview(REPO, "tok", f"{forge.url}/gitlab", policy))
    number = sink.propose("forkflow/bundle-1", "main", "Pick 3 upstream commits", "body").number
    forge.set_pull(REPO, number, head_sha=HEAD)
    return sink, number


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge(tokens={"tok": "write"}) as f:
        yield f


@pytest.mark.security
def test_github_strangers_approval_does_not_count(forge: FakeForge) -> None:
    sink, n = _sink(forge, "github")
    forge.review(REPO, n, "drive-by", association="NONE")
    forge.review(REPO, n, "first-timer", association="FIRST_TIME_CONTRIBUTOR")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "drive-by" in v.why and "not counted" in v.why
    forge.review(REPO, n, "maintainer", association="MEMBER")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.APPROVED and v.why == f"approved by maintainer on {HEAD[:12]}"


@pytest.mark.security
def test_github_members_changes_requested_after_a_strangers_approval_blocks(forge: FakeForge) -> None:
    sink, n = _sink(forge, "github")
    forge.review(REPO, n, "drive-by", association="NONE")
    forge.review(REPO, n, "colleague", association="COLLABORATOR")  # would be enough on its own
    forge.review(REPO, n, "maintainer", "CHANGES_REQUESTED", association="MEMBER")
    forge.review(REPO, n, "maintainer", "COMMENTED", association="MEMBER")  # a comment does not lift it
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and v.why == "changes requested by maintainer"
    forge.review(REPO, n, "maintainer", "DISMISSED", association="MEMBER")
    assert sink.state(n, Sha(HEAD)).state is ReviewState.APPROVED


@pytest.mark.security
def test_github_stale_approval_and_moved_head_do_not_count(forge: FakeForge) -> None:
    sink, n = _sink(forge, "github")
    forge.review(REPO, n, "maintainer", association="OWNER", commit=EARLIER)
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "approved an earlier head" in v.why
    # someone pushed to the request's branch: approving that head approves what forkflow won't land
    forge.set_pull(REPO, n, head_sha=EARLIER)
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and f"not the {HEAD[:12]} forkflow proposed" in v.why
    forge.set_pull(REPO, n, head_sha=HEAD)
    forge.review(REPO, n, "maintainer", association="OWNER")
    assert sink.state(n, Sha(HEAD)).state is ReviewState.APPROVED


def test_github_branch_protection_that_blocks_is_respected(forge: FakeForge) -> None:
    sink, n = _sink(forge, "github")
    forge.review(REPO, n, "maintainer", association="MEMBER")
    forge.set_pull(REPO, n, mergeable_state="blocked")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "blocked" in v.why


@pytest.mark.security
def test_github_named_approvers_and_teams(forge: FakeForge) -> None:
    sink, n = _sink(forge, "github", ReviewPolicy(approvers=("Alice",), teams=("team/triton-reviewers",),
                                                   min_approvals=2))
    forge.team("team", "triton-reviewers", "carol")
    forge.review(REPO, n, "bob", association="MEMBER")  # a member, but not one the fork names
    forge.review(REPO, n, "alice", association="CONTRIBUTOR")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "1 of 2" in v.why and "not counted: bob" in v.why
    forge.review(REPO, n, "carol", association="MEMBER")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.APPROVED and "alice, carol" in v.why


@pytest.mark.security
def test_gitlab_approved_without_rules_or_by_non_members_does_not_count(forge: FakeForge) -> None:
    sink, n = _sink(forge, "gitlab")
    v = sink.state(n, Sha(HEAD))  # GitLab says approved: true here (no rule asks for anyone)
    assert v.state is ReviewState.OPEN and "0 of 1" in v.why
    forge.approve(REPO, n, "drive-by")
    forge.member(REPO, "reporter", access_level=20)
    forge.approve(REPO, n, "reporter")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "not counted: drive-by, reporter" in v.why
    forge.member(REPO, "dev", access_level=30)
    forge.approve(REPO, n, "dev")
    assert sink.state(n, Sha(HEAD)).state is ReviewState.APPROVED


@pytest.mark.security
def test_gitlab_stale_approval_moved_head_and_requested_changes_do_not_land(forge: FakeForge) -> None:
    sink, n = _sink(forge, "gitlab")
    forge.member(REPO, "dev")
    forge.approve(REPO, n, "dev", sha=EARLIER)
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "approved an earlier head" in v.why
    forge.set_pull(REPO, n, head_sha=EARLIER)  # the project keeps approvals across pushes
    assert "forkflow proposed" in sink.state(n, Sha(HEAD)).why
    forge.set_pull(REPO, n, head_sha=HEAD)
    forge.member(REPO, "maint", access_level=40)
    forge.approve(REPO, n, "maint")
    assert sink.state(n, Sha(HEAD)).state is ReviewState.APPROVED
    forge.set_pull(REPO, n, detailed_merge_status="requested_changes")
    assert sink.state(n, Sha(HEAD)).state is ReviewState.OPEN


def test_gitlab_rules_that_want_more_approvals_wait(forge: FakeForge) -> None:
    sink, n = _sink(forge, "gitlab")
    forge.set_pull(REPO, n, approvals_required=2)
    forge.member(REPO, "dev")
    forge.approve(REPO, n, "dev")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.OPEN and "want 1 more" in v.why


@pytest.mark.security
def test_gitlab_named_approvers_and_groups(forge: FakeForge) -> None:
    sink, n = _sink(forge, "gitlab", ReviewPolicy(approvers=("alice",), teams=("team/reviewers",)))
    forge.member(REPO, "dev", access_level=40)
    forge.approve(REPO, n, "dev")  # a maintainer, but the fork names its approvers
    assert sink.state(n, Sha(HEAD)).state is ReviewState.OPEN
    forge.member("team/reviewers", "carol")
    forge.approve(REPO, n, "carol")
    v = sink.state(n, Sha(HEAD))
    assert v.state is ReviewState.APPROVED and "carol" in v.why


# -- the same through `forkflow ingest` on a real fork ----------------------------------------------

def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


def _review_fork(tmp_path: Path, cli, forge: FakeForge, kind: str, extra: str = "") -> Path:  # type: ignore[no-untyped-def]
    fork = _demo_fork(tmp_path, cli)
    origin = tmp_path / "origin.git"
    run_git("clone", "-q", "--bare", str(fork), str(origin), cwd=tmp_path)
    _git(fork, "remote", "add", "origin", str(origin))
    key = "github_repo" if kind == "github" else "gitlab_project"
    text = (fork / "forkflow.toml").read_text().replace("\n[ingest]\n", "\n[ingest]\nland = \"review\"\n", 1)
    text += (f'\n[ingest.review]\nsink = "{kind}"\n{key} = "{REPO}"\n{kind}_api = "{forge.url}/{kind}"\n'
             f'{kind}_token_env = "FORGE_TOKEN"\n{extra}')
    (fork / "forkflow.toml").write_text(text)
    return fork


def _review_units(cli, fork: Path) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    return {u["name"]: u for u in doc["units"] if u["kind"] == "review"}


@pytest.mark.security
@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_ingest_lands_only_on_the_fork_reviewers_approval(tmp_path: Path, cli, kind: str,  # type: ignore[no-untyped-def]
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_TOKEN", "tok")
    with FakeForge(tokens={"tok": "write"}, git_dir=str(tmp_path / "origin.git")) as forge:
        fork = _review_fork(tmp_path, cli, forge, kind)
        main = _git(fork, "rev-parse", "main")
        assert cli("ingest", "--land", repo=fork).rc in (4, 5)  # units in review (and one failing L1)
        n = forge.pulls(REPO)[0]["number"]
        if kind == "github":
            forge.review(REPO, n, "drive-by", association="NONE")
        else:
            forge.approve(REPO, n, "drive-by")
        units = _review_units(cli, fork)
        assert all(u["status"] == "in-review" for u in units.values()), units
        assert any("not counted: drive-by" in u["summary"] for u in units.values())
        assert _git(fork, "rev-parse", "main") == main
        if kind == "github":
            forge.review(REPO, n, "colleague", association="MEMBER")
            forge.review(REPO, n, "maintainer", "CHANGES_REQUESTED", association="MEMBER")
            units = _review_units(cli, fork)
            assert any("changes requested by maintainer" in u["summary"] for u in units.values()), units
            assert _git(fork, "rev-parse", "main") == main
            forge.review(REPO, n, "maintainer", association="MEMBER")
        else:
            forge.member(REPO, "maintainer", access_level=40)
            forge.approve(REPO, n, "maintainer")
        landed = [u for u in _review_units(cli, fork).values() if u["status"] == "landed"]
        assert len(landed) == 1 and _git(fork, "rev-parse", "main") != main


@pytest.mark.security
def test_ingest_counts_named_approvers_on_the_latest_head_only(tmp_path: Path, cli,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_TOKEN", "tok")
    origin = tmp_path / "origin.git"
    with FakeForge(tokens={"tok": "write"}, git_dir=str(origin)) as forge:
        fork = _review_fork(tmp_path, cli, forge, "github", 'approvers = ["alice"]\n')
        main = _git(fork, "rev-parse", "main")
        assert cli("ingest", "--land", repo=fork).rc in (4, 5)  # units in review (and one failing L1)
        pr = forge.pulls(REPO)[0]
        pushed = forge.head(REPO, pr["number"])
        forge.review(REPO, pr["number"], "bob", association="OWNER")  # not a named approver
        forge.review(REPO, pr["number"], "alice", association="MEMBER", commit=main)  # an earlier head
        units = _review_units(cli, fork)
        assert any("not counted: bob" in u["summary"] and "earlier head" in u["summary"] for u in units.values())
        forge.review(REPO, pr["number"], "alice", association="MEMBER", commit=pushed)
        landed = [u for u in _review_units(cli, fork).values() if u["status"] == "landed"]
        assert len(landed) == 1 and "approved by alice" in landed[0]["summary"]
        assert _git(fork, "rev-parse", "main") == pushed


def test_review_policy_config_errors(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FORGE_TOKEN", "tok")
    with FakeForge(tokens={"tok": "write"}) as forge:
        fork = _review_fork(tmp_path, cli, forge, "github", 'approvers = "alice"\nmin_approvals = 0\n')
        r = cli("ingest", "--land", repo=fork)
        assert r.rc == 1 and "ingest.review.approvers" in r.err
        text = (fork / "forkflow.toml").read_text().replace('approvers = "alice"', 'approvers = ["alice"]')
        (fork / "forkflow.toml").write_text(text)
        r = cli("ingest", "--land", repo=fork)
        assert r.rc == 1 and "ingest.review.min_approvals" in r.err
        assert not forge.pulls(REPO)
