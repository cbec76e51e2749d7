"""``gdsdiag check``: which GDS routes the node can take, with the evidence of every check, and
per directory the route a cuFile I/O would take."""

from __future__ import annotations

import os

from ..errors import UsageError
from ..platform.roots import node_root
from .runner import CheckReport


def add_targets(ctx, report: CheckReport) -> None:
    """Per mount and per cuObject endpoint, the route I/O there would take (check/targets.py, check/endpoints.py)."""
    from .endpoints import endpoint_routes
    from .targets import mount_routes
    from .untraced import untraced_paths

    report.mounts = mount_routes(ctx, report.verdict, [r for r in report.results if r.path is None])
    report.endpoints, report.endpoints_source = endpoint_routes(ctx)
    report.untraced = untraced_paths(ctx, report.endpoints)


def check(
    root: str = "/",
    snapshot: str | None = None,
    paths: tuple[str, ...] = (),
    gdscheck_file: str | None = None,
    libcufile_path: str | None = None,
) -> CheckReport:
    from .context import CheckContext
    from .runner import run as run_checks

    if snapshot and paths:
        raise UsageError(
            "--path cannot be probed inside a snapshot", "run 'gdsdiag check --path DIR' on the node itself"
        )
    gdscheck_text = None
    if gdscheck_file:
        from ..bounded import read_user_text  # regular files under a stated size only

        gdscheck_text = read_user_text(gdscheck_file, "gdscheck output")
    with node_root(root, snapshot) as fs:
        ctx = CheckContext(fs, env=dict(os.environ) if fs.is_live else {}, libcufile_path=libcufile_path)
        report = run_checks(ctx, list(paths), gdscheck_text)
        add_targets(ctx, report)
    if snapshot:
        report.source = snapshot
    return report
