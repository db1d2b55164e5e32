"""Conflict resolvers measured against the fork's own engineers, on a real fork's hand-resolved picks.

    python benchmarks/bench_resolve_real.py --repo FORK_AND_UPSTREAM.git --picks picks.jsonl \
        [--since 2025-01-01] [--until 2026-04-30] [--json] [--agent-command CMD | --agent-url URL]

For every `[RESOLVED]` single-commit pick of `--picks` (the `picks.jsonl` of shared/realfork) whose
fork commit is dated in [--since, --until], the upstream commit is picked onto the fork commit's
parent with libgit2's three-way merge in memory (cherry-pick semantics: the merge base is the upstream
commit's parent).  Each conflicted file is then settled by each resolver alone and by the naive
baselines (take the fork's side, take upstream's, union of both), and each answer is compared with
the file the fork's engineers committed: identical, identical after whitespace normalisation, or
different, and whether the guardrails accepted it.  An accepted answer that differs from the fork's
is the costly case when it lands without a person.  `chain` is the deterministic resolvers tried in
order (recorded history, trivial, structural, lag, layout, tokens, syntax: ingest's default order
without the agent), the first accepted answer winning; each is also measured alone.  Each
conflicted file carries the path at the fork point (where the fork commit's parent and the upstream
commit meet), which tells the fork's own edits from upstream changes it has not picked.

The walk-forward (printed last) is the trust gate of `ingest` replayed over time
(conflicts/trust.py): every single-commit pick of any kind is replayed once, oldest first; each
conflicted file is gated by the backtest of strictly earlier picks (each rule's answers there
against the fork's files), so each month is scored as if unseen.  Per month: auto-accepted (every
rule of the answer trusted: it lands without a person), proposed (a person approves it), refused
(no rule answered); same / different among each; and the backtest's estimate of precision next to
the measured one.  `--extra NAME,...` appends resolvers to the chain there, to measure one before
it joins ingest's chain; `--drop NAME,...` leaves some of the chain out (what one of them adds).

`--repo` must hold both sides' objects (a realfork pair's `fork.git` does: its alternates reach the
upstream snapshot).  History learning uses only picks dated strictly before the pick being replayed.
"""
from __future__ import annotations

import argparse
import json
import sys
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forkflow.conflicts import guardrails  # noqa: E402
from forkflow.conflicts.case import ConflictCase, decode, encode  # noqa: E402
from forkflow.conflicts import trust  # noqa: E402
from forkflow.conflicts.classify import fill_regions, has_markers, regions  # noqa: E402
from forkflow.conflicts.engine import deterministic_resolvers, resolve_case  # noqa: E402
from forkflow.conflicts.history import History, learn  # noqa: E402
from forkflow.conflicts.learn import replay_pick  # noqa: E402
from forkflow.conflicts.resolvers import Proposal, Resolver  # noqa: E402
from forkflow.conflicts.resolvers.structural import StructuralResolver  # noqa: E402
from forkflow.conflicts.resolvers.syntax import SyntaxResolver  # noqa: E402
from forkflow.conflicts.resolvers.version import VersionResolver  # noqa: E402
from forkflow.errors import UserError  # noqa: E402
from forkflow.git.repo import Repo  # noqa: E402
from forkflow.git.pick import MemoryPicker  # noqa: E402
from forkflow.models import Sha  # noqa: E402

EXTRA: dict[str, Callable[[], Resolver]] = {"syntax": SyntaxResolver,
                                            "tokens": lambda: StructuralResolver(by_tokens=True),
                                            "version": VersionResolver}
LANGS = trust.LANGUAGES
language = trust.language


@dataclass(frozen=True, slots=True)
class Sample:
    """One conflicted file of one replayed pick and the file the fork committed (None: deleted)."""

    fork_sha: str
    date: str
    case: ConflictCase
    fork: bytes | None


def read_picks(path: Path) -> list[dict[str, object]]:
    """Every record of a picks.jsonl; a file that is not one is a UserError naming the line."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise UserError(f"cannot read --picks {path}: {e.strerror}; pass the picks.jsonl of shared/realfork")
    out: list[dict[str, object]] = []
    for n, line in enumerate(lines, 1):
        try:
            p = json.loads(line)
            ok = isinstance(p, dict) and all(k in p for k in ("kind", "upstream_shas", "fork_commit_date"))
        except json.JSONDecodeError:
            ok = False
        if not ok:
            raise UserError(f"--picks {path}: line {n} is not a pick record (kind, upstream_shas, "
                            "fork_commit_date); pass the picks.jsonl of shared/realfork")
        out.append(p)
    return out


def load_picks(every: list[dict[str, object]], since: str, until: str,
               kinds: tuple[str, ...] = ("RESOLVED",)) -> list[dict[str, object]]:
    out = []
    for p in every:
        day = str(p["fork_commit_date"])[:10]
        if p["kind"] in kinds and len(p["upstream_shas"]) == 1 and since <= day <= until:  # type: ignore[arg-type]
            out.append(p)
    return sorted(out, key=lambda p: str(p["fork_commit_date"]))


def _day(value: str, flag: str) -> str:
    try:
        date.fromisoformat(value)
    except ValueError:
        raise UserError(f"{flag} {value!r} is not a date; pass YYYY-MM-DD") from None
    return value


class Placeholders(pygit2.OdbBackend):
    """Stands in for the blobs a snapshot lacks (prebuilt binaries of 4 MiB and more), so that rename
    detection, which reads every added file, still runs; such a blob is never a conflicted text."""

    TEXT = b"\0placeholder of a blob absent from the snapshot\n"

    def __init__(self) -> None:
        super().__init__()
        self.missing: set[pygit2.Oid] = set()

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        if oid in self.missing:
            return pygit2.enums.ObjectType.BLOB, self.TEXT
        raise KeyError(oid)

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        return self.read_cb(oid)[0], len(self.TEXT)

    def read_prefix_cb(self, oid: pygit2.Oid) -> tuple[int, bytes, pygit2.Oid]:
        return (*self.read_cb(oid), oid)

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return oid in self.missing

    def exists_prefix_cb(self, oid: pygit2.Oid) -> pygit2.Oid:
        raise KeyError(oid)

    def __iter__(self) -> Iterator[pygit2.Oid]:
        return iter(list(self.missing))

    def refresh_cb(self) -> None:
        pass


def open_picker(path: Path) -> tuple[MemoryPicker, Placeholders]:
    picker = MemoryPicker(path)
    pygit2.settings.enable_strict_hash_verification(False)
    holes = Placeholders()
    picker.repo.odb.add_backend(holes, 0)
    return picker, holes


def replay(repo: Repo, picker: MemoryPicker, holes: Placeholders, pick: dict[str, object]) -> Iterator[Sample]:
    """The conflicted files of one pick replayed in memory, each with the fork's committed file."""
    up = Sha(str(pick["upstream_shas"][0]))  # type: ignore[index]
    fork_sha = Sha(str(pick["fork_sha"]))
    for _ in range(8):
        try:
            settled = list(replay_pick(repo, picker, up, fork_sha))
            break
        except pygit2.GitError as e:  # a blob the snapshot lacks: stand it in, merge again
            m = re.search(r"[0-9a-f]{40}", str(e))
            if m is None:
                raise
            holes.missing.add(pygit2.Oid(hex=m.group(0)))
    else:
        return
    for x in settled:
        yield Sample(fork_sha, str(pick["fork_commit_date"])[:10], x.case, x.fork)


def verdict(s: Sample, content: bytes | None) -> str:
    """identical | ws-identical | regions-identical | different, against the fork's file (trust.verdict)."""
    return trust.verdict(s.case, content, s.fork)


def baselines() -> dict[str, Callable[[ConflictCase], Proposal | None]]:
    def side(pick: str) -> Callable[[ConflictCase], Proposal | None]:
        def run(case: ConflictCase) -> Proposal | None:
            if not case.kind.is_text:
                return Proposal(case.ours if pick == "ours" else case.theirs, pick)
            texts = [r.ours if pick == "ours" else r.theirs if pick == "theirs" else r.ours + r.theirs
                     for r in regions(case.segments)]
            return Proposal(encode(fill_regions(case.segments, texts)), pick)
        return run
    return {"base:ours": side("ours"), "base:theirs": side("theirs"), "base:union": side("union")}


@dataclass
class Tally:
    files: int = 0
    proposed: int = 0
    accepted: int = 0  # proposed and accepted by the guardrails: it would land without a person
    identical: int = 0  # accepted and identical to the fork's file after whitespace normalisation
    exact: int = 0  # of those, byte for byte
    regions: int = 0  # accepted, the regions as the fork's, but the fork's commit changed other lines too
    wrong: int = 0  # accepted and different: the costly case
    markers: int = 0  # accepted answers with conflict markers (must stay 0)

    def add(self, proposed: bool, accepted: bool, v: str, markers: bool) -> None:
        self.files += 1
        self.proposed += proposed
        if accepted:
            self.accepted += 1
            self.identical += v in ("identical", "ws-identical")
            self.exact += v == "identical"
            self.regions += v == "regions-identical"
            self.wrong += v == "different"
            self.markers += markers


def measure(samples: list[Sample], history: History | None, agent: object | None,
            reasons: dict[str, dict[str, int]], rules: dict[str, Tally]) -> dict[str, dict[str, Tally]]:
    """Tallies per resolver and per language ('all' too) for the samples of one pick."""
    tallies: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    chain = deterministic_resolvers(history)
    runners: dict[str, Callable[[ConflictCase], Proposal | None]] = {r.name: r.propose for r in chain}
    runners.update(baselines())
    if agent is not None:
        def ask(case: ConflictCase) -> Proposal | None:
            with_examples = replace(case, examples=history.examples(case.path)) if history is not None else case
            return agent.propose(with_examples)  # type: ignore[attr-defined, no-any-return]
        runners["agent"] = ask
    unit: dict[str, list[str]] = {"chain": [], "trivial": []}  # per file: its verdict, "none" unresolved
    for s in samples:
        lang = language(s.case.path)
        first: tuple[bool, str, bool] | None = None
        for name, run in runners.items():
            p = run(s.case)
            ok = p is not None and guardrails.check(s.case, p.content).ok
            v = verdict(s, p.content) if p is not None else "none"
            has = p is not None and p.content is not None and has_markers(decode(p.content) or "") \
                and not has_markers((decode(s.case.ours) or "") + (decode(s.case.theirs) or ""))
            for key in (lang, "all"):
                tallies[name][key].add(p is not None, ok, v, has)
            if p is None:
                why = getattr(run.__self__, "last_reason", "") if hasattr(run, "__self__") else ""
                if why:
                    reasons[name][why] = reasons[name].get(why, 0) + 1
            if ok and first is None and not name.startswith("base:") and name not in ("agent",):
                first = (True, v, has)
                assert p is not None
                rule = f"{name}: {p.note.split('; ')[0].split(' (')[0]}"
                rules.setdefault(rule, Tally()).add(True, True, v, has)
            if name == "trivial":
                unit["trivial"].append(v if ok else "none")
        f = first or (False, "none", False)
        unit["chain"].append(f[1] if f[0] else "none")
        for key in (lang, "all"):
            tallies["chain"][key].add(f[0], f[0], f[1], f[2])
    if samples:  # the pick lands without a person when every conflicted file is settled
        for name, verdicts in unit.items():
            settled = "none" not in verdicts
            worst = next((v for v in ("different", "regions-identical", "ws-identical") if v in verdicts), "identical")
            tallies[name]["unit"].add(settled, settled, worst, False)
    return tallies


def merge_into(total: dict[str, dict[str, Tally]], part: dict[str, dict[str, Tally]]) -> None:
    for name, per in part.items():
        for lang, t in per.items():
            tt = total.setdefault(name, {}).setdefault(lang, Tally())
            for k in vars(t):
                setattr(tt, k, getattr(tt, k) + getattr(t, k))


def agent_resolver(args: argparse.Namespace) -> object | None:
    if not (args.agent_command or args.agent_url):
        return None
    import os
    import shlex

    from forkflow.conflicts.resolvers.agent import AgentResolver, CommandBackend, HttpBackend
    backend = (CommandBackend(shlex.split(args.agent_command), 300) if args.agent_command
               else HttpBackend(args.agent_url, args.agent_model, os.environ.get("OPENAI_API_KEY"), 300))
    return AgentResolver(backend, lambda a: None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", required=True, type=Path, help="a git repository holding fork and upstream objects")
    ap.add_argument("--picks", required=True, type=Path, help="picks.jsonl of shared/realfork")
    ap.add_argument("--since", default="0000-00-00")
    ap.add_argument("--until", default="2026-04-30")
    ap.add_argument("--no-history", action="store_true", help="skip learning from the fork's earlier picks")
    ap.add_argument("--agent-command", default="")
    ap.add_argument("--agent-url", default="")
    ap.add_argument("--agent-model", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--min-precision", type=float, default=trust.DEFAULT_MIN_PRECISION,
                    help="the trust gate's [trust] min_precision")
    ap.add_argument("--extra", default="", help="resolvers appended to the chain in the walk-forward, "
                    "comma-separated (measuring one before it joins ingest's chain)")
    ap.add_argument("--drop", default="", help="resolvers of the chain left out of the walk-forward, comma-separated")
    ap.add_argument("--min-cases", type=int, default=trust.DEFAULT_MIN_CASES, help="the trust gate's [trust] min_cases")
    args = ap.parse_args()
    try:
        return _run(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    start = time.monotonic()
    since = args.since if args.since == "0000-00-00" else _day(args.since, "--since")
    until = _day(args.until, "--until")
    if since > until:
        raise UserError(f"--since {since} is after --until {until}; swap them")
    records = read_picks(args.picks)
    repo = Repo(args.repo)
    picker, holes = open_picker(args.repo)
    picks = load_picks(records, since, until)
    every = load_picks(records, "0000-00-00", until, ("RESOLVED", "single"))
    window = {str(p["fork_sha"]) for p in picks}
    agent = agent_resolver(args)
    total: dict[str, dict[str, Tally]] = {}
    reasons: dict[str, dict[str, int]] = defaultdict(dict)
    rules: dict[str, Tally] = {}  # the chain's accepted answers by the rule that gave them
    extra = tuple(x for x in args.extra.split(",") if x)
    unknown = [x for x in extra if x not in EXTRA]
    if unknown:
        raise UserError(f"--extra {unknown[0]!r} is no resolver here; pass some of {', '.join(EXTRA)}")
    drop = tuple(x for x in args.drop.split(",") if x)
    walk = WalkForward(trust.TrustSettings(args.min_precision, args.min_cases), extra, drop)
    history = History()
    pending: list[Sample] = []  # settled by picks of the current date: they teach only later dates
    conflicted = 0
    day = ""
    for p in every:
        when = str(p["fork_commit_date"])
        if when != day:  # strictly earlier picks only: history and the book grow when the date moves
            for s in pending:
                learn(history, s.case, s.fork, s.fork_sha[:10])
            walk.settle()
            pending.clear()
            day = when
        samples = list(replay(repo, picker, holes, p))
        scored = str(p["fork_sha"]) in window
        walk.pick(samples, history, scored)
        if scored:
            conflicted += bool(samples)
            merge_into(total, measure(samples, None if args.no_history else history, agent, reasons, rules))
        pending.extend(samples if not args.no_history else [])
    doc = report(args, picks, conflicted, total, reasons, rules, time.monotonic() - start)
    if args.json:
        print(json.dumps(doc | walk.doc(), indent=1))
    else:
        walk.report()
    return 0


@dataclass
class Window:
    """One month of the walk-forward: each conflicted file's fate under the trust gate."""

    files: int = 0
    auto: int = 0  # lands without a person: every rule of the answer trusted by the earlier picks' backtest
    auto_same: int = 0
    proposed: int = 0  # a rule answered, not trusted yet: waits for a person's approval
    proposed_same: int = 0  # ... and would be identical to the fork's file if approved
    refused: int = 0  # no rule answered: kept for a person
    auto_ident: int = 0  # of auto_same, the whole file as the fork's (whitespace aside), not only its regions
    proposed_ident: int = 0
    auto_estimate: float = 0.0  # sum of the backtest's precision estimate of each auto-accepted answer
    proposed_estimate: float = 0.0
    proposed_estimated: int = 0  # proposals whose rules had any case yet (the estimate's denominator)


class WalkForward:
    """The trust gate replayed over time: each file is gated by the backtest of strictly earlier
    picks (any kind), as `ingest` gates it by the fork's past picks."""

    def __init__(self, settings: trust.TrustSettings, extra: tuple[str, ...] = (), drop: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.extra = extra  # resolvers appended to ingest's chain, measured before they are kept
        self.drop = drop  # resolvers of ingest's chain left out (what one of them adds)
        self.book = trust.RuleBook()
        self.pending: list[tuple[tuple[str, ...], bool]] = []
        self.months: dict[str, Window] = defaultdict(Window)
        self.by_rule: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # auto, same, proposed, same
        self.wrong: list[str] = []  # auto-accepted and different: the fork commit, path, rules and records

    def settle(self) -> None:
        for rules, same in self.pending:
            self.book.add(rules, same)
        self.book.files += len(self.pending)
        self.pending.clear()

    def estimate(self, rules: tuple[str, ...]) -> float | None:
        known = [self.book.record(r).precision for r in rules]
        return None if any(p is None for p in known) else min(p for p in known if p is not None)

    def pick(self, samples: list[Sample], history: History, scored: bool) -> None:
        for s in samples:
            chain = [r for r in deterministic_resolvers(history) if r.name not in self.drop] + \
                [EXTRA[n]() for n in self.extra]
            outcome = resolve_case(s.case, chain)
            v = trust.verdict(s.case, outcome.content, s.fork) if outcome.resolved else "none"
            same = v not in ("different", "none")
            ident = v in ("identical", "ws-identical")
            rules = trust.outcome_rules(outcome, s.case.path) if outcome.resolved and trust.gated(outcome) else ()
            if rules:
                self.pending.append((rules, same))
            if not scored:
                continue
            w = self.months[s.date[:7]]
            w.files += 1
            est = self.estimate(rules) if rules else None
            if outcome.resolved and self.book.trusted(rules, self.settings):
                w.auto += 1
                w.auto_same += same
                w.auto_ident += ident
                w.auto_estimate += est or 0.0
                if not same:
                    self.wrong.append(f"{s.date} {s.fork_sha[:10]} {s.case.path}: " + "; ".join(
                        f"{r} ({self.book.record(r).describe()})" for r in rules))
                for r in rules:
                    self.by_rule[r][0] += 1
                    self.by_rule[r][1] += same
            elif outcome.resolved:
                w.proposed += 1
                w.proposed_same += same
                w.proposed_ident += ident
                if est is not None:
                    w.proposed_estimate += est
                    w.proposed_estimated += 1
                for r in rules:
                    self.by_rule[r][2] += 1
                    self.by_rule[r][3] += same
            else:
                w.refused += 1

    def windows(self) -> dict[str, Window]:
        months = dict(sorted(self.months.items()))
        every = Window()
        for w in months.values():
            for k in vars(every):
                setattr(every, k, getattr(every, k) + getattr(w, k))
        return months | {"all": every}

    def doc(self) -> dict[str, object]:
        return {"walk_forward": {m: vars(w) for m, w in self.windows().items()},
                "min_precision": self.settings.min_precision, "min_cases": self.settings.min_cases,
                "by_rule": dict(self.by_rule), "auto_different": self.wrong,
                "book": {r: [x.identical, x.different] for r, x in self.book.records.items()}}

    def report(self) -> None:
        print(f"walk-forward trust gate (precision >= {100 * self.settings.min_precision:.0f}% over >= "
              f"{self.settings.min_cases} cases, each file gated by the backtest of strictly earlier picks)")
        print(f"{'month':<9}{'files':>6}{'auto':>6}{'same':>6}{'diff':>6}{'est%':>6}{'meas%':>7}{'proposed':>9}"
              f"{'same':>6}{'diff':>6}{'est%':>6}{'meas%':>7}{'refused':>8}{'auto+approved: same':>20}{'identical':>13}")
        print("same: as the fork's file, or as the fork's in the conflict regions (the fork's commit changed other "
              "lines too); identical: the whole file as the fork's, whitespace aside; est%: the backtest's precision "
              "of the answer's rules when it was gated; meas%: same / answers")
        for m, w in self.windows().items():
            est_a = 100 * w.auto_estimate / w.auto if w.auto else float("nan")
            meas_a = 100 * w.auto_same / w.auto if w.auto else float("nan")
            est_p = 100 * w.proposed_estimate / w.proposed_estimated if w.proposed_estimated else float("nan")
            meas_p = 100 * w.proposed_same / w.proposed if w.proposed else float("nan")
            both = w.auto_same + w.proposed_same
            ident = w.auto_ident + w.proposed_ident
            print(f"{m:<9}{w.files:>6}{w.auto:>6}{w.auto_same:>6}{w.auto - w.auto_same:>6}{est_a:>6.0f}{meas_a:>7.0f}"
                  f"{w.proposed:>9}{w.proposed_same:>6}{w.proposed - w.proposed_same:>6}{est_p:>6.0f}{meas_p:>7.0f}"
                  f"{w.refused:>8}{both:>11} ({100 * both / max(w.files, 1):.0f}%){ident:>8} ({100 * ident / max(w.files, 1):.0f}%)")
        for line in self.wrong:
            print(f"  auto-accepted and different: {line}")
        print("scored files by rule: auto-accepted (same) / proposed (same)")
        for r, (a, sa, pr, sp) in sorted(self.by_rule.items(), key=lambda kv: -kv[1][0] - kv[1][2]):
            print(f"  {a:>3} ({sa:>3}) / {pr:>3} ({sp:>3})  {r}")


def report(args: argparse.Namespace, picks: list[dict[str, object]], conflicted: int,
           total: dict[str, dict[str, Tally]], reasons: dict[str, dict[str, int]], rules: dict[str, Tally],
           secs: float) -> dict[str, object]:
    if args.json:
        return {"picks": len(picks), "conflicted_picks": conflicted, "seconds": round(secs, 1),
                "tallies": {n: {lang: vars(t) for lang, t in per.items()} for n, per in total.items()},
                "rules": {r: vars(t) for r, t in rules.items()}, "declined": reasons}
    files = total.get("base:ours", {}).get("all", Tally()).files
    print(f"{len(picks)} RESOLVED picks {args.since}..{args.until}; {conflicted} conflict; {files} conflicted "
          f"files; {secs:.0f}s")
    print("resolved: accepted by the guardrails; identical: as the fork's file, whitespace aside (exact: byte for "
          "byte); regions: as the fork's in the conflict regions, the fork's commit changed other lines too; "
          "different: accepted and not as the fork's (the costly case)")
    print(f"{'resolver':<14}{'lang':<9}{'files':>6}{'resolved':>9}{'identical':>10}{'exact':>6}{'regions':>8}"
          f"{'different':>10}{'refused':>8}{'markers':>8}{'ident%':>7}{'wrong%':>7}")
    for name, per in total.items():
        for lang in ("all", *LANGS):
            t = per.get(lang)
            if t is None or not t.files:
                continue
            print(f"{name:<14}{lang:<9}{t.files:>6}{t.accepted:>9}{t.identical:>10}{t.exact:>6}{t.regions:>8}"
                  f"{t.wrong:>10}{t.files - t.accepted:>8}{t.markers:>8}{100 * t.identical / t.files:>6.0f}%"
                  f"{100 * t.wrong / max(t.accepted, 1):>6.0f}%")
    print("conflicted picks settled without a person (every conflicted file resolved): today's chain "
          "(recorded + trivial; recorded is empty for a fork that never ran forkflow) vs the new one")
    for name, label in (("trivial", "recorded+trivial"), ("chain", "the chain")):
        t = total.get(name, {}).get("unit", Tally())
        print(f"  {label:<22}{t.accepted:>4} of {t.files} picks ({100 * t.accepted / max(t.files, 1):.0f}%); "
              f"all files as the fork's: {t.identical} (regions only: {t.regions}); a file different: {t.wrong}")
    print("the chain's accepted answers by rule: identical / regions only / different")
    for rule, t in sorted(rules.items(), key=lambda kv: -kv[1].accepted):
        print(f"  {t.identical:>3} / {t.regions:>3} / {t.wrong:>3}  {rule}")
    for name, why in reasons.items():
        for text, n in sorted(why.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {name} declined {n}x: {text}")
    return {}


if __name__ == "__main__":
    sys.exit(main())
