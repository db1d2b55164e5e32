"""Landing on a branch that is checked out: keep its work tree in step, as git's `updateInstead`.

Landing moves the fork branch by compare-and-swap on the ref only. Where that branch is checked
out, the index and files would still show the old commit, so `git status` showed the landing
undone as staged changes and a later `git commit -a` reverted it (issue 12). So:

- before landing, a work tree of the fork branch with local changes refuses the run, in one line;
- after landing, each clean work tree of the fork branch is brought to the new tip
  (`git read-tree -u -m OLD NEW`: a two-tree merge that only rewrites files that changed).
"""
from __future__ import annotations

from pathlib import Path

from forkflow.config import Config
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.models import Sha


def fork_work_trees(repo: Repo, config: Config) -> list[Path]:
    """The work trees where the fork branch is checked out."""
    return [path for path, branch in repo.worktrees() if branch == config.fork_ref]


def local_changes(repo: Repo, path: Path, base: str = "HEAD") -> list[str]:
    """Tracked files whose index or work tree entry differs from `base` at `path` (untracked ones
    are not changes).  After a landing, `base` is the commit the checkout still shows."""
    repo.git("-C", str(path), "update-index", "-q", "--refresh", check=False)
    staged = repo.git("-C", str(path), "diff-index", "--cached", "--name-only", base, check=False)
    unstaged = repo.git("-C", str(path), "diff-files", "--name-only", check=False)
    return sorted({line for line in (staged + unstaged).splitlines() if line.strip()})


def refuse_dirty_work_trees(repo: Repo, config: Config) -> None:
    """One line, before anything moves, when the fork branch is checked out with local changes."""
    for path in fork_work_trees(repo, config):
        changed = local_changes(repo, path)
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            raise UserError(f"{config.fork_branch} is checked out in {path} with local changes ({changed[0]}{more}); "
                            "commit or stash them, or check out another branch, then run ingest --land again")


def catch_up_work_trees(repo: Repo, config: Config, old: Sha, new: Sha) -> list[str]:
    """Bring each clean work tree of the fork branch from `old` to `new`; notes for the others."""
    notes: list[str] = []
    for path in fork_work_trees(repo, config):
        if local_changes(repo, path, old):
            notes.append(f"{config.fork_branch} is checked out in {path} with local changes made during the "
                         f"run; its files still show {old[:12]}: git stash && git read-tree -u -m {old[:12]} "
                         f"{new[:12]} && git stash pop")
            continue
        try:
            repo.git("-C", str(path), "read-tree", "-u", "-m", old, new)
            notes.append(f"updated the checkout in {path} to {new[:12]}")
        except GitError as e:  # an untracked file in the way: git refused, nothing was changed
            notes.append(f"could not update the checkout in {path} ({e.reason}); move the file aside, "
                         f"then: git read-tree -u -m {old[:12]} {new[:12]}")
    return notes
