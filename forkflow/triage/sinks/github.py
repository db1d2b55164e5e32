"""Tracking issues on GitHub (REST v3): list by label, create, edit, comment, close."""
from __future__ import annotations

from typing import Any

from forkflow.triage.sinks.base import IssueDraft, IssueRef, forge_body, key_in
from forkflow.triage.sinks.http import ForgeClient


class GitHubSink:
    name = "github"

    def __init__(self, repo: str, token: str, api: str = "https://api.github.com",
                 label: str = "forkflow", **client_opts: Any) -> None:
        self.repo = repo
        self.label = label
        self.client = ForgeClient(api, token, "Authorization", "Bearer ",
                                  what=f"GitHub ({repo})", **client_opts)

    def _ref(self, issue: dict[str, Any]) -> IssueRef:
        return IssueRef(self.name, str(issue["number"]), issue.get("html_url", ""),
                        issue.get("state") == "open")

    def _issues(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        page = 1
        while True:
            batch = self.client.request("GET", f"/repos/{self.repo}/issues", params={
                "state": "all", "labels": self.label, "per_page": 100, "page": page})
            out += [i for i in batch or [] if "pull_request" not in i]
            if not batch or len(batch) < 100:
                return out
            page += 1

    def find(self, key: str) -> IssueRef | None:
        for issue in self._issues():
            if key_in(issue.get("body") or "") == key:
                return self._ref(issue)
        return None

    def create(self, draft: IssueDraft) -> IssueRef:
        labels = sorted({self.label, *draft.labels})
        issue = self.client.request(
            "POST", f"/repos/{self.repo}/issues",
            json={"title": draft.title, "body": forge_body(draft), "labels": labels},
            recover=lambda: self.find(draft.key))
        return issue if isinstance(issue, IssueRef) else self._ref(issue)

    def update(self, ref: IssueRef, draft: IssueDraft, comment: str) -> IssueRef:
        issue = self.client.request("PATCH", f"/repos/{self.repo}/issues/{ref.id}", json={
            "title": draft.title, "body": forge_body(draft), "state": "open"})
        if comment:
            self.client.request("POST", f"/repos/{self.repo}/issues/{ref.id}/comments",
                                json={"body": comment})
        return self._ref(issue)

    def close(self, ref: IssueRef, comment: str) -> IssueRef:
        if comment:
            self.client.request("POST", f"/repos/{self.repo}/issues/{ref.id}/comments",
                                json={"body": comment})
        issue = self.client.request("PATCH", f"/repos/{self.repo}/issues/{ref.id}",
                                    json={"state": "closed"})
        return self._ref(issue)
