"""docs/architecture.md's layer table, enforced: every import in gdsdiag/ (module level, inside a
function or under TYPE_CHECKING) goes to the same layer or one below it, and no modules import one
another round a circle. A new upward import fails this test: move the code. The document's table and
LAYERS here are compared, and so is the document's list of the modules that open a root."""

from __future__ import annotations

import ast
import os
import re

from conftest import HERE

PKG = os.path.join(os.path.dirname(HERE), "gdsdiag")

# Longest matching prefix decides; the numbers are the rows of docs/architecture.md, top = highest.
LAYERS = {
    "gdsdiag.cli": 8,
    "gdsdiag.__main__": 8,
    "gdsdiag.commands": 7,
    "gdsdiag.render": 6,  # text and plots
    # the JSON documents sit with the reports: diff and the support bundle compare and store them
    "gdsdiag.documents": 5,
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
    "gdsdiag.trace.model": 4,  # events in, verdicts out: no I/O (test_the_trace_model_does_no_io)
    "gdsdiag.trace.probes": 4,  # bpf: the probe session (which libcufile, which processes), the ring
    "gdsdiag.trace": 4,  # the session: live's drivers, the traced command's tree, pods
    "gdsdiag.sweep": 4,
    # readers
    "gdsdiag.platform": 3,
    "gdsdiag.importers": 3,
    "gdsdiag.cufile_json": 3,
    "gdsdiag.cuobj_json": 3,
    "gdsdiag.static_config": 3,
    "gdsdiag.explain.readers": 3,
    "gdsdiag.trace.procs": 3,
    "gdsdiag.trace.recording": 3,  # a --record file, written and read back
    # bindings
    "gdsdiag.cufile": 2,
    "gdsdiag.trace.model.events": 2,  # the recorded event, and how one recorded line is checked
    "gdsdiag.trace.model.eventdefs": 2,  # the table the probes' ids, constants and structs are generated from
    "gdsdiag.trace.probes.usdt": 2,
    "gdsdiag.trace.probes.elfsyms": 2,
    "gdsdiag.trace.probes.cudadoors": 2,
    "gdsdiag.pci": 1,
    "gdsdiag.platform.elf": 1,  # a library read as ELF data (trace's elfsyms and platform/libcufile use it)
    # shared by every layer
    "gdsdiag": 0,  # gdsdiag/__init__.py (__version__)
    "gdsdiag.routes": 0,
    "gdsdiag.errors": 0,
    "gdsdiag.schema": 0,
    "gdsdiag.bounded": 0,
    "gdsdiag.privdir": 0,
    "gdsdiag.envtrust": 0,
    "gdsdiag.selfexec": 0,
    "gdsdiag.outfile": 0,
    "gdsdiag.workdirs": 0,
    "gdsdiag.textparse": 0,
    "gdsdiag.jsontext": 0,
    "gdsdiag.signals": 0,
    "gdsdiag.terminal": 0,
    "gdsdiag.units": 0,
    "gdsdiag.extras": 0,
    "gdsdiag.docout": 0,
    "gdsdiag.verdicts": 0,
}

# (importer prefix, imported prefix): why the crossing is there. Empty, and to be kept so: an
# import that must run up a layer means the code is in the wrong place.
CROSSINGS: dict[tuple[str, str], str] = {}


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


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The module a "from X import y" in PACKAGE names, its relative dots resolved."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(package: str, path: str):
    """(line, module) for every gdsdiag import in the file, at module level, inside functions and
    under TYPE_CHECKING alike; "from X import y" names X.y when y is a module of its own."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("gdsdiag")):
            target = _from_target(node, package)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield node.lineno, sub if sub in MODULES else target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gdsdiag"):
                    yield node.lineno, alias.name


MODULES = {name for name, _, _ in modules()}


def module_of(target: str) -> str:
    """The module an import loads: the longest prefix of its dotted name that is a module here."""
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, package, path in modules():
        graph[name] = {module_of(t) for _, t in imports(package, path)} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative): each is a
    set of modules that import one another round a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


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


def test_no_import_circle():
    # counted with the imports inside functions and under TYPE_CHECKING: a circle hidden from the
    # import machinery is still two modules that cannot be understood (or moved) one without the other
    found = cycles(import_graph())
    assert not found, "modules that import one another round a circle:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_circle_finder_finds_circles():
    # the finder itself, on a made-up graph: a 3-circle, a 2-circle and a module outside both
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_module_has_a_layer():
    # the catch-all "gdsdiag" entry is for gdsdiag/__init__.py only: a new top-level module must be placed
    unplaced = [n for n, _, _ in modules() if n.count(".") == 1 and n not in LAYERS and n != "gdsdiag.__init__"]
    unplaced = [n for n in unplaced if not any(n.startswith(p + ".") or n == p for p in LAYERS if p != "gdsdiag")]
    assert not unplaced, f"place these in LAYERS and in docs/architecture.md: {unplaced}"


DOC = os.path.join(os.path.dirname(HERE), "docs", "architecture.md")


def doc_layers() -> dict[str, int]:
    """docs/architecture.md's layer table: '| 5 | reports ... | `documents/` `diff.py` ... |' rows,
    each path turned into the module prefix LAYERS spells ('topology/report.py' -> gdsdiag.topology.report)."""
    out: dict[str, int] = {}
    with open(DOC, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 3 or not cells[0].isdigit():
                continue
            for path in re.findall(r"`([^`]+)`", cells[2]):
                rel = path.removesuffix("/").removesuffix(".py").replace("/", ".")
                out["gdsdiag" if rel == "__init__" else f"gdsdiag.{rel}"] = int(cells[0])
    return out


def test_the_document_draws_the_layers_the_test_enforces():
    doc = doc_layers()
    assert doc, "docs/architecture.md has no layer table"
    assert doc == LAYERS, (
        "docs/architecture.md's layer table and LAYERS differ: "
        f"only in the document {sorted(set(doc.items()) - set(LAYERS.items()))}, "
        f"only in the test {sorted(set(LAYERS.items()) - set(doc.items()))}"
    )


# docs/architecture.md, "Readers take a root": platform/roots.node_root() opens the root a command
# is pointed at; these modules open an FsRoot themselves, each for its reason.
FSROOT_OPENERS = {
    "gdsdiag.platform.roots": "node_root(): the root a command is pointed at (--root, --from)",
    "gdsdiag.topology.load": "from_root() takes a path as well as an open root (tests, benchmarks, the library API)",
    "gdsdiag.snapshot": "the writer reads the tree it captures (/ or --root) file by file, as the bundle's results",
    "gdsdiag.commands.exporter": "a fresh root per refresh, so every scrape re-reads the files",
    "gdsdiag.sweep.runner": "the nvidia-fs counters and the PCIe link of the node the sweep runs on",
    "gdsdiag.trace.probes.bpf": "the running kernel's /proc/kallsyms, where the kprobes attach",
    "gdsdiag.trace.session": "the traced processes' /proc/PID/cgroup and the kubelet's /var/log/pods on the node it runs on",
}


def test_only_the_listed_modules_open_a_root():
    opened = set()
    for name, _, path in modules():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "FsRoot":
                opened.add(name)
    assert opened - set(FSROOT_OPENERS) == set(), (
        "open the root with platform/roots.node_root(), or list the reason here"
    )
    assert set(FSROOT_OPENERS) - opened == set(), "listed openers that open no FsRoot any more"


# Issue 44's rules for the command line's room: the command line is the only place that knows click
# (a report, a reader or a renderer used by the library API or the exporter never needs it), and
# validate, a report, never reaches back into the command that renders it (the proof was once
# stitched on there, in commands/validate_proof.py).
CLICK_OUTSIDE_COMMANDS = {
    "gdsdiag.cli": "the click group, the command table and the one exit path (it also puts terminal.filtered on click.echo)",
}


def _third_party_imports(path: str) -> set[str]:
    """Top-level names of every absolute import of a file: module level, in functions, under TYPE_CHECKING."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_command_line_imports_click():
    importers = {
        name
        for name, _, path in modules()
        if "click" in _third_party_imports(path) and not name.startswith("gdsdiag.commands")
    }
    assert importers - set(CLICK_OUTSIDE_COMMANDS) == set(), "click belongs to gdsdiag/commands/ and cli.py"
    assert set(CLICK_OUTSIDE_COMMANDS) - importers == set(), "listed modules that no longer import click"


def test_validate_never_imports_the_command_layer():
    up = sorted(
        f"{name} imports {t}"
        for name, package, path in modules()
        if name.startswith("gdsdiag.validate")
        for _, t in imports(package, path)
        if t.startswith(("gdsdiag.commands", "gdsdiag.cli"))
    )
    assert not up, up


# Issue 44's rule for the trace's model: trace/model/ is events in, verdicts out, and does no I/O, so
# it can be read, changed and replayed without the probes, the kernel or the traced node. Its modules
# import, of gdsdiag, only one another and the pure shared modules below (by name where the module
# also holds something that reads), no standard module that reaches a file, a process or the kernel,
# and call no open(). The reading the model needs is done outside it and handed in: the live
# content check (trace/filesample.py), a --record file (trace/recording.py).
MODEL = "gdsdiag.trace.model"
MODEL_MAY_IMPORT: dict[str, tuple[frozenset[str] | None, str]] = {
    "gdsdiag.routes": (None, "the route vocabulary"),
    "gdsdiag.units": (None, "sizes and percentiles, pure functions"),
    "gdsdiag.errors": (None, "the error types"),
    "gdsdiag.schema": (None, "the JSON documents' types"),
    "gdsdiag.check.why": (None, "the one why text of a file's route: pure functions of the node's facts, handed in"),
    "gdsdiag.cufile.errors": (frozenset({"OP_ERRORS"}), "the table of cuFile's error names (a dict)"),
}
# the standard and third-party modules that reach files, processes, the kernel or the terminal
IO_MODULES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "glob",
    "tempfile",
    "stat",
    "fcntl",
    "mmap",
    "select",
    "selectors",
    "socket",
    "subprocess",
    "multiprocessing",
    "signal",
    "ctypes",
    "pwd",
    "grp",
    "resource",
    "gzip",
    "zlib",
    "lzma",
    "bz2",
    "tarfile",
    "zipfile",
    "sqlite3",
    "urllib",
    "http",
    "bcc",
    "psutil",
    "pyudev",
    "cffi",
    "platform",
    "threading",
    "concurrent",
    "asyncio",
}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines under 'if TYPE_CHECKING:': imports for annotations only, never executed."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


def model_impurities(name: str, package: str, source: str) -> list[str]:
    """What in one module's SOURCE breaks trace/model/'s rule (empty: nothing)."""
    tree = ast.parse(source)
    typing_only = _type_checking_lines(tree)
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            bad.append(f"{node.lineno}: calls open()")
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in typing_only:
            continue
        if isinstance(node, ast.Import):
            tops = [(a.name, None) for a in node.names]
        elif node.level or (node.module or "").startswith("gdsdiag"):
            tops = []
        else:
            tops = [(node.module or "", None)]
        for mod, _ in tops:
            if mod.split(".")[0] in IO_MODULES:
                bad.append(f"{node.lineno}: imports {mod}")
            elif mod.startswith("gdsdiag"):
                bad.append(f"{node.lineno}: imports {mod} (import from it by name)")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.lineno in typing_only:
            continue
        if not (node.level or (node.module or "").startswith("gdsdiag")):
            continue
        target = _from_target(node, package)
        for alias in node.names:
            full = f"{target}.{alias.name}"
            if any(t == MODEL or t.startswith(MODEL + ".") for t in (target, full)):
                continue
            listed = [m for m in MODEL_MAY_IMPORT if m in (target, full) or target.startswith(m + ".")]
            if not listed:
                bad.append(f"{node.lineno}: imports {full}, outside trace/model/ and the pure shared modules")
                continue
            names = MODEL_MAY_IMPORT[listed[0]][0]
            if names is not None and alias.name not in names:
                bad.append(f"{node.lineno}: imports {full} (only {sorted(names)} may be taken from {listed[0]})")
    return [f"{name}:{b}" for b in bad]


def test_the_trace_model_does_no_io():
    found = [n for n, _, _ in modules() if n == MODEL or n.startswith(MODEL + ".")]
    assert len(found) > 10, "trace/model/ has moved: point MODEL at it"
    bad: list[str] = []
    for name, package, path in modules():
        if name == MODEL or name.startswith(MODEL + "."):
            with open(path, encoding="utf-8") as f:
                bad += model_impurities(name, package, f.read())
    assert not bad, "trace/model/ does no I/O: move the reading out and hand its result in:\n" + "\n".join(bad)


def test_the_model_rule_catches_what_it_is_for():
    # the rule itself, on made-up modules of the model: each line here is one way to do I/O
    pkg = MODEL
    for src in (
        "from ..probes.bpf import Probes\n",  # the probes
        "from ...platform.inroot import open_no_links\n",  # a reader
        "from ..procs import describe\n",  # the session's process state
        "def f():\n    import subprocess\n",  # a process, even inside a function
        "import os\n",
        "from pathlib import Path\n",
        "def f(p):\n    return open(p).read()\n",
        "from ...cufile.errors import CuFileError, OP_ERRORS\n",  # more than the listed name
        "from ...bounded import loads_json\n",  # a shared module not listed
    ):
        assert model_impurities(f"{pkg}.made_up", pkg, src), src
    # and what it lets through: the model's own modules, listed names, imports for annotations
    for src in (
        "from .events import Event\nfrom ...routes import Route\nimport re\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ...check.facts import NodeFacts\n",
        "def f():\n    from ...cufile.errors import OP_ERRORS\n",
    ):
        assert not model_impurities(f"{pkg}.made_up", pkg, src), src
