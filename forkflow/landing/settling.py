"""The conflicts of one run's picks, met by the resolvers through the trust gate (the landing's
`Settler`): each file's answer once a run, what settled each applied file, what is left for a
person.  The picker asks `resolve` for each conflicted pick; the landing reads the rest."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from forkflow.config import Config
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.casework import Settlement, build_case, build_resolvers, trust_gate
from forkflow.conflicts.engine import CaseResolution, resolve_case
from forkflow.conflicts.provenance import Settled
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.git.pick import MemoryPicker, MissingBlob, PickStep, Resolutions
from forkflow.git.repo import Repo
from forkflow.landing.settings import IngestSettings
from forkflow.models import Sha


class Settler:
    def __init__(self, repo: Repo, picker: MemoryPicker, config: Config, settings: IngestSettings, reader: object,
                 lookup: Callable[[str], tuple[list[str], str] | None], log: Callable[[Attempt], None],
                 *, writes: bool, note: Callable[[str], None]) -> None:
        self.repo, self.picker, self._note = repo, picker, note
        self.fork_point: Sha | None = None  # the cases' origin (a `git merge-base` per case otherwise)
        self.unresolved: dict[Sha, list[tuple[ConflictCase, tuple[str, ...]]]] = {}  # left for a person
        self.used: dict[Sha, list[tuple[ConflictCase, tuple[str, ...], str]]] = {}  # (case, regions, resolver)
        self._answers: dict[tuple[Sha, str, str], CaseResolution] = {}  # (sha, path, conflict key) -> answer
        self.resolvers = build_resolvers(settings.resolvers, lookup, settings.agent, log, dict(os.environ),
                                         with_agent=writes)
        self.trust = trust_gate(repo, config, reader, writes=writes)  # conflicts/trust.py

    def resolve(self, step: PickStep, onto_tree: str) -> Resolutions | None:
        """Every conflicted file of the pick settled by a trusted answer, or None (kept for a person)."""
        settled = Settlement()
        for conflict in step.conflicts:
            try:
                case = build_case(self.repo, self.picker, step.sha, conflict, fork_point=self.fork_point)
            except MissingBlob as e:  # kept for a person, with the reason; the rest goes on
                self._note(f"{step.sha[:12]}: conflict in {conflict.path} kept unresolved: {e}")
                return None
            # a stack picked again (its base moved, or it stood on a red batch) meets the same conflicts:
            # the resolvers (the agent too) answer each once a run
            memo = (step.sha, case.path, case.key) if case.key else None
            outcome = self._answers.get(memo) if memo else None
            if outcome is None:
                outcome = resolve_case(case, self.resolvers)
                if memo:
                    self._answers[memo] = outcome
            settled.add(case, self.trust.gate(case, outcome))  # an untrusted rule's answer waits for a person
        if settled.unresolved:
            self.unresolved[step.sha] = settled.unresolved
            return None
        self.used[step.sha] = settled.used
        return settled.contents

    def resolved_by(self, shas: Sequence[Sha]) -> dict[str, str]:
        """'<sha12> <path>' -> the resolver, for the report."""
        return {f"{sha[:12]} {case.path}": resolver for sha in shas for case, _, resolver in self.used.get(sha, [])}

    def used_in(self, shas: Sequence[Sha]) -> list[tuple[ConflictCase, tuple[str, ...], str]]:
        return [u for sha in shas for u in self.used.get(sha, [])]

    def settled(self, sha: Sha) -> list[Settled]:
        """The files a resolver or a person settled in `sha`'s pick, for its trailers."""
        return [Settled(case.path, resolver, case.key) for case, _, resolver in self.used.get(sha, [])]
