"""A real local HTTP server with the subset of the GitHub, GitLab and OpenAI-compatible APIs
that forkflow uses, with fault injection (500, 429, lost answers) and token permissions.

    with FakeForge(tokens={"good": "write", "ro": "read"}) as forge:
        sink = GitHubSink("o/r", "good", api=forge.url + "/github")
        forge.fail("POST", r"/issues$", status=500, times=2, after_effect=True)

The forkflow code under test talks to it through httpx over TCP, exactly as to the real forge.

Pull and merge requests are reviewed as on the forge: `forge.review(...)` (GitHub, with the
reviewer's author_association and the head it reviewed), `forge.approve(...)` and
`forge.member(...)` (GitLab approvals and project or group members), `forge.team(...)` (GitHub
team members).  Given `git_dir`, a request's head sha is its branch's tip there, as on the forge.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from forkflow.errors import GitError
from forkflow.git.run import run_git


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
    git_dir: str | None = None  # where requests' branches live (their head sha), when given
    teams: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # GitHub (org, slug) -> logins
    members: dict[tuple[str, int], int] = field(default_factory=dict)  # GitLab (project|group, user id) -> access
    user_ids: dict[str, int] = field(default_factory=dict)  # GitLab username -> id
    lock: threading.Lock = field(default_factory=threading.Lock)

    def head_sha(self, pr: dict[str, Any]) -> str:
        if pr.get("head_sha") is not None or self.git_dir is None:
            return str(pr.get("head_sha") or "")
        try:
            return run_git("rev-parse", "--verify", "-q", f"refs/heads/{pr['head']}", cwd=self.git_dir).strip()
        except GitError:
            return ""


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
            return self._pull(m[1], method, m[2], int(m[3]) if m[3] else None, m[4], doc, query)
        m = re.fullmatch(r"/github/orgs/([^/]+)/teams/([^/]+)/memberships/([^/]+)", path)
        if m and method == "GET":
            with self.state.lock:
                found = m[3] in self.state.teams.get((m[1], m[2]), set())
            return (200, {"state": "active", "role": "member"}) if found else (404, {"message": "Not Found"})
        m = re.fullmatch(r"/gitlab/(?:projects|groups)/([^/]+/[^/]+|[^/]+)/members/all/(\d+)", path)
        if m and method == "GET":
            with self.state.lock:
                level = self.state.members.get((m[1], int(m[2])))
            return (200, {"id": int(m[2]), "access_level": level}) if level else (404, {"message": "404 Not found"})
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
              doc: dict[str, Any], query: dict[str, list[str]]) -> tuple[int, Any]:
        """Pull requests (GitHub) and merge requests (GitLab): open, read, reviews/approvals."""
        with self.state.lock:
            pulls = self.state.pulls.setdefault(repo, [])
            if number is None and method == "POST":
                pr = {"number": len(pulls) + 1, "title": doc["title"], "body": doc.get("body", doc.get("description", "")),
                      "head": doc.get("head", doc.get("source_branch")), "base": doc.get("base", doc.get("target_branch")),
                      "state": "open", "merged": False, "head_sha": None, "reviews": [], "approved_by": [],
                      "mergeable_state": "clean", "approvals_required": 0, "detailed_merge_status": "mergeable"}
                pulls.append(pr)
                return 201, self._pull_view(forge, pr)
            found = [p for p in pulls if p["number"] == number]
            if not found or method != "GET":
                return 404, {"message": "Not Found"}
            pr = found[0]
            if sub == "/reviews":
                return 200, self._page(list(pr["reviews"]), query)
            if sub == "/approvals":
                left = max(0, pr["approvals_required"] - len(pr["approved_by"]))
                return 200, {"approved": left == 0 and bool(pr["approved_by"] or not pr["approvals_required"]),
                             "approvals_required": pr["approvals_required"], "approvals_left": left,
                             "has_approval_rules": pr["approvals_required"] > 0,
                             "approved_by": [{"user": dict(a["user"])} | ({"sha": a["sha"]} if a.get("sha") else {})
                                             for a in pr["approved_by"]]}
            return 200, self._pull_view(forge, pr)

    def _pull_view(self, forge: str, p: dict[str, Any]) -> dict[str, Any]:
        sha = self.state.head_sha(p)
        if forge == "github":
            return {"number": p["number"], "title": p["title"], "body": p["body"], "merged": p["merged"],
                    "state": "closed" if p["state"] != "open" else "open", "head": {"ref": p["head"], "sha": sha},
                    "base": {"ref": p["base"]}, "mergeable_state": p["mergeable_state"],
                    "html_url": f"https://github.example/pull/{p['number']}"}
        return {"iid": p["number"], "title": p["title"], "description": p["body"], "source_branch": p["head"],
                "target_branch": p["base"], "state": {"open": "opened"}.get(p["state"], p["state"]), "sha": sha,
                "detailed_merge_status": p["detailed_merge_status"],
                "web_url": f"https://gitlab.example/-/merge_requests/{p['number']}"}

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


def _gl_view(i: dict[str, Any]) -> dict[str, Any]:
    return {"iid": i["number"], "title": i["title"], "description": i["body"],
            "state": "opened" if i["state"] == "open" else "closed", "labels": i["labels"],
            "web_url": f"https://gitlab.example/-/issues/{i['number']}"}


class FakeForge:
    """Start with `with FakeForge(...) as forge:`; `forge.url` is http://127.0.0.1:PORT."""

    def __init__(self, tokens: dict[str, str] | None = None, git_dir: str | None = None) -> None:
        self.state = State(tokens=dict(tokens or {"good-token": "write"}), git_dir=git_dir)
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
        """Change a request: state="merged" / "closed" (merged sets merged=True), head_sha=,
        mergeable_state= (GitHub), approvals_required= or detailed_merge_status= (GitLab)."""
        with self.state.lock:
            pr = next(p for p in self.state.pulls[repo] if p["number"] == number)
            pr.update(changes)
            if changes.get("state") == "merged":
                pr["merged"] = True

    def head(self, repo: str, number: int) -> str:
        """The request's head sha, as the forge shows it."""
        with self.state.lock:
            return self.state.head_sha(next(p for p in self.state.pulls[repo] if p["number"] == number))

    def review(self, repo: str, number: int, login: str, state: str = "APPROVED", *,
               association: str = "MEMBER", commit: str | None = None) -> None:
        """A GitHub review by `login` (APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED) of `commit`
        (default: the request's head now), with that user's author_association."""
        sha = commit if commit is not None else self.head(repo, number)
        with self.state.lock:
            pr = next(p for p in self.state.pulls[repo] if p["number"] == number)
            pr["reviews"].append({"id": len(pr["reviews"]) + 1, "user": {"login": login}, "state": state,
                                  "commit_id": sha, "author_association": association,
                                  "submitted_at": f"2026-01-01T00:00:{len(pr['reviews']):02d}Z"})

    def _user_id(self, username: str) -> int:
        return self.state.user_ids.setdefault(username, 100 + len(self.state.user_ids))

    def approve(self, project: str, number: int, username: str, *, sha: str | None = None) -> None:
        """A GitLab approval by `username` (`sha`: the head it names, where the forge gives one)."""
        with self.state.lock:
            pr = next(p for p in self.state.pulls[project] if p["number"] == number)
            pr["approved_by"].append({"user": {"id": self._user_id(username), "username": username}, "sha": sha})

    def member(self, where: str, username: str, access_level: int = 30) -> None:
        """Make `username` a member of a GitLab project or group (30: Developer, 40: Maintainer)."""
        with self.state.lock:
            self.state.members[(where, self._user_id(username))] = access_level

    def team(self, org: str, slug: str, *logins: str) -> None:
        """The members of a GitHub team."""
        with self.state.lock:
            self.state.teams.setdefault((org, slug), set()).update(logins)

    def requests(self) -> list[Request]:
        with self.state.lock:
            return list(self.state.requests)
