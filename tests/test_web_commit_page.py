"""A commit's page: the unit it is in now and the ones it was in before, a decided commit's
conflict as decided, and the provenance trailers of the fork commit it landed as."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forkflow.context import open_context
from forkflow.landing import records as landing_records
from forkflow.models import MemberOutcome, UnitState
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.testing.seed import HOSTILE, sha_of
from forkflow.web.app import create_app
from tests.test_ingest import WAITS, k_conflict_fork


def test_commit_page_shows_the_unit_it_is_in_now_and_earlier_ones_as_superseded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store.open(url)
    x, other, base = sha_of("up-x"), sha_of("up-y"), sha_of("base")
    with store.session_scope() as s:
        fid = forks.fork_id(s, "triton:main")
        run1 = landing_records.start_run(s, fid, "land", base)
        first = landing_records.add_unit(s, run1, fid, "chain", "ops-api#1", base, sha_of("c1"), UnitState.FAILED,
                                         [(other, MemberOutcome.APPLIED), (x, MemberOutcome.APPLIED)], "L1 failed")
        run2 = landing_records.start_run(s, fid, "land", base)
        second = landing_records.add_unit(s, run2, fid, "chain", "ops-api#1", base, None, UnitState.CONFLICT,
                                          [(x, MemberOutcome.CONFLICT)], "conflict in k.py", retry_of=first)
        run3 = landing_records.start_run(s, fid, "land", base)
        third = landing_records.add_unit(s, run3, fid, "chain", "ops-api#1", base, sha_of("c3"), UnitState.LANDED,
                                         [(x, MemberOutcome.RESOLVED)], "L1 passed", retry_of=second)
    store.dispose()
    with TestClient(create_app(url)) as client:
        units = client.get(f"/api/commits/{x}").json()["units"]
        html = client.get(f"/commits/{x}").text
        fork_page = client.get(f"/api/commits/{sha_of('c3')}").json()["units"]
    assert [(u["id"], u["role"], u["superseded_by"]) for u in units] == [
        (third, "now", None), (second, "superseded", third), (first, "superseded", second)]
    assert [u["outcome"] for u in units] == ["resolved", "conflict", "applied"]
    assert "in this unit now" in html and html.count("superseded by") == 2
    assert f'superseded by <a href="/ingestion/units/{third}">unit #{third}</a>' in html
    assert [(u["id"], u["role"]) for u in fork_page] == [(third, "made this fork commit")]


def test_a_decided_commits_conflict_shows_as_decided_not_resolved(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = k_conflict_fork(cli, builder)
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    sha = c["upstream_sha"]
    assert cli("decide", sha, "--wont-port", "--reason", "the fork keeps its own f()", repo=fork).rc == 0
    assert cli("ingest", "--land", repo=fork).rc in (0, *WAITS)  # a later run closes the decided commit's conflict
    with TestClient(create_app(open_context(fork))) as client:
        doc = client.get(f"/api/commits/{sha}").json()
        html = client.get(f"/commits/{sha}").text
    (shown,) = doc["conflicts"]
    assert shown["id"] == c["id"] and shown["status"] == "decided" and shown["decided_as"] == "wont-port"
    table = re.search(r'<h2 id="conflicts">.*?</table>', html, re.S)
    assert table is not None and "resolved" not in table.group(0).replace("not resolved", "")
    assert f'href="/ingestion/conflicts/{c["id"]}"' in table.group(0)
    assert doc["decision"]["verdict"] == "wont-port" and "the fork keeps its own f()" in html


def test_an_open_conflict_is_open_on_its_commits_page(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = k_conflict_fork(cli, builder)
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    with TestClient(create_app(open_context(fork))) as client:
        (shown,) = client.get(f"/api/commits/{c['upstream_sha']}").json()["conflicts"]
    assert (shown["status"], shown["decided_as"]) == ("open", "")


def _landed_with_trailers(builder: ForkBuilder, cli, lines: str) -> tuple[str, str, Path]:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"k.py": "def f():\n    return 1\n"}, "Initial (#1)")
    builder.branch_fork()
    up = builder.upstream_commit({"k.py": "def f():\n    return 100\n"}, "Tune f (#10)")
    fork_sha = builder.fork_commit({"k.py": "def f():\n    return 100\n"}, "Tune f (#10)",
                                   f"> quoted upstream text\n> Resolved-By: quoted, never read\n\n"
                                   f"Upstream-Commit: {up}\n{lines}")
    builder.fetch()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    return up, fork_sha, builder.f.path


def test_commit_page_reads_back_the_provenance_trailers_of_the_landed_commit(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    up, fork_sha, fork = _landed_with_trailers(builder, cli, (
        "Resolved-By: structural (both sides added units) k.py\n"
        "Resolved-By: Ann Example <ann@example.com> lib/x.py\n"
        "Approved-By: Bob <bob@example.com>\n"
        "L1-Run: 42\n"))
    with TestClient(create_app(open_context(fork))) as client:
        doc = client.get(f"/api/commits/{up}").json()
        html = client.get(f"/commits/{up}").text
    assert doc["upstream"]["fork_shas"] == [fork_sha]
    (landed,) = doc["provenance"]
    assert landed["fork_sha"] == fork_sha
    assert [(t["key"], t["value"]) for t in landed["trailers"]] == [
        ("Resolved-By", "structural (both sides added units) k.py"),
        ("Resolved-By", "Ann Example <ann@example.com> lib/x.py"),
        ("Approved-By", "Bob <bob@example.com>"), ("L1-Run", "42")]
    assert "quoted, never read" not in html
    assert "Ann Example &lt;ann@example.com&gt; lib/x.py" in html
    assert '<a href="/validation/runs/42">42</a>' in html


@pytest.mark.security
def test_provenance_trailers_are_shown_as_text(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    up, _fork_sha, fork = _landed_with_trailers(builder, cli, (
        f"Resolved-By: {HOSTILE} k.py\nApproved-By: <a href=javascript:alert(1)>me</a>\n"
        "L1-Run: 1 <script>x</script>\n"))
    with TestClient(create_app(open_context(fork))) as client:
        html = client.get(f"/commits/{up}").text
    assert HOSTILE not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "<a href=javascript" not in html and "<script>x</script>" not in html


def test_a_commit_without_trailers_has_no_provenance_section(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    up, _fork_sha, fork = _landed_with_trailers(builder, cli, "")
    with TestClient(create_app(open_context(fork))) as client:
        doc = client.get(f"/api/commits/{up}").json()
        html = client.get(f"/commits/{up}").text
    assert doc["provenance"] == [] and 'id="provenance"' not in html
