"""``gdsdiag.explain/2`` (docs/json.md; /2: severities fail|warn|info, /1 spelled fail "error")."""

from __future__ import annotations

from typing import TypedDict


class File(TypedDict):
    path: str
    kind: str | None
    lines: int
    explained: int
    unknown: int
    skipped: int


class Where(TypedDict):
    time: str | None
    file: str
    line: int
    pid: int | None


class Code(TypedDict):
    code: int
    name: str
    text: str


class Message(TypedDict):
    id: str
    severity: str  # fail | warn | info
    title: str
    kind: str
    level: str | None
    component: str | None
    message: str
    count: int
    pids: list[int]
    first: Where | None
    last: Where | None
    files: list[str]
    meaning: str
    cause: str
    fix: str
    sources: list[str]
    code: Code | None
    fields: dict[str, object]


class Unknown(TypedDict):
    file: str
    line: int
    kind: str | None
    level: str | None
    text: str
    matters: bool


class GdsioRun(TypedDict):
    file: str
    line: int
    io: str
    xfer: str
    threads: int
    io_size_kib: int
    dataset_kib: int
    file_kib: int
    gib_per_s: float
    avg_latency_us: float
    ops: int
    seconds: float
    wrapped: bool


class Counts(TypedDict):
    fail: int
    warn: int
    info: int
    unknown: int
    unknown_that_matter: int


class ExplainDoc(TypedDict):
    schema: str
    files: list[File]
    messages: list[Message]
    unknown: list[Unknown]
    unknown_truncated: bool
    gdsio_runs: list[GdsioRun]
    counts: Counts
    exit_code: int
