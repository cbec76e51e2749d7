"""``gdsdiag diff A B``: what differs between two nodes ("it works on node 3 but not on node 7").

Each side is a snapshot archive or a root directory ('/' is the live node). Both are analysed by
the same code as ``topology --json`` and ``check --json`` (their JSON documents are the input), so
diff stays in sync with those commands; only volatile fields (where the input came from, the
temporary directory a snapshot was unpacked to) are left out, and cufile.json is compared key by key.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import EXIT_OK, EXIT_WARN, GdsdiagError, UsageError

if TYPE_CHECKING:
    from .schema import diff as schema

# fields that say where a document came from, not what the node is
VOLATILE = {"source", "exit_code"}
# per device: the config-space byte count depends on whether the capture ran as root, not on the node
DEVICE_VOLATILE = {"config_bytes"}


@dataclass
class Side:
    input: str
    form: str  # "snapshot" | "root"
    topology: dict
    check: dict
    cufile: dict | None  # parsed cufile.json, None when absent
    cufile_path: str | None


@dataclass
class Difference:
    section: str  # verdict | checks | topology | pairs | findings | cufile.json
    key: str
    a: object
    b: object

    def to_json(self) -> schema.Difference:
        return {"section": self.section, "key": self.key, "a": self.a, "b": self.b}


@dataclass
class DiffResult:
    a: Side
    b: Side
    differences: list[Difference] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.same else EXIT_WARN


@contextmanager
def open_root(spec: str):
    """Turns an input into an open ``FsRoot`` (through ``platform.roots.node_root``, the one place
    that opens live roots and snapshots). Yields (fs, form). '-' is a snapshot on stdin
    (ssh node7 cat snap.tar.gz | gdsdiag diff node3.tar.gz -)."""
    from .platform.roots import node_root

    if spec == "-":
        with _stdin_file() as path:
            with open_root(path) as (fs, _):
                yield fs, "snapshot"
        return
    if os.path.isdir(spec):
        with node_root(os.path.abspath(spec)) as fs:
            yield fs, "root"
        return
    if not os.path.exists(spec):
        raise UsageError(f"{spec} not found", "give a snapshot (.tar.gz from 'gdsdiag snapshot') or a root directory")
    with node_root(snapshot=spec) as fs:
        yield fs, "snapshot"


MAX_STDIN = 256 << 20  # a snapshot is kilobytes to a few megabytes


@contextmanager
def _stdin_file():
    import sys
    import tempfile

    data = sys.stdin.buffer.read(MAX_STDIN + 1)
    if not data:
        raise GdsdiagError("nothing on stdin for '-'", "pipe a snapshot archive into gdsdiag diff, or give a path")
    if len(data) > MAX_STDIN:
        raise GdsdiagError(f"stdin is over {MAX_STDIN >> 20} MiB", "give the snapshot as a file")
    # an unnamed file (unlinked at once), opened by the archive reader through /proc/self/fd: a
    # SIGKILL leaves nothing behind in TMPDIR (a named temporary file stayed there for good)
    with tempfile.TemporaryFile(prefix="gdsdiag-diff-") as f:
        f.write(data)
        f.flush()
        yield f"/proc/self/fd/{f.fileno()}"


def _scrub(value, root: str):
    """Drop the temporary root from every string (evidence paths) so equal nodes compare equal."""
    if isinstance(value, str):
        return value.replace(root.rstrip("/") + "/", "/") if root != "/" else value
    if isinstance(value, list):
        return [_scrub(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, root) for k, v in value.items() if k not in VOLATILE}
    return value


def load_side(spec: str) -> Side:
    from .check.context import CheckContext
    from .check.runner import run as run_checks
    from .cufile_json import load as load_cufile
    from .documents.check import document as check_document
    from .documents.topology import document as topology_document
    from .topology.findings import find
    from .topology.load import from_root
    from .topology.pairs import analyse_all

    with open_root(spec) as (fs, form):
        root = fs.root  # one FsRoot for all three readers (their problems land in one list)
        topo = from_root(fs)
        pairs = analyse_all(topo)
        tdoc = topology_document(topo, pairs, find(topo, pairs))
        env = dict(os.environ) if fs.is_live else {}
        cdoc = check_document(run_checks(CheckContext(fs, env=env), [], None))
        cfg = load_cufile(fs, env)
        return Side(
            spec, form, _scrub(tdoc, root), _scrub(cdoc, root), cfg.data if cfg.data is not None else None, cfg.path
        )


def _flat(value, prefix: str, out: dict) -> dict:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif prefix or value not in ({}, None):
        # (an empty document at the top is no key: a side without cufile.json printed "  : (absent) -> {}")
        out[prefix] = value
    return out


def _compare(section: str, a: dict, b: dict, out: list[Difference], absent="(absent)") -> None:
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k, absent), b.get(k, absent)
        if va != vb:
            out.append(Difference(section, k, va, vb))


def _by(items: list[dict], key) -> dict:
    return {key(it): it for it in items}


def _compare_objects(section: str, a: dict, b: dict, summary, out: list[Difference]) -> None:
    """Objects keyed by identity: one line for an object present on one side only, field by field
    for objects on both."""
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            what = summary(a.get(k) or b.get(k))
            out.append(Difference(section, k, what if k in a else "(absent)", what if k in b else "(absent)"))
        else:
            _compare(section, _flat(a[k], k, {}), _flat(b[k], k, {}), out)


def compare(a: Side, b: Side) -> DiffResult:
    res = DiffResult(a, b)
    d = res.differences
    # the verdict first: the answer to "why does it work there and not here"
    _compare("verdict", _flat(a.check.get("verdict", {}), "", {}), _flat(b.check.get("verdict", {}), "", {}), d)

    # checks by id: drivers, versions, modules, cufile.json validation, IOMMU ...
    def checks(doc):
        return {c["id"]: {"status": c["status"], "summary": c["summary"]} for c in doc.get("checks", [])}

    _compare_objects("checks", checks(a.check), checks(b.check), lambda c: f"{c['status']} {c['summary']}", d)
    ta, tb = a.topology, b.topology
    for part in ("cpu", "iommu"):
        _compare("topology", _flat(ta.get(part, {}), part, {}), _flat(tb.get(part, {}), part, {}), d)

    def devs(t):
        return {
            f"devices.{x['bdf']}": {k: v for k, v in x.items() if k not in DEVICE_VOLATILE}
            for x in t.get("devices", [])
        }

    _compare_objects(
        "topology",
        devs(ta),
        devs(tb),
        lambda x: f"{x['role']} {x.get('label') or ''} {x['vendor']}:{x['device']}".replace("  ", " "),
        d,
    )

    def pairs(t):
        return _by(t.get("pairs", []), lambda p: f"pairs.{p['a']}~{p['b']}")

    _compare_objects("pairs", pairs(ta), pairs(tb), lambda p: f"{p['a_label']}~{p['b_label']} {p['p2p']}", d)

    def findings(t):
        return {f"findings.{f.get('id', '?')}": f for f in t.get("findings", [])}

    _compare_objects("findings", findings(ta), findings(tb), lambda f: f"{f['severity']}: {f['title']}", d)
    _compare("cufile.json", {"path": a.cufile_path}, {"path": b.cufile_path}, d)
    _compare("cufile.json", _flat(a.cufile or {}, "", {}), _flat(b.cufile or {}, "", {}), d)
    return res


def diff(spec_a: str, spec_b: str) -> DiffResult:
    return compare(load_side(spec_a), load_side(spec_b))
