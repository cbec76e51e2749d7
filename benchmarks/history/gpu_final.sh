#!/usr/bin/env bash
# One GPU-machine call for the integrated tree: what issues 9 and 10 still need measured, in order of
# importance, each step time-boxed so what was taken comes back (the device returns at most 8 files):
#   1. gdsdiag trace on real programs (fio forked cufile/posix, psync, kvikio compat on/off, CuPy,
#      PyTorch loaders) -> trace/summary.txt, trace/t9out.tar.gz
#   2. the tracer's cost per event and the sysfs flood -> ovh/summary.txt, ovh/ovh.tgz
#   3. the sweep steps not measured yet (per-thread handles, queued cuFile at iodepth 32, verified
#      queued read/write, a tiny compat pool, the GPU sweep tests) -> sweep/run.log, sweep/results.tgz
#   4. the live trace tests -> tests.txt
# From the repository root there: source .device/env.sh; bash benchmarks/history/gpu_final.sh $OUT
set -u
OUT=${1:-/tmp/out}; mkdir -p "$OUT/trace" "$OUT/ovh" "$OUT/sweep"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
echo "start $(date -u +%T)" > "$OUT/steps.txt"
SKIP_OVERHEAD=1 TESTS=none timeout ${T_TRACE:-210} bash tests/workloads/gpu_trace_run.sh "$OUT/trace" > /tmp/trace-run.log 2>&1
echo "trace workloads: rc=$? at $(el) s" >> "$OUT/steps.txt"
OUT=/tmp/ovh SKIP_APPS=1 SKIP_STARTUP=1 ROUNDS=${ROUNDS:-2} timeout ${T_OVH:-130} bash benchmarks/history/trace_overhead_gpu.sh > /tmp/ovh-run.log 2>&1
echo "trace overhead: rc=$? at $(el) s" >> "$OUT/steps.txt"
cp /tmp/ovh/summary.txt "$OUT/ovh/" 2>/dev/null; tar -C /tmp -czf "$OUT/ovh/ovh.tgz" ovh ovh-run.log trace-run.log 2>/dev/null
SKIP_GOAL=1 BUDGET=${T_SWEEP:-170} timeout $(( ${T_SWEEP:-170} + 20 )) bash benchmarks/history/sweep_gpu_recheck.sh "$OUT/sweep" > /tmp/sweep-run.log 2>&1
echo "sweep steps: rc=$? at $(el) s" >> "$OUT/steps.txt"
left=$(( ${BUDGET:-540} - $(el) ))
if [ $left -gt 30 ]; then
  timeout $left python3 -m pytest -q -p no:cacheprovider tests/test_trace_live.py tests/test_trace_doors.py tests/test_trace_counted.py > "$OUT/tests.txt" 2>&1
  echo "live trace tests: rc=$? at $(el) s (limit $left s)" >> "$OUT/steps.txt"
else echo "live trace tests skipped: $left s left" >> "$OUT/steps.txt"; fi
