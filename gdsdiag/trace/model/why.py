"""A trace file's why: built in check/why.py, beside the node rules it reads, so that `validate
--proof` and `sweep` answer from the same builder without importing the trace (issue 45)."""

from __future__ import annotations

from ...check.why import FALLBACK_WORDS, REPLAY, TRACE, NodeMissing, file_why

__all__ = ["FALLBACK_WORDS", "REPLAY", "TRACE", "NodeMissing", "file_why"]
