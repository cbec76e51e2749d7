"""The classifier's parts (issue 44): a dispatcher (classify.py) and four collaborators — procstate,
calls, hostio, accounts — over a ground of shared records, with one direction between them; every
route and confidence a verdict carries comes from one of evidence.py's two rule tables, and a
confidence is a ``routes.Confidence``, written in the JSON as the same three words as before."""

from __future__ import annotations

import ast
import json
import os

import pytest
from conftest import HERE

from gdsdiag.render.trace_out import io_json
from gdsdiag.routes import Confidence, Route
from gdsdiag.trace.live import replay
from gdsdiag.trace.model.evidence import HOST_RULE, HOST_RULES, ROUTE_RULES

TRACE_DIR = os.path.join(os.path.dirname(HERE), "gdsdiag", "trace", "model")
FIXTURES = os.path.join(HERE, "fixtures", "trace")
PARTS = ("records", "procstate", "calls", "hostio", "accounts")
# who may import whom among the classifier's modules (the dispatcher imports them all)
MAY_IMPORT = {
    "records": set(),
    "procstate": {"records"},
    "calls": {"records", "procstate"},
    "hostio": {"records", "procstate"},
    "accounts": {"records", "procstate"},
}
# modules (and their roots) that read files, run programs or load probes: none in a part
IMPURE = {"os", "subprocess", "socket", "ctypes", "pathlib", "io", "shutil", "bcc", "glob", "mmap"}


def _tree(name: str) -> ast.Module:
    with open(os.path.join(TRACE_DIR, name + ".py")) as f:
        return ast.parse(f.read())


def _imports(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(sibling trace modules, absolute roots) a module imports, anywhere in it."""
    siblings, roots = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            if n.level == 1 and n.module:
                siblings.add(n.module.split(".")[0])
            elif n.level == 1:
                siblings.update(a.name for a in n.names)
            elif n.level == 0 and n.module:
                roots.add(n.module.split(".")[0])
        elif isinstance(n, ast.Import):
            roots.update(a.name.split(".")[0] for a in n.names)
    return siblings, roots


@pytest.mark.parametrize("part", PARTS)
def test_each_part_imports_only_below_it_and_does_no_io(part):
    tree = _tree(part)
    siblings, roots = _imports(tree)
    classifier_modules = set(MAY_IMPORT) | {"classify"}
    assert siblings & classifier_modules <= MAY_IMPORT[part], (part, siblings & classifier_modules)
    assert not roots & IMPURE, (part, roots & IMPURE)
    opens = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "open"]
    assert not opens, (part, "open() at lines", opens)


def _named_outside_a_test(tree: ast.Module) -> list[tuple[int, str]]:
    """Route/Confidence members a module names other than to compare with, look up or walk: the
    places it would decide a route or confidence of its own."""
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out = []
    for n in ast.walk(tree):
        if not (
            isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("Route", "Confidence")
        ):
            continue
        p = parents.get(n)
        if isinstance(p, ast.Compare):
            continue
        if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr == "get":
            continue  # (a lookup of a route's bytes)
        if isinstance(p, ast.Tuple) and isinstance(parents.get(p), ast.For):
            continue  # (a walk over routes)
        out.append((n.lineno, f"{n.value.id}.{n.attr}"))
    return out


@pytest.mark.parametrize("module", ("classify", *PARTS, "counted"))
def test_routes_and_confidences_come_from_the_rule_tables(module):
    """Route.DRAM_BOUNCE/HOST/UNKNOWN and every confidence are set in evidence.py alone."""
    tree = _tree(module)
    assert _named_outside_a_test(tree) == [], module
    words = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in ("high", "medium", "low")
    ]
    assert words == [], (module, "a confidence written as a word at lines", words)


def test_every_host_rule_is_one_the_code_picks():
    """A row no module asks for is a route the table claims and the trace never gives."""
    text = ""
    for name in ("hostio", "counted"):
        with open(os.path.join(TRACE_DIR, name + ".py")) as f:
            text += f.read()
    unused = [r.finding for r in HOST_RULES if f'HOST_RULE["{r.finding}"]' not in text]
    assert unused == []
    assert len(HOST_RULE) == len(HOST_RULES)  # (one row per finding)


def test_confidence_is_the_enum_and_its_json_the_word():
    assert [c.value for c in Confidence] == ["high", "medium", "low"]
    assert f"{Confidence.LOW}" == str(Confidence.LOW) == "low"
    assert json.dumps({"c": Confidence.MEDIUM}) == '{"c": "medium"}'
    assert all(isinstance(r.confidence, Confidence) for r in (*ROUTE_RULES, *HOST_RULES))


RECORDINGS = (
    "trace-h200-cufile.jsonl.gz",  # cuFile calls (ROUTE_RULES)
    "trace-h200-kvikio-posix-batch.jsonl.gz",
    "trace-h200-bounce.jsonl.gz",  # host reads copied to the GPU
    "names/writer.jsonl.gz",  # writes
    "names/uring-fixed.jsonl.gz",  # io_uring (buffer address not traced)
    "content/runai-hoststats-cold.rec.jsonl.gz",  # staged copies checked by content, and not
    "content/zlib-decode-cold.rec.jsonl.gz",  # copies that were not the bytes read
    "loaders/torch-load-zip-cold.rec.jsonl.gz",
    "heldout-limits/shm-handoff-cold.rec.jsonl.gz",  # copies elsewhere in the tree
)


@pytest.mark.parametrize("rec", RECORDINGS)
def test_every_verdict_of_a_real_recording_is_a_row_of_a_table(rec):
    """Real captures (tests/fixtures/trace, the GPU machine): each verdict's (route, confidence) is
    a row of ROUTE_RULES (a cuFile call, or its UNKNOWN low) or of HOST_RULES, its confidence a
    Confidence, and its --json line has the word."""
    verdicts: list = []
    replay(os.path.join(FIXTURES, rec), None, verdicts.append)
    assert verdicts
    cufile = {(r.route, r.confidence) for r in ROUTE_RULES} | {
        (r.route, r.else_confidence) for r in ROUTE_RULES if r.all_of
    }
    cufile.add((Route.UNKNOWN, Confidence.LOW))
    host = {(r.route, r.confidence) for r in HOST_RULES}
    for v in verdicts:
        pair = (v["route"], v["confidence"])
        assert isinstance(v["confidence"], Confidence), v
        assert pair in (cufile if v["api"].startswith("cuFile") else host), v
        assert json.loads(io_json(v))["confidence"] == v["confidence"].value
