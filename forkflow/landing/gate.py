"""The L1 gate a landing unit must pass before it lands.

Two implementations: a configured command in a temporary work tree (`[ingest] l1_command`),
and the L1 validation tier (`forkflow.tiers.gate.TierGate`) when L1 suites are configured.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from forkflow.models import Sha


@dataclass(frozen=True, slots=True)
class GateResult:
    passed: bool
    summary: str  # one line for people: what ran, what failed
    run_id: int | None = None  # the stored validation run, when there is one
    infra: bool = False  # the gate could not run (runner fault): not the unit's fault


class Gate(Protocol):
    def check(self, rev: Sha, base: Sha) -> GateResult:
        """Validate fork commit `rev` (a candidate unit on top of `base`)."""
        ...
