"""`ingest` picks each commit once: the landing is its own probe (issue 11's speed)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from forkflow.config import render_config
from forkflow.context import open_context
from forkflow.git.pick import MemoryPicker, PickStep
from forkflow.git.run import run_git
from forkflow.landing.ingest import IngestOptions, Ingestor, Mode, UnitStatus
from forkflow.landing.journal import StoreJournal
from forkflow.landing.settings import ingest_settings
from forkflow.landing.stored import StoreIngestReader
from forkflow.models import GateResult, Sha
from forkflow.testing.gitrepo import ForkBuilder


class CountingPicker(MemoryPicker):
    """A real picker that counts the picks of each commit."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, batch_writes=True)
        self.picks: Counter[str] = Counter()

    def pick(self, base_tree: str, sha: Sha) -> PickStep:
        self.picks[sha] += 1
        return super().pick(base_tree, sha)


class PassGate:
    def check(self, rev: Sha, base: Sha) -> GateResult:
        return GateResult(True, "passed")


def _fork(builder: ForkBuilder) -> tuple[Path, dict[str, Sha]]:
    builder.upstream_commit({"a.py": "a = 1\nb = 1\n", "k.py": "k = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"a.py": "a = 10\nb = 1\n"}, "[fork] ours")
    shas = {
        "c": builder.upstream_commit({"c.py": "c = 1\n"}, "Add c (#2)"),
        "a": builder.upstream_commit({"a.py": "a = 2\nb = 1\n"}, "Change a (#3)"),  # conflicts with the fork
        "a2": builder.upstream_commit({"a.py": "a = 3\nb = 1\n"}, "Change a again (#4)"),  # rewrites #3's line
        "d": builder.upstream_commit({"d.py": "d = 1\n", "k.py": "k = 2\n"}, "Add d (#5)"),
        "e": builder.upstream_commit({"e.py": "e = 1\n", "k.py": "k = 3\n"}, "Add e (#6)"),
    }
    builder.fetch()
    fork = builder.f.path
    (fork / "forkflow.toml").write_text(render_config("upstream", "main", "main"))
    return fork, shas


def _ingest(fork: Path, picker: MemoryPicker) -> list[UnitStatus]:
    ctx = open_context(fork)
    ing = Ingestor(ctx.repo, picker, PassGate(), StoreJournal(ctx.store, ctx.fork_id), None, config=ctx.config,
                   settings=ingest_settings(ctx.config), options=IngestOptions(mode=Mode.LAND),
                   reader=StoreIngestReader(ctx.repo, ctx.config, ctx.store, ctx.fork_id))
    report = ing.run()
    return [r.status for r in report.results]


def test_ingest_picks_each_commit_once_and_trees_equal_git_cherry_pick(builder: ForkBuilder, tmp_path: Path) -> None:
    fork, shas = _fork(builder)
    start = run_git("rev-parse", "main", cwd=fork).strip()
    picker = CountingPicker(fork)
    statuses = _ingest(fork, picker)
    assert UnitStatus.LANDED in statuses and UnitStatus.CONFLICT in statuses
    # no probe ahead of the landing: every pending commit is picked at most once
    assert picker.picks and max(picker.picks.values()) == 1
    log = run_git("log", "--reverse", "--format=%(trailers:key=Upstream-Commit,valueonly)", f"{start}..main", cwd=fork)
    landed = log.split()
    assert landed == [shas[k] for k in ("c", "d", "e")]
    # the landed tree is git's: cherry-pick the same commits onto the same fork tip
    tree = tmp_path / "git"
    run_git("worktree", "add", "-q", "--detach", str(tree), start, cwd=fork)
    for sha in landed:
        run_git("-c", "user.name=t", "-c", "user.email=t@t", "cherry-pick", sha, cwd=tree)
    assert run_git("rev-parse", "HEAD^{tree}", cwd=tree) == run_git("rev-parse", "main^{tree}", cwd=fork)


def test_ingest_rerun_after_a_run_lands_nothing_twice(builder: ForkBuilder) -> None:
    fork, shas = _fork(builder)
    _ingest(fork, CountingPicker(fork))
    tip = run_git("rev-parse", "main", cwd=fork).strip()
    again = CountingPicker(fork)
    statuses = _ingest(fork, again)
    assert UnitStatus.LANDED not in statuses
    assert run_git("rev-parse", "main", cwd=fork).strip() == tip
    assert not {shas[k] for k in ("c", "d", "e")} & set(again.picks)  # decided: not picked again
