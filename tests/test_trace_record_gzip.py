"""--record FILE.gz writes gzip (it wrote plain text under a .gz name), and a gzip recording cut short
(the tracer killed, the disk full) replays up to the cut and says so, as a plain one's cut last line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

from gdsdiag.outfile import NewTextFile
from gdsdiag.trace.model.events import RECORD_VERSION, Event


def _lines(n: int) -> list[str]:
    out = [json.dumps({"gdsdiag_trace_record": RECORD_VERSION})]
    out.append(
        json.dumps(Event(0, 100, 100, "open", "openat", [7, 0, 0, 0, 0, -100, 1], "app", "/data/f.dat").to_list())
    )
    for i in range(n):
        e = Event(1000 + i * 2000, 100, 100, "sys_exit", "pread64", [7, 0x7F00, 4096, i * 4096, 0, 4096, 900], "app")
        out.append(json.dumps(e.to_list()))
    return [x + "\n" for x in out]


def test_a_gz_name_gets_a_gzip_stream(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    rec = NewTextFile(str(path), "--record")
    for x in _lines(100):
        rec.write(x)
    rec.close()
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(path.read_bytes()).decode() == "".join(_lines(100))
    plain = tmp_path / "t.jsonl"
    rec = NewTextFile(str(plain), "--record")
    rec.write("".join(_lines(3)))
    rec.close()
    assert plain.read_text() == "".join(_lines(3))


def _replay(path):
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r, [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]


def test_a_gzip_recording_cut_short_replays_up_to_the_cut(tmp_path):
    whole = gzip.compress("".join(_lines(20000)).encode(), compresslevel=1)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])  # (no end-of-stream marker, no trailer)
    r, out = _replay(path)
    assert r.returncode == 0, r.stderr
    summary = out[-1]
    ios = [x for x in out if x["type"] == "io"]
    assert 0 < len(ios) < 20000 and summary["ios"] == len(ios)
    assert summary["recording_cut_at_line"] is not None and summary["recording_cut_at_line"] > len(ios)
    whole_path = tmp_path / "whole.jsonl.gz"
    whole_path.write_bytes(whole)
    r, out = _replay(whole_path)
    assert r.returncode == 0 and out[-1]["ios"] == 20000 and out[-1]["recording_cut_at_line"] is None
