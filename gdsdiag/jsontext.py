"""JSON text as ``--json`` writes it for a program (a pipe or a file): compact, and the pieces that
large documents are put together from (``documents/topology.document_text``,
``topology.pairs.PairAnalysis.json_text``), each the very text ``json.dumps`` writes for the value."""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as string  # a str, as json.dumps writes it (ensure_ascii)

__all__ = ["compact", "integer", "optional", "string", "strings"]


def compact(value: object) -> str:
    # documents are trees built by to_json methods: the encoder's cycle check is pure cost (~7 %)
    return json.dumps(value, separators=(",", ":"), check_circular=False)


def optional(s: str | None) -> str:
    return "null" if s is None else string(s)


def integer(v: int | None) -> str:
    return "null" if v is None else str(int(v))


def strings(items: list[str]) -> str:
    return "[" + ",".join(map(string, items)) + "]"
