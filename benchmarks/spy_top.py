#!/usr/bin/env python3
"""py-spy's raw samples (``py-spy record -f raw``) summed per function: own samples and inclusive.

  python3 benchmarks/spy_top.py SAMPLES.txt [--only TEXT] [--top 30]

--only keeps the stacks with a frame containing TEXT (e.g. "live.py:400", the live loop's poll)."""

import argparse
import collections


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples")
    ap.add_argument("--only")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    own, incl, total = collections.Counter(), collections.Counter(), 0
    with open(a.samples) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            if not n.isdigit():
                continue
            frames = stack.split(";")
            if a.only and not any(a.only in x for x in frames):
                continue
            total += int(n)
            own[frames[-1]] += int(n)
            for x in set(frames):
                incl[x] += int(n)
    print(f"{total} samples")
    for title, c in (("own", own), ("inclusive", incl)):
        print(f"-- {title}")
        for name, n in c.most_common(a.top):
            print(f"{n / max(total, 1) * 100:5.1f}%  {name[:150]}")


if __name__ == "__main__":
    main()
