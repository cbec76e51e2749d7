"""The --json io line written from its fixed layout (render/trace_out.io_json) is byte for byte what
json.dumps writes, for every verdict: the ones real recordings give, and generated ones with every
kind of value (non-ASCII and control characters, None, huge and negative numbers); a dict of another
layout or a value of another type goes to the encoder itself."""

from __future__ import annotations

import glob
import json
import os

from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsdiag.render.trace_out import io_json
from gdsdiag.routes import Route
from gdsdiag.trace.model.classify import classify, io_line
from gdsdiag.trace.recording import read_record


def _same(v) -> None:
    assert io_json(v) == json.dumps(v) + "\n"


def test_recorded_verdicts() -> None:
    """Every verdict of the GPU machine's recordings (cuFile, kvikio, torch.load, CuPy)."""
    n = 0
    for path in sorted(glob.glob(os.path.join(FIXTURES, "trace", "*.jsonl.gz"))):
        header, events = read_record(path)
        for v in classify(events, record_version=int(header.get("gdsdiag_trace_record", 1))):
            _same(v)
            n += 1
    assert n > 100


text = st.text(st.characters(codec="utf-8"), max_size=40)  # (any code point: quotes, controls, emoji)
num = st.integers(min_value=-(1 << 70), max_value=1 << 70)


@settings(max_examples=400, deadline=None)
@given(
    ts=num,
    pid=num,
    comm=text,
    api=text,
    op=text,
    path=st.none() | text,
    ret=st.none() | num,
    lat=st.none() | num,
    route=st.sampled_from(list(Route)),
    sub=st.none() | text,
    conf=text,
    ev=st.lists(text, max_size=5),
)
def test_generated_verdicts(ts, pid, comm, api, op, path, ret, lat, route, sub, conf, ev) -> None:
    v = io_line(ts, pid, pid + 1, comm, api, op, path, ts // 3, pid * 7, ret, lat, route, sub, conf, ev)
    _same(v)
    _same(v)  # (again: the second time its strings come from the cache)


def test_other_layouts_and_types_go_to_the_encoder() -> None:
    v = io_line(1, 2, 3, "app", "pread64", "read", "/d/f", 0, 4096, 4096, 900, Route.HOST, None, "medium", ["x"])
    for change in (
        {"latency_ns": 1.5},  # a float
        {"size": True},  # a bool is not an int to JSON
        {"comm": 7},
        {"evidence": ("x",)},  # a tuple
        {"evidence": [["nested"]]},  # unhashable where a string goes
        {"evidence": ["x", 5, None]},  # numbers and null among the strings
        {"path": b"/d/f"},
        {"type": "summary"},
    ):
        w = {**v, **change}
        if change.get("path") == b"/d/f" or change.get("evidence") == [["nested"]]:
            try:
                json.dumps(w)
            except TypeError:
                continue  # (the encoder refuses it too: nothing to compare)
        _same(w)
    extra = {**v, "extra": 1}
    _same(extra)
    reordered = dict(reversed(list(v.items())))
    _same(reordered)


def test_the_encoded_runs_of_two_lines_never_stand_in_for_each_other() -> None:
    """io_json encodes (comm, api, op, path) and (route, subtype, confidence, *evidence) once per
    distinct value: a line whose four process-and-file fields equal another's route, subtype,
    confidence and one piece of evidence still gets its own text."""
    a = io_line(1, 2, 3, "HOST", "sub", "high", "ev", 0, 1, 1, 1, Route.COMPAT, None, "low", ["x"])
    b = io_line(1, 2, 3, "c", "read", "read", "/f", 0, 1, 1, 1, Route.HOST, "sub", "high", ["ev"])
    for v in (a, b, a, b):
        _same(v)


def test_a_printer_given_a_polls_lines_together_writes_what_one_call_each_writes(capsys) -> None:
    """LinePrinter.many (the live loop's verdicts of a poll in one list): the same bytes as __call__
    per verdict, in JSON and as text lines (rate-limited the same way)."""
    import io

    from rich.console import Console

    from gdsdiag.render.trace_out import LinePrinter

    vs = [
        io_line(
            i * 10_000_000,
            7,
            7,
            "app",
            "pread64",
            "read",
            "/d/f",
            i * 4096,
            4096,
            4096,
            900,
            route,
            None,
            "high",
            ["x"],
        )
        for i, route in enumerate([Route.HOST, Route.DRAM_BOUNCE, Route.COMPAT] * 40)
    ]
    for as_json in (True, False):
        texts = []
        for together in (False, True):
            buf = io.StringIO()
            p = LinePrinter(Console(file=buf, width=200), as_json, max_per_s=50)
            if together:
                p.many(vs[:50])
                p.many(vs[50:])
            else:
                for v in vs:
                    p(v)
            texts.append(buf.getvalue() + capsys.readouterr().out)
        assert texts[0] == texts[1]
        assert texts[0].count("\n") >= (len(vs) if as_json else 50)
