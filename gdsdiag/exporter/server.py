"""Serve the collector on one port; refresh the verdicts on an interval; optionally trace."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass


@dataclass
class State:
    report: object | None = None
    when: float | None = None
    errors: int = 0
    last_error: str | None = None
    trace: object | None = None


def refresh(state: State, make_report) -> None:
    try:
        state.report = make_report()
        state.when = time.time()
    except Exception as e:  # a refresh must never kill the exporter: count it and say why
        state.errors += 1
        state.last_error = f"{type(e).__name__}: {getattr(e, 'cause', None) or e}"
        print(f"gdsdiag exporter: refresh failed: {state.last_error}", file=sys.stderr, flush=True)


def start(fs, port: int, addr: str, state: State):
    from prometheus_client import CollectorRegistry, start_http_server

    from .collect import Collector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(fs, state))
    server, thread = start_http_server(port, addr, registry)
    return server, thread


def refresher(state: State, make_report, interval: float, stop: threading.Event) -> threading.Thread:
    def loop():
        while not stop.is_set():
            refresh(state, make_report)
            stop.wait(interval)

    t = threading.Thread(target=loop, name="gdsdiag-verdicts", daemon=True)
    t.start()
    return t


def trace_windows(state: State, path_filter: str | None, window: float, stop: threading.Event) -> None:
    """gdsdiag trace needs the main thread (it installs signal handlers): run it there in windows,
    so its per-window verdict list stays bounded; counters accumulate across windows."""
    from ..validate import adapters

    while not stop.is_set():
        adapters.trace_window(window, path_filter, state.trace)
