"""Where a command reads a node from: the live system, a directory tree, or a snapshot archive.
One place opens them all, so every command reads snapshots the same (safe) way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .fsroot import FsRoot


@contextmanager
def node_root(root: str = "/", snapshot: str | None = None) -> Iterator[FsRoot]:
    """An ``FsRoot`` over ``snapshot`` (a ``gdsdiag snapshot`` archive, read in memory and never
    extracted: an ``ArchiveRoot``) when given, else over the directory ``root``."""
    if not snapshot:
        yield FsRoot(root)
        return
    from ..snapshot import open_snapshot

    yield open_snapshot(snapshot)
