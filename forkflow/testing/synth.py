"""Generate large upstream/fork pairs fast with `git fast-import` (benchmarks, scale tests).

The fork branches from upstream at the fork point and carries a realistic mix: picks with
forkflow trailers, picks with other tools' markers, picks without markers (patch-id only),
squashed bundles, and the fork's own commits in files upstream never touches.
"""
from __future__ import annotations

import random
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from forkflow.config import render_config


@dataclass(frozen=True, slots=True)
class SynthSpec:
    base_files: int = 3000          # files in the tree at the fork point (Triton has ~3k)
    history_before_fork: int = 200  # upstream commits before the fork point
    upstream_commits: int = 2000    # upstream commits after the fork point
    fork_commits: int = 2500        # fork commits (picks + own work)
    pick_fraction: float = 0.5      # share of fork commits that pick upstream commits
    seed: int = 7
    start: int = 1_600_000_000
    step: int = 1800                # seconds between commits


@dataclass(frozen=True, slots=True)
class SynthRepo:
    path: Path
    picked: int
    upstream_commits: int
    fork_commits: int


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def _pick_order(rng: random.Random, upstream: int, picks: int) -> list[int]:
    """Upstream indexes the fork picked: an ingested prefix with a 3% backlog, a few urgent picks."""
    picks = min(picks, upstream)
    urgent = max(1, picks // 50) if picks < upstream else 0
    prefix = min(upstream, int((picks - urgent) / 0.97))
    chosen = sorted(rng.sample(range(prefix), min(prefix, picks - urgent)))
    later = [i for i in range(prefix, upstream)]
    chosen += sorted(rng.sample(later, min(len(later), picks - len(chosen))))
    return sorted(chosen)


class FastImport:
    """Commits with inline blobs written by one `git fast-import` process (benchmarks, scale tests).

    Each commit's author and committer date is the clock plus `step` seconds.  With `marks`, the
    marks are exported to that file and, unless `first`, read from it first: a later importer (with
    the same `clock` list) can name the commits an earlier one wrote.
    """

    def __init__(self, path: Path, *, marks: Path | None = None, first: bool = True,
                 clock: list[int] | None = None, step: int = 600) -> None:
        args = ["git", "fast-import", "--quiet", "--done"]
        if marks is not None:
            args.append(f"--export-marks={marks}")
            if not first:
                args.append(f"--import-marks={marks}")
        self.proc = subprocess.Popen(args, cwd=path, stdin=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.out = self.proc.stdin
        self.clock = clock if clock is not None else [1_600_000_000]
        self.step = step
        self.mark = 0  # the last mark written

    def commit(self, ref: str, parent: int | None, msg: str, files: Mapping[str, bytes],
               mark: int | None = None) -> int:
        """Write a commit on `ref` (after the commit marked `parent`); returns its mark, the one
        after the last unless given."""
        self.mark = self.mark + 1 if mark is None else mark
        self.clock[0] += self.step
        who = b"Dev <dev@example.com> %d +0000\n" % self.clock[0]
        buf = [b"commit %s\nmark :%d\nauthor " % (ref.encode(), self.mark) + who + b"committer " + who,
               _data(msg.encode())]
        if parent is not None:
            buf.append(b"from :%d\n" % parent)
        for name, content in files.items():
            buf.append(b"M 100644 inline %s\n" % name.encode() + _data(content))
        self.out.write(b"".join(buf) + b"\n")
        return self.mark

    def close(self) -> None:
        self.out.write(b"done\n")
        self.out.close()
        if self.proc.wait() != 0:
            raise RuntimeError("git fast-import failed")


def generate(path: Path, spec: SynthSpec = SynthSpec()) -> SynthRepo:
    """Write a fork checkout at `path` with branches main (fork) and upstream/main."""
    rng = random.Random(spec.seed)
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    marks = path / ".git" / "synth-marks"
    clock = [spec.start]
    counter = iter(range(1, 10**9))
    imp = FastImport(path, marks=marks, clock=clock, step=spec.step)

    dirs = ["lib/Dialect/TritonGPU", "lib/Conversion", "python/triton/language", "python/test/unit",
            "third_party/nvidia/backend", "include/triton/Dialect", "test/TritonGPU"]
    # about 40 files per folder, as in real trees: small tree objects keep fast-import fast
    files = [f"{dirs[i % len(dirs)]}/d{(i // len(dirs)) // 40}/file{i}."
             f"{'py' if 'python' in dirs[i % len(dirs)] else 'cpp'}" for i in range(spec.base_files)]
    contents = {f: f"// {f}\nint v = 0;\n".encode() for f in files}
    head = imp.commit("refs/heads/main", None, "Initial import", dict(contents), mark=next(counter))
    for i in range(spec.history_before_fork):
        f = rng.choice(files)
        contents[f] += f"int h{i} = {i};\n".encode()
        head = imp.commit("refs/heads/main", head, f"Early work {i} (#{i + 1})", {f: contents[f]},
                          mark=next(counter))
    fork_point = head

    up_marks: list[int] = []
    up_changes: list[tuple[str, bytes, str]] = []
    up_state = dict(contents)
    up = fork_point
    pr = spec.history_before_fork + 1000
    for i in range(spec.upstream_commits):
        f = rng.choice(files) if rng.random() < 0.7 else f"python/triton/new/g{i // 40}/mod{i}.py"
        new = up_state.get(f, b"") + f"value_{i} = {i}\n".encode()
        up_state[f] = new
        pr += 1
        area = rng.choice(["BACKEND", "FRONTEND", "AMD", "NVIDIA", "TESTS"])
        subject = f"[{area}] change {i} (#{pr})"
        up = imp.commit("refs/remotes/upstream/main", up, f"{subject}\n\nDetails of change {i}.\n",
                        {f: new}, mark=next(counter))
        up_marks.append(up)
        up_changes.append((f, new, subject))
    imp.close()
    mark_sha = {}
    for line in marks.read_text().splitlines():
        m, sha = line.split()
        mark_sha[int(m[1:])] = sha

    # the fork: picks in upstream order with mixed evidence, and its own work
    imp = FastImport(path, marks=marks, first=False, clock=clock, step=spec.step)
    fork_state = dict(contents)
    fk = fork_point
    picks_wanted = int(spec.fork_commits * spec.pick_fraction)
    pick_order = _pick_order(rng, spec.upstream_commits, picks_wanted)
    slots = ["pick"] * len(pick_order) + ["own"] * (spec.fork_commits - len(pick_order))
    rng.shuffle(slots)
    pending = iter(pick_order)
    for n, kind in enumerate(slots):
        if kind == "own":
            f = f"fork/feature{n % 50}.cpp"
            fork_state[f] = fork_state.get(f, b"") + f"int fork_{n} = {n};\n".encode()
            fk = imp.commit("refs/heads/main", fk, f"[fork] warp specialization step {n}",
                            {f: fork_state[f]}, mark=next(counter))
            continue
        i = next(pending)
        f, new, subject = up_changes[i]
        fork_state[f] = new
        sha = mark_sha[up_marks[i]]
        msg = f"{subject}\n\nDetails of change {i}.\n"
        style = rng.random()
        if style < 0.6:
            msg += f"\nUpstream-Commit: {sha}\n"
        elif style < 0.8:
            msg += f"\n(cherry picked from commit {sha})\n"
        # else: no marker at all, found by patch-id (or title + PR)
        fk = imp.commit("refs/heads/main", fk, msg, {f: new}, mark=next(counter))
    imp.close()
    subprocess.run(["git", "remote", "add", "upstream", "https://example.invalid/upstream.git"],
                   cwd=path, check=True)
    (path / "forkflow.toml").write_text(render_config("upstream", "main", "main"))
    return SynthRepo(path, len(pick_order), spec.upstream_commits, spec.fork_commits)
