"""Resolutions learnt from the fork's own past picks.  [pure]"""
from __future__ import annotations

from forkflow.conflicts.case import ConflictCase


class History:
    def __init__(self) -> None:
        self.regions: dict[str, str] = {}


def learn(history: History, case: ConflictCase, fork: bytes | None) -> None:
    pass
