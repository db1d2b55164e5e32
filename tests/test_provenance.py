"""Every landed commit says who settled each conflicted file, and who approved it."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.conflicts.provenance import People, Settled, trailer_lines
from forkflow.ledger import trailers as tr
from forkflow.ledger.trailers import provenance, provenance_line
from tests.test_ingest import WAITS, _git, _pr_full, _unit_with, fork  # noqa: F401  (a fixture)


def _landed_message(repo: Path, upstream_sha: str) -> str:
    """The message of the fork commit on main that carries `upstream_sha`'s trailer."""
    sha = _git(repo, "log", "--format=%H", "--fixed-strings", "--grep", f"Upstream-Commit: {upstream_sha}", "main")
    assert sha, f"no landed commit carries {upstream_sha}"
    return _git(repo, "show", "-s", "--format=%B", sha.split()[0])


def test_a_resolver_settled_file_is_named_in_the_landed_commit(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    ops_h = _unit_with(doc, _pr_full(fork, 105))
    assert ops_h["status"] == "landed" and list(ops_h["resolved_by"].values()) == ["trivial"]
    (path,) = [k.split(" ", 1)[1] for k in ops_h["resolved_by"]]
    said = provenance(_landed_message(fork, _pr_full(fork, 105)))
    assert ("Resolved-By", f"trivial {path}") in said or ("Resolved-By", f"trivial {path} (in "
                                                          f"{_pr_full(fork, 105)[:12]})") in said
    clean = _landed_message(fork, _git(fork, "log", "--format=%H", "-1", "--fixed-strings", "--grep", "(#101)",
                                       "upstream/main"))
    assert provenance(clean) == []  # a clean pick says nothing of the kind


def test_a_persons_resolution_names_the_person(cli, fork: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    marked = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()["conflicted"]
    head, rest = marked.split("<<<<<<< fork\n")
    tail = rest.split(">>>>>>> upstream\n")[1]
    resolved = tmp_path / "kernels.py"
    resolved.write_text(head + '        spec = self.num_warps >= 8  # fork: warp specialization\n'
                        '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps,\n'
                        '                "stages": 2, "warp_specialized": spec}\n' + tail)
    _git(fork, "config", "user.name", "Grace Fork")
    _git(fork, "config", "user.email", "grace@fork.example")
    assert cli("conflicts", "resolve", str(c["id"]), "--file", str(resolved), repo=fork).rc == 0
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    link = _unit_with(doc, _pr_full(fork, 103))
    assert link["status"] == "landed"
    said = provenance(_landed_message(fork, _pr_full(fork, 103)))
    assert [v for k, v in said if k == "Resolved-By"][0].startswith(f"Grace Fork <grace@fork.example> {c['path']}")


@pytest.mark.security
@pytest.mark.parametrize("path", ["a\nUpstream-Commit: " + "e" * 40, "b\u2028Approved-By: mallory", 'q"uote.py',
                                  " lead.py", "t\x1b[31mred.py"])
def test_an_odd_path_stays_on_its_own_line_and_says_nothing_else(path: str) -> None:
    lines = trailer_lines([Settled(path, "structural")], {})
    assert len(lines) == 1 and tr.lines(lines[0]) == [lines[0]] and lines[0].isprintable()
    message = "Subject\n\nbody\n\n" + tr.trailer("d" * 40) + "\n" + "\n".join(lines) + "\n"
    assert tr.trailers(message) == ["d" * 40]  # no second commit named
    assert [k for k, _ in provenance(message)] == ["Resolved-By"]


def test_an_approved_proposal_names_the_approver_and_a_name_is_one_line() -> None:
    origin = {"k1": People("agent-approved", "", "Lin Reviewer <lin@fork.example>"), "k2": People("person", "Ann\nB")}
    lines = trailer_lines([Settled("x.py", "recorded", "k1"), Settled("y.py", "recorded", "k2")], origin, "0123456789ab")
    assert lines == ["Resolved-By: agent x.py (in 0123456789ab)",
                     "Approved-By: Lin Reviewer <lin@fork.example> x.py (in 0123456789ab)",
                     "Resolved-By: Ann B y.py (in 0123456789ab)"]
    assert provenance_line("L1-Run", "", "") == "L1-Run: unknown"


def test_the_l1_run_that_passed_a_landed_commit_is_its_note(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    from forkflow.git.notes import read_note

    doc = cli("ingest", "--land", "--json", repo=fork).json()
    landed = [u for u in doc["units"] if u["status"] == "landed"]
    assert landed
    for u in landed:
        note = read_note(fork, u["fork_sha"])
        (pair,) = provenance("note\n\n" + note)
        assert pair[0] == "L1-Run" and pair[1].startswith(f"{u['l1_run']} (") if u.get("l1_run") else pair[0] == "L1-Run"
    failed = next(u for u in doc["units"] if u["status"] == "failed")
    assert failed["fork_sha"] is None or read_note(fork, failed["fork_sha"]) == ""  # only what landed


def test_a_held_commit_keeps_its_units_name_from_plan_to_landing_to_the_next_run(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    held = _pr_full(fork, 103)  # meets the fork's lines and conflicts there
    planned = next(u["name"] for u in cli("plan", "--json", repo=fork).json()["units"] if held in u["commits"])
    first = _unit_with(cli("ingest", "--land", "--json", repo=fork).json(), held)
    again = _unit_with(cli("ingest", "--land", "--json", repo=fork).json(), held)
    assert planned == first["name"] == again["name"] == f"fork-{held[:10]}"
    assert first["status"] == again["status"] == "conflict"


def test_a_chain_links_name_is_its_commit_not_its_place() -> None:
    from forkflow.models import Sha
    from forkflow.planning.model import Unit, UnitKind, chain_of_link, link_name

    a, b = Sha("a" * 40), Sha("b" * 40)
    before, after = Unit(UnitKind.CHAIN, "ops", (a, b)), Unit(UnitKind.CHAIN, "ops", (b,))  # `a` landed
    assert before.link(b) == after.link(b) == "ops#bbbbbbbbbb" and chain_of_link(after.link(b)) == "ops"
    assert link_name(f"resolve-{b[:10]}", b) == f"resolve-{b[:10]}"  # a chain named after its commit


def test_status_reads_the_provenance_back(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    ops_h = _unit_with(doc, _pr_full(fork, 105))
    rows = {c["sha"]: c for c in cli("status", "--commits", "--json", repo=fork).json()["commits"]}
    said = rows[_pr_full(fork, 105)]["provenance"]
    assert ["Resolved-By", next(iter(ops_h["resolved_by"].values()))] == [said[0][0], said[0][1].split(" ")[0]]
    assert any(k == "L1-Run" for k, _ in said)
    assert all(c["provenance"] == [] for c in rows.values() if c["disposition"] != "PICKED")
    shown = cli("status", "--commits", repo=fork).out
    assert "how the landed commits were settled" in shown and "Resolved-By" in shown
