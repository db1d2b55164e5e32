"""One call to an OpenAI-compatible `/chat/completions` endpoint: the conflict resolver's agent
and triage's suggestion agent both speak it.  httpx is imported on the first call, so the
commands that never call an agent do not pay for it."""
from __future__ import annotations

from collections.abc import Sequence


class ChatError(Exception):
    """The endpoint did not give an answer: `kind` is "timeout" or "error"; `body` what it sent."""

    def __init__(self, kind: str, detail: str, body: str = "") -> None:
        super().__init__(detail)
        self.kind, self.detail, self.body = kind, detail, body


def chat_completion(url: str, model: str, messages: Sequence[dict[str, str]], *, api_key: str | None,
                    timeout: float, **params: object) -> str:
    """The first choice's message content; ChatError for a transport, HTTP or shape failure."""
    import httpx

    endpoint = url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.post(endpoint, json={"model": model, **params, "messages": list(messages)},
                       headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise ChatError("timeout", f"no answer within {timeout:g}s") from None
    except httpx.HTTPError as e:
        raise ChatError("error", f"{type(e).__name__}: {e}") from e
    if r.status_code != 200:
        raise ChatError("error", f"HTTP {r.status_code} from {endpoint}", r.text[:2000])
    try:
        content = r.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        content = None
    if not isinstance(content, str):
        raise ChatError("error", "not an OpenAI-style chat completion", r.text[:2000])
    return content
