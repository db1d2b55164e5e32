"""Pure parsing of git output."""
from __future__ import annotations

from forkflow.models import Commit, Sha


def decode(raw: bytes) -> str:
    """Decode git output; invalid UTF-8 (a legacy commit message) becomes U+FFFD, never an error."""
    return raw.decode("utf-8", "replace")


def parse_log_z(raw: bytes) -> list[Commit]:
    """Parse `git log -z --format=%H%x1f%P%x1f%ct%x1f%an%x1f%B`."""
    commits: list[Commit] = []
    for record in raw.split(b"\0"):
        if not record.strip():
            continue
        fields = record.split(b"\x1f", 4)
        if len(fields) != 5:
            continue
        sha, parents, ct, author, message = fields
        text = decode(message).strip("\n")
        subject, _, body = text.partition("\n")
        commits.append(
            Commit(
                sha=Sha(decode(sha).strip()),
                parents=tuple(Sha(p) for p in decode(parents).split()),
                date=int(ct or 0),
                subject=subject.strip(),
                body=body.strip("\n"),
                author=decode(author),
            )
        )
    return commits
