"""``gdsdiag diff A B``: the click command; the comparison lives in gdsdiag.diff."""

from __future__ import annotations

import click

from ._common import emit_json, json_option


@click.command()
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@json_option("gdsdiag.diff/1")
def diff(a, b, as_json):
    """What differs between two nodes: A and B are snapshots ('gdsdiag snapshot' archives) or root
    directories ('/' is this node); '-' reads one snapshot from stdin. Compares the check verdict and checks (drivers, versions,
    modules), topology (devices, link speed/width, ACS, IOMMU, pairs, findings) and cufile.json.

    1 means the two differ."""
    from ..diff import diff as run_diff

    res = run_diff(a, b)
    if as_json:
        from ..documents.diff import document

        emit_json(document(res))
    else:
        from ..render.diff_text import lines

        for ln in lines(res):
            click.echo(ln)
    return res
