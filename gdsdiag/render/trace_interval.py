"""``gdsdiag trace --interval N`` output: a table per interval (text) or an ``interval`` JSON line."""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.text import Text

from .. import docout
from ..trace.model.interval import Intervals
from ..verdicts import style
from .trace_out import _size, cache_note


def _num(x, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _span_note(s: dict) -> str:
    """Where the GB/s is over the span the I/Os took, not the interval (decided late), it says so."""
    span = s.get("io_span_s")
    return f"  (GB/s over the {span:.1f} s its I/Os took)" if span else ""


class IntervalPrinter:
    """Feeds every verdict to the interval counters and prints each interval as it ends."""

    def __init__(self, console: Console, as_json: bool, every_s: float, replay: bool = False):
        self.console, self.as_json, self.replay = console, as_json, replay
        self._ts = 0.0
        self.acc = Intervals(every_s, (lambda: self._ts) if replay else time.monotonic)

    def add(self, v) -> None:
        if self.replay:  # the recording's clock: an interval ends when a verdict comes after it
            self._ts = v["ts"] / 1e9
            self.tick()
        self.acc.add(v)

    def tick(self, final: bool = False, counted=None, waiting=None, pods=None, cache=None) -> None:
        """COUNTED: a function giving the kernel's host-I/O counters now; WAITING: one giving the
        I/Os not decided yet (both read only when an interval is due); PODS: one giving each
        process's pod (trace/pods.PodBook.of); CACHE: one giving each pod's page-cache hit share
        so far (trace/live._cache_now)."""
        if pods is not None and (final or self.acc.due()):
            self.acc.set_pods(pods())
        if cache is not None and (final or self.acc.due()):
            self.acc.set_cache(cache())
        if counted is not None and (final or self.acc.due()):
            self.acc.add_counted(counted())
        if waiting is not None and not final and self.acc.due():
            self.acc.set_waiting(waiting())
        rec = self.acc.tick(final)
        if rec is None:
            return
        if self.as_json:
            docout.stream().write(json.dumps(rec) + "\n")
            docout.stream().flush()
            return
        c = self.console
        when = f"+{rec['t_s']:.1f} s" if self.replay else time.strftime("%H:%M:%S")
        c.print(Text(f"{when}  last {rec['interval_s']:.1f} s", style="bold"))
        w = rec.get("waiting")
        wline = None
        if w and w["ios"]:
            who = ", ".join(f"{(r['comm'] or '?')[:14]}/{r['pid']} {r['ios']}" for r in w["by_process"][:3])
            wline = (
                f"  waiting for evidence: {w['ios']} I/Os, {_size(w['bytes'])} ({who}): a CUDA copy may still take "
                f"their bytes, or libcufile's call claim them; decided when their window ends"
            )
        if not rec["routes"]:
            c.print("  no I/O decided", style="dim")
            if wline:
                c.print(wline, style="yellow", markup=False)
            return
        c.print(f"  {'ROUTE':12} {'I/Os':>9} {'BYTES':>9} {'GB/s':>8} {'p50 µs':>9} {'p99 µs':>9}", style="dim")
        for route, s in rec["routes"].items():
            t = Text(f"  {route:12}", style=style(route))
            t.append(
                f" {s['count']:>9} {_size(s['bytes']):>9} {_num(s['gbps'], '{:.3f}'):>8} "
                f"{_num(s['p50_us']):>9} {_num(s['p99_us']):>9}"
                + (f"  ({s['counted_in_kernel']} counted in the kernel)" if s.get("counted_in_kernel") else "")
                + _span_note(s)
            )
            c.print(t)
        for r in rec["top"]:
            who = f"{r['comm'][:14]}/{r['pid']}"
            c.print(
                f"    {who:22} {r['route']:12} {r['count']:>7} {_num(r['gbps'], '{:.3f}'):>8} GB/s "
                f"p99 {_num(r['p99_us']):>7} µs  {r['path'] or '?'}",
                markup=False,
                style="dim",
            )
        if rec["rows_left_out"]:
            c.print(f"    … {rec['rows_left_out']} more rows", style="dim")
        for p in rec.get("pods", []):
            name = f"{p['namespace']}/{p['pod']}" if p.get("pod") else f"pod uid {p['pod_uid']}"
            mix = ", ".join(
                f"{r} {100 * n / (p['bytes'] or 1):.0f} %" for r, n in sorted(p["routes"].items(), key=lambda x: -x[1])
            )
            ceiling = f" of {p['ceiling_gbps']:.1f}" if p.get("ceiling_gbps") else ""
            c.print(
                f"    pod {name}: {_size(p['bytes'])}, {_num(p['gbps'], '{:.3f}')}{ceiling} GB/s ({mix})"
                + cache_note(p.get("page_cache"), " so far")
                + _span_note(p),
                markup=False,
            )
        if wline:
            c.print(wline, style="yellow", markup=False)
