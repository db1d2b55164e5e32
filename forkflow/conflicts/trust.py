"""Each resolver rule earns its trust on this fork's own history before its answers land alone.

A rule (`structural: both sides added whole units at one place`, `lag: ...`) is backtested on the
fork's past picks: each past conflicted file is settled by the chain with only what the fork had
settled strictly before it, and the rule's answer is compared with the file the fork's engineers
committed.  An answer lands without a person only when every rule that made it has at least
`[trust] min_cases` cases (default 10) on this fork and a precision (identical / cases) of at least
`[trust] min_precision` (default 0.95).  Otherwise it is a proposal that waits for a person
(`forkflow conflicts show ID`, then `approve ID --proposal HASH`: conflicts/approval.py).  A fork
with no history starts with every rule proposing.

Answers made by a person (a recorded resolution, an approved proposal) and the agent (which has
its own approval, `[ingest.agent] autoland`) are not gated here.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence

from forkflow.config import Config, config_error
from forkflow.conflicts.case import ConflictCase, decode
from forkflow.conflicts.classify import extract_regions
from forkflow.conflicts.engine import CaseResolution, deterministic_resolvers, resolve_case
from forkflow.conflicts.history import History, learn
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.conflicts.trustbook import (
    DEFAULT_MIN_CASES, DEFAULT_MIN_PRECISION, PROPOSES, TRUSTED, Record, RuleBook, TrustSettings,
)

__all__ = ["DEFAULT_MIN_CASES", "DEFAULT_MIN_PRECISION", "PROPOSES", "TRUSTED", "Record", "RuleBook",
           "TrustSettings", "TrustGate", "backtest", "trust_settings"]

RULE_BACKEND = "rule"  # the attempt log's backend of a rule's proposal (approval.RULE_BACKEND)
UNGATED = ("agent",)  # resolvers with an approval of their own


def trust_settings(config: Config) -> TrustSettings:
    """`[trust]` of forkflow.toml, checked: min_precision in [0, 1], min_cases >= 0."""
    sect = config.section("trust")
    if "trust" in config.raw and not isinstance(config.raw["trust"], dict):
        raise config_error(config.path, config.text, "trust", "must be a table: [trust]")
    p = sect.get("min_precision", DEFAULT_MIN_PRECISION)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise config_error(config.path, config.text, "trust.min_precision",
                           f"must be a number from 0 to 1 (0.95 is 95%), not {p!r}")
    n = sect.get("min_cases", DEFAULT_MIN_CASES)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise config_error(config.path, config.text, "trust.min_cases",
                           f"must be a whole number >= 0 (0 trusts a rule with no case yet), not {n!r}")
    return TrustSettings(float(p), n)


_DIGITS = re.compile(r"\d+")
_QUOTED = re.compile(r"`[^`]*`")


LANGUAGES = ("C++", "Python", "TableGen", "MLIR", "other")
_EXT = {".py": "Python", ".pyi": "Python", ".td": "TableGen", ".mlir": "MLIR"}
_CPP = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu", ".cuh", ".inc")


def language(path: str) -> str:
    """The language family a rule is measured in: the resolvers read each differently (tree-sitter
    for Python, brackets for C++, records for TableGen, ops and lit lines for MLIR)."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot >= 0 else ""
    return "C++" if ext in _CPP else _EXT.get(ext, "other")


def rules_of(resolver: str, note: str, path: str = "") -> tuple[str, ...]:
    """The rules an answer was made by: its resolver and each clause of its note, without the
    parts that name this file (parentheses, quoted names, numbers), in the file's language family
    (a rule earns its trust per language).  `recorded`'s answers from the fork's own earlier picks
    are the `history` rule."""
    if resolver == "recorded" and not note.startswith("recorded resolution") and "as the fork did" in note:
        resolver = "history"
    where = f" [{language(path)}]" if path else ""
    out = []
    for part in note.split("; "):
        text = _DIGITS.sub("N", _QUOTED.sub("`X`", part.split(" (")[0])).strip()
        if text:
            out.append(f"{resolver}: {text}"[:190] + where)
    return tuple(dict.fromkeys(out)) or (resolver + where,)


def outcome_rules(outcome: CaseResolution, path: str) -> tuple[str, ...]:
    return rules_of(outcome.resolver, outcome.note, path)


def gated(outcome: CaseResolution) -> bool:
    """Whether the trust gate judges this answer: a rule's, not a person's or the agent's."""
    if not outcome.resolved or outcome.resolver in UNGATED:
        return False
    return not (outcome.resolver == "recorded" and outcome.note.startswith("recorded resolution"))


# -- comparing an answer with the fork's file -----------------------------------------------------
def verdict(case: ConflictCase, content: bytes | None, fork: bytes | None) -> str:
    """identical | ws-identical | regions-identical | different, against the fork's file.

    regions-identical: every line of the answer inside a conflict region is what the fork has there
    (whitespace aside), but the fork's commit also changed lines outside the regions (it reformatted
    the file, or adapted other code), which no resolution of the conflict can reproduce."""
    if content == fork:
        return "identical"
    if content is not None and fork is not None and content.split() == fork.split():
        return "ws-identical"
    if content is not None and fork is not None and case.segments and regions_match(case, content, fork):
        return "regions-identical"
    return "different"


def same_as_fork(case: ConflictCase, content: bytes | None, fork: bytes | None) -> bool:
    return verdict(case, content, fork) != "different"


def regions_match(case: ConflictCase, content: bytes, fork: bytes) -> bool:
    """Whether the fork's file differs from the answer only outside the answer's conflict regions."""
    texts = extract_regions(case.segments, content.decode("utf-8", "surrogateescape"))
    if texts is None:
        return False
    spans = []  # [first, last) line of each region in the answer
    line = 0
    it = iter(texts)
    for seg in case.segments:
        n = (seg if isinstance(seg, str) else next(it)).count("\n")
        if not isinstance(seg, str):
            spans.append((line, line + n))
        line += n
    ours = [x.strip() for x in content.decode("utf-8", "replace").splitlines()]
    theirs = [x.strip() for x in fork.decode("utf-8", "replace").splitlines()]
    # the lines both files start and end with are equal: align only what lies between (a whole
    # file's alignment was most of a real fork's backtest)
    head = 0
    while head < min(len(ours), len(theirs)) and ours[head] == theirs[head]:
        head += 1
    tail = 0
    while tail < min(len(ours), len(theirs)) - head and ours[-1 - tail] == theirs[-1 - tail]:
        tail += 1
    sm = difflib.SequenceMatcher(None, ours[head:len(ours) - tail], theirs[head:len(theirs) - tail], autojunk=False)
    for op, i1, i2, _, _ in sm.get_opcodes():
        if op == "equal":
            continue
        i1, i2 = i1 + head, i2 + head
        for a, b in spans:
            if (i1 < b and a < i2) or (i1 == i2 and a < i1 < b):
                return False
    return True


# -- the backtest --------------------------------------------------------------------------------
def backtest(settled: Iterable[tuple[str, ConflictCase, bytes | None]],
             chain: Callable[[History], list[object]] | None = None) -> tuple[RuleBook, History]:
    """Replay the fork's past conflicted files (fork commit, case, the fork's file), oldest first:
    each is settled by the chain with the history of strictly earlier fork commits, and each rule
    of its answer is credited identical or different.  Returns the book and the whole history."""
    make = chain or deterministic_resolvers
    history = History()
    book = RuleBook()
    pending: list[tuple[str, ConflictCase, bytes | None]] = []
    current = ""
    for where, case, fork in settled:
        if where != current:  # a new pick: what the earlier one settled may teach now
            for w, c, f in pending:
                learn(history, c, f, w[:10])
            pending.clear()
            current = where
        outcome = resolve_case(case, make(history))  # type: ignore[arg-type]
        book.files += 1
        if outcome.resolved and gated(outcome):
            book.add(outcome_rules(outcome, case.path), same_as_fork(case, outcome.content, fork))
        pending.append((where, case, fork))
    for w, c, f in pending:
        learn(history, c, f, w[:10])
    return book, history


# -- the gate ------------------------------------------------------------------------------------
class TrustGate:
    """Turns an untrusted rule's answer into a proposal that waits for a person."""

    def __init__(self, settings: TrustSettings, book: Callable[[], RuleBook],
                 log: Callable[[Attempt], None], agent_waits: Callable[[ConflictCase], bool] | None = None) -> None:
        self.settings = settings
        self._book = book  # lazy: the fork's backtest is learnt with its history, at the first conflict
        self.log = log
        # whether an agent's proposal already waits for this conflict: a rule's is then not logged
        # over it (the newest proposal is the one `conflicts show` prints and approve binds to)
        self.agent_waits = agent_waits
        self.proposed = 0

    def gate(self, case: ConflictCase, outcome: CaseResolution) -> CaseResolution:
        if not gated(outcome):
            return outcome
        book = self._book()
        rules = outcome_rules(outcome, case.path)
        if book.trusted(rules, self.settings):
            return outcome
        weakest = min(rules, key=lambda r: (book.status(r, self.settings) == TRUSTED, book.record(r).cases))
        record = book.record(weakest).describe()
        why = (f"trust: {weakest} is not trusted on this fork ({record}; lands alone at "
               f"{100 * self.settings.min_precision:.0f}% over {self.settings.min_cases} cases)")
        if self.agent_waits is not None and self.agent_waits(case):
            why += "; the agent's proposal waits for a person instead"
        elif outcome.content is not None and case.kind.is_text:
            self.log(Attempt(case.upstream_sha, case.path, RULE_BACKEND, f"rule {weakest}",
                             decode(outcome.content) or "", "proposed",
                             f"rule {weakest}: {record}; waits for a person: forkflow conflicts show ID, "
                             "then approve ID --proposal HASH", 0))
            self.proposed += 1
            why += "; proposed"
        return CaseResolution(False, tried=outcome.tried + (why,))
