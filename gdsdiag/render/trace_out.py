"""gdsdiag trace output: a bpftrace-style line per I/O (rate limited), JSON lines, the summary."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from .. import docout
from ..units import size_text
from ..verdicts import style

if TYPE_CHECKING:
    from ..schema import trace as schema


def _line_encoder():
    """json.dumps for the per-I/O lines, its output exactly: json.dumps builds its C encoder again
    for every call (a quarter of a verdict line's cost); this one is built once. json.dumps itself
    where the interpreter has no C encoder (or another signature)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.dumps
    try:
        enc = make(
            None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
        )
    except TypeError:
        return json.dumps

    def dumps(v) -> str:
        return "".join(enc(v, 0))

    return dumps


_dumps = _line_encoder()

# The io line's keys in the order classify.io_line builds them (schema.trace.IoLine): the only
# layout io_json writes itself; anything else goes to the JSON encoder.
_IO_KEYS = (
    "type",
    "ts",
    "pid",
    "tid",
    "comm",
    "api",
    "op",
    "path",
    "offset",
    "size",
    "ret",
    "latency_ns",
    "route",
    "subtype",
    "confidence",
    "evidence",
)
_esc = json.encoder.encode_basestring_ascii  # (what _dumps escapes strings with: ensure_ascii)
_JSON_STR: dict[str, str] = {}  # a string -> its JSON text: names, paths, routes and labels repeat
_JSON_STR_MAX = 8192  # (the verdicts' own texts, such as buffer addresses, are escaped each time)


# io_json's encoded runs of string fields, each to its JSON text: (comm, api, op, path) in _HEADS,
# (route, subtype, confidence) in _TAILS (two maps: a key of one can equal a key of the other). The
# evidence strings are escaped each time, by the C encoder over the list: most are a verdict's own
# (a bounce pair's buffer and copy time), and a cache that misses costs more than the escape.
# Bounded: a stream of a million files keeps encoding.
_HEADS: dict[tuple, str] = {}
_TAILS: dict[tuple, str] = {}
_SEGMENTS_MAX = 8192


class _NotPlain(Exception):
    """A value io_json does not write itself (not an int, str or None where one is expected)."""


def _js(s) -> str:
    r = _JSON_STR.get(s)
    if r is None:
        if not isinstance(s, str):
            raise _NotPlain
        r = _esc(s)
        if len(_JSON_STR) < _JSON_STR_MAX:
            _JSON_STR[s] = r
    return r


def io_json(v: schema.IoLine) -> str:
    """The --json line of a verdict with its newline, byte for byte what json.dumps writes (tests/
    test_trace_json_line.py holds it to that), at about half its cost: the line was a sixth of the
    tracer's CPU on a real COMPAT stream. An io line's layout is fixed (classify.io_line), so only
    its values are encoded; any other dict, or a value of another type, goes to the encoder."""
    try:
        if len(v) != 16 or tuple(v) != _IO_KEYS or v["type"] != "io":
            return _dumps(v) + "\n"
        ts, pid, tid, off, size, ret, lat, ev = (
            v["ts"], v["pid"], v["tid"], v["offset"], v["size"], v["ret"], v["latency_ns"], v["evidence"]
        )  # fmt: skip
        # (type(x) is int: a bool is an int to isinstance, not to JSON)
        if not (type(ts) is int and type(pid) is int and type(tid) is int and type(off) is int and type(size) is int):
            raise _NotPlain
        if ret is None:
            rets = "null"
        elif type(ret) is int:
            rets = str(ret)
        else:
            raise _NotPlain
        if lat is None:
            lats = "null"
        elif type(lat) is int:
            lats = str(lat)
        else:
            raise _NotPlain
        if type(ev) is not list:
            raise _NotPlain
        # the runs of string fields, each encoded once per distinct value (a stream repeats its
        # process, file and route): a dict lookup a line instead of seven string encodings
        who = (v["comm"], v["api"], v["op"], v["path"])
        head = _HEADS.get(who)
        if head is None:
            comm, api, op, path = who
            head = (
                f'"comm": {_js(comm)}, "api": {_js(api)}, "op": {_js(op)}, '
                f'"path": {"null" if path is None else _js(path)}'
            )
            if len(_HEADS) < _SEGMENTS_MAX:
                _HEADS[who] = head
        why = (v["route"], v["subtype"], v["confidence"])
        tail = _TAILS.get(why)
        if tail is None:
            route, sub, conf = why
            tail = (
                f'"route": {_js(route)}, "subtype": {"null" if sub is None else _js(sub)}, '
                f'"confidence": {_js(conf)}, "evidence": ['
            )
            if len(_TAILS) < _SEGMENTS_MAX:
                _TAILS[why] = tail
        return (
            f'{{"type": "io", "ts": {ts}, "pid": {pid}, "tid": {tid}, {head}, "offset": {off}, "size": {size}, '
            f'"ret": {rets}, "latency_ns": {lats}, {tail}{", ".join(map(_esc, ev))}]}}\n'
        )
    except (_NotPlain, TypeError):  # (TypeError: an unhashable value where a string was expected, or
        # a piece of evidence that is no string: the C escape takes strings only)
        return _dumps(v) + "\n"


def _size(n) -> str:
    """An I/O's size or a total: the one notation of every table and summary (units.size_text)."""
    return size_text(n)


class LinePrinter:
    """At most ``max_per_s`` lines a second; beyond that a running count, so a fast workload does not
    bury the terminal (every verdict still counts in the summary and in --json output). The second is
    the I/Os' own (the newest verdict time seen), not the wall clock: a replay prints the same lines
    however fast the machine replays it, and a live trace's verdicts come within a second of their I/O."""

    def __init__(self, console: Console, as_json: bool, max_per_s: int = 50):
        self.console, self.as_json, self.max = console, as_json, max_per_s
        self.window: int | None = None
        self.in_window = 0
        self.suppressed = 0
        self.header_done = False
        self.t0: int | None = None  # the first line's time: lines show seconds since it

    def many(self, vs: list[schema.IoLine]) -> None:
        """Each of VS in turn, as __call__ would (the live loop's verdicts of a poll, together):
        the JSON lines in one write."""
        if self.as_json:
            docout.stream().write("".join([io_json(v) for v in vs]))
            return
        for v in vs:
            self(v)

    def __call__(self, v: schema.IoLine) -> None:
        if self.as_json:
            docout.stream().write(io_json(v))
            return
        now = v["ts"] // 1_000_000_000
        if self.window is None:
            self.window = now
        if now > self.window:
            if self.suppressed:
                self.console.print(
                    f"… {self.suppressed} more I/Os in the last second (counted in the summary)", style="dim"
                )
            self.window, self.in_window, self.suppressed = now, 0, 0
        self.in_window += 1
        if self.in_window > self.max:
            self.suppressed += 1
            return
        if not self.header_done:
            self.console.print(
                Text(
                    f"{'TIME(s)':>9} {'COMM/PID':22} {'OP':5} {'FILE':28} {'OFFSET':>10} {'SIZE':>8} "
                    f"{'LAT(ms)':>8} {'ROUTE':12} EVIDENCE",
                    style="bold",
                )
            )
            self.header_done = True
        if self.t0 is None:
            self.t0 = v["ts"]
        path = v["path"] or "?"
        if len(path) > 28:
            path = "…" + path[-27:]
        lat = f"{v['latency_ns'] / 1e6:.3f}" if v["latency_ns"] is not None else "-"
        route = v["route"] + (f"/{v['subtype']}" if v["subtype"] else "")
        t = Text(
            f"{(v['ts'] - self.t0) / 1e9:9.3f} {v['comm'][:14] + '/' + str(v['pid']):22} {v['op'][:5]:5} {path:28} {v['offset']:>10} "
            f"{_size(v['size']):>8} {lat:>8} "
        )
        t.append(f"{route:12}", style=style(v["route"]))
        t.append(f" [{v['confidence']}] " + "; ".join(v["evidence"][:3]), style="dim")
        self.console.print(t, overflow="ellipsis", no_wrap=True)


def file_line(f: dict) -> str:
    """'model.x: 64 MiB, 100 % reached the GPU through host memory (mmap, page cache hit 40 %), 0 % P2P —
    why: …' (the GPU's index is not in the evidence: a device pointer does not name its GPU)."""
    r = f["routes"]
    total = f["bytes"] or 1
    parts = []
    for route, label in (
        ("DRAM_BOUNCE", "reached the GPU through host memory"),
        ("COMPAT", "went through cuFile's compatibility mode"),
        ("HOST", "stayed in host memory (no CUDA copy took it)"),
        ("UNKNOWN", "took a route nothing conclusive named"),
    ):
        n = r.get(route, 0)
        if n:
            extra = ""
            if route == "DRAM_BOUNCE":
                how = ", ".join(f.get("via_to_gpu") or f["via"])
                if f.get("page_cache_hit") is not None:
                    how += f", page cache hit {100 * f['page_cache_hit']:.0f} %"
                extra = f" ({how})"
            pct = 100 * n / total
            parts.append(f"{'<1' if 0 < pct < 0.5 else f'{pct:.0f}'} % {label}{extra}")
    p2p = f.get("p2p_share", 0)
    parts.append(f"{100 * p2p:.0f} % P2P")
    was = f" (renamed from {', '.join(f['renamed_from'])})" if f.get("renamed_from") else ""
    line = f"{f['path']}{was}: {_size(f['bytes'])}, " + ", ".join(parts)
    return line + (f" — why: {f['why']}" if f.get("why") and not f.get("why_chain") else "")


def file_why_lines(f: dict) -> list[str]:
    """The decisive fact of a file's why and the fix, a line each (the chain is in --json)."""
    chain = f.get("why_chain") or []
    decisive = next((x for x in chain if x.get("role") == "decisive"), chain[0] if chain else None)
    out = []
    if f.get("mechanism"):
        out.append(
            f"how: {f['mechanism']}"
            + (f", {f['gbps']:.2f} GB/s over its I/O" if f.get("gbps") else "")
            + (
                f", {f['major_faults']} major faults ({f['major_faults_per_gib']:g} a GiB mapped)"
                if f.get("major_faults")
                else ""
            )
        )
    if f.get("against_ceiling"):
        out.append(f"ceiling: {f['against_ceiling']}")
    if decisive is not None:
        label = "" if decisive["fact"] == "route" else f"{decisive['fact']}: "
        out.append(f"why: {label}{decisive['value']}")
        others = [x for x in chain if x is not decisive][:3]
        if others:
            out.append("  because: " + "; ".join(f"{x['fact']}: {x['value']}" for x in others))
    if f.get("fix"):
        out.append(f"fix: {f['fix']}")
    return out


def _render_files(console: Console, files: list[dict]) -> None:
    if not files:
        return
    console.print("per file:", style="bold")
    for f in files[:40]:
        console.print("  " + file_line(f), markup=False, highlight=False, soft_wrap=True)  # (copyable: never wrapped)
        for line in file_why_lines(f):
            console.print("    " + line, markup=False, highlight=False, soft_wrap=True)
    if len(files) > 40:
        console.print(f"  … {len(files) - 40} more (all in --json)", style="dim")


def _render_untraced(console: Console, u: dict | None) -> None:
    """The node's paths host tracing cannot see (check/why.py untraced_why): said, never left out."""
    if not u:
        return
    chain = u["why_chain"]
    console.print("not seen by the trace:", style="bold yellow")
    console.print(f"  {chain[0]['value']}", markup=False, highlight=False, soft_wrap=True)
    for x in chain[1:]:
        console.print(f"  {x['fact']}: {x['value']}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"  fix: {u['fix']}", markup=False, highlight=False, soft_wrap=True)


def _render_block(console: Console, rows: list[dict]) -> None:
    if not rows:
        return
    console.print("block devices (--block: requests the traced processes issued):", style="bold")
    for r in rows[:20]:
        name = f" {r['name']}" if r.get("name") else ""
        console.print(
            f"  {r['device']}{name} {r['op']}: {r['requests']} requests, {_size(r['bytes'])}",
            markup=False,
            highlight=False,
        )


def _render_trees(console: Console, trees: list[dict]) -> None:
    """One line per traced process tree with file I/O: its bytes per route (a data loader's workers
    and the process that copies to the GPU are one tree)."""
    shown = [t for t in trees if t["routes"]]
    if len(shown) < 1:
        return
    console.print("per process tree:", style="bold")
    for t in shown[:20]:
        total = sum(t["routes"].values()) or 1
        mix = ", ".join(
            f"{r} {_size(n)} ({100 * n / total:.0f} %)" for r, n in sorted(t["routes"].items(), key=lambda x: -x[1])
        )
        pod = _where(t)
        console.print(
            f"  {t.get('comm') or '?'}/{t['root']}{f' [{pod}]' if pod else ''} "
            f"({len(t['pids'])} process{'es' if len(t['pids']) != 1 else ''}): {mix}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _where(row: dict) -> str:
    """A row's pod and container as text ('' for a host process): 'pod NS/NAME, container ID12'."""
    parts = []
    if row.get("pod_uid"):
        parts.append(
            f"pod {row.get('namespace')}/{row['pod']}" if row.get("pod") else f"pod uid {row['pod_uid']} (name unknown)"
        )
    if row.get("container_id"):
        cid = row["container_id"][:12]
        parts.append(f"container {row['container']} ({cid})" if row.get("container") else f"container {cid}")
    return ", ".join(parts)


def cache_note(pc: dict | None, when: str = "") -> str:
    """A pod's page-cache hit share (trace/model/cacheshare.py), where its reads went through the cache."""
    if not pc:
        return ""
    if pc["hit_share"] is None:
        return f", page cache: hits unknown (of {_size(pc['read_bytes'])} read{when})"
    return f", page cache {100 * pc['hit_share']:.0f} % hits (of {_size(pc['read_bytes'])} read{when})"


def _render_pods(console: Console, pods: list[dict]) -> None:
    """One line per Kubernetes pod: what its processes moved, per route (most bytes first)."""
    if not pods:
        return
    console.print("per pod:", style="bold")
    for p in pods[:20]:
        total = p["bytes"] or 1
        mix = ", ".join(
            f"{r} {_size(n)} ({100 * n / total:.0f} %)" for r, n in sorted(p["routes"].items(), key=lambda x: -x[1])
        )
        name = f"{p['namespace']}/{p['pod']}" if p.get("pod") else f"uid {p['pod_uid']} (name unknown)"
        console.print(
            f"  {name}: {_size(p['bytes'])} in {p['ios']} I/Os by {len(p['pids'])} "
            f"process{'es' if len(p['pids']) != 1 else ''}"
            + (f": {mix}" if mix else "")
            + cache_note(p.get("page_cache")),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if len(pods) > 20:
        console.print(f"  … {len(pods) - 20} more (all in --json)", style="dim")


def render_summary(console: Console, res, as_json: bool) -> None:
    if as_json:
        docout.stream().write(json.dumps(res.summary_json()) + "\n")
        return
    console.print()
    if not res.ios and not getattr(res, "counted", []):
        console.print("no cuFile or file I/O seen", style="yellow")
    for route, s in res.summary.items():
        sub = f" ({', '.join(s['subtypes'])})" if s["subtypes"] else ""
        # I/Os counted in the kernel have no latency each: "latency unknown", not "p50 - µs"
        if s["p50_us"] is None or s["p99_us"] is None:
            lat = "latency unknown"
        else:
            lat = f"p50 {s['p50_us']:.0f} µs, p99 {s['p99_us']:.0f} µs"
        console.print(
            Text(
                f"{route}{sub}: {s['count']} I/Os, {_size(s['bytes'])}, {lat}"
                + (f" ({s['counted_in_kernel']} counted in the kernel)" if s.get("counted_in_kernel") else "")
                + (
                    f" ({s['lost_in_kernel']} of them with no per-I/O detail: their records were dropped)"
                    if s.get("lost_in_kernel")
                    else ""
                ),
                style=f"bold {style(route)}",
            )
        )
        hist = s["hist_us"]
        if hist:
            top = max(c for _, _, c in hist) or 1
            console.print(f"{'µs':>22} : count    distribution", style="dim")
            for lo, hi, c in hist:
                bar = "*" * int(40 * c / top)
                console.print(f"{lo:>10} -> {hi:<10} : {c:<8} |{bar:<40}|", markup=False)
    _render_files(console, getattr(res, "files", []))
    _render_untraced(console, getattr(res, "untraced", None))
    _render_trees(console, getattr(res, "trees", []))
    _render_pods(console, getattr(res, "pods", []))
    _render_block(console, getattr(res, "block", []))
    counted = getattr(res, "counted", [])
    if counted:
        console.print(
            f"host I/O counted in the kernel (processes without CUDA, and I/Os whose records the full ring "
            f"dropped; --per-io for a line each): "
            f"{sum(r['count'] for r in counted)} I/Os",
            style="bold dim",
        )
        for r in counted[:40]:
            mean = f"{r['mean_latency_us']:.1f}" if r["mean_latency_us"] is not None else "-"
            console.print(
                f"  {r['comm'][:14] + '/' + str(r['pid']):22} {r['api']:9} {r['path']}"
                + (f" (renamed from {r['renamed_from']})" if r.get("renamed_from") else "")
                + f"  {r['count']} x {r['size_class']}"
                f" = {_size(r['bytes'])}, mean {mean} µs" + (f", {r['errors']} errors" if r["errors"] else ""),
                markup=False,
                style="dim",
            )
            if r.get("why"):  # (UNKNOWN: counted.CountedIo.rows)
                console.print(f"    {r['route']}: {r['why']}", markup=False)
        if len(counted) > 40:
            console.print(f"  … {len(counted) - 40} more (all in --json)", style="dim")
    if res.processes:
        console.print("processes:", style="bold")
        for p in res.processes:
            parent = f" child of {p['ppid']}" if p.get("ppid") else ""
            console.print(
                f"  {p['pid']:>7} {p.get('comm') or '?':16} {p.get('ios', 0):>6} I/Os{parent}"
                + (f", {p['threads']} thread{'s' if p['threads'] != 1 else ''} started" if p.get("threads") else "")
                + (f"  {p['exe']}" if p.get("exe") else "")
                + (f"  [{_where(p)}]" if _where(p) else ""),
                markup=False,
                style="dim",
            )
    for lib in getattr(res, "libraries", []):
        how = (f"{lib['usdt']} USDT sites + " if lib.get("usdt") else "") + f"{lib.get('uprobes', 0)} uprobes"
        who = f", mapped by {', '.join(map(str, lib['pids']))}" if lib.get("pids") else ""
        console.print(f"probed {lib['kind']} {lib['path']} ({how}{who})", markup=False, style="dim")
    console.print(
        f"events {res.events}, lost {res.lost}"
        + (f", traced program exit code {res.exit_code}" if res.exit_code is not None else ""),
        style="dim",
    )
    if res.lost:
        console.print(
            f"warning: {res.lost} events were lost (the ring buffer was full): their reads and writes are "
            f"counted in the kernel with their bytes (under their file where it is known) but lack per-I/O "
            f"evidence; trace fewer processes or use --path",
            style="bold red",
            markup=False,
        )
        by = getattr(res, "lost_by_process", [])
        if by:
            who = ", ".join(
                f"{r['comm'] or '?'}/{r['pid']} {r['lost']}"
                + (
                    f" ({r['ios']} I/Os, {r.get('bytes', 0)} bytes, counted: no route"
                    + (f"; {r['in_files']} of them under their file" if r.get("in_files") else "")
                    + ")"
                    if r.get("ios")
                    else ""
                )
                for r in by[:10]
            )
            console.print(f"  lost per process: {who}" + (" …" if len(by) > 10 else ""), style="red", markup=False)
    if getattr(res, "recording_cut_at_line", None):
        console.print(
            f"warning: the recording's last line ({res.recording_cut_at_line}) was cut as it was written "
            f"(the trace killed, or its disk full): that event is left out",
            style="bold red",
            markup=False,
        )
    if getattr(res, "unclassified_at_stop", 0):
        console.print(
            f"warning: {res.unclassified_at_stop} events were still queued, or I/Os still waiting for evidence "
            f"(a CUDA copy, libcufile's call), when the trace was stopped; they are not in the verdicts "
            f"(the summary is out within a second of a signal)",
            style="bold red",
            markup=False,
        )
    by = [r for r in getattr(res, "unclassified_by_process", []) if r.get("ios")]
    if by:
        # (a stop cut their evidence short, or a cuFile call's start came before the trace did)
        who = ", ".join(f"{r['comm'] or '?'}/{r['pid']} {r['ios']} I/Os, {r['bytes']} bytes" for r in by[:10])
        console.print(f"  not classified (counted, no route): {who}", style="red", markup=False)
    if getattr(res, "verdicts_not_printed", 0):
        console.print(
            f"note: {res.verdicts_not_printed} verdicts held for a possible CUDA copy at the stop were not "
            f"printed (the stop's time budget); they are in the totals above (--record keeps every event)",
            style="yellow",
            markup=False,
        )
    for f in res.failed:
        console.print(f"not attached: {f}", style="dim", markup=False)
