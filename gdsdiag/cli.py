"""Command line. Heavy modules (cupy, kvikio, bcc, cffi) are imported inside commands only, so
``gdsdiag --help`` and ``gdsdiag topology`` answer at once on a bare node."""
from __future__ import annotations

import json
import os
import sys

import click

from . import __version__
from .errors import EXIT_FAIL, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_WARN, GdsdiagError, refuse_existing


def _emit_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")


def _exit_for(findings, disagreements: int = 0) -> int:
    sev = {f.severity for f in findings}
    if "fail" in sev:
        return EXIT_FAIL
    if "warn" in sev or disagreements:
        return EXIT_WARN
    return EXIT_OK


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gdsdiag")
def cli() -> None:
    """Diagnose the GPUDirect Storage data path: PCIe topology, drivers, and the route I/O takes."""


@cli.command()
@click.option("--root", default="/", show_default=True, help="Read sysfs/procfs under this directory.")
@click.option("--from", "snapshot", metavar="FILE", help="Analyse a snapshot made by 'gdsdiag snapshot'.")
@click.option("--lspci", "lspci_files", multiple=True, metavar="FILE",
              help="Import 'lspci -vvv'/'-vvxxxx' and/or 'lspci -tv' text (repeatable).")
@click.option("--numa", "numa_map", metavar="HB=N,...",
              help="NUMA node per host bridge for lspci imports, e.g. 0000:00=0,0000:80=1 or 0000:00-7f=0.")
@click.option("--cross-check", is_flag=True, help="Compare our labels with 'nvidia-smi topo -m'.")
@click.option("--nvidia-smi", "smi_file", metavar="FILE", help="A saved 'nvidia-smi topo -m' output (implies --cross-check).")
@click.option("--tree", "only_tree", is_flag=True, help="Show only the tree.")
@click.option("--matrix", "only_matrix", is_flag=True, help="Show only the pair matrix.")
@click.option("--json", "as_json", is_flag=True, help="Write the JSON document (schema gdsdiag.topology/1).")
def topology(root, snapshot, lspci_files, numa_map, cross_check, smi_file, only_tree, only_matrix, as_json):
    """The PCIe graph between GPUs, NVMe and NICs, and whether P2P DMA can work on each pair."""
    from .topology.findings import find
    from .topology.pairs import analyse_all

    tmp = None
    try:
        if lspci_files:
            from .importers.lspci import load_lspci
            topo = load_lspci(lspci_files, numa_map)
        else:
            if snapshot:
                from .snapshot import open_snapshot
                tmp = open_snapshot(snapshot)
                root = tmp.name
            from .topology.load import from_root
            topo = from_root(root)
            if snapshot:
                topo.source = snapshot
            elif root == "/":
                from .platform.udev_names import enrich
                topo.problems += [n for n in enrich(topo) if "differs" in n]
        pairs = analyse_all(topo)
        findings = find(topo, pairs)
        cc = None
        if cross_check or smi_file:
            from .importers.nvidia_smi import cross_check as run_cross_check, read_smi_text
            cc = run_cross_check(topo, pairs, read_smi_text(smi_file))
        if as_json:
            from .render.topology_json import document
            _emit_json(document(topo, pairs, findings, cc))
        else:
            from rich.console import Console
            from .render.topology_text import render
            console = Console()
            render(console, topo, pairs, findings, show_tree=not only_matrix, show_matrix=not only_tree)
            if cc is not None:
                from .importers.nvidia_smi import render_cross_check
                render_cross_check(console, cc)
        disagreements = sum(1 for c in cc or [] if not c["agree"])
        sys.exit(_exit_for(findings, disagreements))
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(EXIT_TOOL_ERROR)
    finally:
        if tmp is not None:
            tmp.cleanup()


@cli.command()
@click.option("--root", default="/", show_default=True, help="Read sysfs/procfs under this directory.")
@click.option("--from", "snapshot", metavar="FILE", help="Check a snapshot made by 'gdsdiag snapshot'.")
@click.option("--path", "paths", multiple=True, metavar="DIR",
              help="Also analyse this directory: filesystem, devices, a real O_DIRECT probe, the route cuFile would take (repeatable).")
@click.option("--gdscheck", "gdscheck_file", metavar="FILE", help="Compare with a saved 'gdscheck -p' output.")
@click.option("--libcufile", "libcufile_path", metavar="PATH", help="Use this libcufile instead of searching.")
@click.option("-v", "--verbose", is_flag=True, help="Show the evidence and the reason of every check.")
@click.option("--json", "as_json", is_flag=True, help="Write the JSON document (schema gdsdiag.check/1).")
def check(root, snapshot, paths, gdscheck_file, libcufile_path, verbose, as_json):
    """Which GDS routes this node can take (nvidia-fs P2P, PCI P2PDMA, compat only) and why, with evidence.

    Exit code: 0 all pass, 1 warnings, 2 failures, 3 gdsdiag could not run."""
    import os
    from .check.context import CheckContext
    from .check.runner import run as run_checks
    from .platform.fsroot import FsRoot

    tmp = None
    try:
        gdscheck_text = None
        if gdscheck_file:
            try:
                with open(gdscheck_file, encoding="utf-8", errors="replace") as f:
                    gdscheck_text = f.read()
            except OSError as e:
                raise GdsdiagError(f"cannot read {gdscheck_file}: {e.strerror}", "check the path") from None
        if snapshot:
            from .snapshot import open_snapshot
            tmp = open_snapshot(snapshot)
            root = tmp.name
            if paths:
                raise GdsdiagError("--path cannot be probed inside a snapshot",
                                   "run 'gdsdiag check --path DIR' on the node itself")
        ctx = CheckContext(FsRoot(root), env=dict(os.environ) if root == "/" else {}, libcufile_path=libcufile_path)
        report = run_checks(ctx, list(paths), gdscheck_text)
        if snapshot:
            report.source = snapshot
        if as_json:
            from .render.check_json import document
            _emit_json(document(report))
        else:
            from rich.console import Console
            from .render.check_text import render
            render(Console(), report, verbose)
        sys.exit(report.exit_code())
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(EXIT_TOOL_ERROR)
    finally:
        if tmp is not None:
            tmp.cleanup()


@cli.command("cufile")
@click.option("--libcufile", "libcufile_path", metavar="PATH", help="Use this libcufile instead of searching.")
@click.option("--no-open", is_flag=True, help="Do not try cuFileDriverOpen (it runs in a child process with a timeout).")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for cuFileDriverOpen.")
@click.option("--json", "as_json", is_flag=True, help="Write JSON (schema gdsdiag.cufile/1).")
def cufile_cmd(libcufile_path, no_open, timeout, as_json):
    """libcufile as the bindings see it: where it was found, version, parameters, and whether the
    driver opens (decoded properties) or fails (named error and the cufile.log tail)."""
    try:
        from .cufile import all_parameters, load, probe_driver_open
        L = load(libcufile_path)
        doc = {"schema": "gdsdiag.cufile/1", "library": L.path, "found_via": L.found_via, "version": L.version,
               "log": L.log_path, "parameters_before_open": all_parameters(L)}
        doc["driver_open"] = None if no_open else probe_driver_open(timeout, L.path)
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(EXIT_TOOL_ERROR)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"libcufile {doc['version']} at {doc['library']} (via {doc['found_via']}); log {doc['log']}")
        d = doc["driver_open"]
        if d is None:
            click.echo("driver open: not tried (--no-open)")
        elif d["ok"]:
            p = d["properties"]
            click.echo(f"driver open: OK — nvidia-fs {'%d.%d' % (p['nvfs_major'], p['nvfs_minor']) if p['nvfs_loaded'] else 'not loaded (compatibility mode)'}, "
                       f"control {', '.join(p['control_flags']) or '-'}, storage {', '.join(p['status_flags']) or '-'}, "
                       f"max direct I/O {p['max_direct_io_size_kb']} KiB")
        else:
            click.echo(f"driver open: FAILED — {d['error']}")
            if d.get("log_tail"):
                click.echo("cufile.log tail:\n" + d["log_tail"].rstrip())
    ok = doc["driver_open"] is None or doc["driver_open"]["ok"]
    sys.exit(EXIT_OK if ok else EXIT_FAIL)


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
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(EXIT_FAIL if e.__class__.__name__ == "VerifyError" else EXIT_TOOL_ERROR)


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
        sys.exit(EXIT_OK if res.exit_code in (None, 0) else EXIT_WARN)
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        if rec is not None and rec.tell() == 0:     # nothing recorded: do not leave an empty file behind
            rec.close()
            os.unlink(record_path)
            rec = None
        sys.exit(EXIT_TOOL_ERROR)
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
    try:
        info = create(output, root)
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(EXIT_TOOL_ERROR)
    if as_json:
        _emit_json({"schema": "gdsdiag.snapshot/1", "output": output, **info})
    else:
        click.echo(f"wrote {output}: {info['entries']} entries, {len(info['skipped'])} unreadable"
                   + (" (run as root to include full config space)" if info["skipped"] else ""))


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("gdsdiag: interrupted; files it created were removed", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as e:  # a bug in gdsdiag itself: one line, exit 3, details on request
        import os
        if os.environ.get("GDSDIAG_DEBUG"):
            raise
        click.echo(f"gdsdiag: internal error: {type(e).__name__}: {e} (set GDSDIAG_DEBUG=1 for the traceback)", err=True)
        sys.exit(EXIT_TOOL_ERROR)
