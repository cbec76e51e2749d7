"""``gdsdiag snapshot``: parse options, write the support bundle (gdsdiag.snapshot.create), report what it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ._common import emit_json, only_the_document

if TYPE_CHECKING:
    from ..schema.snapshot import SnapshotDoc


@click.command()
@click.option("-o", "--output", required=True, metavar="FILE", help="Archive to write (.tar.gz); never overwritten.")
@click.option("--root", default="/", show_default=True, help="Capture from this root (for tests).")
@click.option("--redact", is_flag=True, help="Remove hostnames, serial numbers, UUIDs and IP addresses.")
@click.option("--json", "as_json", is_flag=True, callback=only_the_document, help="Report what was captured as JSON.")
def snapshot(output, root, redact, as_json):
    """A support bundle: the files gdsdiag reads (PCI sysfs incl. config space, IOMMU,
    /proc/driver/nvidia*, nvidia-fs procfs, kernel config, cufile.json), plus topology and check
    results, versions, nvidia-smi -q / topo -m, cufile.log tails and nvidia/nvme kernel log lines,
    with a manifest. Analyse it elsewhere with --from; 'tar xzf' unpacks it too."""
    from ..platform.roots import require_node_root
    from ..snapshot import create

    require_node_root(root)  # an empty archive with exit 0 would look like a capture
    info = create(output, root, redact=redact)
    if as_json:
        doc: SnapshotDoc = {
            "schema": "gdsdiag.snapshot/1",
            "output": output,
            "entries": info["entries"],
            "skipped": info["skipped"],
            "redacted": info["redacted"],
            "bundle": info["bundle"],
        }
        emit_json(doc)
    else:
        click.echo(
            f"wrote {output}: {info['entries']} entries, {len(info['skipped'])} unreadable"
            + (" (run as root to include full config space)" if info["skipped"] else "")
        )
