"""gdsdiag validate: one verdict per policy rule for this node, in JSON, JUnit and Prometheus form."""

from __future__ import annotations

import os

import click

from ..errors import EXIT_OK, GdsdiagError, Outcome, UsageError, refuse_existing
from ._common import Duration, emit_json, only_the_document, paths_option

PROM_MARK = "# HELP gdsdiag_"


def _write_new(path: str, data: bytes, option: str) -> None:
    from ..outfile import write_new_bytes

    write_new_bytes(path, option, data)


def write_prom(path: str, text: str) -> None:
    """node_exporter's textfile collector reads FILE.prom on every scrape: a rerun replaces it, and
    only a file gdsdiag wrote (outfile.replace_own)."""
    from ..outfile import replace_own

    replace_own(path, text.encode("utf-8"), PROM_MARK, "--prom", "textfile")


@click.command("validate")
@click.option(
    "--policy", "policy_file", metavar="FILE", help="Policy YAML (default: the shipped policy; see --show-policy)."
)
@paths_option("A directory on a mount to validate (repeatable).")
@click.option("--quick", "level", flag_value="quick", help="Also measure: a short sweep per GPU per mount.")
@click.option(
    "--full", "level", flag_value="full", help="Also measure: the full sweep, with gdsdiag trace attached (root)."
)
@click.option("--keep-going", is_flag=True, help="Measure even after a fatal static failure.")
@click.option(
    "--root", default="/", show_default=True, help="Read sysfs/procfs under this directory (static rules only)."
)
@click.option(
    "--from", "snapshot", metavar="FILE", help="Validate a snapshot made by 'gdsdiag snapshot' (static rules)."
)
@click.option(
    "--sweep-results",
    multiple=True,
    metavar="FILE",
    help="Judge these 'gdsdiag sweep --json' documents instead of sweeping.",
)
@click.option("--trace-replay", metavar="FILE", help="Judge a 'gdsdiag trace --record' file's route shares.")
@click.option(
    "--json",
    "json_path",
    metavar="FILE",
    callback=only_the_document,
    help="Write the JSON report (schema gdsdiag.validate/1); '-' for stdout.",
)
@click.option("--junit", "junit_path", metavar="FILE", help="Write JUnit XML, one testcase per rule.")
@click.option(
    "--prom", "prom_path", metavar="FILE", help="Write a Prometheus textfile (replaces only its own earlier file)."
)
@click.option(
    "--proof",
    is_flag=True,
    help="Prove the route of every GPU x --path: a checksummed cuFile read+write as configured and with "
    "compat mode forbidden, one line per cell (docs/validate.md).",
)
@click.option("--proof-gpus", default="all", show_default=True, metavar="LIST", help="GPUs of the proof: all or 0,1,…")
@click.option(
    "--proof-size", default="16M", show_default=True, metavar="SIZE", help="Bytes read and written per probe."
)
@click.option(
    "--proof-timeout",
    default=60.0,
    show_default=True,
    type=Duration(example="60s"),
    metavar="S",
    help="Time before a probe is killed: seconds, or 30s, 2m.",
)
@click.option(
    "--nfd", "nfd_path", metavar="FILE", help="Write node-feature-discovery labels from the proof (features.d/ file)."
)
@click.option("--show-policy", is_flag=True, help="Print the shipped default policy and exit.")
@click.option("-v", "--verbose", is_flag=True, help="Evidence of every rule, not only failures.")
def validate(
    policy_file,
    paths,
    level,
    keep_going,
    root,
    snapshot,
    sweep_results,
    trace_replay,
    json_path,
    junit_path,
    prom_path,
    proof,
    proof_gpus,
    proof_size,
    proof_timeout,
    nfd_path,
    show_policy,
    verbose,
):
    """Pre-deployment gate: every policy rule (inventory, drivers, IOMMU/ACS/links, cufile.json,
    udev, routes per mount, and with --quick/--full GB/s, p99 and the compat/bounce share) ends
    PASS/WARN/FAIL/SKIP with evidence and fix. Exit code = worst verdict (0 pass, 1 warn, 2 fail)."""
    import json

    from rich.console import Console

    from ..check.context import CheckContext
    from ..platform.roots import node_root
    from ..validate import outputs
    from ..validate.policy import default_text, load
    from ..validate.runner import run

    if show_policy:
        click.echo(default_text(), nl=False)
        return Outcome(EXIT_OK)
    console = Console(stderr=json_path == "-")
    if not console.is_terminal:
        console = Console(stderr=json_path == "-", width=160)  # logs keep the summary column readable
    for pth, opt in ((json_path, "--json"), (junit_path, "--junit")):
        if pth and pth != "-":
            refuse_existing(pth, opt)
    policy = load(policy_file)
    if nfd_path and not proof:
        raise UsageError("--nfd labels come from the proof matrix", "add --proof (and --path DIR)")
    plan = None
    if proof:
        if snapshot or root != "/":
            raise UsageError("--proof does I/O on the running node", "drop --from/--root")
        if not paths:
            raise UsageError("--proof needs a storage target", "give --path DIR (a directory on each mount to prove)")
        from ..validate.proof_stage import ProofPlan

        plan = ProofPlan.parse(proof_gpus, proof_size, proof_timeout)
    if snapshot:
        if paths or level:
            raise UsageError(
                "--path/--quick/--full need the node itself, not a snapshot",
                "run 'gdsdiag validate' on the node (a snapshot gets the static rules)",
            )
    elif root != "/" and (paths or level):
        raise UsageError("--path/--quick/--full measure the running node", "drop --root, or drop --path/--quick/--full")
    for f in list(sweep_results) + ([trace_replay] if trace_replay else []):
        # (named at once: a fatal rule can stop the run before the file is read, and the file went
        # unmentioned with exit 2, issue 46)
        # a path that names nothing is a usage error (4, docs/json.md), one that is not a file is 3
        fix = "pass the path of a 'gdsdiag sweep --json' or 'gdsdiag trace --record' file"
        if not os.path.lexists(f):
            raise UsageError(f"{f}: no such file", fix)
        if not os.path.isfile(f):
            raise GdsdiagError(f"{f}: not a regular file", fix)
    with node_root(root, snapshot) as fs:  # one root for every reader, snapshots read in memory
        ctx = CheckContext(fs, env=dict(os.environ) if fs.is_live else {})
    status = console.status("validating") if console.is_terminal else None
    if status:
        status.start()
    try:

        def progress(msg):
            if status:
                status.update(msg)
            elif msg.startswith("proof ") or (level and not msg.startswith("rule ")):
                # a log shows the measuring (sweeps, proof probes: each takes seconds), not the rules
                click.echo(f"gdsdiag validate: {msg}", err=True)

        rep = run(
            ctx, policy, list(paths), level or "static", keep_going, progress, list(sweep_results), trace_replay, plan
        )
    finally:
        if status:
            status.stop()
    if snapshot:
        rep.node["root"] = snapshot
    outputs.render(console, rep, verbose)
    doc = outputs.document(rep)
    if json_path == "-":
        emit_json(doc)
    elif json_path:
        _write_new(json_path, (json.dumps(doc, indent=2) + "\n").encode(), "--json")
    if junit_path:
        _write_new(junit_path, outputs.junit(rep), "--junit")
    if prom_path:
        write_prom(prom_path, outputs.prometheus(rep))
    if nfd_path and rep.proof is not None:
        from ..validate import proof_out

        proof_out.write_nfd(nfd_path, proof_out.nfd_text(rep.proof))
    return Outcome(rep.command_exit_code)
