"""Issue 23, one vocabulary: one severity scale (info|warn|fail) in every document that carries a
severity, one colour table (verdicts.STYLE) for every renderer, and a route mix as Routes, never a
label parsed back."""

from __future__ import annotations

import ast
import json
import os
import subprocess

from conftest import CORPUS, FIXTURES, GDSDIAG, REPO

from gdsdiag.explain import catalog
from gdsdiag.routes import Route
from gdsdiag.topology.pairs import P2pVerdict
from gdsdiag.verdicts import STYLE, Severity, Status, worst

PKG = os.path.join(REPO, "gdsdiag")
SCALE = {"info", "warn", "fail"}
WORDS = {m.value for e in (Route, Status, Severity, P2pVerdict) for m in e}
COLOURS = {"green", "red", "yellow", "cyan", "magenta", "dim", "bold red", "bold", "blue"}


def _run(*argv):
    return subprocess.run([*GDSDIAG, *argv], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_every_route_status_and_severity_word_has_its_colour():
    assert WORDS - set(STYLE) == set()


def test_no_renderer_keeps_a_colour_table_of_its_own():
    found = []
    for dirpath, _, files in os.walk(PKG):
        for fn in files:
            path = os.path.join(dirpath, fn)
            if not fn.endswith(".py") or path.endswith(os.path.join("gdsdiag", "verdicts.py")):
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if not isinstance(node, ast.Dict):
                    continue
                keys = []
                for k in node.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        keys.append(k.value)
                    elif isinstance(k, ast.Attribute):  # Status.PASS, P2pVerdict.NO, ...
                        keys.append(k.attr)
                values = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
                named = [k for k in keys if k in WORDS or k.upper() in WORDS or k in Route.__members__]
                if len(named) >= 2 and values and all(v in COLOURS for v in values):
                    found.append(f"{os.path.relpath(path, REPO)}:{node.lineno}")
    assert not found, f"take the colour from gdsdiag.verdicts.style(): {found}"


def test_one_severity_scale_in_every_document():
    assert {e.severity for e in catalog.load().entries} <= set(Severity)
    explain = json.loads(
        _run("explain", os.path.join(FIXTURES, "explain", "lmcache-795-container-dm0-udev.cufile.log"), "--json").stdout
    )
    assert explain["schema"] == "gdsdiag.explain/2"
    assert {m["severity"] for m in explain["messages"]} <= SCALE and "fail" in {
        m["severity"] for m in explain["messages"]
    }
    assert set(explain["counts"]) >= SCALE and "error" not in explain["counts"]
    lspci = os.path.join(CORPUS, "lspci-tree", "gigabyte-e251-u70-pex8747-cx6dx-v100-same-switch.txt")
    topo = json.loads(_run("topology", "--lspci", lspci, "--json").stdout)
    assert topo["findings"] and {f["severity"] for f in topo["findings"]} <= SCALE


def test_worst_and_the_status_of_a_severity():
    assert worst([Severity.INFO, Severity.FAIL, Severity.WARN]) is Severity.FAIL and worst([]) is None
    assert [s.status for s in Severity] == [Status.INFO, Status.WARN, Status.FAIL]
    assert Severity.FAIL == "fail" and f"{Severity.WARN}" == "warn" and json.dumps(Severity.INFO) == '"info"'


def test_no_route_label_is_parsed_back():
    # validate reads a point's route mix as counts (routes.mix_of), not by a regex over 'MIXED(...)'
    with open(os.path.join(PKG, "validate", "rules.py"), encoding="utf-8") as f:
        text = f.read()
    assert "MIXED(" not in text and "_MIXED" not in text
