"""tests/workloads/check_why.py, the checker gpu_why_run.sh runs on the GPU machine's documents, held
against the GPU machine's own committed answers (issue 45 item 4): its real sweep points (smoke.json,
r1-host.json of tests/fixtures/gpu-machine/sweep-2026-12-01) and its real proof cell
(proof-2026-12-01/validate-proof.json), each given its why by the one builder from the committed
snapshot of that node — as the sweep and validate of this tree give them there. The checker passes
them, and fails an answer that lost one of the node's facts or leads with another."""

from __future__ import annotations

import copy
import json
import os
import sys

from test_why_measured import SWEEP_DIR, _cell, _proof_cell, _run, _sweep_doc

from gdsdiag.check.context import CheckContext
from gdsdiag.check.facts import NodeFacts
from gdsdiag.platform.roots import open_snapshot
from gdsdiag.sweep.runner import PointRecord, add_whys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "workloads"))
import check_why  # noqa: E402  (a workload script, not a package module)

H200 = os.path.join(HERE, "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")


def _node() -> NodeFacts:
    return NodeFacts.collect(CheckContext(open_snapshot(H200), env={}))


def _sweep(name: str, node: NodeFacts) -> dict:
    doc = _sweep_doc(name)
    recs = [PointRecord(**{k: p[k] for k in PointRecord.__dataclass_fields__ if k in p}) for p in doc["points"]]
    add_whys(recs, SWEEP_DIR, node_facts=lambda: node)
    for p, r in zip(doc["points"], recs):
        p["why_chain"], p["fix"] = r.why_chain, r.fix
    return doc


def _proof(node: NodeFacts) -> dict:
    real = _proof_cell()
    cell = _cell(node, _run(real["configured"]), _run(real["compat_forbidden"]))
    return {"proof": {"cells": [cell.to_json()]}}


def test_the_gpu_machines_answers_pass_and_each_broken_one_fails(tmp_path, capsys):
    node = _node()
    smoke, host, proof = _sweep("smoke.json", node), _sweep("r1-host.json", node), _proof(node)
    files = []
    for name, doc in (("smoke.json", smoke), ("host.json", host), ("proof.json", proof)):
        p = tmp_path / name
        p.write_text(json.dumps(doc))
        files.append(str(p))
    argv = ["--sweep", files[0], "--sweep", files[1], "--proof", files[2]]
    assert check_why.main(argv) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    n = len(smoke["points"]) + len(host["points"]) + 1
    assert f"{n} answers, 0 problems" in out
    assert "ok   proof GPU0" in out and "nvidia-fs: nvidia-fs is not loaded" in out

    # a cuFile point whose chain lost P2PDMA, and one led by something else: both named
    bad = copy.deepcopy(smoke)
    cu = [p for p in bad["points"] if p["mode"] == "cufile"]
    cu[0]["why_chain"] = [f for f in cu[0]["why_chain"] if f["fact"] != "PCI P2PDMA"]
    for f in cu[1]["why_chain"]:
        f["role"] = "decisive" if f["fact"] == "measured route" else "contributing"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert check_why.main(["--sweep", str(tmp_path / "bad.json")]) == 1
    out = capsys.readouterr().out
    assert "the chain does not name P2PDMA off" in out
    assert "decisive fact is 'measured route'" in out
    # a proof cell with no why at all
    empty = {"proof": {"cells": [{**proof["proof"]["cells"][0], "why_chain": []}]}}
    (tmp_path / "empty.json").write_text(json.dumps(empty))
    assert check_why.main(["--proof", str(tmp_path / "empty.json")]) == 1
    assert "no why_chain" in capsys.readouterr().out
    # unreadable input: one line, exit 2
    assert check_why.main(["--proof", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the documents" in capsys.readouterr().err
