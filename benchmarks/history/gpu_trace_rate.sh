#!/usr/bin/env bash
# Issue 21 on the GPU machine: does the tracer keep up with a real per-I/O stream, COMPAT and
# DRAM_BOUNCE, from one process and from several at once (one thread cannot make 100k calls a
# second), this checkout against OLD (`git archive REV gdsdiag probes csrc | tar -x -C .gpu-old`) in
# the same call; the verdict latency per route with gdsdiag's stdout a pipe as a user's is (no
# PYTHONUNBUFFERED); the live trace tests.
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2 3 4 5 6"] [PROCS=1] [THREADS=8] [CALLS=400000] \
#     bash benchmarks/history/gpu_trace_rate.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
log "PYTHONUNBUFFERED in the environment: ${PYTHONUNBUFFERED:-unset} (the benchmarks drop it for gdsdiag)"
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3 4 5 6}
PROCS=${PROCS:-1} THREADS=${THREADS:-8} CALLS=${CALLS:-400000}
wanted 1 && compat_rate 1 compat 1 1 100000 2 240
wanted 2 && compat_rate 2 compat "$PROCS" "$THREADS" "$CALLS" 1 300
wanted 3 && compat_rate 3 bounce 1 1 100000 2 240
wanted 4 && compat_rate 4 bounce "$PROCS" "$THREADS" "$CALLS" 1 300
if wanted 5; then
  log "5. verdict latency, every route (100 x 1 MiB, 20 ms apart, 4 s quiet tail), old and new"
  for t in ${OLDDIR:+"$OLDDIR"} .; do
    n=$(basename "$(cd "$t" && pwd)")
    timeout 90 $PY benchmarks/trace_latency.py --tree "$t" --routes host,host-copying,bounce,compat --n 100 --tail 4 \
      >"$OUT/latency-$n.json" 2>"$OUT/latency-$n.err"
    log "  $n rc=$? $(tr -d '\n ' <"$OUT/latency-$n.json" | grep -o '"p99_s":[0-9.]*' | tr '\n' ' ')"; pack
  done
fi
if wanted 6; then
  log "6. live trace tests"
  timeout 280 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_end.py tests/test_trace_lost.py tests/test_trace_live.py \
    tests/test_trace_fold.py tests/test_trace_record_gzip.py tests/test_trace_json_line.py tests/test_trace_cufile_live.py \
    >"$OUT/live-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
fi
log "done"
