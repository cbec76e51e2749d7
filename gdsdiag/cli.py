"""Command line: the click group, command registration and the one exception boundary. Heavy modules (cupy, kvikio, bcc, cffi) are imported inside commands only, so
``gdsdiag --help`` and ``gdsdiag topology`` answer at once on a bare node."""
from __future__ import annotations

import json
import os
import sys

import click

from . import __version__
from .errors import (
    EXIT_OK,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
    EXIT_WARN,
    GdsdiagError,
    refuse_existing,
)


def _emit_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gdsdiag")
def cli() -> None:
    """Diagnose the GPUDirect Storage data path: PCIe topology, drivers, and the route I/O takes."""


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--pid", "pids", type=int, multiple=True, help="Trace this running process, its threads and all its descendants (repeatable).")
@click.option("--cgroup", metavar="PATH", help="Trace every process in this cgroup v2 directory and below (a container's, a pod's).")
@click.option("--comm", metavar="NAME", help="Trace processes with this name (and their descendants), also those started later.")
@click.option("--duration", type=float, help="Stop after this many seconds.")
@click.option("--path", "path_filter", metavar="DIR", help="Only report I/O to files under DIR.")
@click.option("--libcufile", "libcufile_path", metavar="PATH", help="Compile USDT probes for this libcufile (default: the bindings' copy and those running processes map; every copy a traced process maps gets uprobes).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines: one per I/O, then a summary.")
@click.option("--record", "record_path", metavar="FILE", help="Keep the raw events (JSON lines) for --replay.")
@click.option("--replay", "replay_path", metavar="FILE", help="Re-analyse a recording (no root or bcc needed).")
@click.option("--block", is_flag=True, help="Also record block-layer requests (device, sector, latency): two more events per I/O.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def trace(pids, cgroup, comm, duration, path_filter, libcufile_path, as_json, record_path, replay_path, block, cmd):
    """Per-I/O route verdicts, live: NVFS / P2PDMA / RDMA (P2P), PEER_GPU, COMPAT, DRAM_BOUNCE or
    HOST (off the GPU data path), with the evidence each came from. Trace a command and all it starts
    (gdsdiag trace -- python3 app.py), --pid trees, a --cgroup, a --comm, or everything. Needs root
    and bcc; --replay works anywhere."""
    from rich.console import Console

    from .render.trace_out import LinePrinter, render_summary
    console = Console(stderr=as_json)
    if not console.is_terminal:
        console = Console(stderr=as_json, width=200)    # logs and pipes keep the evidence column
    printer = LinePrinter(console, as_json)
    rec = None
    try:
        if replay_path:
            from .trace.live import replay
            res = replay(replay_path, path_filter, printer)
        else:
            if record_path:
                refuse_existing(record_path, "--record")
                rec = open(record_path, "x")
            from .trace.live import run_live
            res = run_live(list(cmd) or None, list(pids), duration, path_filter, libcufile_path, printer, rec, block,
                           cgroup, comm, on_status=lambda m: console.print(m, style="dim"))
        render_summary(console, res, as_json)
        if getattr(res, "stopped_by", None):        # Ctrl-C / TERM / HUP mid-trace: summary shown, then 130/143/129
            from .signals import EXIT_FOR_SIGNAL
            sys.exit(EXIT_FOR_SIGNAL.get(res.stopped_by, 128 + res.stopped_by))
        sys.exit(EXIT_OK if res.exit_code in (None, 0) else EXIT_WARN)
    except GdsdiagError:
        if rec is not None and rec.tell() == 0:     # nothing recorded: do not leave an empty file behind
            rec.close()
            os.unlink(record_path)
            rec = None
        raise
    finally:
        if rec is not None:
            rec.close()


@cli.command()
@click.option("-o", "--output", required=True, metavar="FILE", help="Archive to write (.tar.gz); never overwritten.")
@click.option("--root", default="/", show_default=True, help="Capture from this root (for tests).")
@click.option("--redact", is_flag=True, help="Remove hostnames, serial numbers, UUIDs and IP addresses.")
@click.option("--json", "as_json", is_flag=True, help="Report what was captured as JSON.")
def snapshot(output, root, redact, as_json):
    """A support bundle: the files gdsdiag reads (PCI sysfs incl. config space, IOMMU,
    /proc/driver/nvidia*, nvidia-fs procfs, kernel config, cufile.json), plus topology and check
    results, versions, nvidia-smi -q / topo -m, cufile.log tails and nvidia/nvme kernel log lines,
    with a manifest. Analyse it elsewhere with --from; 'tar xzf' unpacks it too."""
    from .snapshot import create
    info = create(output, root, redact=redact)
    if as_json:
        _emit_json({"schema": "gdsdiag.snapshot/1", "output": output, **info})
    else:
        click.echo(f"wrote {output}: {info['entries']} entries, {len(info['skipped'])} unreadable"
                   + (" (run as root to include full config space)" if info["skipped"] else ""))


# The CLI layer: one module per command under gdsdiag/commands (parse, render, exit); the work
# is done by the report functions of the packages they call.
from .commands import check, cufile, diff, explain, exporter, kv, report, sweep, topology, validate  # noqa: E402

for _command in (topology.topology, check.check, cufile.cufile_cmd, sweep.sweep, explain.explain, diff.diff,
                 validate.validate, report.report, exporter.exporter, kv.kv):
    cli.add_command(_command)


def main() -> None:
    """The one exception boundary: every GdsdiagError (cuFile and verification errors included)
    becomes one line on stderr and the exit code it carries."""
    from . import signals
    signals.install()          # SIGTERM/SIGHUP clean up like Ctrl-C; exit 143/129 (docs/security.md)
    try:
        cli.main(standalone_mode=False)
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        click.echo(f"gdsdiag: interrupted ({signals.signal_name(e)}); files it created were removed", err=True)
        sys.exit(signals.exit_code(e))
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as e:  # a bug in gdsdiag itself: one line, exit 3, details on request
        import os
        if os.environ.get("GDSDIAG_DEBUG"):
            raise
        click.echo(f"gdsdiag: internal error: {type(e).__name__}: {e} (set GDSDIAG_DEBUG=1 for the traceback)", err=True)
        sys.exit(EXIT_TOOL_ERROR)
