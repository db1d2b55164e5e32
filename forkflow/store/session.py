"""Open a store (SQLite file or PostgreSQL URL), migrate it, and hand out transactions."""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import re

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from forkflow.errors import StoreError, UserError

MIGRATIONS = Path(__file__).parent / "migrations"


LOCK_NAMESPACE = 0x666B666C  # "fkfl": the first key of every forkflow advisory lock (store/locks.py)
_REV = re.compile(r"^revision\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision\s*=\s*(.+)$", re.M)


def _script_revisions() -> tuple[set[str], set[str]]:
    """(every known revision, the heads) read from the migration files, without importing Alembic."""
    known: set[str] = set()
    parents: set[str] = set()
    for f in (MIGRATIONS / "versions").glob("*.py"):
        body = f.read_text(encoding="utf-8")
        rev = _REV.search(body)
        if rev is None:
            continue
        known.add(rev.group(1))
        down = _DOWN.search(body)
        if down:
            parents.update(re.findall(r"['\"]([^'\"]+)['\"]", down.group(1)))
    return known, known - parents


def _current_revisions(conn: Any) -> set[str]:
    if "alembic_version" not in inspect(conn).get_table_names():
        return set()
    return {row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))}


def _is_locked(e: BaseException) -> bool:
    text = str(e).lower()
    return "database is locked" in text or "could not obtain lock" in text or "lock timeout" in text


_GONE = ("server closed the connection", "terminating connection", "connection refused", "could not connect",
         "connection is closed", "the connection is lost", "consuming input failed", "connection timeout expired",
         "no connection to the server", "ssl connection has been closed")


def gone(e: BaseException) -> bool:
    """Whether a driver's error says the database went away (stopped, restarted, unreachable)."""
    if getattr(e, "connection_invalidated", False):
        return True
    text = str(getattr(e, "orig", e)).lower()
    return any(g in text for g in _GONE)


def went_away(url: str, e: BaseException) -> StoreError:
    """One line naming why: the database at `url` went away during the run."""
    first = next((line.strip() for line in str(getattr(e, "orig", e)).splitlines() if line.strip()), type(e).__name__)
    return StoreError(f"the store {redact(url)} went away ({scrub(first, url)[:200]}); this run stopped and its last "
                      "step was not recorded: check the database, then run again (what landed is re-read from git)")


def locked_error(url: str) -> UserError:
    return UserError(
        f"the store {redact(url)} is locked by another forkflow run; wait for it to finish "
        "(or raise FORKFLOW_LOCK_TIMEOUT) and retry"
    )


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user, sep, _ = creds.partition(":")
        return f"{scheme}://{user}:***@{host}" if sep else f"{scheme}://{user}@{host}"
    return url


def scrub(text: str, url: str) -> str:
    """`text` (a driver's error about `url`) without any piece of the URL's password.

    A raw `@` in the password makes the driver read the rest of it as the host name, and the
    error ("failed to resolve host 'rest@db'") then echoes it (issue 13, item 10)."""
    if "://" not in url or "@" not in url:
        return text
    creds = url.split("://", 1)[1].rsplit("@", 1)[0]
    if ":" not in creds:
        return text
    password = creds.split(":", 1)[1]
    pieces = [password] + [password.split("@", i)[-1] for i in range(1, password.count("@") + 1)]
    for piece in sorted({p for p in pieces if p}, key=len, reverse=True):
        text = text.replace(piece + "@", "***@").replace(piece, "***")
    return text


def _bad_password_hint(url: str) -> str:
    creds = url.split("://", 1)[-1].rsplit("@", 1)[0] if "@" in url else ""
    user, sep, password = creds.partition(":")
    if sep and "@" in password:
        return " (the password holds a raw '@': write it as %40 in the URL)"
    return ""


def insert_new(s: Session | Connection, table: Any, rows: Sequence[dict[str, Any]],
               update: Sequence[str] = (), keys: Sequence[str] = ()) -> None:
    """Insert `rows` into a table shared by every fork of the store (a cache keyed by commit or
    content): a row another process inserted meanwhile is kept (`ON CONFLICT DO NOTHING`), or its
    `update` columns are replaced by ours (`DO UPDATE`); `keys` names the unique columns (default:
    the primary key).  Two forks starting on one empty store
    write the same upstream commits' rows at once; a plain insert made one of them crash on the
    primary key."""
    if not rows:
        return
    conn = s.connection() if isinstance(s, Session) else s
    dialect = conn.dialect.name
    stmt: Any
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert
        stmt = pg_insert(table)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert
        stmt = sqlite_insert(table)
    else:  # pragma: no cover  (only SQLite and PostgreSQL stores are opened)
        raise StoreError(f"no upsert for the {dialect} dialect")
    keys = list(keys) or [c.name for c in table.primary_key.columns]
    if update:
        stmt = stmt.on_conflict_do_update(index_elements=keys, set_={c: stmt.excluded[c] for c in update})
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=keys)
    for i in range(0, len(rows), 500):
        conn.execute(stmt, list(rows[i:i + 500]))


Writer = Session | Connection  # a session's transaction, or a bare connection's (Store.connection_scope)


def connection_of(s: Writer) -> Connection:
    """The connection a statement runs on: the session's own, within its transaction."""
    return s.connection() if isinstance(s, Session) else s


class Store:
    """A migrated database and a session factory."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Store:
        """Open the store at `url`, creating and migrating it when needed."""
        engine = _make_engine(url, create=create)
        store = cls(engine, url)
        store.migrate(create=create)
        return store

    def _error(self, e: OperationalError) -> UserError | StoreError:
        """What a transaction's failure tells the user: the store is locked, or what went wrong."""
        if _is_locked(e):
            return locked_error(self.url)
        if gone(e):
            return went_away(self.url, e)
        return StoreError(f"store error on {redact(self.url)}: {scrub(str(e.orig), self.url)}")

    @contextmanager
    def connection_scope(self) -> Iterator[Connection]:
        """One transaction on a bare connection, for writes that are statements only (no ORM rows):
        a transaction of prepared statements costs a tenth of a session's (the landing journal
        writes hundreds a run).  Committed on success, rolled back on any error."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except OperationalError as e:
            raise self._error(e) from e

    @contextmanager
    def session_scope(self) -> Iterator[Session]:
        """One transaction: committed on success, rolled back on any error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except OperationalError as e:
            session.rollback()
            raise self._error(e) from e
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def migrate(self, create: bool = True) -> None:
        """Bring the schema to every head; refuse a store written by a newer forkflow."""
        known, heads = _script_revisions()
        try:
            with self.engine.begin() as conn:
                if self.engine.dialect.name == "postgresql":
                    # two first runs on an empty database would both create the tables (and one
                    # crash on pg_type_typname_nsp_index): one migrates, the other waits, then
                    # finds the schema current (issue 13, item 4)
                    conn.execute(text("SELECT pg_advisory_xact_lock(:ns, 0)"), {"ns": LOCK_NAMESPACE})
                current = _current_revisions(conn)
                if not current and not create:
                    raise UserError(f"no forkflow store at {redact(self.url)} (the database is empty); check "
                                    "--store, FORKFLOW_STORE or [store] url, or create it with forkflow init")
                newer = current - known
                if newer:
                    raise UserError(
                        f"the store {redact(self.url)} was written by a newer forkflow (schema "
                        f"{', '.join(sorted(newer))}); upgrade forkflow (pip install -U forkflow) "
                        "or point --store at another database"
                    )
                if current == heads:
                    return
                from alembic import command  # only when there is something to migrate
                from alembic.config import Config as AlembicConfig

                cfg = AlembicConfig()
                cfg.set_main_option("script_location", str(MIGRATIONS))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "heads")
        except OperationalError as e:
            if _is_locked(e):
                raise locked_error(self.url) from e
            raise UserError(f"cannot open the store {redact(self.url)}: {scrub(str(e.orig), self.url)}"
                            f"{_bad_password_hint(self.url)}; check --store or FORKFLOW_STORE") from None

    def table_names(self) -> list[str]:
        return inspect(self.engine).get_table_names()

    def dispose(self) -> None:
        self.engine.dispose()


def _make_engine(url: str, *, create: bool) -> Engine:
    kwargs: dict[str, Any] = {"future": True}
    timeout = float(os.environ.get("FORKFLOW_LOCK_TIMEOUT", "10"))
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            p = Path(path)
            if not create and not p.exists():
                raise UserError(f"no forkflow store at {p}; check --store, FORKFLOW_STORE or [store] url, "
                                "or create it with forkflow init --upstream URL --store URL")
            if not p.parent.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": timeout}
        if path in ("", ":memory:"):
            from sqlalchemy.pool import StaticPool

            kwargs["poolclass"] = StaticPool
            kwargs["connect_args"]["check_same_thread"] = False
    elif url.startswith("postgresql"):
        kwargs["connect_args"] = {"connect_timeout": 10,
                                  "options": f"-c lock_timeout={int(timeout * 1000)}"}
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except ImportError as e:  # a PostgreSQL URL on an install without its driver
        if url.startswith("postgresql"):
            raise UserError(f"the store {redact(url)} is PostgreSQL, whose driver is not installed "
                            f"({e.name or 'psycopg'}); install it: pip install \"forkflow[postgres]\"") from None
        raise UserError(f"cannot use store URL {redact(url)} ({scrub(str(e), url)}); pass a sqlite:/// or "
                        "postgresql+psycopg:// URL") from None
    except (SQLAlchemyError, ValueError) as e:
        raise UserError(f"cannot use store URL {redact(url)} ({scrub(str(e), url)}); pass a sqlite:/// or "
                        "postgresql+psycopg:// URL") from None
    if url.startswith("sqlite"):
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            try:
                cur.execute("PRAGMA journal_mode=WAL")
                # WAL stays consistent without an fsync per commit; ingest wrote thousands (issue 11)
                cur.execute("PRAGMA synchronous=NORMAL")
            except Exception:  # noqa: BLE001  (locked at open: the first write reports it)
                pass
            cur.close()
    return engine
