"""Every regular expression in gdsdiag, run over adversarial text with a time bound (issue 24:
explain's `nvfs-stats-errors` was exponential on a 93-byte line, nvfs_proc quadratic on a long one).

The patterns are found in the source, not listed by hand: every string literal given to a ``re``
function (``re.compile``, ``re.match``, ``re.sub``...), every pattern row of a ``textparse.fields``
table, and every ``pattern`` of explain's messages.json. Each runs (``search``, and ``findall``,
the call that restarts at every position) over inputs built from its own characters: one
character repeated, two alternating, the pattern's leading literal text followed by a long run,
each 20,000 characters. A linear pattern takes microseconds to milliseconds on them; a quadratic
one seconds, an exponential one forever. They run in a child process that is killed when one
input takes longer than the bound, so a catastrophic pattern fails this test instead of hanging it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import HERE

PKG = os.path.join(os.path.dirname(HERE), "gdsdiag")
RE_FUNCS = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split"}
N = 20_000
BOUND_S = 1.0  # per pattern and input; the slowest linear one here takes ~10 ms on a loaded VM


def _literal(node) -> str | bytes | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "a" + "b"
        a, b = _literal(node.left), _literal(node.right)
        if isinstance(a, str) and isinstance(b, str):
            return a + b
    return None


def patterns() -> list[tuple[str, str | bytes, str]]:
    """(where, pattern, how it is called) for every literal pattern in the package: a pattern given
    to re.match/re.fullmatch is tried at one position only, every other one (and a compiled one,
    whose use is not followed here) as search and findall, which try every position."""
    out = []
    for dirpath, _, files in os.walk(PKG):
        for fn in sorted(files):
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, os.path.dirname(PKG))
            tree = ast.parse(open(path, encoding="utf-8").read())
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                is_re = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "re"
                if is_re and name in RE_FUNCS and node.args:
                    p = _literal(node.args[0])
                    if p is not None:
                        out.append((f"{rel}:{node.lineno}", p, name))
                elif name == "fields":  # textparse.fields((pattern, attr, convert), ...)
                    for row in node.args:
                        if isinstance(row, ast.Tuple) and row.elts:
                            p = _literal(row.elts[0])
                            if p is not None:
                                out.append((f"{rel}:{row.lineno}", p, "match"))
    with open(os.path.join(PKG, "explain", "messages.json"), encoding="utf-8") as f:
        for m in json.load(f)["entries"]:
            out.append((f"messages.json:{m['id']}", m["pattern"], "search"))
    return out


CHILD = r"""
import json, re, sys, time
N = int(sys.argv[1])
CORE = " a0:=-.,x\t_/()[]{}#\"'"

def inputs(p):
    text = p if isinstance(p, str) else p.decode("latin-1")
    chars = sorted(set(c for c in text if c.isprintable() or c in "\t ") | set(CORE))
    lead = re.match(r"\^?((?:\\.|[^\\.^$*+?()\[\]{}|])*)", text).group(1)
    lead = re.sub(r"\\(.)", r"\1", lead)
    out = []
    for c in chars:
        out.append(c * N)
        out.append(lead + c * N)
        for first in "aA":  # (an upper-case start: issue 42's "A" + 200 KB of spaces, 33 CPU s)
            out.append(first + c * N + "\x00")
    core = "a0 :=-.x"
    for c1 in core:
        for c2 in core:
            if c1 != c2:
                out.append((c1 + c2) * (N // 2))
                out.append(lead + (c1 + c2) * (N // 2))
    return list(dict.fromkeys(out))

for line in sys.stdin:
    where, p, is_bytes, how = json.loads(line)
    if is_bytes:
        p = p.encode("latin-1")
    try:
        rx = re.compile(p)
    except re.error:
        print(json.dumps([where, "skip", 0, ""]), flush=True)
        continue
    worst, worst_s = 0.0, ""
    for s in inputs(p):
        s = s.encode("latin-1", "replace") if is_bytes else s
        print(json.dumps([where, "start", 0, repr(s[:40])]), flush=True)
        t = time.perf_counter()
        if how in ("match", "fullmatch"):
            getattr(rx, how)(s)
        else:
            rx.search(s)
            rx.findall(s)
        dt = time.perf_counter() - t
        if dt > worst:
            worst, worst_s = dt, repr(s[:40])
    print(json.dumps([where, "done", worst, worst_s]), flush=True)
"""


def run_all(pats, n=N, bound=BOUND_S):
    """{where: (seconds, input)} for every pattern slower than ``bound`` on some input (or killed)."""
    slow = {}
    todo = list(pats)
    while todo:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin and child.stdout
        for where, p, how in todo:
            is_bytes = isinstance(p, bytes)
            child.stdin.write(json.dumps([where, p.decode("latin-1") if is_bytes else p, is_bytes, how]) + "\n")
        child.stdin.close()
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(child.stdout, selectors.EVENT_READ)
        done = 0
        current = None
        deadline = time.monotonic() + bound * 5 + 5
        killed = False
        while True:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                killed = True
                break
            line = child.stdout.readline()
            if not line:
                break
            where, state, secs, s = json.loads(line)
            if state == "start":
                current = (where, s)
                deadline = time.monotonic() + bound * 5 + 1
                continue
            done += 1
            if state == "done" and secs > bound:
                slow[where] = (round(secs, 2), s)
            deadline = time.monotonic() + bound * 5 + 5
        child.kill()
        child.wait()
        if killed and current:
            slow[current[0]] = ("killed", current[1])
            done += 1
        todo = todo[done:]
    return slow


def test_the_audit_finds_the_patterns():
    pats = patterns()
    assert len(pats) > 150, len(pats)
    wheres = {w.split(":")[0] for w, _, _ in pats}
    assert {"gdsdiag/platform/nvfs_proc.py", "gdsdiag/importers/lspci.py", "messages.json"} <= wheres


def test_the_audit_catches_quadratic_and_exponential_patterns():
    """The checker itself: the two shapes issue 24 found are caught (and killed, not waited for)."""
    slow = run_all(
        [
            ("quadratic", r"^([A-Za-z][A-Za-z0-9 \-]*?)\s*:\s*(.*)$", "match"),
            ("exponential", r"^(\w+\s?)*:", "match"),
            # issue 42: explain's nvfs-stats-errors before round 3 (a name of words, then '\s*:')
            ("quadratic-name", r"^(?:(?P<name>[A-Z][\w -]*?)\s*:\s*)?(?:[^\s=]+=[^\s=]+\s+)*?(?P<key>err)=", "search"),
            ("fine", r"^a+b", "search"),
        ],
        bound=0.2,
    )
    assert set(slow) == {"quadratic", "exponential", "quadratic-name"}, slow


@pytest.mark.slow  # (~20-40 s: 213 patterns x ~90 inputs of 20,000 characters; CI runs it)
def test_every_pattern_in_the_package_is_linear_time():
    slow = run_all(patterns())
    shown = {w: p for w, p, _ in patterns()}
    assert not slow, "\n".join(f"{w} {shown[w]!r}: {s} s on {inp}" for w, (s, inp) in sorted(slow.items()))
