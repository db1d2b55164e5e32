"""Resolver rules: each rule's record on this fork (its past answers against the files the fork's
engineers committed) and whether its answers land alone or wait for a person (conflicts/trust.py).
Read-only: the table is what the last backtest stored (`forkflow ingest` at its first conflict,
or `forkflow conflicts rules --refresh`)."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from forkflow.conflicts.rulebook import load_book
from forkflow.conflicts.rules_view import rule_rows
from forkflow.conflicts.trust import TrustSettings, trust_settings
from forkflow.errors import UserError
from forkflow.web.render import both, emptiness, page
from forkflow.web.source import Source

router = APIRouter()

FILL_HINT = ("no backtest yet: `forkflow conflicts rules` replays the fork's past picks and stores each "
             "rule's record (`forkflow ingest` does too, at its first conflict)")


@both(router, "/ingestion/rules")
def rules(request: Request) -> Response:
    src: Source = request.app.state.source
    settings, problem = TrustSettings(), ""
    if src.ctx is not None:
        try:
            settings = trust_settings(src.ctx.config)
        except UserError as e:  # shown on the page; the defaults stand meanwhile
            problem = str(e)
    with src.session() as s:
        fid = src.fork(s)
        found = load_book(s, fid) if fid is not None else None
    if found is None:
        return page(request, "ingestion_rules.html", {**emptiness(True, FILL_HINT), "rules": [],
                                                      "min_precision": settings.min_precision,
                                                      "min_cases": settings.min_cases, "problem": problem})
    book, when = found
    return page(request, "ingestion_rules.html", {
        **emptiness(False, FILL_HINT), "rules": rule_rows(book, settings), "files": book.files,
        "computed_at": when, "min_precision": settings.min_precision, "min_cases": settings.min_cases,
        "problem": problem})
