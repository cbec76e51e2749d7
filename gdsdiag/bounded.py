"""Reading what a user points us at, within stated limits.

Every file a user can name (cufile.json, saved lspci/nvidia-smi/gdscheck text, trace recordings,
snapshots) may be a FIFO, ``/dev/zero``, a 50 GB log or a JSON nest 100,000 deep. The helpers here
refuse non-regular files and files over a stated size with one clear line, and parse JSON with
limits on depth and number size, so that no input can hang gdsdiag or exhaust its memory.
The limits are documented in docs/security.md.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat

from .errors import GdsdiagError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# Stated limits (docs/security.md). Real files are far below them: a cufile.json is ~15 KiB,
# 'lspci -vvvxxxx' of a 1,000-function node ~8 MiB, a gdsdiag snapshot a few MiB unpacked.
MAX_CUFILE_JSON = 1 * MiB
MAX_COMMAND_TEXT = 64 * MiB  # lspci / nvidia-smi / gdscheck output saved to a file
MAX_RECORDING = 4 * GiB  # a trace recording (read as a stream, line by line)
MAX_RECORD_LINE = 64 * KiB  # one event line of a recording
MAX_JSON_DEPTH = 64
MAX_BPF_CACHE = 64 * MiB  # one cached probe program (~300 KB)
MAX_JSON_NUMBER_CHARS = 40  # enough for any 64-bit integer or double written by json.dumps


def human(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def check_regular(st: os.stat_result, max_bytes: int | None) -> str | None:
    """Why a file with this stat may not be read (None: it may)."""
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}, not a regular file"
    if max_bytes is not None and st.st_size > max_bytes:
        return f"is {human(st.st_size)}, over the {human(max_bytes)} limit"
    return None


def open_user_file(path: str, what: str, max_bytes: int | None, fix: str = "check the path"):
    """Open a file the user named for binary reading, or raise one clear GdsdiagError.

    O_NONBLOCK so that opening a FIFO with no writer returns at once instead of hanging; the
    fstat on the open descriptor (not the path) is what decides, so a swap between the check and
    the read changes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise GdsdiagError(f"cannot read {path}: {e.strerror}", fix) from None
    try:
        why = check_regular(os.fstat(fd), max_bytes)
    except BaseException:
        os.close(fd)
        raise
    if why:
        os.close(fd)
        raise GdsdiagError(f"cannot read {path}: {why}", f"give the {what} as a regular file")
    return os.fdopen(fd, "rb")


def read_user_file(path: str, what: str, max_bytes: int, fix: str = "check the path") -> bytes:
    with open_user_file(path, what, max_bytes, fix) as f:
        data = f.read(max_bytes + 1)  # a file that grew after the fstat still stops here
    if len(data) > max_bytes:
        raise GdsdiagError(
            f"cannot read {path}: over the {human(max_bytes)} limit for {what}", "give the file as the command wrote it"
        )
    return data


def read_user_text(path: str, what: str, max_bytes: int = MAX_COMMAND_TEXT, fix: str = "check the path") -> str:
    """Saved command output: undecodable bytes become U+FFFD (tools print odd device names)."""
    return read_user_file(path, what, max_bytes, fix).decode("utf-8", "replace")


class JsonLimitError(ValueError):
    """JSON that parses in principle but is outside what gdsdiag accepts (depth, number size)."""


def _parse_int(s: str) -> int:
    if len(s) > MAX_JSON_NUMBER_CHARS:
        raise JsonLimitError(f"a number of {len(s)} digits")
    return int(s)


def _parse_float(s: str) -> float:
    if len(s) > MAX_JSON_NUMBER_CHARS:
        raise JsonLimitError(f"a number of {len(s)} characters")
    v = float(s)
    if not math.isfinite(v):
        raise JsonLimitError(f"a number out of range ({s})")
    return v


def _parse_constant(s: str):
    raise JsonLimitError(f"{s} is not JSON")


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")
_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deep arrays/objects nest in ``text`` (strings skipped), without recursion: checked
    before json.loads so that 100,000 '[' never reach a recursive parser."""
    brackets = _BRACKET.findall(_JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_DELTA.__getitem__, brackets)), default=0)


def loads_json(text: str, max_depth: int = MAX_JSON_DEPTH, **kw):
    """json.loads with gdsdiag's limits; every failure is a ValueError (JSONDecodeError keeps its
    line/column, JsonLimitError says which limit)."""
    if json_depth(text) > max_depth:
        raise JsonLimitError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant, **kw)
    except RecursionError:
        raise JsonLimitError(f"nested deeper than {max_depth} levels") from None


MAX_SHOWN = 300  # characters of one value a text renderer prints (JSON output keeps it whole)


def clip(value, n: int = MAX_SHOWN) -> str:
    """A value cut for a terminal: a 1 MiB string from a hostile cufile.json took rich seconds
    to wrap and filled the screen."""
    s = value if isinstance(value, str) else str(value)
    if len(s) <= n:
        return s
    return s[:n] + f"… ({len(s) - n} more characters)"
