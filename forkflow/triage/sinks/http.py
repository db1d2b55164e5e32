"""An httpx client for forge APIs: retries with backoff on 429/5xx, tokens kept out of output.

The token lives only in the request headers.  Messages, logs and exceptions name the method,
the path and the status, never a header; `redact` scrubs the token from any text that might
echo it (a server error page, say) before it reaches a person.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from forkflow.errors import UserError
from forkflow.triage.sinks.base import SinkError

log = logging.getLogger("forkflow.triage.sinks")

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class ForgeClient:
    """One forge, one token.  `request` retries what is safe to retry."""

    def __init__(self, base_url: str, token: str, auth_header: str, auth_prefix: str = "", *,
                 what: str = "the forge", retries: int = 5, backoff: float = 0.5,
                 max_backoff: float = 30.0, timeout: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._token = token
        self.what = what
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, headers={
            auth_header: f"{auth_prefix}{token}", "Accept": "application/json",
            "User-Agent": "forkflow-triage"})

    def redact(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def close(self) -> None:
        self._http.close()

    def _delay(self, attempt: int, resp: httpx.Response | None) -> float:
        if resp is not None:
            after = str(resp.headers.get("retry-after") or "")
            if after.strip().isdigit():
                return float(min(float(after), self.max_backoff))
        return float(min(self.backoff * (2 ** attempt), self.max_backoff))

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: Any = None, recover: Callable[[], Any] | None = None) -> Any:
        """The decoded JSON answer.  Retries 429/5xx and transport errors with backoff.

        `recover` makes a non-idempotent call safe: before each retry it looks for the effect of
        the earlier attempt (an issue created though its answer was lost) and returns it.
        """
        for attempt in range(self.retries + 1):
            if attempt and recover is not None:
                found = recover()
                if found is not None:
                    log.info("%s %s: the earlier attempt had succeeded", method, path)
                    return found
            try:
                resp = self._http.request(method, path, params=params, json=json)
            except httpx.TransportError as e:
                log.warning("%s %s: %s (attempt %d)", method, path, type(e).__name__, attempt + 1)
                if attempt == self.retries:
                    raise SinkError(f"{self.what} unreachable for {method} {path} after "
                                    f"{attempt + 1} attempts ({type(e).__name__}); re-run later") from None
                self._sleep(self._delay(attempt, None))
                continue
            log.info("%s %s -> %d", method, path, resp.status_code)
            if resp.status_code in RETRY_STATUS or _rate_limited(resp):
                if attempt == self.retries:
                    raise SinkError(f"{self.what} answered {resp.status_code} to {method} {path} "
                                    f"{attempt + 1} times; nothing was lost, re-run later")
                self._sleep(self._delay(attempt, resp))
                continue
            if resp.status_code in (401, 403, 404):
                raise self._permission_error(method, path, resp)
            if resp.status_code >= 400:
                raise SinkError(f"{self.what} refused {method} {path} ({resp.status_code}): "
                                f"{self.redact(resp.text[:200])}")
            if 300 <= resp.status_code < 400:  # not followed: the token would go where it points
                where = self.redact(str(resp.headers.get("location", "")))[:200] or "no Location"
                raise SinkError(f"{self.what} answered {resp.status_code} (moved to {where}) to {method} "
                                f"{path}: the repository was renamed or moved; update [triage] in "
                                "forkflow.toml to its new name and retry")
            return self._json(method, path, resp)
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, resp: httpx.Response) -> Any:
        """The JSON body, or a SinkError when the answer is not JSON (a proxy's or SSO login's
        HTML page): that used to exit 3 (issue 13)."""
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            kind = str(resp.headers.get("content-type", "no content type")).split(";")[0]
            raise SinkError(f"{self.what} answered {resp.status_code} with {kind}, not JSON, to {method} "
                            f"{path} (a proxy or login page?): {self.redact(resp.text[:120])!r}; check "
                            "the API URL in [triage] and retry") from None

    def _permission_error(self, method: str, path: str, resp: httpx.Response) -> UserError:
        if resp.status_code == 401:
            return UserError(f"{self.what} rejected the token (401 on {method} {path}); set a valid "
                             "token in the environment variable named by [triage] and retry")
        return UserError(f"the token cannot {method} {path} on {self.what} ({resp.status_code}); "
                         "give it permission to read and write issues, or check the repository "
                         "name in [triage], and retry")


def _rate_limited(resp: httpx.Response) -> bool:
    # GitHub's secondary rate limit answers 403 with Retry-After or no remaining quota
    return resp.status_code == 403 and (
        "retry-after" in resp.headers or resp.headers.get("x-ratelimit-remaining") == "0")
