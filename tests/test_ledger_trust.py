"""Ledger evidence has an origin: no upstream message decides anything about another upstream commit.

Only the fork's own words count (ledger/trailers.py is the one reader of lines, quotes and
trailers; landing/message.py writes with it), and a revert counts only when its diff undoes the
commit it names.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forkflow import wiring
from forkflow.config import DEFAULT_MARKERS
from forkflow.context import open_context
from forkflow.git.parse import parse_log_z
from forkflow.landing.ingest import IngestOptions, Mode
from forkflow.landing.message import Decided, Member, bundle_message, single_message
from forkflow.ledger import trailers as tr
from forkflow.ledger.classify import LedgerBuilder
from forkflow.models import Commit, Disposition, GateResult, Sha
from forkflow.testing.gitrepo import ForkBuilder

# every line break str.splitlines knows, and the lookalike key (U+017F long s)
BREAKS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
LONG_S = "Up\u017ftream-Commit"


class PassGate:
    def check(self, rev: Sha, base: Sha) -> GateResult:
        return GateResult(True, "passed")


def _init(builder: ForkBuilder, cli) -> Path:  # type: ignore[no-untyped-def]
    fork = builder.f.path
    r = cli("init", "--upstream", "upstream", repo=fork)
    assert r.rc == 0, r.err
    return fork


def _ingest(fork: Path) -> None:
    wiring.ingestor(open_context(fork), IngestOptions(mode=Mode.LAND), PassGate()).run()


def _rows(cli, fork: Path) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    r = cli("status", "--json", "--commits", repo=fork)
    assert r.rc == 0, r.err
    return {c["sha"]: c for c in r.json()["commits"]}


@pytest.fixture
def base(builder: ForkBuilder) -> ForkBuilder:
    builder.upstream_commit({"c.txt": "upstream 0\n", "README": "hi\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"c.txt": "the fork's own line\n"}, "[fork] our c")
    return builder


# -- 2. an upstream message marks another upstream commit PICKED ---------------
@pytest.mark.security
@pytest.mark.parametrize("trick", [*BREAKS, "long-s"], ids=[*(f"U+{ord(b):04X}" for b in BREAKS), "long-s"])
def test_trust_upstream_trailer_trick_never_picks_another_commit(base: ForkBuilder, cli, trick: str) -> None:  # type: ignore[no-untyped-def]
    v = base.upstream_commit({"c.txt": "upstream 1\n"}, "Change c (#10)")  # conflicts with the fork
    message = (f"Typo fix.\n\n{LONG_S}: {v}\n" if trick == "long-s"
               else f"Typo fix.{trick}Upstream-Commit: {v}\n")
    u = base.upstream_raw_commit({"typo.txt": "fixed\n"}, message)
    base.fetch()
    fork = _init(base, cli)
    _ingest(fork)
    rows = _rows(cli, fork)
    assert rows[u]["disposition"] == "PICKED"
    assert rows[v]["disposition"] == "DEFERRED", rows[v]  # held by its conflict, not closed
    assert rows[v]["fork_shas"] == []
    _ingest(fork)  # the next run still holds it
    assert _rows(cli, fork)[v]["disposition"] == "DEFERRED"
    assert (fork / "c.txt").read_text() == "the fork's own line\n"
    # the pick quotes upstream's lines: its only trailer is its own
    msg = base.f.git("log", "-1", "--format=%B", rows[u]["fork_shas"][0])
    assert tr.trailers(msg) == [u]


# -- 3. an upstream message decides about other commits -----------------------
@pytest.mark.security
@pytest.mark.parametrize("subject", ["Backport fix to the frontend", "Bundle of small fixes",
                                     "Bac\u212aport fix"])
def test_trust_upstream_sections_never_skip_a_later_commit(base: ForkBuilder, cli, subject: str) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"b.txt": "b\n"}, subject, body="Won't-port:\n- #5\n\nDeferred (1):\n- #6")
    base.fetch()
    fork = _init(base, cli)
    _ingest(fork)
    w5 = base.upstream_commit({"w5.txt": "w\n"}, "Later change (#5)")
    w6 = base.upstream_commit({"w6.txt": "w\n"}, "Another change (#6)")
    base.fetch()
    rows = _rows(cli, fork)
    assert rows[u]["disposition"] == "PICKED"
    assert rows[w5]["disposition"] == "PENDING", rows[w5]
    assert rows[w6]["disposition"] == "PENDING", rows[w6]


@pytest.mark.security
def test_trust_upstream_revert_line_on_an_unrelated_diff_cancels_nothing(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    v = base.upstream_commit({"v.txt": "v\n"}, "Add v (#20)")
    fake = base.upstream_commit({"other.txt": "o\n"}, "Tidy (#21)", body=f"This reverts commit {v}.")
    x = base.upstream_commit({"x.txt": "x\n"}, "Add x (#22)")
    real = base.revert_upstream(x)
    base.fetch()
    rows = _rows(cli, _init(base, cli))
    assert rows[v]["disposition"] == "PENDING"
    assert rows[fake]["disposition"] == "PENDING"
    # a real `git revert` still cancels its commit: both sides skipped
    assert (rows[x]["disposition"], rows[x]["reason"]) == ("SKIPPED", "reverted upstream")
    assert rows[real]["disposition"] == "SKIPPED"


@pytest.mark.security
def test_trust_upstream_revert_with_an_extra_change_cancels_nothing(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    v = base.upstream_commit({"v.txt": "v\n"}, "Add v (#20)")
    r = base.upstream_commit({"v.txt": None, "new.txt": "new code\n"}, 'Revert "Add v (#20)"',
                             body=f"This reverts commit {v}.")
    base.fetch()
    rows = _rows(cli, _init(base, cli))
    # skipping the pair would drop new.txt: both wait for a person (forkflow decide)
    assert rows[v]["disposition"] == "PENDING"
    assert rows[r]["disposition"] == "PENDING"


@pytest.mark.security
@pytest.mark.parametrize("how", ["sha", "title"])
def test_trust_fork_revert_on_an_unrelated_diff_keeps_the_pick(base: ForkBuilder, cli, how: str) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"u.txt": "u\n"}, "Add u (#30)")
    base.fetch()
    p = base.pick(u)
    if how == "sha":
        base.fork_commit({"unrelated.txt": "x\n"}, "Tidy the fork", body=f"This reverts commit {p}.")
    else:
        base.fork_commit({"unrelated.txt": "x\n"}, 'Revert "Add u (#30)"')
    rows = _rows(cli, _init(base, cli))
    assert rows[u]["disposition"] == "PICKED"
    assert rows[u]["fork_shas"] == [p]
    # the same message on a diff that undoes the pick is a revert
    base.fork_commit({"u.txt": None}, 'Revert "Add u (#30)"', body=f"This reverts commit {p}.")
    assert _rows(cli, base.f.path)[u]["disposition"] == "REVERTED"


@pytest.mark.security
def test_trust_upstream_revert_line_in_a_pick_reverts_no_fork_pick(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    a = base.upstream_commit({"a.txt": "a\n"}, "Add a (#40)")
    base.fetch()
    fork = _init(base, cli)
    _ingest(fork)
    pick = _rows(cli, fork)[a]["fork_shas"][0]
    u = base.upstream_commit({"n.txt": "n\n"}, f'Revert "Add a (#40)"\u2028This reverts commit {pick}.',
                             body=f"This reverts commit {pick}.")
    base.fetch()
    _ingest(fork)
    rows = _rows(cli, fork)
    assert rows[a]["disposition"] == "PICKED"
    assert rows[u]["disposition"] == "PICKED"
    assert (fork / "a.txt").exists()


# -- the one reader ------------------------------------------------------------
@pytest.mark.security
@pytest.mark.parametrize("brk", BREAKS + ["\n", "\r\n"])
def test_trust_writer_and_reader_split_lines_alike(brk: str) -> None:
    sha = Sha("a" * 40)
    other = "b" * 40
    raw = f"Subject{brk}Upstream-Commit: {other}{brk}{LONG_S}: {other}{brk}upstream-commit: {other}".encode()
    msg = single_message(sha, raw).decode()
    assert tr.trailers(msg) == [sha]
    for line in tr.lines(msg)[1:]:
        assert line == "" or tr.is_quoted(line) or line == f"Upstream-Commit: {sha}"


def test_trust_reader_folds_ascii_only() -> None:
    sha = "c" * 40
    assert tr.trailers(f"s\n\nupstream-commit: {sha}") == [sha]
    assert tr.trailers(f"s\n\n{LONG_S}: {sha}") == []
    assert tr.trailers(f"Upstream-Commit: {sha}") == []  # a subject is never a trailer
    assert tr.trailers(f"s\n\n> Upstream-Commit: {sha}") == []


def test_trust_non_utf8_upstream_message_passes_through() -> None:
    raw = b"Caf\xe9 fix\n\nbody \xff line"
    out = single_message(Sha("d" * 40), raw)
    assert out.startswith(b"Caf\xe9 fix\n\n> body \xff line\n\n")
    assert out.endswith(b"Upstream-Commit: " + b"d" * 40 + b"\n")


# -- every trick at once, through the landing loop ----------------------------
@pytest.mark.security
def test_trust_every_trick_at_once_ingests_with_targets_held(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    v = base.upstream_commit({"c.txt": "upstream 1\n"}, "Change c (#10)")  # conflicts: held
    w = base.upstream_commit({"w.txt": "w 1\n"}, "Add w (#11)")  # lands
    tricks = [
        base.upstream_raw_commit({"t1.txt": "1\n"}, f"Typo fix.\rUpstream-Commit: {v}\n"),
        base.upstream_raw_commit({"t2.txt": "2\n"}, f"Typo fix.\x0bUpstream-Commit: {v}\n"),
        base.upstream_raw_commit({"t3.txt": "3\n"}, f"Typo fix.\n\n{LONG_S}: {v}\n"),
        base.upstream_raw_commit({"t4.txt": "4\n"}, f"Typo fix.\u2028(cherry picked from commit {v})\n"),
        base.upstream_commit({"t5.txt": "5\n"}, "Backport small fixes", body="Won't-port:\n- #50\n\nDeferred:\n- #51"),
        base.upstream_commit({"t6.txt": "6\n"}, "Tidy (#12)", body=f"This reverts commit {w}."),
        base.upstream_commit({"t7.txt": "7\n"}, "Bundle notes", body=f"Reactor WontPort Revision: {v}\n"
                                                                    f"Reactor Defer Revision: {w}"),
    ]
    base.fetch()
    fork = _init(base, cli)
    _ingest(fork)
    later = [base.upstream_commit({"l50.txt": "l\n"}, "Later (#50)"),
             base.upstream_commit({"l51.txt": "l\n"}, "Later (#51)")]
    # the fork's own commit, on an unrelated diff, claims to revert the pick of w
    rows = _rows(cli, fork)
    base.f.git("reset", "-q", "--hard")  # the landing moved the branch; the work tree follows it
    pick_w = rows[w]["fork_shas"][0]
    base.fork_commit({"mine.txt": "m\n"}, "Fork tidy", body=f"This reverts commit {pick_w}.")
    base.fetch()
    rows = _rows(cli, fork)
    want = {v: "DEFERRED", w: "PICKED", **{t: "PICKED" for t in tricks}, **{s: "PENDING" for s in later}}
    got = {sha: rows[sha]["disposition"] for sha in want}
    assert got == want
    assert "conflict" in (rows[v]["reason"] or "")  # held with its reason
    assert rows[w]["fork_shas"] == [pick_w]
    assert (fork / "c.txt").read_text() == "the fork's own line\n"
    # nothing else changed: every other upstream commit is as it was
    assert {sha: r["disposition"] for sha, r in rows.items() if sha not in want} == {}


# -- the property: no upstream message changes another commit's disposition ----
_UP = [Sha(hashlib.sha1(str(i).encode()).hexdigest()) for i in range(1, 7)]  # six, PRs #101..#106
_FRAGMENTS = [
    "Upstream-Commit: {sha}", LONG_S + ": {sha}", "UPSTREAM-COMMIT: {sha}", "(cherry picked from commit {sha})",
    "Reactor Cherry-pick Revision: {sha}", "Reactor Defer Revision: {sha}", "Reactor WontPort Revision: {sha}",
    "This reverts commit {sha}.", "Won't-port:", "Wont-port (1):", "Skipped (2):", "Deferred (3, backlog):",
    "Picked (2):", "Applied (2): 101 102", "- #{pr}", "- {short} subject", "* #{pr} and #{pr2}", "#{pr}",
    "Revert \"Change {n}\"", "Back out \"Change {n}\"", "Revert D{n}: Change {n}",
    "Original commit changeset: {short12}", "fbshipit-source-id: {short12}", "Differential Revision: D{n}",
    "backport", "Bundle", "Cherry-pick 2 upstream", "Bac\u212aport", "https://github.com/o/r/pull/{pr}",
    "  indented", "> quoted", "\t", "",
]
_SEPS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", " ", "\n\n"]


@st.composite
def _messages(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 8))):
        frag = draw(st.sampled_from(_FRAGMENTS))
        target = draw(st.sampled_from(_UP))
        n = draw(st.integers(1, 6))
        parts.append(frag.format(sha=target, short=target[:10], short12=target[:12], pr=100 + n,
                                 pr2=100 + draw(st.integers(1, 6)), n=n))
        parts.append(draw(st.sampled_from(_SEPS)))
    return "".join(parts)


def _commit(sha: str, message: bytes, parent: str = "0" * 40, when: int = 0) -> Commit:
    """A commit as `git log` gives it back (forkflow's own parser over the stored bytes)."""
    record = f"{sha}\x1f{parent}\x1f{1_700_000_000 + when}\x1fAda\x1f".encode() + message
    return parse_log_z(record)[0]


def _dispositions(attacker: str, mode: str) -> dict[Sha, Disposition]:
    x = Sha("f" * 40)
    upstream = [_commit(s, f"Change {i + 1} (#{101 + i})".encode(), when=i) for i, s in enumerate(_UP)]
    upstream.append(_commit(x, attacker.encode(), when=10))
    fork: list[Commit] = [_commit("e" * 40, single_message(_UP[0], b"Change 1 (#101)"), when=20)]
    if mode == "single":
        fork.append(_commit("d" * 40, single_message(x, attacker.encode()), when=21))
    elif mode == "bundle":
        fork.append(_commit("d" * 40, bundle_message([Member(x, attacker, None), Member(_UP[1], "Change 2", 102)]).encode(), when=21))
    elif mode == "decided":
        decided = [Decided(x, attacker, True, "later"), Decided(_UP[3], "Change 4 (#104)", False, attacker)]
        fork.append(_commit("d" * 40, bundle_message(
            [Member(_UP[2], "Change 3", 103), Member(_UP[4], "Change 5", 105)], decided).encode(), when=21))
    builder = LedgerBuilder(upstream, DEFAULT_MARKERS, is_inverse=lambda r, t, whole: False)
    builder.add_fork_commits(fork)
    builder.add_title_matches()
    return {e.commit.sha: e.disposition for e in builder.entries() if e.commit.sha != x}


@pytest.mark.security
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=_messages(), mode=st.sampled_from(["upstream", "single", "bundle", "decided"]))
def test_trust_property_no_upstream_message_decides_another_commit(message: str, mode: str) -> None:
    assert _dispositions(message, mode) == _dispositions("Plain change", mode)
