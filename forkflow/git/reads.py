"""libgit2's process-wide object settings, for work that reads the same blobs many times.

By default libgit2 hashes every object it reads again to check it against its id (SHA-1 with
collision detection: half the CPU of an in-memory file merge on a real fork, issue 11) and keeps
no blob in its object cache (a file that a backlog changes 30 times is inflated from its pack,
delta chain and all, for each merge that reads it).  git itself checks ids only when objects
arrive (fetch, fsck), not on every read, and neither setting changes what is read.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pygit2
from pygit2.enums import ObjectType, Option

BLOB_CACHE_LIMIT = 4 << 20  # blobs up to this size stay in libgit2's cache (256 MiB in all, its default)

_depth = 0
_blob_limit = 0  # the blob cache limit outside quick_reads: libgit2's 0 until `cache_blobs` sets one


CACHE_OBJECT_MAX = 1 << 20  # blobs and trees up to this size stay cached in a picking process


def settle_for_picks() -> None:
    """The settings of a process that picks (set when `pick.py` is imported).

    Objects forkflow writes are built from objects it just read, so libgit2's re-check that every
    referenced object exists (one lookup per tree entry, per write) is pure cost.  libgit2 keeps
    parsed trees up to 4 KiB and no blobs in its object cache: a pick reads the same blobs (a
    file's upstream side is the base of the next commit's merge of it) and the same large folders
    again and again, each a walk down a delta chain of the alternates' packs (0.45 ms a blob)."""
    pygit2.settings.enable_strict_object_creation(False)
    cache_blobs(CACHE_OBJECT_MAX)  # and quick_reads comes back to it
    pygit2.settings.cache_object_limit(ObjectType.TREE, CACHE_OBJECT_MAX)


def cache_blobs(limit: int) -> None:
    """Keep blobs up to `limit` bytes in libgit2's object cache in this process from now on."""
    global _blob_limit
    _blob_limit = limit
    if _depth == 0:
        pygit2.option(Option.SET_CACHE_OBJECT_LIMIT, ObjectType.BLOB, limit)


@contextmanager
def quick_reads() -> Iterator[None]:
    """Within: objects read are not hashed again, and blobs are cached.  Restores the hash checks
    and the blob limit before it (`cache_blobs`) when the outermost one ends."""
    global _depth
    if _depth == 0:
        pygit2.option(Option.ENABLE_STRICT_HASH_VERIFICATION, False)
        pygit2.option(Option.SET_CACHE_OBJECT_LIMIT, ObjectType.BLOB, max(BLOB_CACHE_LIMIT, _blob_limit))
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            pygit2.option(Option.SET_CACHE_OBJECT_LIMIT, ObjectType.BLOB, _blob_limit)
            pygit2.option(Option.ENABLE_STRICT_HASH_VERIFICATION, True)
