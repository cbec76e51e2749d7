#!/usr/bin/env bash
# fio vs 'gdsdiag sweep --mode host' on the same directory, same file size, threads (numjobs) and
# queue depth 1 (psync / one outstanding pread per thread), alternating, ROUNDS times.
# Goal (issue 6): >= 0.95x fio IOPS at 4 KiB random read, >= 0.98x fio GB/s at 1 MiB+ sequential.
# gdsdiag runs with --no-verify here (fio does not check data); verified runs are reported too.
# Usage: benchmarks/sweep_vs_fio.sh DIR [SIZE=1G] [SECONDS=10] [ROUNDS=3] [THREADS=4]
set -euo pipefail
DIR=${1:?usage: sweep_vs_fio.sh DIR [SIZE] [SECONDS] [ROUNDS] [THREADS]}
SIZE=${2:-1G}; SECS=${3:-10}; ROUNDS=${4:-3}; T=${5:-4}
command -v fio >/dev/null || { echo "fio missing: apt-get install fio" >&2; exit 3; }
FIOFILE="$DIR/gdsdiag-bench-fio.$$"
trap 'rm -f "$FIOFILE"' EXIT
fio_run() {  # rw bs jobs -> "iops gbps"
  fio --name=b --filename="$FIOFILE" --size="$SIZE" --rw="$1" --bs="$2" --numjobs="$3" --ioengine=psync --iodepth=1 \
      --direct=1 --time_based --runtime="$SECS" --group_reporting --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['read']; print(j['iops'], j['bw_bytes']/1e9)"
}
gd_run() {   # rw bs threads [--no-verify] -> "iops gbps"
  python3 -m gdsdiag sweep --dir "$DIR" --size "$SIZE" --rw "$1" --bs "$2" --threads "$3" --mode host --time "${SECS}s" ${4:-} --json |
    python3 -c "import json,sys; p=json.load(sys.stdin)['points'][0]['summary']; print(p['iops'], p['gbps'])"
}
echo "machine: $(nproc) CPUs, $(uname -r), $(python3 --version), fio $(fio --version); dir $DIR size $SIZE ${SECS}s x $ROUNDS rounds"
for cfg in "randread 4k $T" "read 1m 1" "read 1m $T"; do
  set -- $cfg
  for r in $(seq 1 "$ROUNDS"); do
    f=$(fio_run "$1" "$2" "$3"); g=$(gd_run "$1" "$2" "$3" --no-verify); v=$(gd_run "$1" "$2" "$3")
    python3 - "$1" "$2" "$3" "$r" "$f" "$g" "$v" <<'PY'
import sys
rw, bs, t, r, f, g, v = sys.argv[1:8]
fi, fg = map(float, f.split()); gi, gg = map(float, g.split()); vi, vg = map(float, v.split())
print(f"{rw:9s} bs={bs:3s} threads={t} round {r}: fio {fi:9.0f} IOPS {fg:6.3f} GB/s | gdsdiag {gi:9.0f} IOPS {gg:6.3f} GB/s "
      f"(x{gi/fi:.3f} IOPS, x{gg/fg:.3f} GB/s) | gdsdiag verified {vi:9.0f} IOPS (x{vi/fi:.3f})")
PY
  done
done
