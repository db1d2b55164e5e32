"""The corpus of real CI failures (tests/data/real_failures.jsonl) and its surface variants.

Each real failure was copied from a public issue thread that quotes a failing CI or test log
(its `source_url`), and labelled by hand with its root `cause`.  `variants()` puts each real
failure behind the other surfaces the same cause shows up through in CI: a pytest-xdist worker
crash, a subprocess killed by SIGABRT, lit with and without the `# | ` prefix, `--tb=short`,
Dynamo/Inductor wrappers, the error only in captured output, teardown noise after it, and a
long log before it.  Variants keep the real text; only the surface around it is generated.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "real_failures.jsonl"
FIELD = CORPUS.parent / "field"
FRESH = "fresh.jsonl"  # a batch collected after the rules, scored once as its own part
# A fresh batch is any `fresh*.jsonl`.  Once its figure is published it may be read to write rules:
# it is renamed `read-<when>.jsonl` and every failure of it counts as train, whatever its threads'
# hash, so that reading it never reaches the held-aside part.
READ_PREFIX = "read-"


def _part_of_file(name: str) -> str | None:
    """`fresh` for a fresh batch, `train` for a batch read after it was scored, else None (the
    threads' hash decides)."""
    if name.startswith("fresh"):
        return "fresh"
    if name.startswith(READ_PREFIX):
        return "train"
    return None
# the field corpus's classes (tests/data/README.md)
FIELD_CLASSES = ("code", "flaky", "infra-machine", "infra-env")


@dataclass(frozen=True, slots=True)
class Case:
    """One failure as a JUnit report would carry it: message, and captured output."""

    id: str
    cause: str
    surface: str          # the real entry's surface, or the variant's family
    message: str
    captured: str = ""    # <system-out>/<system-err> of the test
    split: str = "train"  # "train" or "heldout" (a third of the causes, scored only at the end)
    source_url: str = ""
    real: bool = True

    @property
    def combined(self) -> str:
        """The text triage sees: what `tiers.reports` stores for a failed test."""
        if not self.captured:
            return self.message
        return f"{self.message}\n----- captured system-err -----\n{self.captured}"


def load(path: Path = CORPUS) -> list[Case]:
    """The real failures, in file order."""
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(Case(d["id"], d["cause"], d["surface"], d["text"], "", d["split"],
                            d["source_url"]))
    return out


def field_split(source_url: str) -> str:
    """The part of the field corpus a thread falls in: a third of the threads are held aside."""
    return "heldout" if int(hashlib.sha1(source_url.encode()).hexdigest(), 16) % 3 == 0 else "train"


@dataclass(frozen=True, slots=True)
class FieldCase:
    """One failure of the field corpus (tests/data/field/*.jsonl)."""

    id: str
    cause: str
    project: str
    surface: str
    klass: str            # code | flaky | infra-machine | infra-env
    text: str
    split: str
    source_url: str
    test_id: str = ""
    fix: str = ""         # how the cause was established (the thread's fix or diagnosis)
    batch: str = ""       # the file it came from, without `.jsonl` (`fresh6-m`)


def load_field(split: str = "train", folder: Path = FIELD) -> list[FieldCase]:
    """The field corpus's failures of one part, `train`, `heldout` or `fresh` (the batches in
    tests/data/field/fresh*.jsonl, collected after the rules, whatever its threads' hash; a batch
    renamed read-*.jsonl is all train).  The part is computed
    from the thread's URL (the stored `split` must agree, else the entry counts as held
    aside), so that an entry of the held-aside part never reaches a caller asking for `train`.
    Lines that do not parse (a file being written) are skipped."""
    if split not in ("train", "heldout", "fresh"):
        raise ValueError(f"split must be train, heldout or fresh, not {split!r}")
    out = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        whole = _part_of_file(path.name)
        if (whole == "fresh") != (split == "fresh"):
            continue  # the fresh batch is its own held-aside part, never train's
        if whole == "train" and split != "train":
            continue  # a batch read while writing rules is never held aside
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    d = json.loads(line)
                    url = str(d["source_url"])
                    part = field_split(url)
                    if whole == "train":
                        part = "train"
                    elif part == "train" and d.get("split") != "train":
                        part = "heldout"
                    if part != split and split != "fresh":
                        continue
                    out.append(FieldCase(str(d["id"]), str(d["cause"]), str(d["project"]),
                                         str(d.get("surface", "")), str(d["class"]), str(d["text"]),
                                         part, url, str(d.get("test_id", "")),
                                         str(d.get("fix", "")), path.stem))
                except (ValueError, KeyError, TypeError):
                    continue
    return out


_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Resources)): (.*)$", re.M)
_NATIVE = re.compile(r"Assertion `|Assertion failed|UNREACHABLE|LLVM ERROR|Stack dump:")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\n\s+(.*)$', re.M)


def _last_py_error(text: str) -> re.Match[str] | None:
    found = list(_PY_ERROR.finditer(text))
    return found[-1] if found else None


def _xdist(c: Case, r: random.Random) -> Case | None:
    if c.surface != "native":
        return None
    gw = f"gw{r.randrange(16)}"
    msg = (f"[{gw}] linux -- Python 3.10.{r.randrange(20)} /opt/conda/bin/python\n"
           f"worker '{gw}' crashed while running 'test/{c.id[:20]}.py::test_case'")
    return replace(c, surface="xdist", message=msg, captured=c.message + "\nFatal Python error: Aborted")


def _subprocess(c: Case, r: random.Random) -> Case | None:
    if c.surface != "native" or not _NATIVE.search(c.message):
        return None
    msg = ("Traceback (most recent call last):\n"
           f'  File "/tmp/pytest-of-ci/pytest-{r.randrange(999)}/test_repro0/run.py", line 12, in <module>\n'
           "    subprocess.run(cmd, check=True)\n"
           "subprocess.CalledProcessError: Command '['triton-opt', 'in.mlir']' died with "
           "<Signals.SIGABRT: 6>.")
    return replace(c, surface="subprocess", message=msg, captured=c.message + "\nAborted (core dumped)")


def _lit_prefix(c: Case, r: random.Random) -> Case | None:
    if c.surface != "lit":
        return None
    if "# | " in c.message:
        text = c.message.replace("# | ", "")
    else:
        text = "\n".join(ln if re.match(r"(FAIL|\*{5}|Exit Code|Script|--|#)", ln) else "# | " + ln
                         for ln in c.message.split("\n"))
    return replace(c, surface="lit-prefix", message=text)


def _tb_short(c: Case, r: random.Random) -> Case | None:
    if c.surface not in ("traceback", "pytest") or not _FRAME.search(c.message) \
            or _last_py_error(c.message) is None:
        return None
    text = _FRAME.sub(lambda m: f"{m[1]}:{m[2]}: in {m[3]}\n    {m[4]}", c.message)
    text = _PY_ERROR.sub(lambda m: f"E   {m[0]}", text)
    return replace(c, surface="tb-short", message=text.replace("Traceback (most recent call last):\n", ""))


def _wrapper(c: Case, r: random.Random) -> Case | None:
    err = _last_py_error(c.message)
    if err is None or "BackendCompilerFailed" in c.message or "InductorError" in c.message:
        return None
    if r.random() < 0.5:
        tail = (f"\ntorch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n{err[0]}\n\n"
                "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially "
                "if you're reporting a bug to PyTorch). For even more developer context, set "
                'TORCH_LOGS="+dynamo"\n')
    else:
        tail = f"\ntorch._inductor.exc.InductorError: {err[0]}\n"
    frames = ('\nThe above exception was the direct cause of the following exception:\n\n'
              'Traceback (most recent call last):\n'
              '  File "/opt/conda/lib/python3.10/site-packages/torch/_dynamo/output_graph.py", '
              'line 1465, in _call_user_compiler\n    raise BackendCompilerFailed(self.compiler_fn, e) from e')
    return replace(c, surface="wrapper", message=c.message + "\n" + frames + tail)


def _captured(c: Case, r: random.Random) -> Case | None:
    msg = r.choice(["Exit Code: 1", "Command exited with non-zero status 1", "test failed"])
    noise = "\n".join(f"INFO:root:step {i} loss={r.random():.4f}" for i in range(r.randrange(3, 30)))
    return replace(c, surface="captured", message=msg, captured=noise + "\n" + c.message)


_TEARDOWN = (
    "\nException ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x{a:x}>\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__\n'
    "    self._shutdown_workers()\n"
    "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_shutdown'\n"
    "[W{pid} ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed "
    "before we destruct ProcessGroupNCCL.\n")


def _teardown(c: Case, r: random.Random) -> Case | None:
    return replace(c, surface="teardown", message=c.message + _TEARDOWN.format(
        a=r.getrandbits(44), pid=r.randrange(10**6)))


def _truncation(c: Case, r: random.Random) -> Case | None:
    lines = [f"{r.choice(['PASSED', 'SKIPPED'])} test/test_ops.py::TestCommon::test_case_{i} "
             f"[{r.random():.2f}s]" for i in range(r.randrange(120, 400))]
    return replace(c, surface="truncation", message="\n".join(lines) + "\n" + c.message)


VARIANTS = {"xdist": _xdist, "subprocess": _subprocess, "lit-prefix": _lit_prefix,
            "tb-short": _tb_short, "wrapper": _wrapper, "captured": _captured,
            "teardown": _teardown, "truncation": _truncation}


def variants(cases: list[Case], seed: int = 0) -> list[Case]:
    """Every applicable surface variant of every real case (deterministic for a seed)."""
    r = random.Random(seed)
    out = []
    for family, make in VARIANTS.items():
        for c in cases:
            v = make(c, r)
            if v is not None:
                out.append(replace(v, id=f"{c.id}~{family}", real=False))
    return out
