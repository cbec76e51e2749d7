"""gdsdiag exporter: a Prometheus exporter on one port (/metrics)."""

from __future__ import annotations

import os
import threading

import click

from ..errors import EXIT_OK, GdsdiagError, Outcome, UsageError
from ..extras import install_command
from ._common import Duration, paths_option
from ._numbers import PORT, Whole


@click.command("exporter")
@click.option(
    "--port",
    default=9835,
    show_default=True,
    type=PORT,
    help="TCP port for /metrics (0: any free one).",
)
@click.option(
    "--addr",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on: local only by default (the metrics name rules, drivers and processes); "
    "0.0.0.0 to serve the network.",
)
@click.option(
    "--interval",
    default=300.0,
    show_default=True,
    type=Duration(example="5m"),
    help="Time between verdict refreshes (validate's static rules): seconds, or 30s, 5m.",
)
@click.option("--policy", "policy_file", metavar="FILE", help="Policy for the verdicts (default: the shipped policy).")
@paths_option("Mounts whose cuFile route is judged on each refresh (repeatable).")
@click.option("--root", default="/", show_default=True, help="Read sysfs/procfs under this directory.")
@click.option("--trace", "trace", is_flag=True, help="Also count I/O routes live with gdsdiag trace (root, bcc).")
@click.option(
    "--trace-window",
    default=60.0,
    show_default=True,
    type=Duration(example="60s"),
    help="Time per trace session (probes re-attach between): seconds, or 30s, 2m.",
)
@click.option("--trace-path", metavar="DIR", help="Only count traced I/O to files under DIR.")
@click.option(
    "--pod-logs",
    metavar="DIR",
    default="/var/log/pods",
    show_default=True,
    help="With --trace: the kubelet's pod log directories (under --root), where the namespace and pod labels are "
    "read; the container names from DIR/../containers.",
)
@click.option(
    "--top-pods",
    default=16,
    show_default=True,
    type=Whole(1, 1000),
    help="With --trace: how many (namespace, pod, container) label sets are named, the busiest by bytes in the "
    "last 10 min; the rest count under 'other' (docs/fleet.md: how a pod moves in and out, counters monotonic).",
)
def exporter(
    port,
    addr,
    interval,
    policy_file,
    paths,
    root,
    trace,
    trace_window,
    trace_path,
    pod_logs="/var/log/pods",
    top_pods=16,
):
    """Export nvidia-fs statistics, the validate/check verdicts (refreshed every --interval), the
    processes using libcufile and, with --trace, live route counters. Metrics: docs/fleet.md."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise GdsdiagError("the exporter needs prometheus-client", install_command("exporter")) from None
    from ..check.context import CheckContext
    from ..exporter.collect import TraceCounters
    from ..exporter.server import State, refresher, start, trace_windows
    from ..platform.fsroot import FsRoot
    from ..platform.roots import require_node_root
    from ..validate.policy import load
    from ..validate.runner import run

    require_node_root(root)  # a --root that names no node's tree: one line, before serving anything
    for p in paths if root == "/" else ():
        # as check and validate refuse it (exit 4), before serving: each refresh failed on it and the
        # exporter served on (issue 46)
        if not os.path.isdir(p):
            what = "does not exist" if not os.path.lexists(p) else "is not a directory"
            raise UsageError(f"--path {p} {what}", "pass an existing directory on the storage to judge")
    policy = load(policy_file)
    if trace:
        from ..validate.adapters import trace_available

        why = trace_available()
        if why:
            raise GdsdiagError(f"--trace unavailable: {why}", "run as root with bcc installed, or drop --trace")
    fs = FsRoot(root)
    from ..platform.containers import Identities

    # (each traced process's pod: its /proc/PID/cgroup and the kubelet's log directories, under --root)
    state = State(trace=TraceCounters(ids=Identities(fs, pod_logs), pod_limit=top_pods) if trace else None)

    def make_report():
        ctx = CheckContext(FsRoot(root), env=dict(os.environ) if root == "/" else {})  # fresh: re-read every file
        return run(ctx, policy, list(paths), "static")

    try:
        server, _ = start(fs, port, addr, state)
    except OSError as e:
        raise GdsdiagError(f"cannot listen on {addr}:{port}: {e.strerror}", "choose another --port/--addr") from None
    stop = threading.Event()
    refresher(state, make_report, interval, stop)
    click.echo(
        f"gdsdiag exporter: serving http://{addr}:{server.server_port}/metrics "
        f"(verdicts every {interval:g} s{', tracing' if trace else ''})",
        err=True,
    )
    # The exporter runs until a signal: INT/TERM/HUP end it as they end every command, through
    # cli.main, with 130/143/129 (issue 42: a Ctrl-C here was swallowed and the exit was 0, and
    # under --trace each window's own handlers took the signal and the next window began).
    try:
        if trace:
            trace_windows(state, trace_path, trace_window, stop)
        else:
            while not stop.wait(3600):
                pass
    finally:
        stop.set()
        server.shutdown()
    return Outcome(EXIT_OK)
