#!/usr/bin/env python3
"""When each of fio's jobs measured, from its IOPS logs (gdsdiag/sweep/fio_windows.py): how far apart
the jobs' clocks started and ended, and fio's rate while every job ran beside its reported rate.

  fio ... --write_iops_log=PREFIX --log_avg_msec=20 --log_unix_epoch=1 --output-format=json >RUN.json
  python3 benchmarks/history/fio_job_windows.py RUN.json PREFIX_iops.*.log

Prints one JSON document: fio_windows.job_windows' figures, per job its IOPS as fio reports them,
fio's reported IOPS (the sum of its jobs') and its IOPS while all ran (reported x while_all_ran)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the checkout

from gdsdiag.sweep.fio_windows import job_windows, read_iops_log  # noqa: E402


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        run = json.load(f)
    logs = []
    for path in sorted(sys.argv[2:]):
        with open(path) as f:
            logs.append(read_iops_log(f.read()))
    w = job_windows(logs)
    jobs = [round(j["read"]["iops"] + j["write"]["iops"], 1) for j in run["jobs"]]
    doc = {**(w or {"windows": "unknown: too few samples"}), "jobs_iops": jobs, "reported_iops": round(sum(jobs), 1)}
    if w is not None:
        doc["iops_all_running"] = round(sum(jobs) * w["while_all_ran"], 1)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
