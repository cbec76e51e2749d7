"""Fail on mypy findings that are not in .ci/mypy-baseline.txt.

The baseline lists the findings the code had when mypy was introduced, without line numbers (so
edits elsewhere in a file do not disturb it). A new finding fails CI; fixing one is welcome, and
`python3 .ci/mypy_gate.py MYPY --update` rewrites the baseline after such a fix.
"""
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, "mypy-baseline.txt")


def findings(mypy: str) -> collections.Counter:
    r = subprocess.run([mypy, "--no-error-summary", "--no-pretty"], capture_output=True, text=True,
                       cwd=os.path.dirname(HERE))
    out = collections.Counter()
    for line in r.stdout.splitlines():
        m = re.match(r"^(\S+?):\d+(?::\d+)?: error: (.*)$", line)
        if m:
            out[f"{m.group(1)}: {m.group(2)}"] += 1
    if r.returncode not in (0, 1) or (r.returncode == 1 and not out):
        sys.exit(f"mypy did not run: {r.stderr.strip() or r.stdout.strip()}")
    return out


def main() -> None:
    mypy = sys.argv[1] if len(sys.argv) > 1 else "mypy"
    now = findings(mypy)
    if "--update" in sys.argv:
        with open(BASELINE, "w") as f:
            f.writelines(f"{k}\n" for k in sorted(now.elements()))
        print(f"mypy baseline: {sum(now.values())} findings written")
        return
    try:
        with open(BASELINE) as f:
            base = collections.Counter(line.rstrip("\n") for line in f if line.strip())
    except FileNotFoundError:
        base = collections.Counter()
    new = now - base
    fixed = base - now
    if fixed:
        print(f"mypy: {sum(fixed.values())} baseline finding(s) fixed — run .ci/mypy_gate.py --update to drop them")
    if new:
        for k in sorted(new.elements()):
            print("mypy: new finding:", k)
        sys.exit(f"mypy: {sum(new.values())} new finding(s)")
    print(f"mypy: no new findings ({sum(now.values())} in the baseline)")


if __name__ == "__main__":
    main()
