"""validate --proof / --nfd: argument checks, the run, and how the proof joins validate's outputs
(the JSON document's "proof", a second JUnit testsuite, more Prometheus families, the NFD file)."""

from __future__ import annotations

import click

from ..errors import UsageError

MAX_PROOF_SIZE = 1 << 30


def check_args(proof, nfd_path, paths, snapshot, root, size_text, timeout_s, gpus: str = "all") -> int:
    """Refuse what cannot work before anything runs (exit 4); the probe size in bytes."""
    from ..units import parse_size
    from ..validate.proof import DEFAULT_BS

    if nfd_path and not proof:
        raise UsageError("--nfd labels come from the proof matrix", "add --proof (and --path DIR)")
    if not proof:
        return 0
    if snapshot or root != "/":
        raise UsageError("--proof does I/O on the running node", "drop --from/--root")
    if not paths:
        raise UsageError("--proof needs a storage target", "give --path DIR (a directory on each mount to prove)")
    if timeout_s <= 0:
        raise UsageError(f"--proof-timeout {timeout_s:g}: must be > 0", "give seconds, e.g. --proof-timeout 60")
    import re

    # 'all' or up to 4,096 ASCII GPU indices or labels, checked before any work
    if gpus != "all" and (
        gpus.count(",") >= 4096 or not re.fullmatch(r"(?:(?:GPU)?[0-9]{1,4})(?:,(?:GPU)?[0-9]{1,4})*", gpus, re.I)
    ):
        raise UsageError(f"--proof-gpus {gpus[:40]!r}: not 'all' or a list of GPU indices", "give e.g. 0,1 or all")
    try:
        size = parse_size(size_text)
    except ValueError:
        raise UsageError(f"--proof-size {size_text!r} is not a size", "give e.g. 16M") from None
    if size < DEFAULT_BS or size % DEFAULT_BS or size > MAX_PROOF_SIZE:
        raise UsageError(
            f"--proof-size {size_text}: must be a multiple of 1 MiB from 1 MiB to 1 GiB", "give e.g. --proof-size 16M"
        )
    return size


def run_proof(ctx, paths, gpus, size, timeout_s, console):
    from ..validate import proof, proof_out
    from ..validate.adapters import check_report

    status = console.status("proof matrix") if console.is_terminal else None

    def say(msg):
        if status:
            status.update(msg)
        else:
            click.echo(f"gdsdiag validate: {msg}", err=True)

    if status:
        status.start()
    try:
        # check's per-path verdicts again (validate's runner keeps only its rules): cheap, cached reads
        m = proof.run_matrix(ctx, check_report(ctx, paths), gpus, size, proof.DEFAULT_BS, timeout_s, say)
    finally:
        if status:
            status.stop()
    proof_out.render(console, m)
    return m


def junit_text(rep, matrix) -> bytes:
    from ..validate import outputs, proof_out

    xml = outputs.junit(rep)
    if matrix is None:
        return xml
    return proof_out.add_to_junit(xml, matrix, rep.node.get("hostname") or rep.node["root"])


def prom_text(rep, matrix) -> str:
    from ..validate import outputs, proof_out

    text = outputs.prometheus(rep)
    return text if matrix is None else text + proof_out.prometheus(matrix)


def nfd_write(path, matrix) -> None:
    from ..validate import proof_out

    proof_out.write_nfd(path, proof_out.nfd_text(matrix))
