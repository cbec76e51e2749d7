"""Inputs for the fuzzer: mutations of real captures and grammar-aware generation.

The classes come from issue 24 (what an earlier fuzzer never made): digit runs far past 40 digits
and past Python's 4,300-digit int() limit, Unicode digits ('²', '①', '٣' are str.isdigit()),
ranges and huge ranges, '1.2.3', inf/nan, deep nesting, huge repeats of one line or token, and
structure-level edits of JSON documents (a number where a list was, a list where a string was).
Everything is deterministic from the seed, so a failure can be replayed by its index.
"""

from __future__ import annotations

import json
import random
import re

DIGITS_UNICODE = ["²", "①", "٣", "৪", "௫", "߆", "𝟕", "Ⅷ", "½", "¹"]
NUMBERS = [
    "0",
    "-1",
    "1.2.3",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "Infinity",
    "1e400",
    "-0",
    "0x1f",
    "1_000",
    "9" * 41,
    "9" * 4301,
    "1" * 20000,
    "18446744073709551616",
    "0-4000000000",
    "4000000000-0",
    "0-9" * 3,
    "1,2,3-" + "9" * 30,
    "ffffffff," * 200,
    "f" * 100000,
    "00000000," * 5000 + "1",
    " ",
    "",
]
TOKENS = [
    "[",
    "{",
    "(",
    '"',
    "\\",
    "\x00",
    "\x1b[31m",
    "[/]",
    "[link=http://x]",
    "%s",
    "\n",
    "\r",
    "\t",
    "-",
    ",",
    ":",
    "=",
]


def _num(rng: random.Random) -> str:
    c = rng.random()
    if c < 0.5:
        return rng.choice(NUMBERS)
    if c < 0.7:
        return "".join(rng.choice(DIGITS_UNICODE) for _ in range(rng.randint(1, 4)))
    if c < 0.85:
        return str(rng.randint(0, 10 ** rng.randint(1, 60)))
    lo = rng.randint(0, 1 << 33)
    return f"{lo}-{lo + rng.randint(0, 1 << 34)}"


MAX_INPUT = 8 << 20
_NUMRE = re.compile(rb"[0-9]+(?:\.[0-9]+)?")


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four edits of ``data``, each of a class above."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(10)
        n = len(out)
        if op == 0 and n:  # replace a number by a hostile one
            ms = list(_NUMRE.finditer(bytes(out)))
            if ms:
                m = rng.choice(ms)
                out[m.start() : m.end()] = _num(rng).encode()
                continue
        if op <= 1 and n:  # flip bytes
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(n)] = rng.randrange(256)
        elif op == 2 and n:  # cut
            a = rng.randrange(n)
            del out[a : a + rng.randint(1, max(1, n // 4))]
        elif op == 3 and n:  # repeat one line many times
            lines = bytes(out).split(b"\n")
            i = rng.randrange(len(lines))
            k = min(rng.choice([2, 100, 5000]), (4 << 20) // (len(lines[i]) + 1) + 1)
            lines[i : i + 1] = [lines[i]] * k
            out = bytearray(b"\n".join(lines))
        elif op == 4:  # insert a token or nesting
            t = rng.choice(TOKENS)
            k = rng.choice([1, 3, 100, 10000])
            pos = rng.randrange(n + 1)
            out[pos:pos] = (t * k).encode()
        elif op == 5 and n:  # a very long line
            pos = rng.randrange(n + 1)
            out[pos:pos] = b"x" * rng.choice([1000, 70000, 1 << 20])
        elif op == 6 and n:  # splice two pieces of itself
            a, b = sorted(rng.randrange(n) for _ in range(2))
            pos = rng.randrange(n + 1)
            out[pos:pos] = out[a:b]
        elif op == 7:  # insert a hostile number anywhere
            pos = rng.randrange(n + 1)
            out[pos:pos] = _num(rng).encode()
        elif op == 8 and n:  # invalid UTF-8 / NUL
            pos = rng.randrange(n + 1)
            out[pos:pos] = rng.choice([b"\xff\xfe", b"\x00", b"\xc3", "²".encode()])
        else:  # truncate to empty or to a few bytes
            del out[rng.randint(0, min(n, 64)) :]
        del out[MAX_INPUT:]  # inputs stay small enough to make, whatever they make the parser do
    return bytes(out)


_VALUES = [
    5,
    -1,
    0,
    1.5,
    1e308,
    "x",
    "",
    "[/]",
    None,
    True,
    [],
    {},
    [1, 2],
    {"a": 1},
    "9" * 5000,
    10**300,
    "nan",
    "²",
]


def _json_edit(doc, rng: random.Random, depth: int = 0):
    """Replace one value somewhere in a JSON document by a value of another shape."""
    if depth > 6 or rng.random() < 0.15:
        c = rng.random()
        if c < 0.6:
            return rng.choice(_VALUES)
        if c < 0.8:
            return [doc] * rng.choice([2, 1000])
        nest: object = 1
        for _ in range(rng.choice([10, 100, 1000])):
            nest = [nest]
        return nest
    if isinstance(doc, dict) and doc:
        k = rng.choice(list(doc))
        doc = dict(doc)
        if rng.random() < 0.1:
            del doc[k]
        else:
            doc[k] = _json_edit(doc[k], rng, depth + 1)
        return doc
    if isinstance(doc, list) and doc:
        doc = list(doc)
        i = rng.randrange(len(doc))
        doc[i] = _json_edit(doc[i], rng, depth + 1)
        return doc
    return rng.choice(_VALUES)


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    """Shape edits of a JSON seed (half the time), byte mutations otherwise."""
    if rng.random() < 0.5:
        try:
            doc = json.loads(data)
        except ValueError:
            return mutate(data, rng)
        try:
            return json.dumps(_json_edit(doc, rng)).encode()
        except (ValueError, RecursionError):
            return mutate(data, rng)
    return mutate(data, rng)


def generate(rng: random.Random, kind: str) -> bytes:
    """Grammar-aware text for a parser with no seed that shows the edge (sysfs-like values)."""
    if kind == "cpulist":
        parts = [_num(rng) for _ in range(rng.randint(1, 6))]
        return ",".join(parts).encode()
    if kind == "yaml":
        c = rng.randrange(4)
        if c == 0:
            lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
            for i in range(1, rng.randint(2, 9)):
                lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
            lines.append(f"routes:\n  allowed: *a{len(lines) - 1}")
            return "\n".join(lines).encode()
        if c == 1:
            return ("[" * rng.choice([100, 10000, 100000])).encode()
        if c == 2:
            return f"sweep:\n  quick:\n    size: {_num(rng)}\n    seconds: {_num(rng)}\n    threads: [{_num(rng)}]\n".encode()
        return f"expect:\n  gpus: {_num(rng)}\nio:\n  max_compat_share: {_num(rng)}\n".encode()
    return _num(rng).encode()
