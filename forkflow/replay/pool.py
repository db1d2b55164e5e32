"""Steps of a replay spread over worker processes, each with its own scratch repository and store.

With `--independent`, steps do not depend on each other (each starts from the fork as it really
was), so they parallelise; a worker owns a scratch slot because a step moves that scratch
repository's refs.
"""
from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from forkflow.config import find_config, load_config
from forkflow.git.repo import Repo
from forkflow.replay.model import Step
from forkflow.replay.step import compute_step

_WORKER: dict[str, Any] = {}


def _init(repo_path: str, root: str, gate: str, slots: Any) -> None:
    from forkflow.replay.engine import Engine
    from forkflow.replay.scratch import open_scratch

    user = Repo(Path(repo_path))
    found = find_config(Path(root))
    assert found is not None
    config = load_config(found)
    scratch = open_scratch(user, config, slot=int(slots.get()))
    _WORKER.update(config=config, scratch=scratch,
                   engine=Engine(scratch.repo, config, scratch.store, gate, log_dir=scratch.root / "logs"))


def _one(point: Any) -> dict[str, Any]:
    try:
        step = compute_step(_WORKER["engine"], _WORKER["scratch"], _WORKER["config"], point)
    except Exception as e:
        if type(e).__module__.startswith("forkflow"):
            raise
        # libgit2's errors do not pickle: the parent would only see "Error sending result"
        raise RuntimeError(f"{type(e).__name__}: {e}") from None
    return step.to_json()


def map_steps(repo_path: Path, root: Path, gate: str, todo: Sequence[Any], jobs: int) -> Iterator[Step]:
    """The steps of `todo`, in order, computed by `jobs` processes."""
    ctx = mp.get_context("spawn")  # no store connection or libgit2 handle crosses a fork
    slots = ctx.Queue()
    for i in range(1, jobs + 1):
        slots.put(i)
    with ctx.Pool(jobs, initializer=_init, initargs=(str(repo_path), str(root), gate, slots)) as pool:
        for doc in pool.imap(_one, todo):
            yield Step.from_json(doc)
