"""The store on real SQLite and on a real PostgreSQL server (FORKFLOW_TEST_POSTGRES, started by .ci/run)."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import text

from forkflow.errors import UserError
from forkflow.ledger import records as ledger_records
from forkflow.models import Better, Disposition, MetricPoint, RecordedDecision, Sha
from forkflow.regress import records as regress_records
from forkflow.store import forks
from forkflow.ledger.records import Snapshot
from forkflow.store.session import Store


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_store_migrates_to_every_head(store_url: str) -> None:
    store = Store.open(store_url)
    names = set(store.table_names())
    assert {"forks", "dispositions", "snapshots", "commit_facts", "ledger_cache", "metric_points",
            "alembic_version"} <= names
    Store.open(store_url).dispose()  # a second open changes nothing
    store.dispose()


def test_store_transaction_rolls_back(store_url: str) -> None:
    store = Store.open(store_url)
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
    with pytest.raises(RuntimeError):
        with store.session_scope() as s:
            ledger_records.record_decision(s, fid, RecordedDecision(Sha("a" * 40), Disposition.SKIPPED, "why"))
            raise RuntimeError("killed half-way")
    with store.session_scope() as s:
        assert ledger_records.recorded_decisions(s, fid) == []
    store.dispose()


def test_store_decisions_upsert_and_snapshots_never_duplicate(store_url: str) -> None:
    store = Store.open(store_url)
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        ledger_records.record_decision(s, fid, RecordedDecision(Sha("a" * 40), Disposition.DEFERRED, "chain x"))
    with store.session_scope() as s:
        ledger_records.record_decision(s, fid, RecordedDecision(Sha("a" * 40), Disposition.SKIPPED, "empty pick"))
    with store.session_scope() as s:
        got = ledger_records.recorded_decisions(s, fid)
    assert got == [RecordedDecision(Sha("a" * 40), Disposition.SKIPPED, "empty pick")]
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    snap = Snapshot(at, "backfill", Sha("f" * 40), Sha("u" * 40), Sha("i" * 40), True, 3.5, 7, {"pending": 7})
    for _ in range(2):
        with store.session_scope() as s:
            ledger_records.save_snapshot(s, fid, snap)
    with store.session_scope() as s:
        assert ledger_records.snapshots(s, fid) == [snap]
    store.dispose()


def test_store_decisions_in_batches_insert_replace_and_keep_the_last(store_url: str) -> None:
    store = Store.open(store_url)
    shas = [Sha(f"{i:040x}") for i in range(200)]  # more than one statement's worth
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        ledger_records.record_decisions(s, fid, [RecordedDecision(x, Disposition.DEFERRED, "chain x") for x in shas])
    with store.session_scope() as s:
        ledger_records.record_decisions(s, fid, [RecordedDecision(shas[0], Disposition.SKIPPED, "empty"),
                                          RecordedDecision(shas[0], Disposition.PICKED, "", (Sha("c" * 40),)),
                                          RecordedDecision(Sha("d" * 40), Disposition.SKIPPED, "new")])
    with store.session_scope() as s:
        got = {d.sha: d for d in ledger_records.recorded_decisions(s, fid)}
    assert len(got) == 201 and got[shas[1]].reason == "chain x"
    assert got[shas[0]] == RecordedDecision(shas[0], Disposition.PICKED, "", (Sha("c" * 40),))
    assert got[Sha("d" * 40)].disposition is Disposition.SKIPPED
    store.dispose()


def test_store_metric_series_order(store_url: str) -> None:
    store = Store.open(store_url)
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        pts = [MetricPoint("mm.tflops", Sha(f"{i:040x}"), 100.0 - i, "TFLOP/s", Better.HIGHER,
                           (1.0, 2.0), commit_date=1000 - i) for i in range(3)]
        regress_records.add_metric_points(s, fid, pts)
    with store.session_scope() as s:
        series = regress_records.metric_series(s, fid, "mm.tflops")
        assert [p.commit_date for p in series] == [998, 999, 1000]
        assert regress_records.metric_names(s, fid, "mm.*") == ["mm.tflops"]
    store.dispose()


def test_store_refuses_newer_schema(store_url: str) -> None:
    store = Store.open(store_url)
    with store.engine.begin() as c:
        c.execute(text("INSERT INTO alembic_version (version_num) VALUES ('zzzz_newer')"))
    store.dispose()
    with pytest.raises(UserError, match="newer forkflow"):
        Store.open(store_url)


def test_store_bad_url_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="postgresql"):
        Store.open("nosuchdb://x/y")
    with pytest.raises(UserError, match="cannot open the store"):
        Store.open("postgresql+psycopg://nobody@127.0.0.1:1/none")


def test_store_upgrade_reads_an_old_held_commits_chain_once(store_url: str) -> None:
    """A store written before the chain column said a held commit's chain only in its reason
    ("chain NAME: ..."); the upgrade moves it into the column, after which the reason is text only."""
    from alembic import command
    from alembic.config import Config as AlembicConfig
    from sqlalchemy import create_engine

    from forkflow.store.session import MIGRATIONS

    engine = create_engine(store_url)
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "decisions_0002")
        command.upgrade(cfg, "heads")
        command.downgrade(cfg, "decisions_0002")  # the old schema, as an old forkflow left it
        conn.execute(text("INSERT INTO forks (name, created_at) VALUES ('f', CURRENT_TIMESTAMP)"))
        fid = conn.execute(text("SELECT id FROM forks WHERE name = 'f'")).scalar_one()
        for sha, reason, source in (("a", "chain warp-spec: waits for 0123456789ab", "auto"),
                                    ("b", "in review: https://forge.example/pr/7", "auto"),
                                    ("c", "chain not-a-chain: a person's words", "person"),
                                    ("d", "conflict in x.py", "auto")):
            conn.execute(text("INSERT INTO dispositions (fork_id, upstream_sha, disposition, reason, fork_shas, "
                              "decided_at, source) VALUES (:f, :s, 'DEFERRED', :r, '[]', CURRENT_TIMESTAMP, :src)"),
                         {"f": fid, "s": sha * 40, "r": reason, "src": source})
    engine.dispose()
    store = Store.open(store_url)
    with store.session_scope() as s:
        chains = {d.sha[0]: d.chain for d in ledger_records.recorded_decisions(s, fid)}
    assert chains == {"a": "warp-spec", "b": "(in review)", "c": "", "d": ""}
    store.dispose()


def test_store_keeps_a_held_commits_chain_apart_from_its_reason(store_url: str) -> None:
    store = Store.open(store_url)
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        ledger_records.record_decisions(s, fid, [
            RecordedDecision(Sha("a" * 40), Disposition.DEFERRED, "chain other: L1 failed", chain="ops"),
            RecordedDecision(Sha("b" * 40), Disposition.DEFERRED, "waits for a", chain="ops")])
    with store.session_scope() as s:
        got = {d.sha[0]: d.chain for d in ledger_records.recorded_decisions(s, fid)}
    assert got == {"a": "ops", "b": "ops"}  # the column is what counts, whatever the text says
    store.dispose()
