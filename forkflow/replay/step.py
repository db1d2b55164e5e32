"""One step of a replay: the state at a point, forkflow's ingest on it, and the state after.

Shared by the replay driver (in this process) and its worker pool (in worker processes).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from forkflow.config import Config
from forkflow.models import Sha
from forkflow.replay.engine import Engine, landed_of, state_of
from forkflow.replay.model import Step
from forkflow.replay.scratch import Scratch, forget_objects, set_state


@dataclass(frozen=True, slots=True)
class Point:
    at: int
    fork: Sha
    upstream: Sha


def compute_step(engine: Engine, scratch: Scratch, config: Config, p: Point) -> Step:
    """The state at p, forkflow's ingest on it, and the state after."""
    began = time.monotonic()
    set_state(scratch, config, p.fork, p.upstream)
    forget_objects(scratch)  # after the refs moved: none of them names a scratch object any more
    ctx = engine.context(f"replay:{p.fork[:12]}:{p.upstream[:12]}:{time.time_ns()}")
    real = engine.status(ctx, p.fork, p.upstream)
    outcome = engine.ingest(ctx, p.upstream)
    return Step(p.at, p.fork, p.upstream, scratch.repo.commit_date(p.fork), real.upstream_tip.date,
                state_of(real), outcome.after, landed_of(outcome), outcome.skipped, outcome.deferred,
                outcome.waiting, outcome.units, round(time.monotonic() - began, 1), False, outcome.notes)
