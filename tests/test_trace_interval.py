"""--interval (trace.model.interval): what each interval adds up to, cut by the clock; the JSON line matches
its documented type; the CLI refuses intervals that are not a finite number of seconds."""

import json
import os
import subprocess
import sys

from gdsdiag.trace.model.interval import Intervals

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REC = os.path.join(ROOT, "tests", "fixtures", "trace", "trace-h200-cufile.jsonl.gz")


def _v(route, size, lat_us, pid=1, path="/d/f"):
    return {"route": route, "size": size, "latency_ns": None if lat_us is None else lat_us * 1000, "pid": pid,
            "comm": "app", "path": path}  # fmt: skip


def test_each_interval_counts_its_own_verdicts_then_starts_again():
    now = [100.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    assert iv.tick() is None  # starts the clock
    for lat in (10, 20, 30, 40):
        iv.add(_v("COMPAT", 1_000_000, lat))
    iv.add(_v("NVFS", 4096, None, pid=2, path="/d/g"))
    now[0] = 100.5
    assert iv.tick() is None  # not due yet
    now[0] = 101.0
    rec = iv.tick()
    assert rec["interval_s"] == 1.0 and rec["t_s"] == 1.0
    assert rec["routes"]["COMPAT"] == {"count": 4, "bytes": 4_000_000, "gbps": 0.004, "p50_us": 20.0, "p99_us": 40.0}
    assert rec["routes"]["NVFS"]["p50_us"] is None and rec["routes"]["NVFS"]["count"] == 1
    assert [(r["pid"], r["route"], r["count"]) for r in rec["top"]] == [(1, "COMPAT", 4), (2, "NVFS", 1)]
    now[0] = 102.0
    empty = iv.tick()
    assert empty["routes"] == {} and empty["t_s"] == 2.0
    assert iv.tick(final=True) is None  # a last partial interval that saw nothing is not printed


def _gdsdiag(*args):
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "gdsdiag", "trace", *args], capture_output=True, text=True, env=env)


def test_replay_with_interval_json_lines_match_the_type():
    from test_json_schema import compare

    from gdsdiag.schema.trace import Interval

    r = _gdsdiag("--replay", REC, "--json", "--interval", "0.2")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    ivs = [x for x in lines if x["type"] == "interval"]
    ios = [x for x in lines if x["type"] == "io"]
    assert ivs and sum(sum(s["count"] for s in x["routes"].values()) for x in ivs) == len(ios)
    problems: list[str] = []
    for x in ivs:
        compare(x, Interval, "trace interval", problems, documented=False)
    assert not problems, problems


def test_interval_must_be_a_finite_number_of_seconds():
    for bad in ("nan", "inf", "0", "-1"):
        r = _gdsdiag("--interval", bad, "--", "true")
        assert r.returncode == 4, (bad, r.stderr)
        assert "--interval" in r.stderr


def test_documented_interval_line_matches_the_type():
    import re

    from test_json_schema import _strip_comments, compare

    from gdsdiag.schema.trace import Interval

    with open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8") as f:
        section = f.read().split("### `--interval N`", 1)[1]
    doc = json.loads(_strip_comments(re.search(r"```jsonc?\n(.*?)```", section, re.S).group(1)))
    problems: list[str] = []
    compare(doc, Interval, "trace interval (docs/json.md)", problems, documented=True)
    assert not problems, problems


def test_kernel_counted_host_io_counts_by_what_its_counters_gained():
    now = [0.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    iv.tick()
    row = {"pid": 7, "comm": "cp", "api": "read", "path": "/d/f", "size_class": "4 KiB-8 KiB", "route": "HOST"}
    iv.add_counted([{**row, "count": 100, "bytes": 409600}])
    now[0] = 1.0
    rec = iv.tick()
    assert rec["routes"]["HOST"]["count"] == 100 and rec["routes"]["HOST"]["counted_in_kernel"] == 100
    assert rec["routes"]["HOST"]["p50_us"] is None  # (no per-I/O latencies)
    iv.add_counted([{**row, "count": 150, "bytes": 614400}])
    now[0] = 2.0
    rec = iv.tick()
    assert rec["routes"]["HOST"]["count"] == 50 and rec["routes"]["HOST"]["bytes"] == 204800
    assert rec["top"][0]["path"] == "/d/f" and rec["top"][0]["count"] == 50
    iv.add_counted([{**row, "count": 150, "bytes": 614400}])  # nothing new: an empty interval
    now[0] = 3.0
    assert iv.tick()["routes"] == {}


def test_an_interval_carries_what_is_waiting_for_evidence():
    """Intervals.set_waiting: the I/Os not decided at the interval's end, most bytes first, in the
    record (the type's ``waiting``), and gone from the next interval until set again."""
    from gdsdiag.trace.model.interval import TOP, Intervals

    now = [0.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    iv.tick()
    now[0] = 1.0
    rows = [{"pid": p, "comm": "w", "ios": p, "bytes": p * 10} for p in range(1, TOP + 3)]
    iv.set_waiting(rows)
    rec = iv.tick()
    w = rec["waiting"]
    assert w["ios"] == sum(range(1, TOP + 3)) and w["bytes"] == 10 * w["ios"]
    assert [r["pid"] for r in w["by_process"]] == list(range(TOP + 2, 2, -1))
    now[0] = 2.0
    iv.add({"route": "HOST", "size": 4096, "latency_ns": 1000, "pid": 1, "comm": "w", "path": "/f"})
    assert "waiting" not in iv.tick()


def _burst(iv, t0_s, seconds, gbps, io=1 << 20, lat_us=500):
    """Verdicts of SECONDS of I/O at GBPS from T0_S (the probes' clock), all handed over at once:
    what a trace gives for I/Os held for their evidence, then decided together."""
    n = int(seconds * gbps * 1e9 / io)
    step = seconds * 1e9 / n
    for i in range(n):
        iv.add({**_v("HOST", io, lat_us), "ts": int(t0_s * 1e9 + i * step)})
    return n


def test_a_burst_of_held_verdicts_never_shows_more_than_the_program_did():
    """fio at 1.51 GB/s, its verdicts held ~3 s and released in one interval: the interval's GB/s
    is over the 3 s its I/Os took (io_span_s), not its own 1 s (which said 4.5 GB/s)."""
    now = [100.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    iv.tick()
    _burst(iv, 96.0, 3.0, 1.51)
    now[0] = 101.0
    rec = iv.tick()
    host = rec["routes"]["HOST"]
    assert host["gbps"] <= 1.51 and host["gbps"] > 1.4, host
    assert 2.9 < host["io_span_s"] < 3.1 and rec["top"][0]["gbps"] == host["gbps"]


def test_the_last_short_interval_after_the_flush_keeps_the_rate():
    """At the end the held verdicts come out in a last interval of 0.2 s: 3 s of I/O at 1.51 GB/s
    (it said 5.0 GB/s, and 12.3 in another run)."""
    now = [100.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    iv.tick()
    now[0] = 101.0
    iv.tick()
    _burst(iv, 98.0, 3.0, 1.51)
    now[0] = 101.2
    rec = iv.tick(final=True)
    assert rec["interval_s"] == 0.2 and rec["routes"]["HOST"]["gbps"] <= 1.51


def test_steady_verdicts_decided_late_show_the_steady_rate():
    """Each interval decides the I/O of one second, 3 s after it happened: the rate is that second's,
    and no io_span_s is said when the span is within the interval."""
    now = [100.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    iv.tick()
    rates = []
    for k in range(3):
        _burst(iv, 97.0 + k, 0.999, 1.0, lat_us=0)
        now[0] = 101.0 + k
        rec = iv.tick()
        rates.append(rec["routes"]["HOST"]["gbps"])
        assert "io_span_s" not in rec["routes"]["HOST"]
    assert all(0.95 < r <= 1.0 for r in rates), rates
