"""Group failures by signature, and measure a grouping against true labels.  [pure]"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

from forkflow.triage.models import Failure, FailureGroup


def group_failures(failures: Iterable[Failure]) -> list[FailureGroup]:
    """One group per signature, biggest first (ties by signature text, so the order is stable)."""
    by_key: dict[str, list[Failure]] = {}
    for f in failures:
        by_key.setdefault(f.signature.key, []).append(f)
    groups = [FailureGroup(key=k, signature=fs[0].signature.text, kind=fs[0].signature.kind,
                           failures=tuple(fs)) for k, fs in by_key.items()]
    return sorted(groups, key=lambda g: (-len(g.failures), g.signature))


def _comb2(counts: Iterable[int]) -> float:
    return float(sum(c * (c - 1) / 2 for c in counts))


def adjusted_rand_index(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> float:
    """Hubert and Arabie's adjusted Rand index of two labellings of the same items (1.0 = equal)."""
    if len(truth) != len(predicted):
        raise ValueError("both labellings must label the same items")
    n = len(truth)
    if n < 2:
        return 1.0
    pairs = Counter(zip(truth, predicted))
    index = _comb2(pairs.values())
    a = _comb2(Counter(truth).values())
    b = _comb2(Counter(predicted).values())
    expected = a * b / (n * (n - 1) / 2)
    top = (a + b) / 2
    if top == expected:  # both labellings are trivial (one cluster, or all singletons)
        return 1.0
    return (index - expected) / (top - expected)
