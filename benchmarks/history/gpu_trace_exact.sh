#!/usr/bin/env bash
# Issue 21 on the GPU machine: cuFile calls counted exactly once when their exit record is not
# classified (a stop, the reader's backlog, the kernel's full ring), this checkout against OLD (an
# earlier commit's gdsdiag/, probes/, csrc/: `git archive REV gdsdiag probes csrc | tar -x -C .gpu-old`)
# in the same call: the live cuFile tests (the ring made to overflow under real compat calls), a real
# COMPAT stream's cost per verdict both trees, and the live trace tests.
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2 3"] bash benchmarks/history/gpu_trace_exact.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3}
if wanted 1; then
  log "1. the live cuFile tests (the fold's record; the ring overflowing under 300k compat calls)"
  timeout 300 $PY -m pytest -q -rs -s -p no:cacheprovider tests/test_trace_cufile_live.py >"$OUT/cufile-live.txt" 2>&1
  log "  rc=$? $(grep -E '^calls |passed|failed|skipped' "$OUT/cufile-live.txt" | tr '\n' ' ')"; pack
fi
if wanted 2; then
  log "2. a real COMPAT stream: ${CALLS:-100000} x 4 KiB cuFileRead, old and new trees, ${ROUNDS:-2} rounds"
  timeout 240 $PY benchmarks/trace_compat_rate.py --calls ${CALLS:-100000} --rounds ${ROUNDS:-2} "${OLDT[@]}" --tree . >"$OUT/compat-rate.json" 2>"$OUT/compat-rate.err"
  log "  rc=$?"; cat "$OUT/compat-rate.err" | tee -a "$OUT/run.log"; pack
fi
if wanted 3; then
  log "3. live trace tests"
  timeout 200 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_end.py tests/test_trace_lost.py tests/test_trace_live.py tests/test_trace_fold.py tests/test_trace_record_gzip.py >"$OUT/live-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
fi
log "done"
