"""docs/architecture.md's layer drawing, enforced: every import in gdsdiag/ (module level or inside a
function) goes to the same layer or one below it, except the few crossings listed here with their
reason. A new upward import fails this test: move the code, or add it here and to the document."""

from __future__ import annotations

import ast
import os

from conftest import HERE

PKG = os.path.join(os.path.dirname(HERE), "gdsdiag")

# Longest matching prefix decides; the numbers are the rows of docs/architecture.md, top = highest.
LAYERS = {
    "gdsdiag.cli": 8,
    "gdsdiag.__main__": 8,
    "gdsdiag.commands": 7,
    "gdsdiag.render": 6,  # text and plots
    # JSON documents sit with the reports: diff and the support bundle compare and store them
    "gdsdiag.render.topology_json": 5,
    "gdsdiag.render.check_json": 5,
    "gdsdiag.render.diff_json": 5,
    "gdsdiag.render.explain_json": 5,
    # reports: each returns a report object carrying its exit code
    "gdsdiag.topology.report": 5,
    "gdsdiag.check.report": 5,
    "gdsdiag.cufile.report": 5,
    "gdsdiag.sweep.runner": 5,
    "gdsdiag.trace.live": 5,
    "gdsdiag.diff": 5,
    "gdsdiag.explain": 5,
    "gdsdiag.validate": 5,
    "gdsdiag.exporter": 5,
    "gdsdiag.kv": 5,
    "gdsdiag.snapshot": 5,
    "gdsdiag.bundle": 5,
    # analysis
    "gdsdiag.topology": 4,
    "gdsdiag.check": 4,
    "gdsdiag.trace": 4,  # classify, and bpf: the probe session (which libcufile, which processes)
    "gdsdiag.sweep": 4,
    # readers
    "gdsdiag.platform": 3,
    "gdsdiag.importers": 3,
    "gdsdiag.cufile_json": 3,
    "gdsdiag.explain.readers": 3,
    "gdsdiag.trace.procs": 3,
    # bindings
    "gdsdiag.cufile": 2,
    "gdsdiag.trace.events": 2,  # the recorded event and its reader
    "gdsdiag.trace.eventdefs": 2,  # the table the probes' ids, constants and structs are generated from
    "gdsdiag.trace.usdt": 2,
    "gdsdiag.trace.elfsyms": 2,
    "gdsdiag.trace.cudadoors": 2,
    "gdsdiag.pci": 1,
    # shared by every layer
    "gdsdiag": 0,  # gdsdiag/__init__.py (__version__)
    "gdsdiag.routes": 0,
    "gdsdiag.errors": 0,
    "gdsdiag.schema": 0,
    "gdsdiag.bounded": 0,
    "gdsdiag.privdir": 0,
    "gdsdiag.outfile": 0,
    "gdsdiag.textparse": 0,
    "gdsdiag.jsontext": 0,
    "gdsdiag.signals": 0,
    "gdsdiag.terminal": 0,
}

# (importer prefix, imported prefix): why the crossing is there
CROSSINGS = {
    ("gdsdiag.importers.lspci", "gdsdiag.topology"): "an lspci text is imported straight into a Topology",
    ("gdsdiag.importers.nvidia_smi", "gdsdiag.topology"): "nvidia-smi topo -m cells are matched to Topology devices",
    ("gdsdiag.platform.roots", "gdsdiag.snapshot"): "node_root() opens a snapshot with the snapshot module's reader",
    ("gdsdiag.cufile._lib", "gdsdiag.platform.libcufile"): "the bindings load the libcufile the locator finds",
}


def layer(mod: str) -> int:
    best = max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return LAYERS[best]


def modules():
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
                is_pkg = rel.endswith(".__init__")
                name = rel[: -len(".__init__")] if is_pkg else rel
                yield name, (name if is_pkg else name.rsplit(".", 1)[0]), path


def imports(package: str, path: str):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:  # "from . import cufile_json" names a module
                yield node.lineno, target if node.module else f"{target}.{alias.name}"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gdsdiag"):
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gdsdiag"):
                    yield node.lineno, alias.name


def test_no_import_runs_up_a_layer():
    bad: list[str] = []
    used = set()
    for name, package, path in modules():
        for line, target in imports(package, path):
            if layer(target) <= layer(name):
                continue
            why = [k for k in CROSSINGS if name.startswith(k[0]) and (target == k[1] or target.startswith(k[1] + "."))]
            if why:
                used.update(why)
                continue
            if bad and bad[-1].startswith(f"{os.path.relpath(path, os.path.dirname(PKG))}:{line}:"):
                continue  # one line per import statement
            bad.append(
                f"{os.path.relpath(path, os.path.dirname(PKG))}:{line}: {name} (layer {layer(name)}) "
                f"imports {target} (layer {layer(target)})"
            )
    assert not bad, "imports that run up a layer (docs/architecture.md):\n" + "\n".join(bad)
    assert used == set(CROSSINGS), f"listed crossings no longer in the code: {set(CROSSINGS) - used}"


def test_every_module_has_a_layer():
    # the catch-all "gdsdiag" entry is for gdsdiag/__init__.py only: a new top-level module must be placed
    unplaced = [n for n, _, _ in modules() if n.count(".") == 1 and n not in LAYERS and n != "gdsdiag.__init__"]
    unplaced = [n for n in unplaced if not any(n.startswith(p + ".") or n == p for p in LAYERS if p != "gdsdiag")]
    assert not unplaced, f"place these in LAYERS and in docs/architecture.md: {unplaced}"
