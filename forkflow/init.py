"""`forkflow init`: check the fork, attach upstream, write forkflow.toml, create the store."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from forkflow.config import CONFIG_NAME, Config, load_config, parse_config, render_config
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.git.run import refuse_option_like
from forkflow.ledger.merges import PICK, Intake, detect_intake
from forkflow.state import migrate_state, state_dir
from forkflow.store import forks
from forkflow.store.session import Store, redact


@dataclass(frozen=True, slots=True)
class InitResult:
    config_path: Path
    config_written: bool
    remote: str
    remote_added: bool
    store_url: str


def has_password(url: str) -> bool:
    return re.search(r"://[^/@:]+:[^/@]+@", url) is not None


def _looks_like_url_or_path(value: str) -> bool:
    return "://" in value or value.startswith(("/", ".", "~")) or "@" in value or Path(value).exists()


def _check_reachable(repo: Repo, url: str, branch: str) -> None:
    """Ask the remote for the branch before writing anything."""
    refuse_option_like(url, "upstream")  # `--upload-pack=CMD` would run CMD (see docs/security.md)
    try:
        out = repo.git("ls-remote", "--heads", "--", url, f"refs/heads/{branch}")
    except GitError as e:
        raise UserError(f"upstream {url} is unreachable ({e.reason}); check the URL or path and your "
                        "network, then retry") from e
    if not out.strip():
        raise UserError(f"upstream {url} has no branch '{branch}'; pass the right one with "
                        "--upstream-branch")


def init_fork(repo_path: Path, upstream: str, upstream_branch: str, fork_branch: str,
              store_url: str | None, remote_name: str = "upstream") -> InitResult:
    """Set up forkflow in a fork's checkout; running it again changes nothing."""
    repo = Repo.open(repo_path)
    if repo.is_shallow():
        raise UserError("this is a shallow clone; forkflow needs the whole history: "
                        "run `git fetch --unshallow` and retry")
    if repo.resolve(f"refs/heads/{fork_branch}") is None:
        raise UserError(f"fork branch '{fork_branch}' does not exist in {repo.path}; "
                        "pass the right one with --fork-branch")
    remotes = repo.remotes()
    remote_added = False
    if upstream in remotes:
        remote = upstream
        _check_reachable(repo, repo.remote_url(remote) or remote, upstream_branch)
    elif _looks_like_url_or_path(upstream):
        url = str(Path(upstream).expanduser().resolve()) if Path(upstream).expanduser().exists() else upstream
        remote = remote_name
        existing = repo.remote_url(remote)
        if existing is not None and existing not in (url, upstream):
            raise UserError(f"remote '{remote}' already points at {existing}; pass --upstream "
                            f"{remote} to use it, or remove it with `git remote remove {remote}`")
        _check_reachable(repo, url, upstream_branch)
        if existing is None:
            repo.add_remote(remote, url)
            remote_added = True
    else:
        raise UserError(f"no remote named '{upstream}' and it is not a URL or path; "
                        f"run `git remote -v` to see remotes, or pass the upstream URL")

    cfg_path = repo.path / CONFIG_NAME
    try:
        repo.fetch(remote, upstream_branch)
        upstream_tip = repo.resolve(f"refs/remotes/{remote}/{upstream_branch}")
        fork_tip = repo.resolve(f"refs/heads/{fork_branch}")
        assert upstream_tip and fork_tip
        if repo.merge_base(fork_tip, upstream_tip) is None:
            raise UserError(f"fork branch '{fork_branch}' and {remote}/{upstream_branch} share no "
                            "history; check that --upstream names this fork's upstream")
        intake = detect_intake(repo, fork_tip, upstream_tip)
        written = _write_config(cfg_path, remote, upstream_branch, fork_branch, store_url, intake,
                                fork_identity(repo, fork_branch))
    except BaseException:
        if remote_added:  # nothing half-written: take back the remote we added
            repo.git("remote", "remove", remote, check=False)
        raise
    config = load_config(cfg_path)
    if written:
        print(f"intake {intake.describe()}; set [fork] intake in {CONFIG_NAME} to change it", file=sys.stderr)
    moved = migrate_state(repo, config.root)
    if moved:
        print(moved, file=sys.stderr)
    url = store_url or config.resolved_store_url(state_dir(repo))
    _open_store(repo, config, url)
    return InitResult(cfg_path, written, remote, remote_added, redact(url))


def fork_identity(repo: Repo, fork_branch: str, shared_remote: str = "origin") -> str:
    """The fork's name in a shared store: the shared remote's URL (normalised) and the fork
    branch, or the checkout's folder and branch when the fork has no such remote."""
    url = repo.remote_url(shared_remote) if shared_remote in repo.remotes() else None
    return forks.identity(url, fork_branch) if url else f"{repo.path.name}:{fork_branch}"


def _write_config(path: Path, remote: str, upstream_branch: str, fork_branch: str,
                  store_url: str | None, intake: Intake | None = None, name: str = "") -> bool:
    # a URL with a password never goes into a file that may be committed: use FORKFLOW_STORE
    in_file = store_url if store_url and not has_password(store_url) else ""
    if path.exists():
        existing = load_config(path)
        wanted = (remote, upstream_branch, fork_branch)
        have = (existing.upstream_remote, existing.upstream_branch, existing.fork_branch)
        if have != wanted:
            raise UserError(f"{path} already says upstream {have[0]}/{have[1]} and fork branch "
                            f"{have[2]}; edit it by hand, or remove it and run init again")
        return False
    # the fork's identity is fixed at init: moving the checkout keeps its history (issue 12), and
    # every clone of the shared remote comes to the same one, whatever its folder's name
    text = render_config(remote, upstream_branch, fork_branch, in_file, name or f"{path.parent.name}:{fork_branch}")
    text = with_intake(text, intake.style if intake is not None else PICK)
    parse_config(text)  # the template always parses
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


INTAKE_COMMENT = ('# How the fork takes upstream: "pick" (cherry-picks and bundles) or "merge" (merge commits whose\n'
                  "# second parent is upstream's). `forkflow init` read it from the fork's history; status, history,\n"
                  "# replay and ingest follow it.\n")


def with_intake(text: str, style: str) -> str:
    """The config text with `intake = "<style>"` as the first key of its [fork] section."""
    head, sep, rest = text.partition("[fork]\n")
    if not sep:
        return text + f'\n[fork]\n{INTAKE_COMMENT}intake = "{style}"\n'
    return f'{head}{sep}{INTAKE_COMMENT}intake = "{style}"\n{rest}'


def _open_store(repo: Repo, config: Config, url: str) -> None:
    from forkflow.context import fork_name

    state = state_dir(repo)  # in the git directory: nothing to keep out of commits
    if url.startswith("sqlite") and str(state) in url:
        state.mkdir(parents=True, exist_ok=True)
    store = Store.open(url)
    with store.session_scope() as s:
        # a store that knew this fork by its folder's name (before [fork] name came from the
        # shared remote) keeps its history: that row takes the new name
        forks.fork_id(s, fork_name(repo, config), legacy=(f"{repo.path.name}:{config.fork_branch}",))
    store.dispose()
