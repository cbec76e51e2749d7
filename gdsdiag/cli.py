"""Command line: the click group, command registration and the one exception boundary. Heavy modules (cupy, kvikio, bcc, cffi) are imported inside commands only, so
``gdsdiag --help`` and ``gdsdiag topology`` answer at once on a bare node."""
from __future__ import annotations

import json
import os
import sys

import click

from . import __version__
from .errors import (
    EXIT_FAIL,
    EXIT_INTERRUPTED,
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


@cli.command()
@click.option("--dir", "directory", required=True, metavar="DIR", help="Directory on the storage to test (files are created and removed there).")
@click.option("--size", default="4G", show_default=True, help="Size of the test file.")
@click.option("--bs", default="4k,64k,1m,16m", show_default=True, help="Block sizes, comma separated.")
@click.option("--threads", default="1,4,16", show_default=True, help="Thread counts, comma separated.")
@click.option("--rw", default="read,write,randread,randwrite", show_default=True, help="Patterns: read, write, randread, randwrite.")
@click.option("--mode", "modes", default="cufile,kvikio,bounce,host", show_default=True,
              help="cufile (the bindings, sync), cufile-async (stream-ordered), cufile-batch (batches of 8), kvikio, "
                   "bounce (O_DIRECT to pinned memory + copy), host (no GPU).")
@click.option("--gpu", default=0, show_default=True, help="GPU index.")
@click.option("--time", "duration", default="10s", show_default=True, help="Duration of each point.")
@click.option("--bytes", "total", default=None, help="Bytes per point instead of --time.")
@click.option("--no-verify", is_flag=True, help="Do not check the data (for pure speed runs; results say 'off').")
@click.option("--json", "as_json", is_flag=True, help="Write the JSON document (schema gdsdiag.sweep/1).")
@click.option("--csv", "csv_path", metavar="FILE", help="Also write a CSV (never overwrites).")
@click.option("--plot", "plot_path", metavar="FILE.png", help="Also write a PNG: GB/s vs block size per mode, read and write panels.")
def sweep(directory, size, bs, threads, rw, modes, gpu, duration, total, no_verify, as_json, csv_path, plot_path):
    """Read/write throughput sweep whose route (cuFile stats) and data (every byte) are verified.

    Only files it creates (gdsdiag-sweep-*.dat, removed at the end and on Ctrl-C) are touched."""
    from .sweep.latency import parse_duration, parse_size
    from .sweep.runner import SweepConfig, run_sweep
    try:
        cfg = SweepConfig(directory=directory, size=parse_size(size),
                          block_sizes=[parse_size(x) for x in bs.split(",") if x.strip()],
                          threads=[int(x) for x in threads.split(",") if x.strip()],
                          rws=[x.strip() for x in rw.split(",") if x.strip()],
                          modes=[x.strip() for x in modes.split(",") if x.strip()], gpu=gpu,
                          seconds=None if total else parse_duration(duration),
                          total_bytes=parse_size(total) if total else None, verify=not no_verify)
    except ValueError as e:
        raise GdsdiagError(str(e), "see gdsdiag sweep --help") from None
    for path, option in ((csv_path, "--csv"), (plot_path, "--plot")):
        if path:
            refuse_existing(path, option)
    from rich.console import Console
    console = Console(stderr=as_json)
    if not console.is_terminal:
        console = Console(stderr=as_json, width=160)   # a log or pipe: keep every column readable
    npoints = len(cfg.rws) * len(cfg.modes) * len(cfg.block_sizes) * len(cfg.threads)
    from .render.sweep_out import SweepProgress, render, write_csv, write_plot
    if console.is_terminal:
        with SweepProgress(console, npoints, cfg.seconds, cfg.total_bytes) as prog:
            report = run_sweep(cfg, prog)
    else:
        report = run_sweep(cfg)
    if csv_path:
        write_csv(report, csv_path)
    if plot_path:
        write_plot(report, plot_path)
    render(console, report)              # with --json the table goes to stderr, the document to stdout
    if as_json:
        _emit_json(report.to_json())
    failed = any(p.error for p in report.points)
    warned = any(p.route_warning for p in report.points)
    sys.exit(EXIT_FAIL if failed else EXIT_WARN if warned else EXIT_OK)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--pid", type=int, help="Trace this running process (all its threads).")
@click.option("--duration", type=float, help="Stop after this many seconds.")
@click.option("--path", "path_filter", metavar="DIR", help="Only report I/O to files under DIR.")
@click.option("--libcufile", "libcufile_path", metavar="PATH", help="The libcufile the traced program uses (default: as the bindings find it).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines: one per I/O, then a summary.")
@click.option("--record", "record_path", metavar="FILE", help="Keep the raw events (JSON lines) for --replay.")
@click.option("--replay", "replay_path", metavar="FILE", help="Re-analyse a recording (no root or bcc needed).")
@click.option("--block", is_flag=True, help="Also record block-layer requests (device, sector, latency): two more events per I/O.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def trace(pid, duration, path_filter, libcufile_path, as_json, record_path, replay_path, block, cmd):
    """Per-I/O route verdicts, live: P2P (nvidia-fs, P2PDMA, RDMA), PEER_GPU, COMPAT or DRAM_BOUNCE,
    with the evidence each came from. Trace a command (gdsdiag trace -- python3 app.py), a --pid,
    or everything. Needs root and bcc; --replay works anywhere."""
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
            res = run_live(list(cmd) or None, pid, duration, path_filter, libcufile_path, printer, rec, block)
        render_summary(console, res, as_json)
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
@click.option("--json", "as_json", is_flag=True, help="Report what was captured as JSON.")
def snapshot(output, root, as_json):
    """Capture the files gdsdiag reads (PCI sysfs incl. config space, IOMMU, /proc/driver/nvidia*,
    nvidia-fs procfs, kernel config, cufile.json) for analysis elsewhere with --from."""
    from .snapshot import create
    info = create(output, root)
    if as_json:
        _emit_json({"schema": "gdsdiag.snapshot/1", "output": output, **info})
    else:
        click.echo(f"wrote {output}: {info['entries']} entries, {len(info['skipped'])} unreadable"
                   + (" (run as root to include full config space)" if info["skipped"] else ""))


# The CLI layer: one module per command under gdsdiag/commands (parse, render, exit); the work
# is done by the report functions of the packages they call.
from .commands import check, cufile, diff, explain, topology  # noqa: E402

for _command in (topology.topology, check.check, cufile.cufile_cmd, explain.explain, diff.diff):
    cli.add_command(_command)


def main() -> None:
    """The one exception boundary: every GdsdiagError (cuFile and verification errors included)
    becomes one line on stderr and the exit code it carries."""
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
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("gdsdiag: interrupted; files it created were removed", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as e:  # a bug in gdsdiag itself: one line, exit 3, details on request
        import os
        if os.environ.get("GDSDIAG_DEBUG"):
            raise
        click.echo(f"gdsdiag: internal error: {type(e).__name__}: {e} (set GDSDIAG_DEBUG=1 for the traceback)", err=True)
        sys.exit(EXIT_TOOL_ERROR)
