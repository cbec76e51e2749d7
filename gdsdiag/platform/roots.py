"""Where a command reads a node from: the live system, a directory tree, or a snapshot archive.
One place opens them all, so every command reads snapshots the same (safe) way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import GdsdiagError, UsageError
from .fsroot import FsRoot


def require_node_root(root: str) -> None:
    """A --root that is missing or not a directory (a usage error, exit 4), or a directory holding
    neither sys/ nor proc/ (exit 3) is an error, one line, not a report: read as a tree, it would be
    a node with no devices, no IOMMU and no findings, which looks like a healthy answer (issue 22)."""
    import os

    fix = "pass the top of a node's tree (the directory holding its sys/ and proc/), or --from a snapshot"
    if not os.path.exists(root):
        raise UsageError(f"--root {root}: no such directory", fix)
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory", fix)
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
    yield open_snapshot(snapshot)


# The file every gdsdiag snapshot holds (snapshot.py writes it); an archive without it is not one.
MARKER = "/gdsdiag-snapshot.txt"


def open_snapshot(path: str, limits=None) -> FsRoot:
    """The snapshot as an ``ArchiveRoot``: read in memory, never extracted (docs/security.md).

    An archive without the marker file every gdsdiag snapshot holds is refused: an answer of
    "no findings" for a tarball of something else would be wrong."""
    import os

    from .archroot import DEFAULT_LIMITS, ArchiveRoot

    if os.path.isdir(path):
        raise GdsdiagError(f"{path} is a directory", "pass it with --root, or give a .tar.gz from gdsdiag snapshot")
    if not os.path.lexists(path):
        raise UsageError(f"snapshot {path} not found", "check the path")
    fs = ArchiveRoot(path, limits or DEFAULT_LIMITS)
    marker = fs.files.get(MARKER, b"")
    if not marker.startswith(b"gdsdiag-snapshot "):
        raise GdsdiagError(
            f"{path} is not a gdsdiag snapshot (no {MARKER.lstrip('/')} in it)",
            "create one on the node with 'gdsdiag snapshot -o FILE'",
        )
    return fs
