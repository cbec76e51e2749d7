#!/usr/bin/env bash
# gdsdiag sweep vs fio, like for like, through `gdsdiag sweep --compare-fio`: for every point fio
# runs the equivalent job on the same open file just before and just after the point, and the
# ratio is against the mean of the two (order effects cancel). What "equivalent" means
# (gdsdiag/sweep/fio.py): fio's forked jobs and --thread (FIO_JOBS=both, the default here; a ratio
# each), the sweep's host buffers in fio's 4 KiB pages, numjobs = threads, iodepth = --iodepth, psync (pread/pwrite,
# as the C loop) or io_uring at iodepth > 1, sequential jobs each on their own slice
# (offset_increment), random jobs over the whole data region (norandommap), writes to a second
# pre-filled file. fio does not verify data, so the sweep runs with --no-verify here; the
# VERIFY=1 run shows what verification costs.
# Goal (issue 10): host >= 0.95x fio psync IOPS at 4 KiB and >= 0.98x GB/s at 1 MiB, 1/4/16 threads;
# >= 0.95x fio io_uring at --iodepth 32.
# Usage: benchmarks/sweep_vs_fio.sh DIR [SIZE=1G] [TIME=3s] [ROUNDS=2]
set -euo pipefail
DIR=${1:?usage: sweep_vs_fio.sh DIR [SIZE] [TIME] [ROUNDS]}
SIZE=${2:-1G}; T=${3:-3s}; ROUNDS=${4:-2}
command -v fio >/dev/null || { echo "fio missing: apt-get install fio" >&2; exit 3; }
GD=${GDSDIAG:-python3 -m gdsdiag}
echo "machine: $(nproc) CPUs, $(uname -r), $(python3 --version), $(fio --version); $(uptime | sed 's/.*load/load/')"
echo "dir $DIR ($(df -T "$DIR" | awk 'NR==2{print $2" on "$1}')), size $SIZE, $T per point, $ROUNDS rounds"
HERE=$(cd "$(dirname "$0")" && pwd)
run() {  # label, sweep args...
  local label=$1; shift
  $GD sweep --dir "$DIR" --size "$SIZE" --time "$T" --compare-fio --fio-jobs "${FIO_JOBS:-both}" --json "$@" 2>/dev/null | python3 "$HERE/sweep_fio_table.py" "$label" || true   # ERROR points exit 2
}
for r in $(seq 1 "$ROUNDS"); do
  echo "-- round $r"
  run psync --mode host --rw read,randread,write --bs 4k,1m --threads 1,4,16 --no-verify
  run uring --mode host --rw read,randread --bs 4k,1m --threads 1 --iodepth 32 --no-verify
done
[ "${VERIFY:-0}" = 1 ] && run verified --mode host --rw read,write --bs 4k,1m --threads 1,4
exit 0
