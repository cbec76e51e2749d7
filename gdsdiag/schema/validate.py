"""``gdsdiag.validate/1`` and ``gdsdiag.report/1`` (docs/json.md): a node's validation, and the
fleet view report merges from many of them."""

from __future__ import annotations

from typing import TypedDict

from .check import Evidence, WhyFact


class Node(TypedDict):
    hostname: str | None
    root: str
    snapshot_id: str
    machine_id: str | None  # app-specific hash of /etc/machine-id (validate.runner.node_ids)
    boot_id: str | None  # the same of the kernel's boot id
    tool_version: str
    kernel: str | None
    date: str


class Policy(TypedDict):
    source: str
    values: dict[str, object]


class Counts(TypedDict):
    PASS: int
    WARN: int
    FAIL: int
    SKIP: int


class RuleResult(TypedDict):
    rule: str
    title: str
    status: str
    summary: str
    evidence: list[Evidence]
    fix: str
    source: str
    stage: str


class SweepPoint(TypedDict):
    mode: str | None
    rw: str | None
    bs: int | None
    threads: int | None
    gbps: float | None
    p99_us: float | None
    route: str | None
    error: str | None


class Sweep(TypedDict):
    path: str
    gpu: int
    points: list[SweepPoint]


class RouteCount(TypedDict):
    count: int
    bytes: int


class ProofGpu(TypedDict):
    gpu: str
    bdf: str


class ProofTarget(TypedDict):
    path: str
    kind: str  # nvme | nfs-rdma | nfs | dfs | other | unknown
    fstype: str | None
    mount_point: str | None
    devices: list[str]
    predicted: str  # the Route gdsdiag check predicts for a cuFile I/O there
    reasons: list[str]


class ProofPrediction(TypedDict):
    route: str
    reasons: list[str]
    p2p: str | None  # topology's GPU <-> storage device verdict; null: no PCI device under the path
    p2pdma_map: str | None


class ProofIo(TypedDict):
    bytes: int
    n: int
    gbps: float | None
    p50_us: float | None
    p99_us: float | None
    match: bool
    sha256: str
    first_diff: int | None


class ProofRun(TypedDict):
    ok: bool
    stage: (
        str | None
    )  # load | driver_open | cuda | file | handle_register | buf_register | read | write | verify | timeout | child
    error: str | None
    code: int | None
    name: str | None
    meaning: str | None
    compat_allowed: bool | None
    nvfs_loaded: bool | None
    direct: bool | None
    read: ProofIo | None
    write: ProofIo | None
    routes: dict[str, int] | None
    removed: bool
    seconds: float | None
    log_tail: list[str]


class ProofCell(TypedDict):
    gpu: str | None
    gpu_bdf: str | None
    path: str
    result: str  # verified | compat | bounce | not_taken | skipped | mismatch | no_route
    route: str
    line: str
    predicted: ProofPrediction
    read_gbps: float | None
    read_p99_us: float | None
    write_gbps: float | None
    write_p99_us: float | None
    configured: ProofRun
    compat_forbidden: ProofRun | None
    why_chain: list[WhyFact]  # why this result: the decisive fact first (validate/proof_why.py, issue 45)
    fix: str  # the one change that would move the bytes, "none needed", or "none …: <reason>"


class ProofCounts(TypedDict):
    verified: int
    compat: int
    bounce: int
    not_taken: int
    skipped: int
    mismatch: int
    no_route: int


class ProofProbe(TypedDict):
    size: int
    bs: int
    timeout_s: float


class ProofDoc(TypedDict):
    gpus: list[ProofGpu]
    targets: list[ProofTarget]
    cells: list[ProofCell]
    counts: ProofCounts
    exit_code: int
    note: str | None
    probe: ProofProbe
    seconds: float


class _ValidateOptional(TypedDict, total=False):
    proof: ProofDoc  # only with --proof (docs/validate.md "Proof matrix")


class ValidateDoc(_ValidateOptional):
    schema: str
    tool_version: str
    node: Node
    level: str
    policy: Policy
    verdict: str
    exit_code: int
    counts: Counts
    stopped_early: str | None
    seconds: float
    rules: list[RuleResult]
    sweeps: list[Sweep]
    route_ratio: dict[str, float]
    trace: dict[str, RouteCount] | None


class NodeRow(TypedDict):
    node: str  # the hostname (a snapshot's file name), plus what tells nodes of one hostname apart
    hostname: str | None
    machine_id: str | None
    boot_id: str | None
    source: str
    snapshot_id: str
    verdict: str  # FAIL where the report contradicts itself ("inconsistent" says how)
    inconsistent: str | None  # "inconsistent input: the report says PASS, its rules FAIL"; None
    level: str
    failed: list[str]
    warned: list[str]
    gbps: dict[str, float]  # "read 1m" -> best GB/s over the GPUs, mounts and threads of cuFile modes


class ReportDoc(TypedDict):
    schema: str
    nodes: list[NodeRow]
    rules: dict[str, dict[str, list[str]]]
    verdict: str
