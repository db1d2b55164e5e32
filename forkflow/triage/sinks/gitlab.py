"""Tracking issues on GitLab (REST v4): list by label, create, edit, note, close."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from forkflow.triage.sinks.base import IssueDraft, IssueRef, forge_body, key_in
from forkflow.triage.sinks.http import ForgeClient


class GitLabSink:
    name = "gitlab"

    def __init__(self, project: str, token: str, api: str = "https://gitlab.com/api/v4",
                 label: str = "forkflow", **client_opts: Any) -> None:
        self.project = quote(project, safe="")  # "group/name" or a numeric id
        self.label = label
        self.client = ForgeClient(api, token, "PRIVATE-TOKEN", what=f"GitLab ({project})",
                                  **client_opts)

    @property
    def _base(self) -> str:
        return f"/projects/{self.project}/issues"

    def _ref(self, issue: dict[str, Any]) -> IssueRef:
        return IssueRef(self.name, str(issue["iid"]), issue.get("web_url", ""),
                        issue.get("state") == "opened")

    def find(self, key: str) -> IssueRef | None:
        page = 1
        while True:
            batch = self.client.request("GET", self._base, params={
                "labels": self.label, "per_page": 100, "page": page, "scope": "all"})
            for issue in batch or []:
                if key_in(issue.get("description") or "") == key:
                    return self._ref(issue)
            if not batch or len(batch) < 100:
                return None
            page += 1

    def create(self, draft: IssueDraft) -> IssueRef:
        labels = ",".join(sorted({self.label, *draft.labels}))
        issue = self.client.request(
            "POST", self._base,
            json={"title": draft.title, "description": forge_body(draft),
                  "labels": labels},
            recover=lambda: self.find(draft.key))
        return issue if isinstance(issue, IssueRef) else self._ref(issue)

    def update(self, ref: IssueRef, draft: IssueDraft, comment: str) -> IssueRef:
        body: dict[str, Any] = {"title": draft.title,
                                "description": forge_body(draft)}
        if not ref.open:
            body["state_event"] = "reopen"
        issue = self.client.request("PUT", f"{self._base}/{ref.id}", json=body)
        if comment:
            self.client.request("POST", f"{self._base}/{ref.id}/notes", json={"body": comment})
        return self._ref(issue)

    def close(self, ref: IssueRef, comment: str) -> IssueRef:
        if comment:
            self.client.request("POST", f"{self._base}/{ref.id}/notes", json={"body": comment})
        issue = self.client.request("PUT", f"{self._base}/{ref.id}", json={"state_event": "close"})
        return self._ref(issue)
