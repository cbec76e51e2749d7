"""Check results and verdicts: what every check returns and renderers consume."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..routes import Route
from ..verdicts import Status

if TYPE_CHECKING:
    from ..schema import check as schema


UNTRACED_PREFIX = "untraced."  # check/untraced.py's ids: paths host tracing cannot see
# what `check` and `trace` say of such a path (issue 47 goal 4)
INVISIBLE = "invisible to host tracing — verify with `gdsdiag validate --proof`"


def plain(value) -> str:
    """Evidence text a person reads (and JSON carries): never a Python repr such as None,
    {'n': 1} or [('a', 'b')]. A missing value says so."""
    if value is None:
        return "(absent)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_inner(v)}" for k, v in value.items()) or "(empty)"
    if isinstance(value, (list, tuple, set)):
        return "; ".join(plain(v) for v in value) or "(empty)"
    return str(value)


def _inner(value) -> str:
    return f"({plain(value)})" if isinstance(value, (dict, list, tuple, set)) and value else plain(value)


@dataclass
class Evidence:
    source: str  # file (or command) read
    value: str  # what it said (anything else given is turned into text by plain())

    def __post_init__(self):
        self.value = plain(self.value)

    def to_json(self) -> schema.Evidence:
        return {"source": self.source, "value": self.value}


@dataclass
class CheckResult:
    id: str
    title: str
    status: Status
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    why: str = ""
    fix: str = ""
    route: Route | None = None  # the route this check is a prerequisite of, if any
    path: str | None = None  # for per-path checks

    def to_json(self) -> schema.CheckResult:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
            "why": self.why,
            "fix": self.fix,
            "route": self.route.value if self.route else None,
            "path": self.path,
        }


def judged(
    ok: object,
    cid: str,
    title: str,
    summary: str,
    evidence: list[Evidence],
    why: str,
    fix: str,
    bad: Status = Status.FAIL,
    route: Route | None = None,
    path: str | None = None,
) -> CheckResult:
    """A check decided by one condition: PASS, or ``bad`` with its fix (a passing check shows none)."""
    return CheckResult(cid, title, Status.PASS if ok else bad, summary, evidence, why, "" if ok else fix, route, path)


@dataclass
class PathVerdict:
    path: str
    route: Route
    reasons: list[str]
    fstype: str | None = None
    mount_point: str | None = None
    devices: list[str] = field(default_factory=list)
    topology: list[schema.PathTopology] = field(default_factory=list)

    def to_json(self) -> schema.PathResult:
        return {
            "path": self.path,
            "route": self.route.value,
            "reasons": self.reasons,
            "fstype": self.fstype,
            "mount_point": self.mount_point,
            "devices": self.devices,
            "topology": self.topology,
        }


@dataclass
class NodeVerdict:
    routes: list[Route]  # direct routes possible, plus COMPAT when allowed
    summary: str  # "NVFS + P2PDMA", "COMPAT only", "none"
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> schema.Verdict:
        return {"routes": [r.value for r in self.routes], "summary": self.summary, "reasons": self.reasons}


@dataclass
class MountRoute:
    """A mounted file system and the route a cuFile read of a file on it would take here."""

    mount_point: str
    fstype: str
    source: str
    where: str  # "ext4 /dev/vda on / (vda (virtio))"
    route: Route
    deciding: str  # the fact that decided the route, with where it was read
    reasons: list[str]  # check's rules for this mount, in order
    fix: str  # "" where none is needed or none is known
    decided_by: str = "mount"  # mount (its file system, devices, cufile.json's say on it) | node

    def to_json(self) -> schema.MountRoute:
        return {
            "mount_point": self.mount_point,
            "fstype": self.fstype,
            "source": self.source,
            "where": self.where,
            "route": self.route.value,
            "deciding": self.deciding,
            "decided_by": self.decided_by,
            "reasons": self.reasons,
            "fix": self.fix,
        }


@dataclass
class EndpointRoute:
    """An endpoint cuobj.json names (rdma_dev_addr_list) and the route of a cuObject GET/PUT
    through it: RDMA into GPU memory, into host memory only (then copied: DRAM_BOUNCE), or none."""

    endpoint: str
    interface: str | None
    rdma_devices: list[str]
    route: Route  # RDMA | DRAM_BOUNCE | NONE | UNKNOWN
    memory: str  # GPU | host | none | unknown
    deciding: str
    fix: str

    def to_json(self) -> schema.EndpointRoute:
        return {
            "endpoint": self.endpoint,
            "interface": self.interface,
            "rdma_devices": self.rdma_devices,
            "route": self.route.value,
            "memory": self.memory,
            "deciding": self.deciding,
            "fix": self.fix,
        }
