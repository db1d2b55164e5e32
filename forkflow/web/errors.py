"""Errors of the dashboard: each one maps to one HTTP status in `app.py`."""
from __future__ import annotations

from forkflow.errors import UserError


class NotFound(UserError):
    """An id, name or sha the store does not know (404)."""


class Forbidden(UserError):
    """An action without the operator's token, or with a wrong one (403)."""


class Unavailable(UserError):
    """An action this dashboard cannot do as started (409), e.g. without the fork's checkout."""
