"""One step of a replay: the state at a point, forkflow's ingest on it, and the state after.

Shared by the replay driver (in this process) and its worker pool (in worker processes).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from forkflow.config import Config
from forkflow.models import Sha
from forkflow.replay.carry import Carried
from forkflow.replay.engine import Engine, landed_of
from forkflow.replay.model import Step
from forkflow.replay.scratch import Scratch, forget_objects, set_state


@dataclass(frozen=True, slots=True)
class Point:
    at: int
    fork: Sha
    upstream: Sha


def compute_step(engine: Engine, scratch: Scratch, config: Config, p: Point, carried: Carried | None = None,
                 root: Sha | None = None) -> Step:
    """The state at p, forkflow's ingest on it, and the state after.

    Without `carried`, forkflow starts from the fork as it really was at p; with it, from
    forkflow's carried branch (`carried.tip`, grown from the real fork at `root`)."""
    began = time.monotonic()
    start = carried.tip if carried is not None else p.fork
    set_state(scratch, config, start, p.upstream)
    # after the refs moved: no ref names a scratch object any more, except a carried branch
    forget_objects(scratch, keep=start if carried is not None else None,
                   since=tuple(s for s in (root, p.upstream) if s))
    stamp = f"{p.fork[:12]}:{p.upstream[:12]}:{time.time_ns()}"
    real = engine.status(engine.fork(f"replay:{stamp}"), p.fork, p.upstream)
    outcome = engine.ingest(engine.fork(f"replay:ingest:{stamp}"), p.upstream,
                            point=real.ingestion_point.sha)
    same_rule = engine.same_rule(f"replay:same-rule:{stamp}", outcome.tip, p.upstream)
    return Step(p.at, p.fork, p.upstream, scratch.repo.commit_date(p.fork), real.upstream_tip.date,
                engine.state(real), outcome.after, landed_of(outcome), outcome.skipped, outcome.deferred,
                outcome.waiting, outcome.units, round(time.monotonic() - began, 1), False, outcome.notes,
                same_rule, outcome.tip, carried.applied if carried else 0, carried.forced if carried else 0,
                carried.left_out if carried else 0, outcome.backlog_at, outcome.stopped)
