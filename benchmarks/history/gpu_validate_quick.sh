#!/bin/bash
# GPU machine run for issue 14: 'gdsdiag validate --quick' on a data directory, once with the shipped
# policy (compat not allowed: expected FAIL on io.compat_share) and once with
# deploy/policies/compat-allowed.yaml (expected PASS on it); all outputs to $OUT. Also samples the
# System V / POSIX shared memory while cuFile runs, and probes where libcufile keeps its statistics.
#   source .device/env.sh; cd .gpu-t14; bash benchmarks/history/gpu_validate_quick.sh
set -u
OUT=${OUT:-/tmp/gdsdiag-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
[ -f ../.device/env.sh ] && source ../.device/env.sh      # gds_udev_entry, carried wheels
if ls .gpu-whl/*.whl >/dev/null 2>&1; then                 # PyYAML (not on the GPU machine's python)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-t14 .gpu-whl/*.whl
  export PYTHONPATH=/tmp/site-t14${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
D=/var/tmp/gdsdiag-validate
mkdir -p $D
type gds_udev_entry >/dev/null 2>&1 && gds_udev_entry $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; uname -r; python3 -V; } | tee $OUT/machine.txt
( for i in $(seq 1 400); do echo "== $(date +%s.%N)"; cat /proc/sysvipc/shm; ls /dev/shm; sleep 0.25; done ) > $OUT/shm-samples.txt 2>&1 &
SAMPLER=$!
python3 -m gdsdiag validate --quick --path $D --json $OUT/validate-default.json --junit $OUT/validate-default.xml \
  --prom $OUT/validate-default.prom 2>&1 | tee $OUT/validate-default.txt
echo "exit=${PIPESTATUS[0]}" | tee -a $OUT/validate-default.txt
python3 -m gdsdiag validate --quick --path $D --policy deploy/policies/compat-allowed.yaml --json $OUT/validate-compat.json \
  --junit $OUT/validate-compat.xml --prom $OUT/validate-compat.prom 2>&1 | tee $OUT/validate-compat.txt
echo "exit=${PIPESTATUS[0]}" | tee -a $OUT/validate-compat.txt
kill $SAMPLER 2>/dev/null
timeout 60 python3 benchmarks/history/cufile_stats_shm_probe.py $D $OUT/shm 2>&1 | tail -30 | tee $OUT/shm-probe.txt
python3 -m gdsdiag report $OUT/validate-default.json $OUT/validate-compat.json 2>&1 | tee $OUT/report.txt
# If time is left: a one-point --full (the sweep run under gdsdiag trace, bcc from the kit).
if [ "$SECONDS" -lt 140 ]; then
  printf 'sweep: {full: {size: 256m, bs: [1m], threads: [4], rw: [read], modes: [cufile], seconds: 3}}\n' > /tmp/t14-full.yaml
  timeout 75 python3 -m gdsdiag validate --full --path $D --policy /tmp/t14-full.yaml --json $OUT/validate-full.json \
    2>&1 | tee $OUT/validate-full.txt
  echo "exit=${PIPESTATUS[0]} elapsed=$SECONDS" | tee -a $OUT/validate-full.txt
else
  echo "skipped --full: $SECONDS s used" | tee $OUT/validate-full.txt
fi
rmdir $D 2>/dev/null
true
