"""``gdsdiag trace``: parse options, run a live trace or a replay (gdsdiag.trace.live), print verdicts as they come, return the outcome."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any, cast

import click

from .. import docout
from ..errors import EXIT_OK, EXIT_WARN, GdsdiagError, Outcome
from ._common import Duration, only_the_document
from ._numbers import PID


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--pid",
    "pids",
    type=PID,
    multiple=True,
    help="Trace this running process, its threads and all its descendants (repeatable).",
)
@click.option(
    "--cgroup",
    metavar="PATH",
    help="Trace every process in this cgroup v2 directory and below (a container's, a pod's).",
)
@click.option(
    "--comm", metavar="NAME", help="Trace processes with this name (and their descendants), also those started later."
)
@click.option(
    "--pod",
    metavar="NAME|UID",
    help="Trace the processes of this Kubernetes pod running on this node (its name, from /var/log/pods, or its "
    "UID, from their cgroup) and all they start; with --namespace, the pod of that name there.",
)
@click.option(
    "--namespace",
    metavar="NS",
    help="Trace the processes of every pod of this Kubernetes namespace running on this node, and all they start.",
)
@click.option(
    "--pod-logs",
    metavar="DIR",
    default="/var/log/pods",
    show_default=True,
    help="The kubelet's pod log directories (<namespace>_<name>_<uid>), where pods' names are read; in a "
    "DaemonSet, the host's /var/log/pods mounted here.",
)
@click.option("--duration", type=Duration(example="30s"), help="Stop after this long: seconds, or 500ms, 30s, 2m.")
@click.option(
    "--interval",
    "interval_s",
    type=Duration(example="1s"),
    metavar="N",
    help="Every N seconds (or 500ms, 1m): I/Os, GB/s and latency per route and for the busiest processes and files "
    "(like biolatency 1), then the summary's histograms; the text output then leaves out the per-I/O "
    "lines (--json keeps them and adds 'interval' lines).",
)
@click.option(
    "--top",
    is_flag=True,
    help="A live screen of processes x routes x GB/s, redrawn every second (like top), then the summary; "
    "where stdout is not a terminal (or with --json / --replay) --interval 1 lines instead.",
)
@click.option("--path", "path_filter", metavar="DIR", help="Only report I/O to files under DIR.")
@click.option(
    "--json", "as_json", is_flag=True, callback=only_the_document, help="JSON lines: one per I/O, then a summary."
)
@click.option(
    "--libcufile",
    "libcufile_path",
    metavar="PATH",
    help="Compile USDT probes for this libcufile (default: the bindings' copy and those running processes map; every copy a traced process maps gets uprobes).",
)
@click.option(
    "-o",
    "--output",
    "output_path",
    metavar="FILE",
    help="Write the verdicts and the summary to FILE (new, 0600; .gz: gzip) instead of stdout, so a traced "
    "program that prints keeps stdout to itself and never splits a --json line (like bpftrace -o).",
)
@click.option("--record", "record_path", metavar="FILE", help="Keep the raw events (JSON lines) for --replay.")
@click.option("--replay", "replay_path", metavar="FILE", help="Re-analyse a recording (no root or bcc needed).")
@click.option(
    "--block", is_flag=True, help="Also record block-layer requests (device, sector, latency): two more events per I/O."
)
@click.option(
    "--per-io",
    is_flag=True,
    help="A line for every host I/O too (by default the kernel counts the file I/O of processes without CUDA "
    "per file, syscall and size, which costs far less per I/O).",
)
@click.option(
    "--ebpf", is_flag=True, help="Print the eBPF program these options would load (generated C, for bcc) and exit."
)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def trace(
    pids,
    cgroup,
    comm,
    duration,
    path_filter,
    libcufile_path,
    as_json,
    record_path,
    replay_path,
    block,
    per_io,
    ebpf,
    cmd,
    output_path=None,
    interval_s=None,
    top=False,
    pod=None,
    namespace=None,
    pod_logs="/var/log/pods",
):
    """Per-I/O route verdicts, live: NVFS / P2PDMA / RDMA (P2P), PEER_GPU, COMPAT, DRAM_BOUNCE or
    HOST (off the GPU data path), with the evidence each came from. Trace a command and all it starts
    (gdsdiag trace -- python3 app.py), --pid trees, a --cgroup, a --comm, or everything. Needs root
    and bcc; --replay works anywhere."""
    if output_path is not None and not output_path.strip():
        from ..errors import UsageError

        raise UsageError("-o/--output: an empty path", "name a new file, e.g. -o trace.jsonl")
    if comm is not None and not comm.strip():
        from ..errors import UsageError

        # (an empty name selected nothing, so the trace followed every process: issue 42)
        raise UsageError("--comm: an empty process name", "name the program, e.g. --comm python3")
    for opt, val in (("--pod", pod), ("--namespace", namespace)):
        if val is not None and not val.strip():
            from ..errors import UsageError

            raise UsageError(f"{opt}: an empty name", f"name it as kubectl get pod -o wide shows it, e.g. {opt} vllm-0")
    import os

    if pod_logs != "/var/log/pods" and not os.path.isdir(pod_logs):
        from ..errors import UsageError

        raise UsageError(
            f"--pod-logs {pod_logs}: not a directory", "give the kubelet's pod log directory, e.g. /var/log/pods"
        )
    pod_logs = os.path.abspath(pod_logs)
    if (pod or namespace) and replay_path:
        from ..errors import UsageError

        raise UsageError(
            "--pod/--namespace with --replay: a recording holds no pods (they are read from the live node)",
            "filter the live trace: gdsdiag trace --pod NAME --record FILE",
        )
    if ebpf:
        from ..trace.probes.bpf import ebpf_text

        # (--pod/--namespace: pids found at the start, like --pid; the program is the same)
        selective = bool(cmd or pids or comm or cgroup or pod or namespace)
        text = ebpf_text(libcufile_path, selective, block, cgroup, comm, per_io)
        if output_path:
            from ..outfile import write_new_bytes

            write_new_bytes(output_path, "--output", text.encode())
        else:
            sys.stdout.write(text)
        return Outcome(EXIT_OK)
    from rich.console import Console

    from ..errors import UsageError
    from ..render.trace_out import LinePrinter, render_summary

    if replay_path and record_path:
        raise UsageError(  # (it used to record nothing without a word: issue 24)
            "--record with --replay: a replay reads a recording, it makes none",
            "copy the recording instead, or drop --record",
        )
    if top and interval_s is not None:
        raise UsageError("--top with --interval: the screen is redrawn every second", "give one of them")
    if interval_s is not None:
        import math

        if not math.isfinite(interval_s) or not 0.1 <= interval_s <= 86400:
            raise UsageError(
                f"--interval {interval_s}: not a number of seconds from 0.1 to 86400", "use e.g. --interval 1"
            )
    out = None
    if output_path:
        # The traced program inherits stdout: its own prints would land between (and, written in
        # pieces, inside) the verdict lines. -o gives the verdicts a file of their own.
        from ..outfile import NewTextFile

        out = NewTextFile(output_path, "--output")  # new, 0600 (paths, process names), never overwritten
    if out is not None and not as_json:
        # a file: plain text, every column
        console = Console(file=cast(IO[str], out), width=200, force_terminal=False, color_system=None)
    else:
        console = Console(stderr=as_json)
        if not console.is_terminal:
            console = Console(stderr=as_json, width=200)  # logs and pipes keep the evidence column
    status = Console(stderr=True) if out is not None else console  # attaching…, tracing…: for the user
    printer: Callable[[Any], None] = LinePrinter(console, as_json)  # one verdict line each
    on_tick = None
    if top and console.is_terminal and not as_json and not replay_path:
        from ..render.trace_top import TopScreen

        screen = TopScreen(console)
        printer = screen.add  # (the per-I/O lines are left out, as with --interval)
        on_tick = screen.tick
    elif top:
        interval_s = 1.0  # not a terminal: the same figures as lines
    if interval_s is not None:
        from ..render.trace_interval import IntervalPrinter

        ivl = IntervalPrinter(console, as_json, interval_s, replay=bool(replay_path))
        if not replay_path:  # (a replay's node is elsewhere: its pods' GB/s stand alone)
            ivl.acc.set_ceiling(_gpu_link)
        lines = printer

        def with_intervals(v) -> None:  # (the line printer, and the intervals)
            ivl.add(v)
            if as_json:
                lines(v)

        printer = with_intervals

        on_tick = ivl.tick
    rec = None

    def summary(res) -> None:
        render_summary(console, res, as_json)
        docout.stream().flush()  # out before the probes are detached (seconds of the kernel's time)

    import contextlib

    # -o: the JSON lines, the interval lines and the summary (written to docout's stream by the
    # renderers) go to the file for the trace's whole run
    to_out = docout.redirect_to(cast(IO[str], out)) if out is not None else contextlib.nullcontext()
    try:
        with to_out:
            if replay_path:
                from ..trace.live import replay

                res = replay(replay_path, path_filter, printer)
                if on_tick is not None:  # the last, partial interval (the kernel's counters as recorded at the end)
                    on_tick(final=True, counted=lambda: res.counted)
                summary(res)
            else:
                if record_path:
                    from ..outfile import NewTextFile

                    rec = NewTextFile(record_path, "--record")  # 0600, never through a planted name
                from ..trace.live import run_live

                res = run_live(
                    list(cmd) or None,
                    list(pids),
                    duration,
                    path_filter,
                    libcufile_path,
                    printer,
                    rec,
                    block,
                    cgroup,
                    comm,
                    on_status=lambda m: status.print(m, style="dim"),
                    per_io=per_io,
                    on_end=summary,
                    on_tick=on_tick,
                    # (stdout to a pipe or file is block-buffered: without this a `| jq` saw each poll's
                    # verdicts only once 8 KiB of them had piled up, or at the end)
                    on_batch=lambda: docout.stream().flush(),
                    pod=pod,
                    namespace=namespace,
                    pod_logs=pod_logs,
                )
            sig = getattr(res, "stopped_by", None)
            if sig:  # Ctrl-C / TERM / HUP mid-trace: summary shown, then 130/143/129
                from ..signals import EXIT_FOR_SIGNAL

                code = EXIT_FOR_SIGNAL.get(sig, 128 + sig)
            else:
                code = EXIT_OK if res.exit_code in (None, 0) else EXIT_WARN
    except GdsdiagError:
        if rec is not None and (rec.failed or rec.tell() == 0):  # nothing, or a cut recording (full disk)
            rec.discard()
            rec = None
        if out is not None and (out.tell() == 0 or out.empty_on_disk()):
            # the trace never started, or the disk was full from the first write: no empty file is
            # left behind to block the rerun (issue 42: -o on a full disk left a 0-byte file)
            out.discard()
            out = None
        raise
    finally:
        if out is not None:
            _close_output(out)  # (a cut --output is kept: the verdicts in it were seen; the error says so)
        if rec is not None:
            try:
                rec.close()
            except GdsdiagError:
                rec.discard()  # the last write failed: a cut recording is removed, not left to replay
                raise
    # a long trace holds millions of objects (events, verdicts): the interpreter's teardown freed
    # them one by one for seconds after the summary; the OS takes them at once
    return Outcome(code, leave_heap=True)


def _gpu_link() -> tuple[float | None, str]:
    """The node's GPU link for --interval's pod rows, read (and its module imported) at the first."""
    from ..platform.ceiling import node_gpu_link

    return node_gpu_link()


def _close_output(out) -> None:
    """Close -o's file. If its last flush fails and nothing of it reached the disk, it is removed:
    an empty file gdsdiag made would block the rerun (-o never overwrites)."""
    from ..errors import GdsdiagError

    try:
        out.close()
    except GdsdiagError:
        if out.empty_on_disk():
            out.discard()
        raise
