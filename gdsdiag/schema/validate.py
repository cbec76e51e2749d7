"""``gdsdiag.validate/1`` and ``gdsdiag.report/1`` (docs/json.md): a node's validation, and the
fleet view report merges from many of them."""

from __future__ import annotations

from typing import TypedDict

from .check import Evidence


class Node(TypedDict):
    hostname: str | None
    root: str
    snapshot_id: str
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


class ValidateDoc(TypedDict):
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
    node: str
    source: str
    snapshot_id: str
    verdict: str
    level: str
    failed: list[str]
    warned: list[str]
    gbps: dict[str, float]  # "read 1m" -> best GB/s over the GPUs, mounts and threads of cuFile modes


class ReportDoc(TypedDict):
    schema: str
    nodes: list[NodeRow]
    rules: dict[str, dict[str, list[str]]]
    verdict: str
