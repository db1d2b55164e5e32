"""Who a review is: an approval binds to the proposal a person read, and review landing counts only
the fork's people on the request's latest head (the fake forge plays GitHub and GitLab)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forkflow.testing.gitrepo import ForkBuilder

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
    builder.upstream_commit({"k.py": "def f():\n    return 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"k.py": "def f():\n    return 10  # fork\n"}, "[fork] f")
    builder.upstream_commit({"k.py": "def f():\n    return 100\n"}, "Tune f (#10)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
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
