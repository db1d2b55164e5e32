"""The range left to search, narrowed by verdicts; K-ary probing; skipped commits.  [pure]

Candidates are numbered 0..n-1 in history order: 0 is the good end, n-1 the bad end, and the
culprit is the first BAD commit (the change came in between it and the GOOD commit before).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from forkflow.bisect.verdict import Verdict


@dataclass(frozen=True, slots=True)
class BisectState:
    """Verdicts so far over candidates 0..n-1."""

    n: int
    verdicts: Mapping[int, Verdict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError("a bisection needs at least the two ends")

    def verdict(self, i: int) -> Verdict | None:
        if i == 0:
            return Verdict.GOOD
        if i == self.n - 1:
            return Verdict.BAD
        return self.verdicts.get(i)

    @property
    def bounds(self) -> tuple[int, int]:
        """(lo, hi): the last GOOD below the first BAD, and the first BAD."""
        hi = min((i for i in range(1, self.n) if self.verdict(i) is Verdict.BAD), default=self.n - 1)
        lo = max((i for i in range(hi) if self.verdict(i) is Verdict.GOOD), default=0)
        return lo, hi

    @property
    def open(self) -> list[int]:
        """Candidates strictly inside the bounds that have no verdict yet."""
        lo, hi = self.bounds
        return [i for i in range(lo + 1, hi) if self.verdict(i) is None]

    @property
    def is_done(self) -> bool:
        return not self.open

    @property
    def skipped(self) -> list[int]:
        return sorted(i for i, v in self.verdicts.items() if v is Verdict.SKIP)

    @property
    def suspects(self) -> list[int]:
        """When done: the skipped commits inside the bounds, then the first BAD commit."""
        lo, hi = self.bounds
        return [i for i in range(lo + 1, hi) if self.verdict(i) is Verdict.SKIP] + [hi]

    @property
    def culprit(self) -> int | None:
        """The first BAD commit, once nothing untested or skipped is left before it."""
        if not self.is_done:
            return None
        s = self.suspects
        return s[0] if len(s) == 1 else None

    @property
    def inconsistent(self) -> list[int]:
        """GOOD verdicts above the first BAD (noise or a change that came and went)."""
        _, hi = self.bounds
        return [i for i, v in self.verdicts.items() if v is Verdict.GOOD and i > hi]

    def next_probes(self, k: int = 1) -> list[int]:
        """Up to k untested candidates that cut the open range into k + 1 near-equal parts."""
        todo = self.open
        if len(todo) <= k:
            return todo
        lo, hi = self.bounds
        chosen: list[int] = []
        for j in range(1, k + 1):
            target = lo + (hi - lo) * j / (k + 1)
            pick = min((i for i in todo if i not in chosen), key=lambda i: (abs(i - target), i))
            chosen.append(pick)
        return sorted(chosen)

    def with_verdicts(self, new: Mapping[int, Verdict]) -> BisectState:
        merged = dict(self.verdicts)
        for i, v in new.items():
            if 0 < i < self.n - 1 and v is not Verdict.UNSURE:
                merged[i] = v
        return replace(self, verdicts=merged)
