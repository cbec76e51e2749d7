"""``gdsdiag.sweep/1`` (docs/json.md): the document's frame. A point is still built from its
record's fields (sweep/runner.py ``PointRecord.to_json``), so its keys are typed loosely here."""

from __future__ import annotations

from typing import TypedDict


class Machine(TypedDict):
    hostname: str
    kernel: str
    cpus: int | None
    python: str
    date: str


class Config(TypedDict):
    dir: str
    size: int
    bs: list[int]
    threads: list[int]
    rw: list[str]
    modes: list[str]
    gpu: int
    seconds: float | None
    bytes: int | None
    verify: bool
    iodepth: int
    compare_fio: bool


class SweepDoc(TypedDict):
    schema: str
    machine: Machine
    config: Config
    prepare_seconds: float
    ceilings: dict[str, object]
    points: list[dict[str, object]]
