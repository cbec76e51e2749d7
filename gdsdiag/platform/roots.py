"""Where a command reads a node from: the live system, a directory tree, or a snapshot archive.
One place opens them all, so every command reads snapshots the same (safe) way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import GdsdiagError
from .fsroot import FsRoot


def require_node_root(root: str) -> None:
    """A --root that is missing, not a directory, or holds neither sys/ nor proc/ is an error (exit
    3, one line), not a report: read as a tree, it would be a node with no devices, no IOMMU and no
    findings, which looks like a healthy answer (issue 22)."""
    import os

    fix = "pass the top of a node's tree (the directory holding its sys/ and proc/), or --from a snapshot"
    if not os.path.exists(root):
        raise GdsdiagError(f"--root {root}: no such directory", fix)
    if not os.path.isdir(root):
        raise GdsdiagError(f"--root {root}: not a directory", fix)
    if not any(os.path.isdir(os.path.join(root, d)) for d in ("sys", "proc")):
        raise GdsdiagError(f"--root {root} holds neither sys/ nor proc/: not a node's tree", fix)


@contextmanager
def node_root(root: str = "/", snapshot: str | None = None) -> Iterator[FsRoot]:
    """An ``FsRoot`` over ``snapshot`` (a ``gdsdiag snapshot`` archive, read in memory and never
    extracted: an ``ArchiveRoot``) when given, else over the directory ``root``."""
    if not snapshot:
        require_node_root(root)
        yield FsRoot(root)
        return
    from ..snapshot import open_snapshot

    yield open_snapshot(snapshot)
