#!/usr/bin/env python3
"""Replay every committed trace recording with two checkouts and diff what each writes.

  python3 tests/workloads/replay_same.py OLD_TREE NEW_TREE [OUTDIR]

For each *.jsonl.gz recording under tests/fixtures (of NEW_TREE), runs
``gdsdiag trace --replay REC --json`` with OLD_TREE's gdsdiag/ and with NEW_TREE's (PYTHONPATH),
keeps both outputs under OUTDIR (old/, new/) and compares them byte for byte: the verdict lines,
the summary document and the exit code. Prints one line per recording and a total; exits 1 when
any differs. A refactor of the classifier (issue 44) must leave every one identical."""

import glob
import hashlib
import os
import subprocess
import sys
import tempfile


def replay(tree: str, rec: str, timeout: int = 600) -> bytes:
    env = {**os.environ, "PYTHONPATH": tree, "COLUMNS": "200", "NO_COLOR": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", rec, "--json"],
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=tree,
    )
    return b"rc=%d\n" % r.returncode + r.stdout + b"\n--stderr--\n" + r.stderr


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = (os.path.abspath(p) for p in sys.argv[1:3])
    out = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="replay-same-")
    recs = sorted(glob.glob(os.path.join(new, "tests/fixtures/**/*.jsonl.gz"), recursive=True))
    differ = 0
    for rec in recs:
        rel = os.path.relpath(rec, new)
        rows = []
        for side, tree in (("old", old), ("new", new)):
            path = os.path.join(out, side, rel.replace("/", "__") + ".out")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.exists(path):  # (kept: a second run compares against the first's old side)
                with open(path, "wb") as f:
                    f.write(replay(tree, rec))
            with open(path, "rb") as f:
                data = f.read()
            rows.append((hashlib.sha256(data).hexdigest()[:16], data.count(b'"type": "io"')))
        same = rows[0][0] == rows[1][0]
        differ += not same
        print(f"{'same   ' if same else 'DIFFERS'} {rows[1][1]:7d} io lines  {rel}", flush=True)
    print(f"{len(recs)} recordings, {differ} differ (outputs under {out})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
