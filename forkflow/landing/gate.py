"""The L1 gate a landing unit must pass before it lands.

Two implementations: a configured command in a temporary work tree (`[ingest] l1_command`),
and the L1 validation tier (`forkflow.triage.gate.TierGate`) when L1 suites are configured.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from forkflow.errors import GitError
from forkflow.git.checkout import WorkTreeMover
from forkflow.git.repo import Repo
from forkflow.git.run import no_git_env
from forkflow.landing.l1trees import L1Tree, kill_processes_in, prune_stale, register
from forkflow.process import run_in_group  # one runner: own process group, killed whole
from forkflow.models import GateResult, Sha


class Gate(Protocol):
    def check(self, rev: Sha, base: Sha) -> GateResult:
        """Validate fork commit `rev` (a candidate unit on top of `base`)."""
        ...


class CommandGate:
    """L1 as a configured command (`[ingest] l1_command`), run in a temporary work tree of `rev`.

    The command runs through `sh -c` with FORKFLOW_REV and FORKFLOW_BASE set; exit 0 passes.
    The user's own work tree is never used.  Exit 126/127 (cannot run) is an infrastructure fault.
    The work tree is registered (`forkflow.landing.l1trees`) before it is made; after each run,
    whatever still runs marked as this gate's or inside its tree is killed; the output kept is
    its head and tail (`forkflow.process.L1_KEEP`).
    """

    def __init__(self, repo: Repo, command: str, timeout: float = 3600.0,
                 log_dir: Path | None = None) -> None:
        self.repo = repo
        self.command = command
        self.timeout = timeout
        self.log_dir = log_dir
        self._tree: Path | None = None  # one work tree per run, moved from unit to unit
        self._held: L1Tree | None = None  # its registry entry, held while the tree lives
        self._mover = WorkTreeMover()  # moves that work tree in this process while it can

    def _checkout(self, rev: Sha) -> Path:
        """The run's work tree at `rev`: made once, then moved by `git checkout` (which rewrites only
        the files that differ, where a fresh work tree per unit wrote the whole fork: issue 11)."""
        if self._tree is not None:
            try:
                if not self._mover.move(self._tree, rev):
                    self.repo.git("-C", str(self._tree), "checkout", "--quiet", "--force", "--detach", rev)
                    self.repo.git("-C", str(self._tree), "clean", "-ffdxq")
                return self._tree
            except GitError:
                self.close()
        self._held = register(self.repo)  # before the tree exists: a kill in between leaves no stranger
        self._tree = self._held.path
        self.repo.add_worktree(self._tree, rev)
        return self._tree

    def close(self) -> None:
        """Remove the run's work tree and its registry entry."""
        self._mover.forget()
        if self._held is not None:
            self._held.release()
            self._held = None
        self._tree = None

    def check(self, rev: Sha, base: Sha) -> GateResult:
        start = time.monotonic()
        try:
            tree = self._checkout(rev)
            # a hook's GIT_DIR would point the command's own git calls at the hook's repository
            env = dict(no_git_env(), FORKFLOW_REV=rev, FORKFLOW_BASE=base)
            assert self._held is not None
            try:
                rc, output = run_in_group(self.command, tree, env, self.timeout, mark=self._held.mark)
            finally:
                kill_processes_in(tree)  # what left both the group and the mark (`env -i setsid ...`)
            if rc is None:
                self._log(rev, output)
                return GateResult(False, f"l1_command timed out after {self.timeout:g}s")
            log = self._log(rev, output)
            took = time.monotonic() - start
            if rc == 0:
                return GateResult(True, f"l1_command passed in {took:.1f}s")
            last = output.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            where = f"; log {log}" if log else ""
            return GateResult(False, f"l1_command failed (exit {rc}): {last[0][:200]}{where}",
                              infra=rc in (126, 127))
        except BaseException:
            self.close()  # a killed or broken run leaves no work tree behind
            raise

    def _log(self, rev: Sha, output: bytes) -> Path | None:
        """The command's output, kept in the log folder; a command that printed nothing leaves no
        log (a file a unit was 131 empty files of a real fork's run)."""
        if self.log_dir is None or not output:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"l1-{rev[:12]}.log"
        path.write_bytes(output)  # at most run_in_group's head and tail of it
        return path


def prune_stale_worktrees(repo: Repo) -> None:
    """Drop the L1 work trees a killed run left behind, and kill what still runs for them.

    Only trees in forkflow's registry whose owner is gone (`forkflow.landing.l1trees`): a tree
    of a live run (a `replay --gate` beside this ingest) stays, and nothing unregistered is
    touched, whatever its path says."""
    prune_stale(repo)
