"""``gdsdiag.snapshot/1`` (docs/json.md)."""

from __future__ import annotations

from typing import TypedDict


class Captured(TypedDict):
    """What ``gdsdiag.snapshot.create`` reports."""

    entries: int
    skipped: list[str]
    redacted: int | None
    bundle: list[str]


class SnapshotDoc(Captured):
    schema: str
    output: str
