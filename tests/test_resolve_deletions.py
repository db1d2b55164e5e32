"""Delete/modify conflicts settled as the fork settled them before: keeping the changed side's
file (the guardrails accept it as it is, nothing else), or deleting again, also a file of the
folder where the fork's newest such conflict was deleted."""
from __future__ import annotations

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.engine import deterministic_resolvers, resolve_case
from forkflow.conflicts.history import History, learn
from forkflow.conflicts.resolvers.recorded import HistoryResolver
from forkflow.models import Sha


def _dm(path: str, ours: bytes | None, theirs: bytes | None) -> ConflictCase:
    return ConflictCase(Sha("c" * 40), "s", "s", path, ConflictKind.DELETE_MODIFY, b"base\n", ours, theirs)


def test_keeps_the_changed_side_where_the_fork_did_before() -> None:
    hist = History()
    # upstream deleted a pass the fork still changes; the fork kept its file
    earlier = _dm("lib/Pass.cpp", b"fork v1\n", None)
    assert learn(hist, earlier, b"fork v1\n", "1111111111") == 1
    later = _dm("lib/Pass.cpp", b"fork v2\n", None)
    out = resolve_case(later, deterministic_resolvers(hist))
    assert out.resolved and out.resolver == "history" and out.content == b"fork v2\n"
    assert "kept fork's file" in out.tried[-1]


def test_guardrails_accept_only_the_changed_sides_file_for_a_delete_modify() -> None:
    case = _dm("lib/Pass.cpp", b"fork v2\n", None)
    assert guardrails.check(case, b"fork v2\n").ok
    assert guardrails.check(case, None).ok  # deleting, as upstream did
    edited = guardrails.check(case, b"fork v2 with an edit\n")
    assert not edited.ok and "content the changed side does not have" in edited.reason
    binary = ConflictCase(Sha("c" * 40), "s", "s", "a.bin", ConflictKind.BINARY, b"\0a", b"\0b", b"\0c")
    assert not guardrails.check(binary, b"\0b").ok  # other kinds stay with a person


def test_deletes_again_in_a_folder_where_the_fork_deleted_last() -> None:
    hist = History()
    resolver = HistoryResolver(hist)
    case = _dm(".github/workflows/nvidia.yml", None, b"upstream edit\n")
    assert resolver.propose(case) is None and "never settled" in resolver.last_reason
    # the fork deleted upstream's amd workflow again last time: so the nvidia one goes too
    learn(hist, _dm(".github/workflows/amd.yml", None, b"x\n"), None, "2222222222")
    p = resolver.propose(case)
    assert p is not None and p.content is None and "same folder (2222222222)" in p.note
    # keeping is not carried over to other files of the folder, nor a deletion by the other side
    kept = History()
    learn(kept, _dm(".github/workflows/amd.yml", None, b"x\n"), b"x\n", "3333333333")
    assert HistoryResolver(kept).propose(case) is None
    assert resolver.propose(_dm(".github/workflows/nvidia.yml", b"fork edit\n", None)) is None
    # the newest decision in the folder counts
    learn(hist, _dm(".github/workflows/macos.yml", None, b"y\n"), b"y\n", "4444444444")
    assert resolver.propose(case) is None
