"""The sweep's table at the terminal's width: columns are dropped (and named under the table) until
it fits, never a number cut ("2.…"); sizes in one notation (units.size_text: binary units, 3
significant digits), raw bytes only in JSON. On a real CPU-machine sweep with --compare-fio
(fixtures/cpu-machine/sweep-host-compare-fio-2026-12-07.json) and the GPU machine's sweep."""

import io
import json
import os
import re

import pytest
from rich.console import Console
from sweep_fixture import h200_sweep_doc
from sweep_render_fixture import report_from_doc

from gdsdiag.render import sweep_out
from gdsdiag.units import size_text

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_FIO = os.path.join(HERE, "fixtures", "cpu-machine", "sweep-host-compare-fio-2026-12-07.json")


def _docs():
    with open(CPU_FIO, encoding="utf-8") as f:
        return {"cpu-compare-fio": json.load(f), "h200": h200_sweep_doc()}


def _render(doc, width):
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, force_terminal=False)
    sweep_out.render(console, report_from_doc(doc))
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("name", ["cpu-compare-fio", "h200"])
def test_the_table_fits_and_no_number_is_cut(name, width):
    doc = _docs()[name]
    text = _render(doc, width)
    assert "…" not in text, text
    table = [ln for ln in text.splitlines() if ln.startswith("  ") and ("GB/s" in ln or re.search(r"\d\.\d{3}", ln))]
    assert table and all(len(ln.rstrip()) <= width for ln in table), "\n".join(table)
    rows = [ln for ln in table if "GB/s" not in ln]
    assert len(rows) == len(doc["points"])
    for ln, p in zip(rows, doc["points"]):  # the figures every width keeps, whole
        cells = ln.split()
        assert f"{p['summary']['gbps']:.3f}" in cells and p["route"] in cells, ln
        ratio = (p.get("fio") or {}).get("ratio")
        if ratio is not None:
            assert f"{ratio:.2f}" in cells, ln


def test_what_is_left_out_is_named_and_a_wide_terminal_has_everything():
    doc = _docs()["cpu-compare-fio"]
    narrow = _render(doc, 80)
    m = re.search(r"left out at 80 columns: ([^(]+) \(", narrow.replace("\n", " "))
    assert m and "p99.9 µs" in m.group(1), narrow
    wide = _render(doc, 200)
    assert "left out" not in wide
    header = next(ln for ln in wide.splitlines() if "GB/s" in ln)
    for col in ("IOPS", "p50 µs", "p99 µs", "p99.9 µs", "CPU %", "verified", "fio GB/s", "fio IOPS", "÷fio"):
        assert col in header, header


@pytest.mark.parametrize("name", ["cpu-compare-fio", "h200"])
def test_one_size_notation(name):
    doc = _docs()[name]
    text = _render(doc, 200)
    assert not re.search(r"\b\d+(\.\d+)?(k|M|G|KiB|MiB|GiB)\b", text), text  # no '4k', '16M', '16.0MiB'
    for p in doc["points"]:
        assert f"{size_text(p['bs'])}" in text
    assert f"({size_text(doc['config'].get('size', 4 << 30))} file)" in text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "?"),
        (0, "0 B"),
        (512, "512 B"),
        (4096, "4 KiB"),
        (90134, "88 KiB"),
        (1536 << 10, "1.5 MiB"),
        (16 << 20, "16 MiB"),
        (87436 << 10, "85.4 MiB"),
        (1023 << 20, "1023 MiB"),
        (int(1.67 * (1 << 30)), "1.67 GiB"),
        (1 << 40, "1 TiB"),
    ],
)
def test_size_text(n, text):
    assert size_text(n) == text
