"""``gdsdiag.check/1`` (docs/json.md)."""

from __future__ import annotations

from typing import TypedDict


class Verdict(TypedDict):
    routes: list[str]
    summary: str
    reasons: list[str]


class PathTopology(TypedDict):
    gpu: str
    device: str
    nvidia_smi: str
    p2p: str
    p2pdma_map: str


class PathResult(TypedDict):
    path: str
    route: str
    reasons: list[str]
    fstype: str | None
    mount_point: str | None
    devices: list[str]
    topology: list[PathTopology]


class MountRoute(TypedDict):
    mount_point: str
    fstype: str
    source: str
    where: str
    route: str
    deciding: str
    decided_by: str  # mount | node
    reasons: list[str]
    fix: str


class EndpointRoute(TypedDict):
    endpoint: str
    interface: str | None
    rdma_devices: list[str]
    route: str
    memory: str  # GPU | host | none | unknown
    deciding: str
    fix: str


class Endpoints(TypedDict):
    source: str  # where the list came from, or why there is none
    endpoints: list[EndpointRoute]


class UntracedPath(TypedDict):
    kind: str  # nvme_bypass | cuobject_rdma
    target: str  # the PCI function, or the cuObject endpoint
    route: str  # UNKNOWN (a bypassed NVMe function: the program picks the memory) | RDMA | DRAM_BOUNCE
    deciding: str
    evidence: list[Evidence]


class Evidence(TypedDict):
    source: str
    value: str


class CheckResult(TypedDict):
    id: str
    title: str
    status: str
    summary: str
    evidence: list[Evidence]
    why: str
    fix: str
    route: str | None
    path: str | None


class Counts(TypedDict):
    PASS: int
    WARN: int
    FAIL: int
    SKIP: int
    INFO: int


class GdscheckRow(TypedDict):
    item: str
    gdscheck: str
    gdsdiag: str
    agree: bool | None
    note: str


class _CheckDoc(TypedDict):
    schema: str
    source: str
    verdict: Verdict
    paths: list[PathResult]
    mounts: list[MountRoute]
    objects: Endpoints
    untraced: list[UntracedPath]
    checks: list[CheckResult]
    counts: Counts
    exit_code: int
    problems: list[str]


class CheckDoc(_CheckDoc, total=False):
    gdscheck: list[GdscheckRow]  # only with --gdscheck


class WhyFact(TypedDict):
    """One fact of a why (check/facts.Fact): trace's files, validate's proof cells, sweep's points."""

    fact: str
    value: str
    source: str
    role: str  # decisive | contributing
