"""Hostile logs for the triage rules: each signature (and what reads it) within a time limit, shared
by the tests of each signature version."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from forkflow.triage.models import Signature
from forkflow.triage.signature import signature_of


def read_quickly(texts: Iterable[str], limit: float = 1.0,
                 *readers: Callable[[Signature], object]) -> list[Signature]:
    """Each text's signature, and each reader of it, within `limit` seconds; the signatures."""
    out = []
    for text in texts:
        t0 = time.perf_counter()
        sig = signature_of(text)
        for read in readers:
            read(sig)
        assert time.perf_counter() - t0 < limit, text[:20]
        out.append(sig)
    return out
