"""Tracking issues as Markdown files in a folder (the default sink): one file per group."""
from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from forkflow.triage.sinks.base import IssueDraft, IssueRef, forge_body, forge_title, key_in


class MarkdownSink:
    name = "markdown"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.md"

    def _write(self, path: Path, text: str) -> None:
        # write then rename: a reader never sees half a file
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".md")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)

    def _ref(self, key: str, is_open: bool) -> IssueRef:
        path = self._path(key)
        return IssueRef(self.name, path.name, path.resolve().as_uri(), is_open)

    def find(self, key: str) -> IssueRef | None:
        path = self._path(key)
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        if key_in(text) != key:
            return None
        return self._ref(key, "\nstate: closed\n" not in text.split("\n---\n", 1)[0] + "\n")

    def _render(self, draft: IssueDraft, state: str, log: list[str]) -> str:
        head = f"---\nstate: {state}\nlabels: {', '.join(draft.labels)}\n---\n"
        history = "\n## History\n\n" + "\n".join(log) + "\n" if log else ""
        marked, body = forge_body(draft).split("\n", 1)
        return f"{head}{marked}\n# {forge_title(draft.title)}\n\n{body}\n{history}"

    def _history(self, key: str) -> list[str]:
        return self._history_of(self._path(key))

    def _history_of(self, path: Path) -> list[str]:
        if not path.is_file():
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
        part = text.split("\n## History\n\n", 1)
        return [ln for ln in part[1].split("\n") if ln.strip()] if len(part) == 2 else []

    @staticmethod
    def _stamp(text: str) -> str:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return f"- {now}: " + " ".join(text.split())

    def create(self, draft: IssueDraft) -> IssueRef:
        existing = self.find(draft.key)
        if existing is not None:
            return existing
        self._write(self._path(draft.key), self._render(draft, "open", [self._stamp("opened")]))
        return self._ref(draft.key, True)

    def update(self, ref: IssueRef, draft: IssueDraft, comment: str) -> IssueRef:
        # the issue's own file: a group keyed again by newer signature rules keeps its file
        path = self.folder / Path(ref.id).name if ref.id else self._path(draft.key)
        log = self._history_of(path) + ([self._stamp(comment)] if comment else [])
        self._write(path, self._render(draft, "open", log))
        return IssueRef(self.name, path.name, path.resolve().as_uri(), True)

    def close(self, ref: IssueRef, comment: str) -> IssueRef:
        path = self.folder / ref.id
        text = path.read_text(encoding="utf-8", errors="replace")
        head, _, rest = text.partition("\n---\n")
        head = head.replace("state: open", "state: closed")
        stamp = self._stamp(comment or "closed")
        rest = rest + ("" if "\n## History\n\n" in rest else "\n## History\n\n") + stamp + "\n"
        self._write(path, f"{head}\n---\n{rest}")
        return IssueRef(self.name, ref.id, ref.url, False)
