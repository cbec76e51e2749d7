"""What every command's rendering shares."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any


def json_text(doc: Mapping[str, Any], pretty: bool | None = None) -> str:
    """A JSON document as text: indented for a person at a terminal, one compact line for a
    program (a pipe or a file). Python encodes indented JSON in pure Python and compact JSON in
    C: the 4.5 MB topology of a 1,000-device node takes 0.36 s indented and 0.09 s compact
    (docs/benchmarks.md). ``pretty`` None: decide by whether stdout is a terminal."""
    if pretty is None:
        pretty = sys.stdout.isatty()
    if pretty:
        return json.dumps(doc, indent=2)
    return json.dumps(doc, separators=(",", ":"))


def emit_json(doc: Mapping[str, Any]) -> None:
    """A command's JSON document on stdout (schemas in docs/json.md)."""
    sys.stdout.write(json_text(doc) + "\n")
