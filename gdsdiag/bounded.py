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

from .errors import GdsdiagError, UsageError
from .units import human_bytes

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
    """A limit or a file's size in a message: '1.0 MiB', '512 bytes'."""
    return human_bytes(n, 1, sep=" ", word="bytes")


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
    except FileNotFoundError as e:  # the command line names nothing there: a usage error (exit 4)
        raise UsageError(f"cannot read {path}: {e.strerror}", fix) from None
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


def read_capped(f, max_bytes: int, path: str, fix: str = "check the path") -> bytes:
    """At most ``max_bytes + 1`` bytes of an open user file; a read that fails (EIO from
    /proc/self/mem, a file on a dead NFS server, EISDIR) is one GdsdiagError, never an OSError
    traceback."""
    try:
        return f.read(max_bytes + 1)
    except OSError as e:
        raise GdsdiagError(f"cannot read {path}: {e.strerror or e}", fix) from None


def read_user_file(path: str, what: str, max_bytes: int, fix: str = "check the path", named: bool = False) -> bytes:
    """``named``: the error says what the file is meant to be ("cannot read policy FILE: ...")."""
    try:
        f = open_user_file(path, what, max_bytes, fix)
    except GdsdiagError as e:
        if named:
            raise type(e)(e.cause.replace("cannot read ", f"cannot read {what} ", 1), e.fix) from None
        raise
    with f:
        data = read_capped(f, max_bytes, path, fix)  # a file that grew after the fstat still stops here
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


# Numbers and ranges from outside text (sysfs files, tool output, policy YAML). Python's int()
# accepts '²', '①' and '٣' (str.isdigit), '1_000', surrounding spaces and 4,300 digits before it
# refuses; a range '0-4000000000' expanded as given takes the machine. These read ASCII digits
# only, at most MAX_INT_DIGITS of them, and bound every range and list they expand.
MAX_INT_DIGITS = 20  # any 64-bit value
MAX_CPUS = 65536  # CPU numbers (Linux's NR_CPUS tops out at 8192)
MAX_NODES = 4096  # NUMA node numbers (Linux's MAX_NUMNODES tops out at 1024)
_ASCII_INT = re.compile(r"[0-9]{1,%d}" % MAX_INT_DIGITS)


def ascii_int(text: str, limit: int | None = None) -> int | None:
    """'123' -> 123; anything but 1-20 ASCII digits (or a value over ``limit``) -> None."""
    if not isinstance(text, str) or not _ASCII_INT.fullmatch(text):
        return None
    v = int(text)
    return None if limit is not None and v > limit else v


_ASCII_DECIMAL = re.compile(r"(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][+-]?[0-9]{1,3})?")


def ascii_number(text: str) -> float | None:
    """'2', '0.5', '1e3' -> a finite float; anything else -> None: no sign, no 'inf'/'nan', no
    '1_000', '١٢' or spaces (all of which float() takes), at most 20 digits each side."""
    if not isinstance(text, str) or not _ASCII_DECIMAL.fullmatch(text):
        return None
    v = float(text)
    return v if math.isfinite(v) else None


def parse_ranges(text: str, limit: int, max_items: int | None = None) -> list[int] | None:
    """'0,3-9,11' -> [0, 3, ..., 9, 11] (order kept), values 0..limit-1 and at most ``max_items``
    (default ``limit``) of them; anything else (a number too large, a reversed or huge range,
    '²', '1.5') -> None. Linear in the text plus the output."""
    cap = limit if max_items is None else max_items
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, sep, hi_s = part.partition("-")
        lo = ascii_int(lo_s.strip(), limit - 1)
        hi = ascii_int(hi_s.strip(), limit - 1) if sep else lo
        if lo is None or hi is None or hi < lo or len(out) + (hi - lo + 1) > cap:
            return None
        out.extend(range(lo, hi + 1))
    return out


_HEX = frozenset("0123456789abcdefABCDEF")


def parse_hexmask(text: str, limit: int) -> set[int] | None:
    """'0000,00000000,0000ffff' (32-bit words, most significant first) -> {0..15}; bits beyond
    ``limit`` or non-hex text -> None. Linear: one hex digit at a time, never one huge int."""
    digits = text.strip().replace(",", "")
    if not digits or len(digits) > limit // 4 + 16 or not _HEX.issuperset(digits):
        return None
    out: set[int] = set()
    for pos, ch in enumerate(reversed(digits)):
        v = int(ch, 16)
        if v:
            base = pos * 4
            if base + v.bit_length() > limit:
                return None
            out.update(base + b for b in range(4) if v >> b & 1)
    return out


def short_repr(value) -> str:
    """repr() cut to a line for an error message, without building the whole repr first (a policy
    value of 10⁹ items through YAML aliases once hung validate in repr())."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxtuple, r.maxset = 3, 6, 6, 6, 6
    r.maxstring, r.maxother, r.maxlong = 80, 80, 40
    try:
        return r.repr(value)
    except (ValueError, RecursionError):  # an int over Python's digit limit, a cyclic value
        return f"<a {type(value).__name__}>"


MAX_DOC_NODES = 200_000  # values in one YAML/JSON document, counting every alias use


def count_nodes(doc, limit: int = MAX_DOC_NODES, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why a parsed document is too big (None: it is not): its values counted as a reader would
    meet them (a YAML alias counts each time it is used), and its depth, without recursion."""
    seen = 0
    stack = [(doc, 1)]
    while stack:
        v, depth = stack.pop()
        seen += 1
        if seen > limit:
            return f"more than {limit:,} values (YAML aliases expanding?)"
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
            stack.extend((k, depth + 1) for k in v)
            if len(stack) > limit:
                return f"more than {limit:,} values"
        elif isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)
            if len(stack) > limit:
                return f"more than {limit:,} values"
    return None


MAX_POLICY = 1 * MiB  # a policy YAML (the shipped one is ~3 KiB)
MAX_REPORT_JSON = 64 * MiB  # a 'validate --json' report, a 'sweep --json' document, a kv input


def load_user_json(path: str, what: str, max_bytes: int = MAX_REPORT_JSON, fix: str = "") -> object:
    """A JSON file the user named, through every limit here: a regular file under ``max_bytes``
    (a FIFO or /dev/zero is refused at once), strict UTF-8, nesting and numbers bounded, and
    ``count_nodes``. Every failure is one GdsdiagError naming the file, the line and what was
    expected."""
    fix = fix or f"give the {what} as the command wrote it"
    data = read_user_file(path, what, max_bytes, fix, named=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise GdsdiagError(f"{path} line {line}: not UTF-8 text (the {what} is JSON)", fix) from None
    try:
        doc = loads_json(text)
    except json.JSONDecodeError as e:
        raise GdsdiagError(f"{path} line {e.lineno} column {e.colno}: not JSON ({e.msg})", fix) from None
    except ValueError as e:
        raise GdsdiagError(f"{path}: outside the limits for a {what} ({e})", fix) from None
    too_big = count_nodes(doc)
    if too_big:
        raise GdsdiagError(f"{path}: outside the limits for a {what} ({too_big})", fix)
    return doc


_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def shape_error(value, spec, where: str = "") -> str | None:
    """Why ``value`` does not have the shape ``spec`` (None: it does), naming the JSON path.

    A spec is a type or a tuple of alternatives (``None`` allows null); a dict spec is an object
    whose listed keys, where present, have their shapes (a key ending in '!' must be present; the key
    '*' gives the shape of every value); a
    one-element list spec is an array whose every element has that shape. Numbers are finite."""
    alts = spec if isinstance(spec, tuple) else (spec,)
    errors = []
    for alt in alts:
        if alt is None:
            if value is None:
                return None
            continue
        if isinstance(alt, dict):
            if not isinstance(value, dict):
                errors.append("an object")
                continue
            if "*" in alt:  # every value has this shape (a map of names to numbers)
                for k, x in value.items():
                    why = shape_error(x, alt["*"], f"{where}.{k}" if where else str(k))
                    if why:
                        return why
                return None
            for k, sub in alt.items():
                need = k.endswith("!")
                k = k.rstrip("!")
                if k not in value:
                    if need:
                        return f"{where or 'the document'}: no '{k}'"
                    continue
                why = shape_error(value[k], sub, f"{where}.{k}" if where else k)
                if why:
                    return why
            return None
        if isinstance(alt, list):
            if not isinstance(value, list):
                errors.append("an array")
                continue
            for i, x in enumerate(value):
                why = shape_error(x, alt[0], f"{where}[{i}]")
                if why:
                    return why
            return None
        if isinstance(value, bool) and alt is not bool:
            errors.append(_NAMES.get(alt, alt.__name__))
            continue
        if alt is float and isinstance(value, int) and not isinstance(value, bool):
            return None
        if isinstance(value, alt):
            if isinstance(value, float) and not math.isfinite(value):
                return f"{where}: not a finite number"
            return None
        errors.append(_NAMES.get(alt, alt.__name__))
    found = "null" if value is None else type(value).__name__.replace("dict", "an object").replace("list", "an array")
    return f"{where or 'the document'}: expected {' or '.join(dict.fromkeys(errors)) or 'null'}, found {found}"


def check_shape(path: str, value, spec, what: str) -> None:
    why = shape_error(value, spec)
    if why:
        raise GdsdiagError(f"{path}: not a {what} ({why})", f"give the {what} as gdsdiag wrote it")


_CONTROL: dict[int, str] = {c: "?" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]}
# Characters that reorder or hide text without being control characters (Unicode "format" and
# separators): U+202E turns a file name 'gdsdiag-txt.exe' into what reads as 'gdsdiag-exe.txt',
# and a line separator breaks a line as a terminal draws it (issue 42: U+202E was printed raw).
# Shown escaped, so a reader sees that they are there and where.
_CONTROL.update(
    {
        c: f"\\u{c:04x}"
        for c in [0x061C, 0x180E, *range(0x200B, 0x2010), 0x2028, 0x2029, *range(0x202A, 0x202F), 0x2060]
        + [*range(0x2066, 0x206A), 0xFEFF]
    }
)


def printable(s: str) -> str:
    """Control characters (ESC of a terminal sequence, OSC 8 hyperlinks, BEL) as '?': text from an
    input file never drives the terminal."""
    return s.translate(_CONTROL)
