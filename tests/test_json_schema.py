"""docs/json.md against the document types in gdsdiag/schema/, and those types against what the
commands print on committed fixtures.

For each typed document family: every key of the documented example exists in its type and every
key of the type is documented (recursively, through lists, nested objects and the alternatives of
a union); and the command's real output on a fixture has exactly the type's keys (keys a type
marks optional, ``total=False``, may be absent). mypy checks the code that builds the documents
against the same types (.ci/run), so the three cannot drift apart.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import types
import typing

import pytest
from conftest import FIXTURES, GDSDIAG, HERE

from gdsdiag.schema import check as check_schema
from gdsdiag.schema import cufile as cufile_schema
from gdsdiag.schema import diff as diff_schema
from gdsdiag.schema import explain as explain_schema
from gdsdiag.schema import kv as kv_schema
from gdsdiag.schema import snapshot as snapshot_schema
from gdsdiag.schema import sweep as sweep_schema
from gdsdiag.schema import topology as topology_schema
from gdsdiag.schema import trace as trace_schema
from gdsdiag.schema import validate as validate_schema

REPO = os.path.dirname(HERE)
H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
H200X2 = os.path.join(FIXTURES, "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")
SMI_X2 = os.path.join(FIXTURES, "nvidia-smi", "h200x2-vm-topo-m.txt")
GDSCHECK = os.path.join(FIXTURES, "corpus", "gdscheck", "asus-esc8000a-e12-gds1.14-iommu-off.txt")
VALIDATE_GPU = os.path.join(FIXTURES, "gpu-machine", "validate-compat.json")  # a real GPU-machine report
LLAMA = os.path.join(FIXTURES, "models", "llama-3.1-70b.config.json")
CUFILE_LOG = os.path.join(FIXTURES, "corpus", "cufile-log", "hongsunjang-compat-mode-topology-table-misses.txt")
GDSIO = os.path.join(FIXTURES, "corpus", "gdsio", "asus-esc8000a-e12-gpud-vs-cpuonly-nvme-raid.txt")

TYPED = {
    "gdsdiag.topology/1": topology_schema.TopologyDoc,
    "gdsdiag.check/1": check_schema.CheckDoc,
    "gdsdiag.cufile/1": cufile_schema.CufileDoc,
    "gdsdiag.report/1": validate_schema.ReportDoc,
    "gdsdiag.validate/1": validate_schema.ValidateDoc,
    "gdsdiag.diff/1": diff_schema.DiffDoc,
    "gdsdiag.explain/2": explain_schema.ExplainDoc,
    "gdsdiag.kv/1": kv_schema.KvDoc,
    "gdsdiag.snapshot/1": snapshot_schema.SnapshotDoc,
    "gdsdiag.sweep/2": sweep_schema.SweepDoc,
}
# the command line whose output each type is checked against (committed fixtures only)
REAL = {
    "gdsdiag.topology/1": ["topology", "--from", H200X2, "--nvidia-smi", SMI_X2, "--json"],
    "gdsdiag.check/1": ["check", "--from", H200, "--gdscheck", GDSCHECK, "--json"],
    "gdsdiag.cufile/1": ["cufile", "--json"],  # the driver open fails without a GPU: the failure form
    "gdsdiag.diff/1": ["diff", H200, H200X2, "--json"],
    "gdsdiag.report/1": ["report", VALIDATE_GPU, "--json"],
    "gdsdiag.validate/1": ["validate", "--from", H200, "--json", "-"],
    "gdsdiag.explain/2": ["explain", CUFILE_LOG, GDSIO, "--json"],
    "gdsdiag.kv/1": [
        "kv",
        "--model-config",
        LLAMA,
        "--gbps",
        "2.2",
        "--tokens",
        "8192",
        "--prefill-tps",
        "3000",
        "--json",
    ],
    # an empty tree: what matters here is the document's shape (OUT is replaced by a new file)
    "gdsdiag.snapshot/1": ["snapshot", "-o", "OUT", "--root", "EMPTY", "--json"],
    # a short real sweep (host mode: no GPU needed) on a disk that takes O_DIRECT
    "gdsdiag.sweep/2": [
        "sweep",
        "--dir",
        "DISK",
        "--size",
        "8M",
        "--bs",
        "4k",
        "--threads",
        "1",
        "--rw",
        "read",
        "--mode",
        "host",
        "--time",
        "0.3s",
        "--json",
    ],
}


def _strip_comments(block: str) -> str:
    """jsonc → json: drop // comments outside strings."""
    out = []
    for line in block.splitlines():
        quoted, cut = False, len(line)
        for i, c in enumerate(line):
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            elif not quoted and line.startswith("//", i):
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def documented_trace_lines() -> list[dict]:
    """The JSON lines of docs/json.md's trace section (several objects in one block)."""
    with open(os.path.join(REPO, "docs", "json.md"), encoding="utf-8") as f:
        section = f.read().split("## `gdsdiag trace --json`", 1)[1].split("\n## ", 1)[0]
    text = _strip_comments(re.search(r"```jsonc?\n(.*?)```", section, re.S).group(1))
    out, i, dec = [], 0, json.JSONDecoder()
    while text[i:].strip():
        i += len(text[i:]) - len(text[i:].lstrip())
        obj, i = dec.raw_decode(text, i)
        out.append(obj)
    return out


TRACE_LINE = {"io": trace_schema.IoLine, "summary": trace_schema.Summary}
TRACE_RECORDING = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")  # recorded on the GPU machine


def test_docs_trace_lines_match_the_types():
    lines = documented_trace_lines()
    assert [x["type"] for x in lines] == ["io", "summary"]
    problems: list[str] = []
    for x in lines:
        compare(x, TRACE_LINE[x["type"]], f"trace {x['type']}", problems, documented=True)
    assert not problems, "docs/json.md and gdsdiag/schema/trace.py disagree:\n" + "\n".join(problems)


def test_trace_replay_lines_match_the_types():
    r = subprocess.run(
        [*GDSDIAG, "trace", "--replay", TRACE_RECORDING, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert {x["type"] for x in lines} == {"io", "summary"}
    problems: list[str] = []
    for x in lines:
        compare(x, TRACE_LINE[x["type"]], f"trace {x['type']}", problems, documented=False)
    assert not problems, "gdsdiag trace --replay output and gdsdiag/schema/trace.py disagree:\n" + "\n".join(
        problems[:20]
    )


def documented_examples() -> dict[str, dict]:
    """schema id → the example document of its section in docs/json.md."""
    with open(os.path.join(REPO, "docs", "json.md"), encoding="utf-8") as f:
        text = f.read()
    out = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        m = re.match(r"`(gdsdiag\.[a-z]+/\d+)`", section)
        block = re.search(r"```jsonc?\n(.*?)```", section, re.S)
        if m and block:
            try:
                out[m.group(1)] = json.loads(_strip_comments(block.group(1)))
            except ValueError:
                pass  # not one JSON object (JSON lines, elisions): families without a type yet
    return out


def _is_typeddict(tp) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _hints(tp) -> dict:
    return typing.get_type_hints(tp)


def _pick(value: dict, options: list) -> type:
    """The TypedDict of a union whose keys fit ``value`` best."""

    def misfit(t):
        keys = set(value)
        return len(keys - set(_hints(t))) + len(t.__required_keys__ - keys)

    return min(options, key=misfit)


def compare(value, tp, where: str, problems: list[str], documented: bool) -> None:
    """Note every key of ``value`` the type lacks, and every key of the type ``value`` lacks (in
    the docs: every key; in real output: the required ones)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) not in args:
                problems.append(f"{where}: null, but the type does not allow it")
            return
        dicts = [a for a in args if _is_typeddict(a)]
        if isinstance(value, dict) and dicts:
            compare(value, _pick(value, dicts), where, problems, documented)
        else:
            others = [a for a in args if a is not type(None) and not _is_typeddict(a)]
            if others:
                compare(value, others[0], where, problems, documented)
        return
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            problems.append(f"{where}: {type(value).__name__}, the type says an object ({tp.__name__})")
            return
        hints = _hints(tp)
        for k in sorted(set(value) - set(hints)):
            problems.append(f"{where}.{k}: not in {tp.__module__}.{tp.__name__}")
        must = set(hints) if documented else set(tp.__required_keys__)
        for k in sorted(must - set(value)):
            problems.append(f"{where}.{k}: in {tp.__name__} but {'not documented' if documented else 'not printed'}")
        for k, v in value.items():
            if k in hints:
                compare(v, hints[k], f"{where}.{k}", problems, documented)
        return
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(tp)
        if documented and _is_typeddict(item) and value and all(isinstance(v, dict) for v in value):
            # an example list may show each key in another element (a compared and a skipped cell)
            merged: dict = {}
            for v in value:
                merged.update({k: x for k, x in v.items() if k not in merged})
            compare(merged, item, f"{where}[*]", problems, documented)
            return
        for i, v in enumerate(value):
            compare(v, item, f"{where}[{i}]", problems, documented)
        return
    if origin is dict and isinstance(value, dict):
        _, item = typing.get_args(tp)
        if documented and _is_typeddict(item) and value and all(isinstance(v, dict) for v in value.values()):
            # as for lists: an optional key (HOST's counted_in_kernel) is shown on one entry only
            merged = {}
            for v in value.values():
                merged.update({k: x for k, x in v.items() if k not in merged})
            compare(merged, item, f"{where}[*]", problems, documented)
            return
        for k, v in value.items():
            compare(v, item, f"{where}[{k!r}]", problems, documented)


@pytest.mark.parametrize("schema", sorted(TYPED))
def test_docs_json_md_matches_the_type(schema):
    examples = documented_examples()
    assert schema in examples, f"docs/json.md has no parsable example for {schema}"
    problems: list[str] = []
    compare(examples[schema], TYPED[schema], schema, problems, documented=True)
    assert not problems, "docs/json.md and gdsdiag/schema disagree:\n" + "\n".join(problems)


@pytest.mark.parametrize("schema", sorted(TYPED))
def test_real_output_matches_the_type(schema, tmp_path):
    (tmp_path / "empty").mkdir()
    # a tree with nothing in it but proc/: a root with neither sys/ nor proc/ is exit 3 (issue 22)
    (tmp_path / "empty" / "proc").mkdir()
    disk = tempfile.mkdtemp(prefix="gdsdiag-schema-", dir="/var/tmp")  # /tmp may be tmpfs (no O_DIRECT)
    places = {"OUT": str(tmp_path / "s.tar.gz"), "EMPTY": str(tmp_path / "empty"), "DISK": disk}
    argv = [places.get(a, a) for a in REAL[schema]]
    try:
        r = subprocess.run([*GDSDIAG, *argv], capture_output=True, text=True, cwd=REPO, timeout=300)
    finally:
        shutil.rmtree(disk, ignore_errors=True)
    if schema in ("gdsdiag.cufile/1", "gdsdiag.sweep/2") and r.returncode == 3:
        pytest.skip(f"cannot run here: {r.stderr.strip()}")
    doc = json.loads(r.stdout) if r.stdout.strip() else {}
    # A cross-check that compares nothing is exit 3 (docs/json.md); the H200x2 snapshot with its own
    # text compares the NUMA nodes only (its NV# cells' only NVLink source is that same text)
    nothing_compared = doc.get("cross_check_input", {}).get("compared") == 0
    assert r.returncode in (0, 1, 2) or (r.returncode == 3 and nothing_compared), r.stderr
    assert doc["schema"] == schema
    problems: list[str] = []
    compare(doc, TYPED[schema], schema, problems, documented=False)
    assert not problems, f"{' '.join(REAL[schema])} and gdsdiag/schema disagree:\n" + "\n".join(problems)


def test_the_comparison_finds_a_missing_and_an_extra_key():
    """The checker itself: a key the type lacks and a key the example lacks are both reported,
    also inside a list of objects and a union."""
    problems: list[str] = []
    example = {"a": "x", "b": "y", "label": "NV4", "links": 4, "via_nvswitch": False, "source": "nvml", "extra": 1}
    compare(example, topology_schema.NvLinkPair, "pair", problems, documented=True)
    assert problems == [
        "pair.extra: not in gdsdiag.schema.topology.NvLinkPair",
        "pair.p2p_ok: in NvLinkPair but not documented",
    ]
    problems = []
    info = {"source": "nvml", "pairs": [dict(example, p2p_ok=None)], "gpus": [], "problems": []}
    compare(info, topology_schema.NvLinkInfo | topology_schema.NoNvLink, "nvlink", problems, documented=False)
    assert problems == ["nvlink.pairs[0].extra: not in gdsdiag.schema.topology.NvLinkPair"]
