"""forkflow: keep a downstream fork close to its upstream, with tiered validation."""
from __future__ import annotations

__version__ = "0.1.0"
