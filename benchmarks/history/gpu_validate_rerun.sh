#!/bin/bash
# Second GPU call (issue 14): the default-policy --quick run again (its files did not come back from
# the first call: too many files) and the stats shared-memory probe; everything packed in one tarball.
set -u
OUT=${OUT:-/tmp/gdsdiag-out}
W=/tmp/t14-run2; rm -rf $W; mkdir -p $W
cd "$(dirname "$0")/../.."
[ -f ../.device/env.sh ] && source ../.device/env.sh
if ls .gpu-whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-t14 .gpu-whl/*.whl
  export PYTHONPATH=/tmp/site-t14${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
D=/var/tmp/gdsdiag-validate; mkdir -p $D
type gds_udev_entry >/dev/null 2>&1 && gds_udev_entry $D
python3 -m gdsdiag validate --quick --path $D --json $W/validate-default.json --junit $W/validate-default.xml \
  --prom $W/validate-default.prom 2>&1 | tee $W/validate-default.txt
echo "exit=${PIPESTATUS[0]}" | tee -a $W/validate-default.txt
timeout 60 python3 benchmarks/history/cufile_stats_shm_probe.py $D $W/shm 2>&1 | tail -12 | tee $W/shm-probe.txt
tar -C $W -czf $OUT/run2.tgz .
rmdir $D 2>/dev/null; true
