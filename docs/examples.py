#!/usr/bin/env python3
"""Keep the command examples in README.md and docs/*.md what the commands really print.

An example the CPU machine (and CI) can produce is written in Markdown as

    <!-- example: gdsdiag topology --from tests/fixtures/snapshots/h200-vm-2026-11-29.tar.gz --tree -->
    ```
    (anything: regenerated)
    ```
    <!-- /example -->

and this script runs the command (from the checkout, or the installed console script under
tests/run.sh; on committed fixtures only, 100 columns, no colour) and writes ``$ command`` plus its
output between the markers. Values that differ from run to run (the seconds a run took) are
written as in MASKS, in the doc and in the comparison alike.

Output only the GPU machine can produce (a sweep, a live trace, libcufile on a GPU) is quoted from
the raw capture committed under tests/fixtures/ instead of typed into the doc:

    <!-- quote: tests/fixtures/gpu-machine/sweep-h200.txt 3-20 -->
    ```
    (anything: lines 3 to 20 of that file, regenerated)
    ```
    <!-- /quote -->

and ``<!-- quote: FILE [FIRST-LAST] /REGEX/ -->`` quotes only the lines (of that range) REGEX finds.

``--check`` rewrites nothing and exits 1 listing every example or quote whose text differs
(tests/test_docs_examples.py runs it in CI).

    python3 docs/examples.py [--check] [FILE.md ...]
"""

from __future__ import annotations

import glob
import gzip
import os
import re
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- example: (?P<cmd>.+?) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
QUOTE = re.compile(
    r"(<!-- quote: (?P<src>\S+?)(?: (?P<first>\d+)-(?P<last>\d+))?(?: /(?P<grep>.+?)/)? -->\n)(?P<body>.*?)(<!-- /quote -->)",
    re.S,
)
WIDTH = "100"
# run-to-run values: (pattern, replacement); a doc shows the replacement
MASKS = [
    (re.compile(r"(gdsdiag \d+\.\d+\.\d+, )\d+(?:\.\d+)? s\)"), r"\1… s)"),  # validate's run time
]


def gdsdiag_argv() -> list[str]:
    """The installed console script when the suite tests an install, else the checkout's module."""
    script = os.path.join(os.path.dirname(sys.executable), "gdsdiag")
    if os.environ.get("GDSDIAG_TEST_INSTALLED") == "1" and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "gdsdiag"]


def masked(text: str) -> str:
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return text


def run_example(cmd: str) -> str:
    argv = shlex.split(cmd)
    if argv[0] != "gdsdiag":
        raise SystemExit(f"examples run gdsdiag only, not: {cmd}")
    env = dict(
        os.environ,
        COLUMNS=WIDTH,
        NO_COLOR="1",
        TERM="dumb",
        PYTHONPATH=REPO if os.environ.get("GDSDIAG_TEST_INSTALLED") != "1" else "",
    )
    r = subprocess.run(gdsdiag_argv() + argv[1:], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = masked((r.stdout + r.stderr).rstrip())
    return f"```\n$ {cmd}\n{out}\n```\n"


def quote(src: str, first: str | None, last: str | None, grep: str | None = None) -> str:
    """Lines first..last (1-based, inclusive; all when not given) of a committed capture, only
    those ``grep`` finds when given."""
    path = os.path.join(REPO, src)
    if os.path.relpath(path, REPO).startswith("..") or not src.startswith("tests/fixtures/"):
        raise SystemExit(f"quotes come from committed captures under tests/fixtures/, not: {src}")
    opener = gzip.open if src.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    if first is not None and last is not None:
        lo, hi = int(first), int(last)
        if not 1 <= lo <= hi <= len(lines):
            raise SystemExit(f"{src} has {len(lines)} lines: no lines {lo}-{hi}")
        lines = lines[lo - 1 : hi]
    if grep is not None:
        lines = [ln for ln in lines if re.search(grep, ln)]
    if not lines:
        raise SystemExit(f"quote of {src}: no lines")
    body = "\n".join(ln.rstrip() for ln in lines)
    return f"```\n{body}\n```\n"


def update(path: str, check: bool) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stale: list[str] = []

    def repl(m: re.Match) -> str:
        new = run_example(m.group("cmd"))
        if new != m.group("body"):
            stale.append(f"{os.path.relpath(path, REPO)}: {m.group('cmd')}")
        return m.group(1) + new + m.group(4)

    def repl_quote(m: re.Match) -> str:
        new = quote(m.group("src"), m.group("first"), m.group("last"), m.group("grep"))
        if new != m.group("body"):
            where = m.group("src") + (f" {m.group('first')}-{m.group('last')}" if m.group("first") else "")
            stale.append(f"{os.path.relpath(path, REPO)}: quote {where}")
        return m.group(1) + new + m.group(7)

    out = QUOTE.sub(repl_quote, BLOCK.sub(repl, text))
    if not check and out != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(out)
    return stale


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = "--check" in sys.argv[1:]
    files = args or [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    stale = [s for f in files for s in update(f, check)]
    if stale:
        print(("stale examples (run python3 docs/examples.py):\n  " if check else "updated:\n  ") + "\n  ".join(stale))
        sys.exit(1 if check else 0)


if __name__ == "__main__":
    main()
