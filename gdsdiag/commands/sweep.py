"""``gdsdiag sweep``: parse, run, render, return the outcome (cli.main exits with its code).
Signals: SIGTERM is turned into an exit (143) for the sweep's duration so its file is removed as on
Ctrl-C (signals.term_exits); the previous handler is restored after."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN, GdsdiagError, Outcome, UsageError, refuse_existing
from ..signals import term_exits
from ._common import emit_json, json_option
from ._numbers import GPU_INDEX


def _ints(text: str, option: str) -> list[int]:
    """ASCII whole numbers of at most 20 digits, values up to 65536, at most 64 of them (int() took
    '²' and 4,300-digit values); 0 and negatives are validate_config's to refuse, in its words."""
    import re

    parts = [x.strip() for x in text.split(",")[:65] if x.strip()]
    if len(parts) > 64 or not all(re.fullmatch(r"-?[0-9]{1,20}", x) for x in parts):
        raise UsageError(f"{option} {text[:80]!r}: not a list of whole numbers", f"use e.g. {option} 1,4,16")
    vals = [int(x) for x in parts]
    if any(v > 1 << 16 for v in vals):
        raise UsageError(f"{option} {text[:80]!r}: at most 65536", f"use e.g. {option} 1,4,16")
    return vals


MAX_LIST = 64  # values of one list option
MAX_POINTS = 1_000  # points of one sweep (the default is 192; 1,000 of 10 s are ~3 h): a list x 100,000 ran forever


def _words(text: str, option: str) -> list[str]:
    """A comma list of names, each once (a name repeated is one point, not a thousand), at most
    MAX_LIST of them; unknown names are validate_config's to refuse, in its words."""
    parts = list(dict.fromkeys(x.strip() for x in text.split(",")[: MAX_LIST * 4] if x.strip()))
    if len(parts) > MAX_LIST:
        raise UsageError(f"{option} {text[:80]!r}: more than {MAX_LIST} values", "see gdsdiag sweep --help")
    return parts


def _write_outputs(report, csv_path: str | None, plot_path: str | None) -> None:
    """--csv and --plot, each opened once (O_EXCL|O_NOFOLLOW) and written through that descriptor,
    complete or removed (gdsdiag/outfile.py): a symlink planted after the start-up check is never
    written through. Both are attempted; the first failure is raised after."""
    import io

    from ..outfile import write_new
    from ..render.sweep_out import write_csv, write_plot

    errors = []
    if csv_path:

        def csv_bytes(f):
            text = io.StringIO(newline="")
            write_csv(report, text)
            f.write(text.getvalue().encode("utf-8"))

        try:
            write_new(csv_path, "--csv", csv_bytes)
        except GdsdiagError as e:
            errors.append(e)
    if plot_path:
        try:
            write_new(plot_path, "--plot", lambda f: write_plot(report, f))
        except GdsdiagError as e:
            errors.append(e)
    if errors:
        raise errors[0]


@click.command()
@click.option(
    "--dir",
    "directory",
    required=True,
    metavar="DIR",
    help="Directory on the storage to test (files are created and removed there).",
)
@click.option("--size", default="4G", show_default=True, help="Size of the test file.")
@click.option(
    "--bs", default="4k,64k,1m,16m", show_default=True, help="Block sizes, comma separated (multiples of 4 KiB)."
)
@click.option("--threads", default="1,4,16", show_default=True, help="Thread counts, comma separated.")
@click.option(
    "--rw",
    default="read,write,randread,randwrite",
    show_default=True,
    help="Patterns: read, write, randread, randwrite.",
)
@click.option(
    "--mode",
    "modes",
    default="cufile,kvikio,bounce,host",
    show_default=True,
    help="cufile (the bindings, sync), cufile-async (stream-ordered), cufile-batch (batch API), kvikio, "
    "bounce (O_DIRECT to pinned memory + copy), host (no GPU).",
)
@click.option(
    "--iodepth",
    default="1",
    show_default=True,
    help="I/Os in flight per thread (fio's iodepth): io_uring for host and bounce, cuFile batch handles for "
    "cufile-batch, registered CUDA streams for cufile-async.",
)
@click.option("--gpu", type=GPU_INDEX, default=0, show_default=True, help="GPU index.")
@click.option("--time", "duration", default="10s", show_default=True, help="Duration of each point.")
@click.option("--bytes", "total", default=None, help="Bytes per point instead of --time.")
@click.option("--no-verify", is_flag=True, help="Do not check the data (for pure speed runs; results say 'off').")
@click.option(
    "--compare-fio",
    is_flag=True,
    help="Run fio's equivalent job before and after each point on the same file (like for like: the "
    "sweep's host buffers in fio's 4 KiB pages); print the ratio and what still differs.",
)
@click.option(
    "--fio-jobs",
    type=click.Choice(["match", "process", "thread", "both"]),
    default="match",
    show_default=True,
    help="With --compare-fio: fio's jobs of the kind that matches --workers (match: --thread for thread "
    "workers, fio's default forked jobs for process workers), forked processes, threads, or both (a "
    "ratio for each).",
)
@click.option(
    "--workers",
    type=click.Choice(["thread", "process"]),
    default="thread",
    show_default=True,
    help="A point's workers: threads of the sweep's process, or each in a process of its own (as fio's "
    "default forked jobs: its own cuFile driver, handle, buffers and slice).",
)
@json_option("gdsdiag.sweep/2")
@click.option("--csv", "csv_path", metavar="FILE", help="Also write a CSV (never overwrites).")
@click.option(
    "--plot",
    "plot_path",
    metavar="FILE.png",
    help="Also write a PNG: GB/s vs block size per mode, read and write panels.",
)
def sweep(
    directory,
    size,
    bs,
    threads,
    rw,
    modes,
    iodepth,
    gpu,
    duration,
    total,
    no_verify,
    compare_fio,
    fio_jobs,
    workers,
    as_json,
    csv_path,
    plot_path,
):
    """Read/write throughput sweep whose route (cuFile stats) and data (every byte) are verified.

    Only files it creates (gdsdiag-sweep-*.dat, removed at the end and on Ctrl-C) are touched."""
    from ..sweep.runner import SweepConfig, run_sweep, validate_config
    from ..units import parse_duration, parse_size

    try:
        depth = _ints(iodepth, "--iodepth")
        if len(depth) != 1:
            raise UsageError(f"--iodepth {iodepth!r}: one value", "use e.g. --iodepth 32")
        cfg = SweepConfig(
            directory=directory,
            size=parse_size(size),
            block_sizes=[parse_size(x) for x in _words(bs, "--bs")],
            threads=_ints(threads, "--threads"),
            rws=_words(rw, "--rw"),
            modes=_words(modes, "--mode"),
            gpu=gpu,
            seconds=None if total else parse_duration(duration),
            total_bytes=parse_size(total) if total else None,
            verify=not no_verify,
            iodepth=depth[0],
            compare_fio=compare_fio,
            fio_jobs=fio_jobs,
            workers=workers,
        )
    except ValueError as e:
        raise UsageError(str(e), "see gdsdiag sweep --help") from None
    if len(cfg.rws) * len(cfg.modes) * len(cfg.block_sizes) * len(cfg.threads) > MAX_POINTS:
        raise UsageError(
            f"{len(cfg.rws) * len(cfg.modes) * len(cfg.block_sizes) * len(cfg.threads):,} points (--rw x --mode x --bs"
            f" x --threads): more than {MAX_POINTS:,}",
            "sweep fewer block sizes, thread counts, patterns or modes at a time",
        )
    validate_config(cfg)  # (per point: after the count is bounded)
    for path, option in ((csv_path, "--csv"), (plot_path, "--plot")):
        if path:
            refuse_existing(path, option)
    from ..render.sweep_out import LineProgress, SweepProgress, check_plot, render

    if plot_path:
        check_plot()  # no matplotlib: refused now, not after the sweep ran
    from rich.console import Console

    console = Console(stderr=as_json)
    if not console.is_terminal:
        console = Console(stderr=as_json, width=160)  # a log or pipe: keep every column readable
    npoints = len(cfg.rws) * len(cfg.modes) * len(cfg.block_sizes) * len(cfg.threads)
    with term_exits():
        if console.is_terminal:
            with SweepProgress(console, npoints, cfg.seconds, cfg.total_bytes) as prog:
                report = run_sweep(cfg, prog)
        else:  # a pipe or a log: a line per point on stderr
            with LineProgress(sys.stderr, npoints, cfg.seconds, cfg.total_bytes) as lines:
                report = run_sweep(cfg, lines)
    # the results first: a file that cannot be written (a full disk) must not lose the sweep
    render(console, report)  # with --json the table goes to stderr, the document to stdout
    if as_json:
        emit_json(report.to_json())
    _write_outputs(report, csv_path, plot_path)
    failed = any(p.error for p in report.points)
    warned = any(p.route_warning for p in report.points)
    return Outcome(EXIT_FAIL if failed else EXIT_WARN if warned else EXIT_OK)
