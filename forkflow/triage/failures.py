"""A run's failures with their signatures, computed once and then read from the store.

Apart from `forkflow.triage.triage` so that the flaky memory and trunk health read failures
without importing the triage stages (no cycle between them).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from forkflow.triage.models import Failure, Signature
from forkflow.triage.records import finding_signature
from forkflow.triage.signature import signature_of, signature_of_file

if TYPE_CHECKING:
    from forkflow.triage.journal import TriageJournal


def _signature(message: str, log_path: str, synthetic: bool) -> Signature:
    path = Path(log_path) if log_path else None
    if (synthetic or not message.strip()) and path is not None and path.is_file():
        return finding_signature(signature_of_file(path), message) if synthetic else signature_of_file(path)
    return signature_of(message)


def failures_of_run(journal: TriageJournal, run_id: int) -> list[Failure]:
    """The failures of a run with their signatures (computed once, then read from the store)."""
    known = journal.stored_failures(run_id)
    if known is not None:
        return known
    jobs = {j.id: j for j in journal.jobs_of_run(run_id)}
    bad = journal.bad_outcomes(run_id)
    out = []
    for o in bad:
        job = jobs.get(o.job_id)
        sig = _signature(o.message, job.log_path if job else "", o.test_id.startswith("["))
        out.append(Failure(o.test_id, sig, run_id, o.suite))
    if out:
        journal.failures_found(run_id, out)  # unless another triage raced us to it
    return out


