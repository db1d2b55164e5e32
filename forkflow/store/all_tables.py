"""Import every schema module so that `Base.metadata` knows every table."""
from __future__ import annotations

import importlib
import pkgutil

import forkflow.store as _store_pkg

for _info in pkgutil.iter_modules(_store_pkg.__path__):
    if _info.name.startswith("schema"):
        importlib.import_module(f"forkflow.store.{_info.name}")
