"""Bad input from issue 11: each has a one-line reason where something is held back, and nothing
half-written (no exit 3)."""
from __future__ import annotations

import time
from pathlib import Path

from forkflow.git.run import run_git
from forkflow.models import Sha
from forkflow.planning.lines import CommitShape, FileChange, Hunk, trace
from forkflow.planning.model import PendingCommit, Touch
from forkflow.planning.route import RoutingRules, route
from forkflow.testing.gitrepo import ForkBuilder


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    return run_git(*args, cwd=repo, input=input).strip()


def _land(cli, fork: Path, rc: int = 0) -> dict:  # type: ignore[no-untyped-def,type-arg]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == rc, r.err
    return r.json()  # type: ignore[no-any-return]


def _picked(doc: dict) -> set[str]:  # type: ignore[type-arg]
    return {s for u in doc["units"] for s in u["picked"] + u["skipped"]}


def _commit_with_entry(up: Path, name: str, env: dict[str, str]) -> str:
    """An upstream commit whose tree gains a folder named `name` (git's porcelain never writes one)."""
    blob = _git(up, "hash-object", "-w", "--stdin", input="[core]\n\tbare = false\n")
    sub = _git(up, "mktree", input=f"100644 blob {blob}\tconfig\n")
    top = _git(up, "ls-tree", "HEAD") + f"\n040000 tree {sub}\t{name}\n"
    tree = _git(up, "mktree", "--missing", input=top)
    sha = run_git("commit-tree", tree, "-p", "HEAD", "-m", f"Add {name} (#9)", cwd=up, env=env).strip()
    _git(up, "update-ref", "refs/heads/main", sha)
    return sha


def test_bad_input_tree_entry_dot_git_is_held_back_and_the_rest_lands(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "m = 1\n"}, "[fork] ours")
    before = builder.upstream_commit({"b.py": "b = 1\n"}, "Add b (#2)")
    bad = {name: _commit_with_entry(builder.upstream.path, name, builder.upstream.env()) for name in (".git", "..")}
    after = builder.upstream_commit({"c.py": "c = 1\n"}, "Add c (#3)")
    builder.fetch()
    doc = _land(cli, builder.f.path, rc=4)  # the held-back unit waits on a person (docs/automation.md)
    assert {before, after} <= _picked(doc)
    held = {h["sha"]: h["why"] for h in doc["held_back"]}
    assert held[bad[".git"]] == "refused: it adds the path '.git/config', which git will not check out"
    assert held[bad[".."]] == "refused: it adds the path '../config', which git will not check out"
    assert _git(builder.f.path, "ls-tree", "--name-only", "main").split() == ["a.py", "b.py", "c.py", "mine.py"]


def test_bad_input_upstream_merge_commit_lands(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "m = 1\n"}, "[fork] ours")
    up = builder.upstream
    up.git("checkout", "-q", "-b", "side")
    builder.upstream_commit({"s.py": "s = 1\n"}, "Side (#2)")
    up.git("checkout", "-q", "main")
    builder.upstream_commit({"b.py": "b = 1\n"}, "Main (#3)")
    up.git("merge", "-q", "--no-ff", "side", "-m", "Merge side (#4)", env=up.env())
    builder.fetch()
    doc = _land(cli, builder.f.path)
    assert not doc["held_back"]
    assert _git(builder.f.path, "ls-tree", "--name-only", "main").split() == ["a.py", "b.py", "mine.py", "s.py"]


def test_bad_input_fork_without_own_commits_lands_everything(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    shas = [builder.upstream_commit({"a.py": f"a = {i}\n"}, f"Change {i} (#{i + 1})") for i in range(2, 6)]
    builder.fetch()
    doc = _land(cli, builder.f.path)
    assert set(shas) <= _picked(doc) and not doc["held_back"]
    assert not [u for u in doc["plan"]["units"] if u["name"].startswith("fork-")]


def test_bad_input_revert_of_a_revert_lands_in_order(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "m = 1\n"}, "[fork] ours")
    x = builder.upstream_commit({"a.py": "a = 2\n"}, "Change a (#2)")
    r1 = builder.revert_upstream(x)
    r2 = builder.revert_upstream(r1)  # the reland
    builder.fetch()
    doc = _land(cli, builder.f.path)  # the ledger settles the revert pair; the change itself lands
    planned = {s for u in doc["plan"]["units"] for s in u["commits"]}
    assert x in planned and not doc["held_back"]
    assert _git(builder.f.path, "show", "main:a.py") == "a = 2"
    assert {r1, r2}.isdisjoint(_picked(doc)) or {r1, r2} <= _picked(doc)


def test_bad_input_ten_thousand_pending_commits_plan_in_linear_time() -> None:
    n = 10_000
    shapes = []
    for i in range(n):  # 100 files, each commit rewrites a line near the previous one in its file
        path = f"f{i % 100}.py"
        shapes.append(CommitShape(Sha(f"{i:040x}"), (FileChange(path, (Hunk(10 + i // 100, 1, 10 + i // 100, 2),)),),
                                  defines=frozenset({f"name_{i}"}), mentions=frozenset({f"name_{i}"}),
                                  uses=frozenset({f"name_{i - 1}"}) if i else frozenset()))
    start = time.perf_counter()
    found = trace(shapes, [s.sha for s in shapes])
    commits = [PendingCommit(s.sha, "", Touch(frozenset(f.path for f in s.files)), deps=found.dependencies.get(s.sha, ()))
               for s in shapes]
    units = route(commits, RoutingRules())
    took = time.perf_counter() - start
    assert sum(len(u.commits) for u in units) == n
    assert max(len(u.commits) for u in units) <= 50
    assert len(found.dependencies) == n - 1  # each uses the name the one before introduced
    assert took < 20, f"{took:.1f} s"
