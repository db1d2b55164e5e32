"""Helpers for the validation tests: real git repos with suites, and a tiny JUnit harness.

(No tests here; the other test_tiers*/test_validate*/... files import these.)
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from forkflow.git.run import run_git

PY = sys.executable
_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}

# A stand-in harness: `harness.py REPORT N_PASS N_FAIL N_SKIP [--summary K]` writes JUnit with
# that many tests and prints a pytest-like summary (K overrides the count it prints).
HARNESS = '''
import sys
report, npass, nfail, nskip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
summary = int(sys.argv[6]) if len(sys.argv) > 6 else None
cases = [f'<testcase classname="tests.test_m" name="test_p{i}" time="0.01"/>' for i in range(npass)]
cases += [f'<testcase classname="tests.test_m" name="test_f{i}"><failure message="assert {i} == 0">E assert</failure></testcase>' for i in range(nfail)]
cases += [f'<testcase classname="tests.test_m" name="test_s{i}"><skipped message="skip"/></testcase>' for i in range(nskip)]
open(report, "w").write("<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>")
n = summary if summary is not None else npass + nfail + nskip
print(f"{n} passed in 0.01s")
sys.exit(1 if nfail else 0)
'''


def git(repo: Path, *args: str, date: int = 1_700_000_000) -> str:
    env = dict(_ENV, GIT_AUTHOR_DATE=f"{date} +0000", GIT_COMMITTER_DATE=f"{date} +0000")
    return run_git(*args, cwd=repo, env=env).strip()


def commit(repo: Path, files: Mapping[str, str | None], msg: str = "change", date: int = 1_700_000_000) -> str:
    for name, text in files.items():
        p = repo / name
        if text is None:
            if p.exists():
                git(repo, "rm", "-q", "--", name)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            os.chmod(p, 0o755)
        git(repo, "add", "--", name)
    git(repo, "commit", "-q", "--allow-empty", "-m", msg, date=date)
    return git(repo, "rev-parse", "HEAD")


def suite_toml(name: str, command: str, tier: str = "L1", report: str = "junit", **extra: object) -> str:
    lines = ["[[suite]]", f'name = "{name}"', f'tier = "{tier}"', f"command = '{command}'",
             f'report = "{report}"']
    for k, v in extra.items():
        if isinstance(v, str):
            lines.append(f'{k} = "{v}"')
        elif isinstance(v, (list, tuple)):
            lines.append(f"{k} = [" + ", ".join(f'"{x}"' for x in v) + "]")
        elif isinstance(v, dict):
            lines.append(f"{k} = {{ " + ", ".join(f"{a} = {b}" for a, b in v.items()) + " }")
        else:
            lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


def make_repo(root: Path, suites: str, files: Mapping[str, str] | None = None, head: str = "") -> tuple[Path, str]:
    """A fork repo with forkflow.toml (the given suites) and files; returns (path, sha)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    toml = '[upstream]\nremote = "upstream"\n[fork]\nbranch = "main"\n' + head + "\n" + suites
    all_files = {"forkflow.toml": toml, "harness.py": HARNESS, ".gitignore": ".forkflow/\n"}
    all_files.update(files or {})
    return root, commit(root, all_files, "initial")


def harness(npass: int, nfail: int = 0, nskip: int = 0, summary: int | None = None) -> str:
    extra = f" --summary {summary}" if summary is not None else ""
    return f"{PY} harness.py {{report}} {npass} {nfail} {nskip}{extra}"
