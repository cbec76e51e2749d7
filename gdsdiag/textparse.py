"""Line parsers for tool and procfs text where most lines set one field: a table of
(pattern, attribute, convert) tried in order, so each format reads as data, not as a chain of ifs."""

from __future__ import annotations

import re
from collections.abc import Callable

Field = tuple[re.Pattern, str, Callable[[str], object]]
_MD_BOLD = re.compile(r"\*\*(.+?)\*\*")


def unbold(line: str) -> str:
    """A stripped line a paster wrapped whole in markdown bold ('**NVMe : Unsupported**', DALI#4009)
    is the row inside; any other line is itself."""
    b = _MD_BOLD.fullmatch(line)
    return b.group(1).strip() if b else line


def fields(*rows: tuple[str, str, Callable[[str], object]]) -> list[Field]:
    """Compile (regex with one group, attribute, convert) rows."""
    return [(re.compile(rx), attr, conv) for rx, attr, conv in rows]


def set_field(obj, line: str, table: list[Field]) -> bool:
    """Set the attribute of the first row whose pattern matches ``line``; False when none does."""
    for rx, attr, conv in table:
        m = rx.match(line)
        if m:
            setattr(obj, attr, conv(m.group(1)))
            return True
    return False
