"""Triage figures, forkflow side by side with plain baselines, in one run.

    python benchmarks/bench_triage.py [--mb 200] [--seeds 0 1]

1. Grouping quality (adjusted Rand index) on the labelled corpus (forkflow/testing/failure_corpus.py),
   against grouping by the raw last line, and by the normalized last line that says
   error/failed (what a grep-based triage does).
2. Throughput of signature extraction in MB/s of log, one process and two (2 cores), against
   reading the file and against `grep -c Traceback`.
3. The flaky simulation (forkflow/testing/flakysim.py): share of real failures labelled FLAKY,
   against the naive rule "FLAKY when one rerun passes".
4. The field corpus (tests/data/field/*.jsonl): ARI per part, project and class, and class
   precision/recall for INFRA (machine, environment) and FLAKY.  Each failure is written as a
   job's log file of one stored run, and `forkflow triage RUN --json --reruns 0` reads them, as a
   user's run would be triaged.  The held-aside parts (`heldout` by the threads' hash, and
   `fresh`, the batch of tests/data/field/fresh.jsonl) are scored only with `--heldout`, and only
   figures are printed for them, never a failure's text or signature.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable

from forkflow.triage.classify import FlakyPolicy, infra_family, rule_family
from forkflow.testing.failure_corpus import TEMPLATES, _env, _noise, generate
from forkflow.testing import real_corpus
from forkflow.testing.flakysim import naive_labeller, simulate, triage_labeller
from forkflow.triage.group import adjusted_rand_index
from forkflow.triage.models import FailureKind, InfraFamily, Signature
from forkflow.triage.parsers import generic_key
from forkflow.triage.signature import normalize, signature_of, signature_of_file

if TYPE_CHECKING:
    from forkflow.models import Sha
    from forkflow.testing.gitrepo import ForkBuilder


def _last_line(log: str) -> str:
    lines = [ln for ln in log.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def grouping(seeds: list[int]) -> None:
    print("== grouping quality (adjusted Rand index, 1.0 = the true groups)")
    for seed in seeds:
        samples = generate(seed=seed)
        truth = [s.group for s in samples]
        t0 = time.perf_counter()
        ours = adjusted_rand_index(truth, [signature_of(s.log).text for s in samples])
        dt = time.perf_counter() - t0
        raw = adjusted_rand_index(truth, [_last_line(s.log) for s in samples])
        norm = adjusted_rand_index(truth, [normalize(generic_key(s.log)[0]) for s in samples])
        print(f"seed {seed}: {len(samples)} failures in {len(TEMPLATES)} true groups; "
              f"forkflow ARI {ours:.4f} ({dt:.2f}s) | raw last line {raw:.4f} | "
              f"normalized last error/fail line {norm:.4f} | "
              f"ratio vs best baseline {ours / max(raw, norm, 1e-9):.1f}x")


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


_ERRORISH = re.compile(r"(?i)error|fail|fatal|abort|exception|panic")
_VOLATILE = ((re.compile(r"^\S*\d\d:\d\d:\d\d\S*\s*"), ""), (re.compile(r"(?<![\w.])(?:[\w.~-]*/)+([\w.-]+)"), r"\1"),
             (re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b"), "H"), (re.compile(r"\d+"), "N"))


def plain_regex_key(text: str) -> str:
    """The baseline a grep-based triage uses, kept apart from forkflow's code so that it does not
    improve with it: the last line that says error/failed, paths, hex and numbers replaced."""
    lines = [ln.strip() for ln in text[-20000:].splitlines() if ln.strip()]
    line = next((ln for ln in reversed(lines) if _ERRORISH.search(ln)), lines[-1] if lines else "")
    for rx, repl in _VOLATILE:
        line = rx.sub(repl, line[:2000])
    return line


def _scores(cases: list[real_corpus.Case]) -> tuple[float, float, float]:
    truth = [c.cause for c in cases]
    ours = adjusted_rand_index(truth, [signature_of(c.combined).key for c in cases])
    exact = adjusted_rand_index(truth, [_first_line(c.message) for c in cases])
    regex = adjusted_rand_index(truth, [plain_regex_key(c.combined) for c in cases])
    return ours, exact, regex


def real_grouping(heldout: bool) -> None:
    """ARI on the real corpus (tests/data), as a whole and per surface family, with baselines."""
    cases = real_corpus.load()
    splits = ("train", "heldout") if heldout else ("train",)
    print(f"== real corpus: {len(cases)} failures, {len({c.cause for c in cases})} causes "
          f"(ARI: forkflow | exact first line | regex normaliser)")
    for name in splits:
        part = [c for c in cases if c.split == name]
        o, e, r = _scores(part)
        print(f"{name:8} {len(part):4} real failures: {o:.3f} | {e:.3f} | {r:.3f}")
    pool = [c for c in cases if c.split in splits]
    if heldout:
        o, e, r = _scores(pool)
        print(f"{'both':8} {len(pool):4} real failures: {o:.3f} | {e:.3f} | {r:.3f}")
    allv = real_corpus.variants(pool)
    o, e, r = _scores(pool + allv)
    print(f"{'all':14} {len(pool) + len(allv):4} real + variants: {o:.3f} | {e:.3f} | {r:.3f}")
    for family in real_corpus.VARIANTS:
        fam = [v for v in allv if v.surface == family]
        # the family's variants must land in the group of their real twins
        twins = {v.id.split("~")[0] for v in fam}
        o, e, r = _scores([c for c in pool if c.id in twins] + fam)
        print(f"  {family:12} {len(fam):4} variants + twins: {o:.3f} | {e:.3f} | {r:.3f}")
    # surfaces stacked on one failure, and variants drawn with other seeds: a rule fitted to
    # one generated surface would show here
    for chain in (("wrapper", "teardown", "truncation"), ("tb-short", "captured")):
        stacked = _stacked(pool, chain)
        twins = {v.id for v in stacked}
        o, e, r = _scores([c for c in pool if c.id in twins] + stacked)
        print(f"  {'+'.join(chain):28} {len(stacked):4} stacked + twins: {o:.3f} | {e:.3f} | {r:.3f}")
    for seed in (1, 2):
        drawn = pool + real_corpus.variants(pool, seed=seed)
        o, e, r = _scores(drawn)
        print(f"  {'variants, seed ' + str(seed):28} {len(drawn):4} real + variants: {o:.3f} | {e:.3f} | {r:.3f}")


FIELD_CLASSES = (("INFRA machine", "infra-machine", "machine"), ("INFRA environment", "infra-env", "environment"))


def _inited_fork(root: Path) -> tuple[ForkBuilder, Sha, dict[str, str]]:
    """A fork under `root` with one commit of its own, `forkflow init`ed by a fresh process: the
    builder, that commit, and the environment that runs forkflow from this checkout."""
    import sys

    from forkflow.testing.gitrepo import ForkBuilder

    b = ForkBuilder(root / "repos")
    b.upstream_commit({"a.py": "A = 1\n"}, "Initial")
    b.branch_fork()
    sha = b.fork_commit({"f.py": "F = 1\n"}, "[fork] feature")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    subprocess.run([sys.executable, "-m", "forkflow", "init", "--upstream", "upstream",
                    "--repo", str(b.f.path)], check=True, capture_output=True, env=env)
    return b, sha, env


def field_signatures(cases: list[real_corpus.FieldCase], cli: bool = True) -> list[tuple[str, str, str, str, str]]:
    """(group key, kind, signature text, classification, excerpt) of each failure: through the CLI (one
    stored run, one job a failure, its text the job's log file), or in this process."""
    if not cli:
        from forkflow.triage.classify import Evidence, classify_failure
        from forkflow.triage.models import Failure
        out = []
        for c in cases:
            sig = signature_of(c.text)
            verdict = classify_failure(Failure(c.id, sig), Evidence())
            out.append((sig.key, sig.kind.value, sig.text, verdict.classification.value, sig.excerpt))
        return out
    import json
    import sys

    from forkflow.context import open_context
    from forkflow.models import Sha
    from forkflow.tiers import records as tq
    from forkflow.tiers.reports import TestOutcome, TestResult
    from forkflow.tiers.tiers import RunStatus, Tier

    with tempfile.TemporaryDirectory() as d:
        b, sha, env = _inited_fork(Path(d))
        ctx = open_context(b.f.path)
        logs = Path(d) / "logs"
        logs.mkdir()
        jobs = []
        for i, c in enumerate(cases):
            path = logs / f"e{i}.log"
            path.write_text(c.text + "\n", encoding="utf-8", errors="surrogateescape")
            jobs.append(tq.NewJob(f"e{i}", "ci", str(path), "", "", False, None, None))
        with ctx.store.session_scope() as s:
            run_id, job_ids = tq.create_run(s, ctx.fork_id, tq.NewRun(
                Tier.L1, Sha(sha), None, "local", "validate", 0, (), ("ci",), {}), jobs)
            for i, job in enumerate(job_ids):
                # the job failed as a whole: its log is what triage reads (`[suite]`, as validate
                # records a job without a report)
                tq.finish_job(s, job, tq.JobFinish(RunStatus.FAIL, 1, 1.0, "", 1, 1, None, (), (), 1),
                              [TestResult(f"[e{i}]", TestOutcome.ERROR, 1.0, "")])
            tq.finish_run(s, run_id, RunStatus.FAIL, "", ())
        done = subprocess.run([sys.executable, "-m", "forkflow", "triage", str(run_id), "--json",
                              "--reruns", "0", "--repo", str(b.f.path)], capture_output=True,
                             env=env, check=True, text=True)
    by_suite = {f["suite"]: f for f in json.loads(done.stdout)["failures"]}
    return [(f["group"], f["kind"], f["signature"], f["classification"], f["excerpt"])
            for f in (by_suite[f"e{i}"] for i in range(len(cases)))]


def agreement() -> None:
    """How far people agree on the causes and classes of read batches (tests/data/agreement/),
    and where forkflow stands among them: the ceiling an ARI of the field corpus is read against."""
    for path in sorted((real_corpus.FIELD.parent / "agreement").glob("*.second-labeller.jsonl")):
        _agreement(path.name.split(".")[0])


def _agreement(batch: str) -> None:
    import json

    folder = real_corpus.FIELD.parent / "agreement"

    def labels(kind: str, field: str) -> dict[str, str]:
        with (folder / f"{batch}.{kind}.jsonl").open(encoding="utf-8") as f:
            return {d["id"]: d[field] for d in map(json.loads, f)}

    cases = {c.id: c for c in real_corpus.load_field("train") if c.batch.startswith(batch + "-")}
    second, alone, person = labels("second-labeller", "cause"), labels("text-only", "group"), labels("text-only-class", "class")
    ids = sorted(set(cases) & set(second) & set(alone))
    first = [cases[i].cause for i in ids]
    got = field_signatures([cases[i] for i in ids])
    keys = [g[0] for g in got]
    sec, txt = [second[i] for i in ids], [alone[i] for i in ids]
    print(f"== agreement on {len(ids)} failures of {batch}-* (ARI)")
    print(f"  the labels vs a second labeller (both read the fix)   {adjusted_rand_index(first, sec):.3f}")
    print(f"  a person grouping the texts alone vs the labels        {adjusted_rand_index(first, txt):.3f} "
          f"(vs the second labeller {adjusted_rand_index(sec, txt):.3f})")
    print(f"  forkflow (through the CLI) vs the labels               {adjusted_rand_index(first, keys):.3f} "
          f"(vs the second labeller {adjusted_rand_index(sec, keys):.3f}, vs the person {adjusted_rand_index(txt, keys):.3f})")
    print(f"  exact first line vs the labels                         "
          f"{adjusted_rand_index(first, [_first_line(cases[i].text) for i in ids]):.3f}")
    # classes: a person (another one) reading each text alone, and forkflow, against the labels
    classes = [cases[i].klass for i in ids]
    fams = _families(got, infra_family)
    for name, klass, fam in FIELD_CLASSES:
        print(f"  {name:18} a person reading the text alone: {_prf_of(classes, [person.get(i, '') for i in ids], klass, klass)}")
        print(f"  {'':18} forkflow (its rules read this batch): {_prf_of(classes, fams, klass, fam)}")


def _families(got: list[tuple[str, str, str, str, str]],
              family: Callable[[Signature], InfraFamily | None]) -> list[str]:
    """The INFRA family (`machine`, `environment`, or "") that `family` gives each failure the
    CLI called INFRA, from its kind, signature text and excerpt."""
    out = []
    for _key, kind, text, classification, excerpt in got:
        fam = family(Signature(FailureKind(kind), text, excerpt)) if classification == "INFRA" else None
        out.append(fam.value if fam is not None else "")
    return out


def _prf_of(truth: Sequence[str], said: Sequence[str], real_label: str, said_label: str) -> str:
    """Precision and recall of calling `said_label` for items whose truth is `real_label`."""
    hit = sum(1 for t, x in zip(truth, said) if t == real_label and x == said_label)
    return _prf(hit, sum(1 for x in said if x == said_label), sum(1 for t in truth if t == real_label))


def _prf(hit: int, said: int, real: int) -> str:
    p = f"{hit / said:.2f}" if said else "n/a"
    r = f"{hit / real:.2f}" if real else "n/a"
    return f"precision {p} ({hit}/{said}) recall {r} ({hit}/{real})"


def field_grouping(split: str, cli: bool = True, batch: str = "") -> float:
    """ARI of one part of the field corpus (of one batch of it: the files `<batch>-*.jsonl`), per
    project and class; INFRA and FLAKY precision and recall.  Figures only: nothing of a
    failure's text is printed."""
    cases = [c for c in real_corpus.load_field(split) if not batch or c.batch.split("-")[0] == batch]
    if batch:
        split = f"{split} batch {batch}-*"
    if len(cases) < 2:
        print(f"== field corpus, {split}: {len(cases)} failures, nothing to score")
        return 1.0
    t0 = time.perf_counter()
    got = field_signatures(cases, cli)
    dt = time.perf_counter() - t0
    truth = [c.cause for c in cases]
    keys = [g[0] for g in got]
    ours = adjusted_rand_index(truth, keys)
    exact = adjusted_rand_index(truth, [_first_line(c.text) for c in cases])
    regex = adjusted_rand_index(truth, [plain_regex_key(c.text) for c in cases])
    how = "through `forkflow triage RUN --json`" if cli else "in process"
    print(f"== field corpus, {split}: {len(cases)} failures in {len(set(truth))} causes from "
          f"{len({c.source_url for c in cases})} threads, {how} ({dt:.1f} s)")
    print(f"ARI forkflow {ours:.3f} | exact first line {exact:.3f} | regex normaliser {regex:.3f}")
    same = [(i, j) for i in range(len(cases)) for j in range(i + 1, len(cases))]
    real_pairs = sum(1 for i, j in same if truth[i] == truth[j])
    said_pairs = sum(1 for i, j in same if keys[i] == keys[j])
    right_pairs = sum(1 for i, j in same if truth[i] == truth[j] and keys[i] == keys[j])
    print(f"  pairs of one cause {real_pairs}: grouped together {right_pairs}; "
          f"pairs grouped {said_pairs}: of different causes {said_pairs - right_pairs}")
    if split != "train":
        # a later batch's collectors may find new threads of a cause the train part labels: the
        # score without them says how the rules meet causes they were not written on
        known = {c.cause for c in real_corpus.load_field("train")}
        new = [i for i, c in enumerate(cases) if c.cause not in known]
        if len(new) < len(cases):
            print(f"  causes no train failure carries: {len(new)} failures, ARI "
                  f"{adjusted_rand_index([truth[i] for i in new], [keys[i] for i in new]):.3f}")
    for label, attr in (("project", "project"), ("class", "klass")):
        for value in sorted({getattr(c, attr) for c in cases}):
            idx = [i for i, c in enumerate(cases) if getattr(c, attr) == value]
            ari = adjusted_rand_index([truth[i] for i in idx], [keys[i] for i in idx])
            print(f"  {label} {value:14} {len(idx):4} failures, {len({truth[i] for i in idx}):3} causes: ARI {ari:.3f}")
    for kind in sorted({g[1] for g in got}):
        idx = [i for i, g in enumerate(got) if g[1] == kind]
        ari = adjusted_rand_index([truth[i] for i in idx], [keys[i] for i in idx])
        print(f"  kind {kind:17} {len(idx):4} failures, {len({truth[i] for i in idx}):3} causes: ARI {ari:.3f}")
    classes = [c.klass for c in cases]
    fams = _families(got, infra_family)
    by_rules = _families(got, rule_family)  # the rules alone, without the INFRA model
    for suffix, called in (("", fams), (" (rules)", by_rules)):
        for name, klass, fam in FIELD_CLASSES:
            print(f"  {name + suffix:18} {_prf_of(classes, called, klass, fam)}")
    infra = sum(1 for c, g in zip(cases, got) if c.klass.startswith("infra") and g[3] == "INFRA")
    print(f"  {'INFRA (either)':18} {_prf(infra, sum(1 for g in got if g[3] == 'INFRA'), sum(1 for c in cases if c.klass.startswith('infra')))}")
    flaky_real = sum(1 for c in cases if c.klass == "flaky")
    flaky_said = sum(1 for g in got if g[3] == "FLAKY")
    flaky_hit = sum(1 for c, g in zip(cases, got) if c.klass == "flaky" and g[3] == "FLAKY")
    as_infra = sum(1 for c, g in zip(cases, got) if c.klass == "flaky" and g[3] == "INFRA")
    print(f"  {'FLAKY':18} {_prf(flaky_hit, flaky_said, flaky_real)} (no rerun or history in a "
          f"quoted log: FLAKY needs reruns; {as_infra} of {flaky_real} flaky failures read INFRA)")
    return ours


def _stacked(pool: list[real_corpus.Case], chain: tuple[str, ...]) -> list[real_corpus.Case]:
    r = random.Random(5)
    out = []
    for c in pool:
        v: real_corpus.Case | None = c
        for family in chain:
            v = real_corpus.VARIANTS[family](v, r) if v is not None else None
        if v is not None:
            out.append(v)
    return out


def confusions(heldout: bool) -> None:
    """The causes forkflow splits, and the signatures that merge causes (real failures and
    their variants): what to look at when a figure drops."""
    cases = [c for c in real_corpus.load() if heldout or c.split == "train"]
    by_cause: dict[str, list[tuple[str, str, str]]] = {}
    by_key: dict[str, tuple[str, set[str]]] = {}
    for c in cases + real_corpus.variants(cases):
        sig = signature_of(c.combined)
        by_cause.setdefault(c.cause, []).append((sig.key, c.surface, sig.text))
        by_key.setdefault(sig.key, (sig.text, set()))[1].add(c.cause)
    print("== split causes (surface: signature)")
    for cause, sigs in sorted(by_cause.items()):
        if len({k for k, _s, _t in sigs}) > 1:
            print(f"{cause}:")
            for _k, surface, text in sorted(set(sigs), key=lambda x: (x[2], x[1])):
                print(f"    {surface:10} {text[:150]}")
    print("== signatures shared by several causes")
    for text, causes in sorted(by_key.values()):
        if len(causes) > 1:
            print(f"{text[:150]}\n    {', '.join(sorted(causes))}")


def field_confusions() -> None:
    """Split and merged causes of the field corpus's train part (never of the held-aside part)."""
    cases = real_corpus.load_field("train")
    by_cause: dict[str, set[tuple[str, str]]] = {}
    by_key: dict[str, tuple[str, set[str]]] = {}
    for c in cases:
        sig = signature_of(c.text)
        by_cause.setdefault(c.cause, set()).add((sig.key, sig.text))
        by_key.setdefault(sig.key, (sig.text, set()))[1].add(c.cause)
    print("== field train: split causes")
    for cause, sigs in sorted(by_cause.items()):
        if len({k for k, _t in sigs}) > 1:
            print(f"{cause}:" + "".join(f"\n    {t[:150]}" for _k, t in sorted(sigs)))
    print("== field train: signatures shared by several causes")
    for text, causes in sorted(by_key.values()):
        if len(causes) > 1:
            print(f"{text[:150]}\n    {', '.join(sorted(causes))}")


def train_report(width: int = 1200) -> None:
    """What to look at on the field corpus's train part (never the held-aside part): each cause
    whose failures got different signatures, each signature shared by different causes, with
    the failures' texts, and INFRA's misses and false alarms per family."""
    from forkflow.triage.classify import classify_failure, Evidence, infra_family
    from forkflow.triage.models import Failure

    cases = real_corpus.load_field("train")
    sigs = [signature_of(c.text) for c in cases]
    fams = [f.value if f else "" for f in (infra_family(s) for s in sigs)]
    verdicts = [classify_failure(Failure(c.id, s), Evidence()).classification.value
                for c, s in zip(cases, sigs)]

    def show(i: int) -> str:
        c, s = cases[i], sigs[i]
        text = c.text if len(c.text) <= width else c.text[:width // 3] + "\n[...]\n" + c.text[-2 * width // 3:]
        body = "\n".join("      | " + ln for ln in text.splitlines())
        return (f"  - {c.id} [{c.klass}, {c.project}] cause {c.cause}\n    signature: {s.text}\n"
                f"    env: {s.env or '-'}; verdict {verdicts[i]}"
                f"{' (' + fams[i] + ')' if fams[i] else ''}\n    fix: {c.fix}\n{body}")

    by_cause: dict[str, list[int]] = {}
    by_key: dict[str, list[int]] = {}
    for i, (c, s) in enumerate(zip(cases, sigs)):
        by_cause.setdefault(c.cause, []).append(i)
        by_key.setdefault(s.key, []).append(i)
    truth = [c.cause for c in cases]
    keys = [s.key for s in sigs]
    base = adjusted_rand_index(truth, keys)
    print(f"== field train: {len(cases)} failures, {len(by_cause)} causes, {len(by_key)} signatures, "
          f"ARI {base:.3f}")

    def gain(idx: list[int], relabel: Callable[[int], str]) -> float:
        """What the ARI would gain if these failures were grouped right: the loss they cause."""
        new = list(keys)
        for i in idx:
            new[i] = relabel(i)
        return adjusted_rand_index(truth, new) - base

    def as_cause(i: int) -> str:
        return "cause:" + truth[i]

    def by_cause_too(i: int) -> str:
        return keys[i] + "|" + truth[i]

    # biggest losses first
    split = {k: v for k, v in by_cause.items() if len({sigs[i].key for i in v}) > 1}
    print(f"== split causes ({len(split)}), biggest ARI loss first")
    for cause, idx in sorted(split.items(), key=lambda kv: -gain(kv[1], as_cause)):
        print(f"# {cause}: {len(idx)} failures, {len({sigs[i].key for i in idx})} signatures, "
              f"ARI loss {gain(idx, as_cause):.4f}")
        for i in idx:
            print(show(i))
    merged = {k: v for k, v in by_key.items() if len({cases[i].cause for i in v}) > 1}
    print(f"== merged signatures ({len(merged)}), biggest ARI loss first")
    for key, idx in sorted(merged.items(), key=lambda kv: -gain(kv[1], by_cause_too)):
        print(f"# {sigs[idx[0]].text[:200]}: {len({cases[i].cause for i in idx})} causes, "
              f"ARI loss {gain(idx, by_cause_too):.4f}")
        for i in idx:
            print(show(i))
    for name, klass, fam in FIELD_CLASSES:
        miss = [i for i, c in enumerate(cases) if c.klass == klass and fams[i] != fam]
        false = [i for i, c in enumerate(cases) if c.klass != klass and fams[i] == fam]
        print(f"== {name}: {len(miss)} misses")
        for i in miss:
            print(show(i))
        print(f"== {name}: {len(false)} false alarms")
        for i in false:
            print(show(i))


def pathological() -> None:
    """Time of one signature on hostile lines (issue 14: the old path pattern was quadratic)."""
    import re
    print("== pathological lines (seconds per signature; old path pattern on 16 KB for scale)")
    for name, text in (("1 MB of '/~'", "/~" * 500_000), ("1 MB line", "x" * 1_000_000),
                       ("assertion 600 KB", "Assertion `" + "a:" * 300_000),
                       ("frames 600 KB", " #0 0x1 " + "( (" * 200_000)):
        t0 = time.perf_counter()
        signature_of(text)
        dt = time.perf_counter() - t0
        print(f"{name:18} {dt:.3f} s")
        # the bound the L1 gate relies on: a hostile line must never cost more than a second
        assert dt < 1.0, f"{name}: {dt:.2f} s for one signature: a pattern is not linear"
    old = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:[/\\][\w.+@~-]+)+[/\\]([\w.+@-]+)")
    t0 = time.perf_counter()
    old.sub(r"\1", "/~" * 8192)
    print(f"old path pattern, 16 KB of '/~': {time.perf_counter() - t0:.3f} s")


def many_failures(n: int = 500, mb: float = 5.0) -> None:
    """Grouping in process: signatures of n failures holding `mb` MB of text, then groups."""
    from forkflow.triage.group import group_failures
    from forkflow.triage.models import Failure
    cases = real_corpus.load()
    texts = []
    pad = int(mb * 1e6 / n)
    for i in range(n):
        c = cases[i % len(cases)]
        noise = "".join(f"PASSED test_x.py::t{j} [0.01s]\n" for j in range(pad // 32))
        texts.append(noise + c.combined)
    size = sum(len(t) for t in texts) / 1e6
    walls, cpus = [], []
    for _ in range(3):  # best of three, each with a cold normalisation cache
        normalize.cache_clear()
        t0, c0 = time.perf_counter(), time.process_time()
        groups = group_failures(Failure(f"t{i}", signature_of(t)) for i, t in enumerate(texts))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall, cpu = min(walls), min(cpus)
    print(f"== grouping in process: {n} failures, {size:.1f} MB -> {len(groups)} groups: "
          f"wall {wall:.3f} s = {size / wall:.0f} MB/s, CPU {cpu:.3f} s = {size / cpu:.0f} MB/s "
          f"(best of 3; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def end_to_end(n: int = 500, mb: float = 5.0) -> None:
    """One `forkflow triage RUN --json --reruns 0` of a stored run with n failures holding `mb`
    MB of failure text, as a fresh process (start-up, store reads, signatures, batched writes)."""
    import sys

    from forkflow.context import open_context
    from forkflow.models import Sha
    from forkflow.tiers import records as tq
    from forkflow.tiers.reports import clean_text, TestOutcome, TestResult
    from forkflow.tiers.tiers import RunStatus, Tier

    cases = real_corpus.load()
    with tempfile.TemporaryDirectory() as d:
        b, sha, env = _inited_fork(Path(d))
        ctx = open_context(b.f.path)
        pad = "".join(f"INFO step {j} ok\n" for j in range(int(mb * 1e6 / n) // 16))
        results = [TestResult(f"test_{i}", TestOutcome.FAIL, 0.1,
                              clean_text(pad + cases[i % len(cases)].combined))
                   for i in range(n)]
        size = sum(len(r.message) for r in results) / 1e6
        with ctx.store.session_scope() as s:
            run_id, [job] = tq.create_run(s, ctx.fork_id, tq.NewRun(
                Tier.L1, Sha(sha), None, "local", "validate", 0, (), ("unit",), {}),
                [tq.NewJob("unit", "pytest", "", "", "", False, None, None)])
            tq.finish_job(s, job, tq.JobFinish(RunStatus.FAIL, 1, 1.0, "", n, n, None, (), (), 1), results)
            tq.finish_run(s, run_id, RunStatus.FAIL, "", ())
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "forkflow", "triage", str(run_id), "--json",
                              "--reruns", "0", "--repo", str(b.f.path)], capture_output=True,
                             env=env, check=False)
        dt = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import forkflow.cli.main, forkflow.cli.triage_cmds"],
                       capture_output=True, env=env, check=False)
        start = time.perf_counter() - t0
    print(f"== end to end: forkflow triage of {n} failures, {size:.1f} MB stored text: "
          f"{dt:.2f} s (rc {out.returncode}; interpreter + imports alone {start:.2f} s) = "
          f"{size / dt:.1f} MB/s")


def _make_log(path: Path, mb: int, seed: int) -> None:
    r = random.Random(seed)
    env = _env(r)
    block = ("\n".join(_noise(r, env, 5000, trap=True)) + "\n").encode()
    failure = generate(seed=seed, per_group=1)[0].log.encode()
    with path.open("wb") as f:
        written = 0
        while written < mb * 1_000_000:
            f.write(block)
            written += len(block)
        f.write(failure)


def _scan(path: str) -> str:
    return signature_of_file(Path(path)).text


def throughput(mb: int) -> None:
    print(f"== throughput ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as d:
        paths = [Path(d) / f"job{i}.log" for i in range(2)]
        for i, p in enumerate(paths):
            _make_log(p, mb, i)
        size = paths[0].stat().st_size / 1e6
        t0 = time.perf_counter()
        with paths[0].open("rb") as f:
            while f.read(1 << 20):
                pass
        read = size / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run(["grep", "-c", "Traceback", str(paths[0])], capture_output=True, check=False)
        grep = size / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        sig = _scan(str(paths[0]))
        one = size / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        with ProcessPoolExecutor(2) as pool:
            list(pool.map(_scan, [str(p) for p in paths]))
        two = 2 * size / (time.perf_counter() - t0)
        print(f"log of {size:.0f} MB, signature {sig[:70]!r}")
        print(f"forkflow 1 process {one:.0f} MB/s | 2 processes {two:.0f} MB/s | "
              f"plain read {read:.0f} MB/s | grep -c {grep:.0f} MB/s | "
              f"forkflow/grep {one / grep:.2f}x | target 10 MB/s: {two / 10:.0f}x over")


def flaky() -> None:
    print("== flaky simulation (3 reruns per failure, 3000 units, 40 flaky tests of 400)")
    for share in (0.08, 0.2):
        ours = simulate(triage_labeller(FlakyPolicy()), intermittent=share)
        naive = simulate(naive_labeller, intermittent=share)
        print(f"intermittent share of real failures {share:.0%}: forkflow real->FLAKY "
              f"{ours.real_as_flaky:.2%} ({ours.real_flaky}/{ours.real}), flaky recall "
              f"{ours.flaky_recall:.1%} | naive real->FLAKY {naive.real_as_flaky:.2%} "
              f"({naive.real_flaky}/{naive.real}), flaky recall {naive.flaky_recall:.1%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--heldout", action="store_true", help="also score the held-out causes")
    ap.add_argument("--only-real", action="store_true", help="only the real-corpus scores")
    ap.add_argument("--confusions", action="store_true", help="print split and merged causes")
    ap.add_argument("--in-process", action="store_true",
                    help="field corpus: signatures in this process instead of through the CLI")
    ap.add_argument("--field-train-confusions", action="store_true",
                    help="print the field corpus's train-part causes that are split or merged")
    ap.add_argument("--train-report", action="store_true",
                    help="print the field corpus's train part as its split and merged causes and "
                         "INFRA's misses and false alarms, with the failures' texts; nothing else")
    ap.add_argument("--agreement", action="store_true",
                    help="how far two labellers and a person reading the logs alone agree, and forkflow")
    args = ap.parse_args()
    if args.agreement:
        agreement()
        return
    if args.train_report:
        train_report()
        return
    real_grouping(args.heldout)
    if args.confusions:
        confusions(args.heldout)
    field_grouping("train", cli=not args.in_process)
    if args.heldout:
        field_grouping("heldout", cli=not args.in_process)
        # the fresh batches: threads collected after the rules were written, read by no rule;
        # each batch (`fresh-*`, `fresh6-*`) scored on its own
        for batch in sorted({c.batch.split("-")[0] for c in real_corpus.load_field("fresh")}):
            field_grouping("fresh", cli=not args.in_process, batch=batch)
    if args.field_train_confusions:
        field_confusions()
    if args.only_real:
        return
    pathological()
    many_failures()
    end_to_end()
    grouping(args.seeds)
    throughput(args.mb)
    flaky()


if __name__ == "__main__":
    main()
