"""Build real upstream/fork repository pairs with deterministic SHAs.

Every commit gets the next tick of a fixed clock and fixed author, so the same operations
always give the same SHAs (as pre-commit pins GIT_AUTHOR_* in its tests).

    b = ForkBuilder(tmp_path)
    u1 = b.upstream_commit({"k.py": "x = 1\\n"}, "Add k (#1)")
    b.branch_fork()
    b.pick(u1, evidence="trailer")
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from forkflow.git.run import run_git
from forkflow.models import Sha

FileContent = str | bytes | None  # None deletes the file

EVIDENCE_STYLES = (
    "trailer",        # Upstream-Commit: <sha>
    "cherry",         # (cherry picked from commit <sha>)
    "reactor",        # Reactor Cherry-pick Revision: <sha>
    "backport",       # Reactor Backport Revision: <sha>
    "original",       # Original Commit: <sha>
    "upstream",       # Upstream commit: <sha>
    "patch-id",       # no marker: the same patch under another title
    "title-pr",       # no marker, same title and PR, a changed patch
    "quoted",         # the marker only inside a quoted upstream message (does not count)
)


UPSTREAM_PERSON = ("Ada Upstream", "ada@example.com")
FORK_PERSON = ("Finn Fork", "finn@fork.example")  # the fork's own engineer: its commits, its decisions


class GitTree:
    """One repository with a work tree, committing on a deterministic clock."""

    def __init__(self, path: Path, clock: list[int], step: int, who: tuple[str, str] = UPSTREAM_PERSON) -> None:
        self.path = path
        self._clock = clock
        self._step = step
        self.who = who  # (name, email) of whoever commits here: upstream's maintainer, or the fork's engineer

    def env(self) -> dict[str, str]:
        self._clock[0] += self._step
        date = f"{self._clock[0]} +0000"
        name, email = self.who
        return {
            "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
            "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
        }

    def git(self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> str:
        return run_git(*args, cwd=self.path, env=dict(env) if env else None, input=input)

    def write(self, files: Mapping[str, FileContent]) -> None:
        for name, content in files.items():
            p = self.path / name
            if content is None:
                if p.exists():
                    self.git("rm", "-q", "--", name)
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content, encoding="utf-8")
            self.git("add", "--", name)

    def commit(self, files: Mapping[str, FileContent], subject: str, body: str = "",
               raw_message: bytes | None = None) -> Sha:
        self.write(files)
        msg = subject + (f"\n\n{body}" if body else "")
        if raw_message is not None:  # e.g. a legacy non-UTF-8 message
            msg_file = self.path / ".git" / "RAW_MSG"
            msg_file.write_bytes(raw_message)
            self.git("commit", "-q", "--allow-empty", "-F", str(msg_file), env=self.env())
        else:
            self.git("commit", "-q", "--allow-empty", "-m", msg, env=self.env())
        return self.head()

    def head(self) -> Sha:
        return Sha(self.git("rev-parse", "HEAD").strip())

    def show(self, sha: str, fmt: str) -> str:
        return self.git("show", "-s", f"--format={fmt}", sha)


class ForkBuilder:
    """An upstream repository and a fork cloned from it, side by side under `root`."""

    def __init__(self, root: Path, start: int = 1_700_000_000, step: int = 3600) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self._clock = [start]
        self.upstream = GitTree(root / "upstream", self._clock, step)
        self.upstream.path.mkdir()
        run_git("init", "-q", "-b", "main", str(self.upstream.path), cwd=root)
        self._config(self.upstream)
        self.fork: GitTree | None = None

    @staticmethod
    def _config(tree: GitTree) -> None:
        tree.git("config", "user.name", tree.who[0])
        tree.git("config", "user.email", tree.who[1])
        tree.git("config", "commit.gpgsign", "false")

    def tick(self, seconds: int) -> None:
        """Let time pass (so that days behind moves)."""
        self._clock[0] += seconds

    # -- upstream ------------------------------------------------------------
    def upstream_commit(self, files: Mapping[str, FileContent], subject: str, body: str = "",
                        raw_message: bytes | None = None) -> Sha:
        return self.upstream.commit(files, subject, body, raw_message)

    def upstream_raw_commit(self, files: Mapping[str, FileContent], message: str) -> Sha:
        """An upstream commit whose message is stored byte for byte (no `git commit` clean-up)."""
        up = self.upstream
        up.write(files)
        tree = up.git("write-tree").strip()
        head = up.git("rev-parse", "HEAD").strip()
        sha = up.git("commit-tree", tree, "-p", head, input=message, env=up.env()).strip()
        up.git("update-ref", "HEAD", sha)
        return Sha(sha)

    def revert_upstream(self, sha: Sha) -> Sha:
        self.upstream.git("revert", "--no-edit", sha, env=self.upstream.env())
        return self.upstream.head()

    # -- fork ------------------------------------------------------------------
    def branch_fork(self, name: str = "fork") -> GitTree:
        """Clone upstream into the fork with an `upstream` remote; the fork branch is `main`."""
        path = self.root / name
        run_git("clone", "-q", "--origin", "upstream", str(self.upstream.path), str(path), cwd=self.root)
        self.fork = GitTree(path, self._clock, self.upstream._step, FORK_PERSON)
        self._config(self.fork)
        return self.fork

    @property
    def f(self) -> GitTree:
        assert self.fork is not None, "call branch_fork() first"
        return self.fork

    def fetch(self) -> None:
        self.f.git("fetch", "-q", "upstream")

    def fork_commit(self, files: Mapping[str, FileContent], subject: str, body: str = "",
                    raw_message: bytes | None = None) -> Sha:
        return self.f.commit(files, subject, body, raw_message)

    def pick(self, sha: Sha, evidence: str = "trailer", extra: Mapping[str, FileContent] | None = None) -> Sha:
        """Cherry-pick an upstream commit into the fork, leaving the chosen kind of evidence."""
        if evidence not in EVIDENCE_STYLES:
            raise ValueError(f"unknown evidence style {evidence!r}")
        self.fetch()
        self.f.git("cherry-pick", "--no-commit", "--allow-empty", sha)
        if extra:
            self.f.write(extra)
        subject = self.upstream.show(sha, "%s").strip()
        body = self.upstream.show(sha, "%b").strip()
        message = _pick_message(evidence, sha, subject, body)
        self.f.git("commit", "-q", "--allow-empty", "-m", message, env=self.f.env())
        return self.f.head()

    def bundle(self, shas: Sequence[Sha], style: str = "prs") -> Sha:
        """One fork commit squashing several upstream picks, listing PRs or SHAs."""
        self.fetch()
        for sha in shas:
            self.f.git("cherry-pick", "--no-commit", "--allow-empty", sha)
        subjects = [self.upstream.show(s, "%s").strip() for s in shas]
        if style == "prs":
            prs = " ".join("#" + s.rsplit("(#", 1)[1].rstrip(")") for s in subjects if "(#" in s)
            message = f"Cherry-pick {len(shas)} upstream({prs})"
        else:
            message = f"Cherry-pick {len(shas)} upstream commits\n\n" + "\n".join(
                f"- {s[:12]} {subj}" for s, subj in zip(shas, subjects))
        self.f.git("commit", "-q", "--allow-empty", "-m", message, env=self.f.env())
        return self.f.head()

    def revert_in_fork(self, fork_sha: Sha) -> Sha:
        self.f.git("revert", "--no-edit", fork_sha, env=self.f.env())
        return self.f.head()


def _pick_message(evidence: str, sha: str, subject: str, body: str) -> str:
    text = subject + (f"\n\n{body}" if body else "")
    if evidence == "trailer":
        return f"{text}\n\nUpstream-Commit: {sha}"
    if evidence == "cherry":
        return f"{text}\n\n(cherry picked from commit {sha})"
    if evidence == "reactor":
        return f"{text}\n\nReactor Cherry-pick Revision: {sha}"
    if evidence == "backport":
        return f"{text}\n\nReactor Backport Revision: {sha}"
    if evidence == "original":
        return f"{text}\n\nOriginal Commit: {sha}"
    if evidence == "upstream":
        return f"{text}\n\nUpstream commit: {sha}"
    if evidence == "patch-id":
        return f"[fork] port: {subject.split(' (#')[0]}"
    if evidence == "title-pr":
        return text
    if evidence == "quoted":
        return f"Fork tweak, inspired by upstream\n\nUpstream said:\n> {subject}\n> (cherry picked from commit {sha})"
    raise ValueError(evidence)
