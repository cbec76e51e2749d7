#!/usr/bin/env python3
"""Keep the command examples in README.md and docs/*.md what the commands really print.

An example is written in Markdown as

    <!-- example: gdsdiag topology --from tests/fixtures/snapshots/h200-vm-2026-11-29.tar.gz --tree -->
    ```
    (anything: regenerated)
    ```
    <!-- /example -->

and this script runs the command (from the checkout, on committed fixtures only, 100 columns, no
colour) and writes ``$ command`` plus its output between the markers. ``--check`` rewrites nothing
and exits 1 listing every example whose text differs (tests/test_docs_examples.py runs it in CI).

    python3 docs/examples.py [--check] [FILE.md ...]
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- example: (?P<cmd>.+?) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
WIDTH = "100"


def gdsdiag_argv() -> list[str]:
    """The installed console script when the suite tests an install, else the checkout's module."""
    script = os.path.join(os.path.dirname(sys.executable), "gdsdiag")
    if os.environ.get("GDSDIAG_TEST_INSTALLED") == "1" and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "gdsdiag"]


def run_example(cmd: str) -> str:
    argv = shlex.split(cmd)
    if argv[0] != "gdsdiag":
        raise SystemExit(f"examples run gdsdiag only, not: {cmd}")
    env = dict(os.environ, COLUMNS=WIDTH, NO_COLOR="1", TERM="dumb", PYTHONPATH=REPO
               if os.environ.get("GDSDIAG_TEST_INSTALLED") != "1" else "")
    r = subprocess.run(gdsdiag_argv() + argv[1:], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = (r.stdout + r.stderr).rstrip()
    return f"```\n$ {cmd}\n{out}\n```\n"


def update(path: str, check: bool) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stale: list[str] = []

    def repl(m: re.Match) -> str:
        new = run_example(m.group("cmd"))
        if new != m.group("body"):
            stale.append(f"{os.path.relpath(path, REPO)}: {m.group('cmd')}")
        return m.group(1) + new + m.group(4)

    out = BLOCK.sub(repl, text)
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
