"""A person's resolution meets the parse check `ingest` makes: against the fork's own file, not
the fork side rebuilt from the marked file (which carries the merge's clean hunks)."""
from __future__ import annotations

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import case_from_marked
from forkflow.conflicts.classify import ConflictKind
from forkflow.models import Sha

# the merge's clean hunk (upstream's `def g(` line, cut) makes the rebuilt fork side unparsable
MARKED = ("def f():\n"
          "<<<<<<< fork\n    return 10\n||||||| base\n    return 1\n=======\n    return 2\n>>>>>>> upstream\n"
          "def g(\n")


def test_a_result_that_does_not_parse_is_refused_against_the_forks_own_file() -> None:
    case = case_from_marked(Sha("a" * 40), "s", "k.py", ConflictKind.CONTENT, MARKED, "key")
    assert case is not None
    result = b"def f():\n    return 12\ndef g(\n"  # only the region changed; the file does not parse
    assert guardrails.check(case, result).ok  # the rebuilt side does not parse either: let through
    fork_file = b"def f():\n    return 10\n\n\ndef g():\n    return 0\n"
    verdict = guardrails.check(case, result, fork_file)
    assert not verdict.ok and verdict.reason == "k.py no longer parses"  # as `ingest` would refuse it
