"""``gdsdiag.diff/1`` (docs/json.md)."""

from __future__ import annotations

from typing import TypedDict


class Side(TypedDict):
    input: str
    form: str
    verdict: str | None


class Difference(TypedDict):
    section: str
    key: str
    a: object  # the value on each side, as in the compared documents
    b: object


Counts = TypedDict(
    "Counts",
    {"verdict": int, "checks": int, "topology": int, "pairs": int, "findings": int, "cufile.json": int},
)


class DiffDoc(TypedDict):
    schema: str
    a: Side
    b: Side
    same: bool
    differences: list[Difference]
    counts: Counts
    exit_code: int
