"""A PostgreSQL store on an install without the PostgreSQL extra says what to install."""
from __future__ import annotations

import sys

import pytest

from forkflow.errors import UserError
from forkflow.store.session import Store


def test_a_postgres_url_without_its_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "psycopg" or m.startswith("psycopg.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    with pytest.raises(UserError, match=r'pip install "forkflow\[postgres\]"') as e:
        Store.open("postgresql+psycopg://team:secret@db.example/forkflow")
    assert "secret" not in str(e.value) and "\n" not in str(e.value)
