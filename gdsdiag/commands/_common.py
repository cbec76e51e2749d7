"""What every command's rendering shares."""

from __future__ import annotations

import json
import sys


def emit_json(doc: dict) -> None:
    """A command's JSON document on stdout (schemas in docs/json.md)."""
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
