"""The landing loop over forkflow's store, for one fork: the `IngestReader` and an `Ingestor` whose
journal and reader are the store's.  No `Context`: the commands (`landing/wired.py`) and replay's
scratch forks (`replay/engine.py`) both build it from a repository, a config, a store and a fork id.
"""
from __future__ import annotations

from collections.abc import Sequence

from forkflow.config import Config
from forkflow.conflicts import records as crecords
from forkflow.conflicts.provenance import People, people
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.git.pick import MemoryPicker
from forkflow.git.repo import Repo
from forkflow.landing import records
from forkflow.landing.gate import Gate
from forkflow.landing.ingest import IngestOptions, Ingestor, Reporter
from forkflow.landing.journal import Journal, StoreJournal
from forkflow.landing.plan import make_plan, resolve_until
from forkflow.landing.settings import IngestSettings, ingest_settings
from forkflow.ledger.build import build_ledger
from forkflow.models import OPEN_STATES, Ledger, Sha
from forkflow.planning.model import Plan
from forkflow.store.session import Store


class StoreIngestReader:
    """The `IngestReader` over forkflow's store, for one fork."""

    def __init__(self, repo: Repo, config: Config, store: Store, fork_id: int) -> None:
        self.repo, self.config, self.store, self.fork_id = repo, config, store, fork_id

    def ledger(self, fork_tip: Sha, upstream_tip: Sha) -> Ledger:
        return build_ledger(self.repo, self.config, self.store, self.fork_id, fork_tip=fork_tip,
                            upstream_tip=upstream_tip)

    def plan(self, ledger: Ledger, settings: IngestSettings, until: str | None, max_bundle: int | None,
             picker: MemoryPicker) -> Plan:
        return make_plan(self.repo, self.store, ledger, settings, until=resolve_until(self.repo, ledger, until),
                         max_bundle=max_bundle, picker=picker, probe_first=False)

    def unfinished_units(self) -> list[records.UnitRecord]:
        with self.store.session_scope() as s:
            records.interrupt_running(s, self.fork_id)
            return list(records.units(s, self.fork_id, OPEN_STATES))

    def failed_with(self, shas: Sequence[Sha]) -> list[records.UnitRecord]:
        with self.store.session_scope() as s:
            return records.failed_with(s, self.fork_id, shas)

    def close_conflicts_of(self, settled: set[Sha]) -> None:
        with self.store.session_scope() as s:
            open_ = {c.upstream_sha for c in crecords.conflicts(s, self.fork_id, "open")}
            crecords.close_conflicts(s, self.fork_id, sorted(open_ & settled))

    def lookup_resolution(self, key: str) -> tuple[list[str], str] | None:
        with self.store.connection_scope() as conn:
            return crecords.lookup_resolution(conn, key)

    def log_attempt(self, attempt: Attempt) -> None:
        with self.store.session_scope() as s:
            crecords.add_attempt(s, self.fork_id, attempt)

    def resolution_people(self, keys: Sequence[str]) -> dict[str, People]:
        with self.store.connection_scope() as conn:
            return people(conn, keys)


def store_ingestor(repo: Repo, config: Config, store: Store, fork_id: int, options: IngestOptions,
                   gate: Gate | None, reporter: Reporter | None = None, settings: IngestSettings | None = None,
                   journal: Journal | None = None) -> Ingestor:
    """An `Ingestor` over fork `fork_id` of the store, with `[ingest]` of `config`."""
    return Ingestor(repo, MemoryPicker(repo.path, batch_writes=True), gate,
                    journal or StoreJournal(store, fork_id), reporter, config=config,
                    settings=settings or ingest_settings(config), options=options,
                    reader=StoreIngestReader(repo, config, store, fork_id))
