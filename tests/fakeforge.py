"""A real local HTTP server with the subset of the GitHub, GitLab and OpenAI-compatible APIs
that forkflow uses, with fault injection (500, 429, lost answers) and token permissions.

    with FakeForge(tokens={"good": "write", "ro": "read"}) as forge:
        sink = GitHubSink("o/r", "good", api=forge.url + "/github")
        forge.fail("POST", r"/issues$", status=500, times=2, after_effect=True)

The forkflow code under test talks to it through httpx over TCP, exactly as to the real forge.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    after_effect: bool = False  # do the work, then answer `status` (the answer is lost)
    retry_after: str | None = None


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class State:
    tokens: dict[str, str]                      # token -> "write" | "read"
    issues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repo -> issues
    comments: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    chat_replies: list[str] = field(default_factory=list)
    chat_prompts: list[list[dict[str, str]]] = field(default_factory=list)
    pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repo -> pull/merge requests
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    state: State

    def log_message(self, *_args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[len("Bearer "):]
        return self.headers.get("PRIVATE-TOKEN")

    def _handle(self, method: str) -> None:
        st = self.state
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        with st.lock:
            st.requests.append(Request(method, url.path, dict(self.headers), body))
            fault = next((f for f in st.faults if f.times > 0 and f.method == method
                          and f.path.search(url.path)), None)
            if fault:
                fault.times -= 1
        if fault and not fault.after_effect:
            hdr = {"Retry-After": fault.retry_after} if fault.retry_after else None
            return self._send(fault.status, {"message": "injected"}, hdr)
        perm = st.tokens.get(self._token() or "")
        if url.path.endswith("/chat/completions"):  # a local model endpoint needs no key
            perm = "write"
        if perm is None:
            return self._send(401, {"message": "Bad credentials"})
        if method != "GET" and perm != "write":
            return self._send(403, {"message": "Resource not accessible by integration"})
        status, doc = self._route(method, unquote(url.path), parse_qs(url.query),
                                  json.loads(body) if body else {})
        if fault:  # the work is done but the answer is lost
            return self._send(fault.status, {"message": "injected after effect"})
        self._send(status, doc)

    def _route(self, method: str, path: str, query: dict[str, list[str]],
               doc: dict[str, Any]) -> tuple[int, Any]:
        m = re.fullmatch(r"/(github|gitlab)/(?:repos|projects)/([^/]+/[^/]+|\d+)/(?:pulls|merge_requests)"
                         r"(?:/(\d+))?(/reviews|/approvals)?", path)
        if m:
            return self._pull(m[1], method, m[2], int(m[3]) if m[3] else None, m[4], doc)
        m = re.fullmatch(r"/github/repos/([^/]+/[^/]+)/issues(?:/(\d+))?(/comments)?", path)
        if m:
            return self._github(method, m[1], int(m[2]) if m[2] else None, bool(m[3]), query, doc)
        m = re.fullmatch(r"/gitlab/projects/([^/]+/[^/]+|\d+)/issues(?:/(\d+))?(/notes)?", path)
        if m:
            return self._gitlab(method, m[1], int(m[2]) if m[2] else None, bool(m[3]), query, doc)
        if path.endswith("/chat/completions") and method == "POST":
            with self.state.lock:
                self.state.chat_prompts.append(doc.get("messages", []))
                reply = self.state.chat_replies.pop(0) if self.state.chat_replies else ""
            return 200, {"choices": [{"message": {"role": "assistant", "content": reply}}]}
        return 404, {"message": "Not Found"}

    def _pull(self, forge: str, method: str, repo: str, number: int | None, sub: str | None,
              doc: dict[str, Any]) -> tuple[int, Any]:
        """Pull requests (GitHub) and merge requests (GitLab): open, read, reviews/approvals."""
        with self.state.lock:
            pulls = self.state.pulls.setdefault(repo, [])
            if number is None and method == "POST":
                pr = {"number": len(pulls) + 1, "title": doc["title"], "body": doc.get("body", doc.get("description", "")),
                      "head": doc.get("head", doc.get("source_branch")), "base": doc.get("base", doc.get("target_branch")),
                      "state": "open", "merged": False, "approved": False}
                pulls.append(pr)
                return 201, _pull_view(forge, pr)
            found = [p for p in pulls if p["number"] == number]
            if not found or method != "GET":
                return 404, {"message": "Not Found"}
            pr = found[0]
            if sub == "/reviews":
                return 200, [{"state": "APPROVED"}] if pr["approved"] else []
            if sub == "/approvals":
                return 200, {"approved": pr["approved"]}
            return 200, _pull_view(forge, pr)

    def _page(self, items: list[dict[str, Any]], query: dict[str, list[str]]) -> list[dict[str, Any]]:
        per = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        return items[(page - 1) * per: page * per]

    def _github(self, method: str, repo: str, number: int | None, comments: bool,
                query: dict[str, list[str]], doc: dict[str, Any]) -> tuple[int, Any]:
        st = self.state
        with st.lock:
            issues = st.issues.setdefault(repo, [])
            if number is None and method == "GET":
                label = query.get("labels", [""])[0]
                sel = [i for i in issues if not label or label in i["labels"]]
                return 200, self._page([_gh_view(i) for i in sel], query)
            if number is None and method == "POST":
                issue = {"number": len(issues) + 1, "title": doc["title"], "body": doc.get("body", ""),
                         "labels": list(doc.get("labels", [])), "state": "open"}
                issues.append(issue)
                return 201, _gh_view(issue)
            assert number is not None
            found = [i for i in issues if i["number"] == number]
            if not found:
                return 404, {"message": "Not Found"}
            issue = found[0]
            if comments and method == "POST":
                st.comments.setdefault((repo, number), []).append(doc["body"])
                return 201, {"body": doc["body"]}
            if method == "PATCH":
                issue.update({k: v for k, v in doc.items() if k in ("title", "body", "state")})
                return 200, _gh_view(issue)
        return 405, {"message": "method not allowed"}

    def _gitlab(self, method: str, project: str, iid: int | None, notes: bool,
                query: dict[str, list[str]], doc: dict[str, Any]) -> tuple[int, Any]:
        st = self.state
        with st.lock:
            issues = st.issues.setdefault(project, [])
            if iid is None and method == "GET":
                label = query.get("labels", [""])[0]
                sel = [i for i in issues if not label or label in i["labels"]]
                return 200, self._page([_gl_view(i) for i in sel], query)
            if iid is None and method == "POST":
                issue = {"number": len(issues) + 1, "title": doc["title"],
                         "body": doc.get("description", ""),
                         "labels": [x for x in str(doc.get("labels", "")).split(",") if x],
                         "state": "open"}
                issues.append(issue)
                return 201, _gl_view(issue)
            assert iid is not None
            found = [i for i in issues if i["number"] == iid]
            if not found:
                return 404, {"message": "404 Not found"}
            issue = found[0]
            if notes and method == "POST":
                st.comments.setdefault((project, iid), []).append(doc["body"])
                return 201, {"body": doc["body"]}
            if method == "PUT":
                if "description" in doc:
                    issue["body"] = doc["description"]
                if "title" in doc:
                    issue["title"] = doc["title"]
                event = doc.get("state_event")
                if event in ("close", "reopen"):
                    issue["state"] = "closed" if event == "close" else "open"
                return 200, _gl_view(issue)
        return 405, {"message": "method not allowed"}

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")


def _gh_view(i: dict[str, Any]) -> dict[str, Any]:
    return {"number": i["number"], "title": i["title"], "body": i["body"], "state": i["state"],
            "labels": [{"name": x} for x in i["labels"]],
            "html_url": f"https://github.example/issues/{i['number']}"}


def _pull_view(forge: str, p: dict[str, Any]) -> dict[str, Any]:
    if forge == "github":
        return {"number": p["number"], "title": p["title"], "body": p["body"], "merged": p["merged"],
                "state": "closed" if p["state"] != "open" else "open", "head": {"ref": p["head"]},
                "base": {"ref": p["base"]}, "html_url": f"https://github.example/pull/{p['number']}"}
    return {"iid": p["number"], "title": p["title"], "description": p["body"], "source_branch": p["head"],
            "target_branch": p["base"], "state": {"open": "opened"}.get(p["state"], p["state"]),
            "web_url": f"https://gitlab.example/-/merge_requests/{p['number']}"}


def _gl_view(i: dict[str, Any]) -> dict[str, Any]:
    return {"iid": i["number"], "title": i["title"], "description": i["body"],
            "state": "opened" if i["state"] == "open" else "closed", "labels": i["labels"],
            "web_url": f"https://gitlab.example/-/issues/{i['number']}"}


class FakeForge:
    """Start with `with FakeForge(...) as forge:`; `forge.url` is http://127.0.0.1:PORT."""

    def __init__(self, tokens: dict[str, str] | None = None) -> None:
        self.state = State(tokens=dict(tokens or {"good-token": "write"}))
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeForge:
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(self, method: str, path: str, *, status: int, times: int = 1,
             after_effect: bool = False, retry_after: str | None = None) -> None:
        with self.state.lock:
            self.state.faults.append(Fault(method, re.compile(path), status, times, after_effect,
                                           retry_after))

    def issues(self, repo: str) -> list[dict[str, Any]]:
        with self.state.lock:
            return [dict(i) for i in self.state.issues.get(repo, [])]

    def comments(self, repo: str, number: int) -> list[str]:
        with self.state.lock:
            return list(self.state.comments.get((repo, number), []))

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        with self.state.lock:
            return [dict(p) for p in self.state.pulls.get(repo, [])]

    def set_pull(self, repo: str, number: int, **changes: Any) -> None:
        """Play the reviewer: approved=True, or state="merged" / "closed" (merged sets merged=True)."""
        with self.state.lock:
            pr = next(p for p in self.state.pulls[repo] if p["number"] == number)
            pr.update(changes)
            if changes.get("state") == "merged":
                pr["merged"] = True

    def requests(self) -> list[Request]:
        with self.state.lock:
            return list(self.state.requests)
