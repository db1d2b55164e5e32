"""Each resolver rule's record on one fork, and the trust it earns from it.  [pure]

Kept apart from conflicts/trust.py (which runs the chain) so that the fork's History can carry
the book learnt with it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

DEFAULT_MIN_PRECISION = 0.95
DEFAULT_MIN_CASES = 10
TRUSTED, PROPOSES = "trusted", "proposes"


@dataclass(frozen=True, slots=True)
class TrustSettings:
    min_precision: float = DEFAULT_MIN_PRECISION
    min_cases: int = DEFAULT_MIN_CASES


@dataclass(slots=True)
class Record:
    """A rule's backtest on one fork: answers compared with the fork's committed files."""

    identical: int = 0
    different: int = 0

    @property
    def cases(self) -> int:
        return self.identical + self.different

    @property
    def precision(self) -> float | None:
        return self.identical / self.cases if self.cases else None

    def describe(self) -> str:
        if not self.cases:
            return "no case on this fork yet"
        return (f"{self.identical} of {self.cases} past answers as the fork's engineers committed "
                f"({100 * (self.precision or 0):.0f}%)")


@dataclass(slots=True)
class RuleBook:
    """rule -> its record on this fork, and how many past conflicted files were replayed."""

    records: dict[str, Record] = field(default_factory=dict)
    files: int = 0

    def add(self, rules: Iterable[str], same: bool) -> None:
        for rule in rules:
            r = self.records.setdefault(rule, Record())
            r.identical += same
            r.different += not same

    def record(self, rule: str) -> Record:
        return self.records.get(rule, Record())

    def status(self, rule: str, settings: TrustSettings) -> str:
        """trusted: its answers land alone; proposes: a person approves each.  min_cases = 0 trusts a
        rule with no case yet (a fork that opts out of the gate until a rule's record says otherwise)."""
        r = self.record(rule)
        if r.cases < settings.min_cases:
            return PROPOSES
        return TRUSTED if r.precision is None or r.precision >= settings.min_precision else PROPOSES

    def trusted(self, rules: Sequence[str], settings: TrustSettings) -> bool:
        return bool(rules) and all(self.status(r, settings) == TRUSTED for r in rules)

    def copy(self) -> RuleBook:
        return RuleBook({k: Record(v.identical, v.different) for k, v in self.records.items()}, self.files)
