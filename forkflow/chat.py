"""One call to an OpenAI-compatible `/chat/completions` endpoint: the conflict resolver's agent
and triage's suggestion agent both speak it.  httpx is imported on the first call, so the
commands that never call an agent do not pay for it."""
from __future__ import annotations

import json
import threading
from collections.abc import Sequence


class ChatError(Exception):
    """The endpoint did not give an answer: `kind` is "timeout" or "error"; `body` what it sent."""

    def __init__(self, kind: str, detail: str, body: str = "") -> None:
        super().__init__(detail)
        self.kind, self.detail, self.body = kind, detail, body


MAX_ANSWER = 2 * 1024 * 1024  # bytes of response body read at most


def chat_completion(url: str, model: str, messages: Sequence[dict[str, str]], *, api_key: str | None,
                    timeout: float, max_bytes: int = MAX_ANSWER, **params: object) -> str:
    """The first choice's message content; ChatError for a transport, HTTP or shape failure.

    `timeout` bounds the whole call, not each read: an endpoint that trickles a byte a second
    cannot hold the caller (and the ingest lock) past it; a body over `max_bytes` is an error
    (issue 13, item 9)."""
    endpoint = url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"model": model, **params, "messages": list(messages)}
    box: dict[str, object] = {}
    worker = threading.Thread(target=_post, args=(endpoint, body, headers, timeout, max_bytes, box),
                              daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        client = box.get("client")
        if client is not None:
            client.close()  # type: ignore[attr-defined]  # ends the reader's wait early
        raise ChatError("timeout", f"no answer within {timeout:g}s")
    failure = box.get("failure")
    if isinstance(failure, ChatError):
        raise failure
    status, text = box["status"], str(box["text"])
    if status != 200:
        raise ChatError("error", f"HTTP {status} from {endpoint}", text[:2000])
    try:
        content = json.loads(text)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        content = None
    if not isinstance(content, str):
        raise ChatError("error", "not an OpenAI-style chat completion", text[:2000])
    return content


def _post(endpoint: str, body: dict[str, object], headers: dict[str, str], timeout: float,
          max_bytes: int, box: dict[str, object]) -> None:
    """One POST, its body read in chunks up to `max_bytes`; results and failures go in `box`."""
    import httpx

    try:
        with httpx.Client(timeout=timeout) as client:
            box["client"] = client
            with client.stream("POST", endpoint, json=body, headers=headers) as r:
                data = bytearray()
                for chunk in r.iter_bytes():
                    data += chunk
                    if len(data) > max_bytes:
                        box["failure"] = ChatError("error", f"answer larger than {max_bytes} bytes",
                                                   data[:2000].decode("utf-8", "replace"))
                        return
                box["status"] = r.status_code
                box["text"] = data.decode(r.encoding or "utf-8", "replace")
    except httpx.TimeoutException:
        box["failure"] = ChatError("timeout", f"no answer within {timeout:g}s")
    except httpx.HTTPError as e:
        box["failure"] = ChatError("error", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001  (a closed client mid-read, on the timeout path)
        box["failure"] = ChatError("error", f"{type(e).__name__}: {e}")
