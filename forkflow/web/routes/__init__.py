"""One router per page; `ROUTERS` is what `create_app` mounts."""
from __future__ import annotations

from fastapi import APIRouter

from forkflow.web.routes import commits, conflicts, decisions, ingestion, l2, overview, triage, validation
from forkflow.web.routes import replay as replay_page
from forkflow.web.routes import rules

ROUTERS: tuple[APIRouter, ...] = (overview.router, ingestion.router, validation.router, l2.router,
                                  triage.router, commits.router, decisions.router, replay_page.router,
                                  rules.router, conflicts.router)
