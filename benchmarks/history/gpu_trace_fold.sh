#!/usr/bin/env bash
# Issue 21 on the GPU machine: cuFile calls folding their own evidence into their exit record (record
# version 4), this checkout against OLD (an earlier commit's gdsdiag/, probes/, csrc/: `git archive REV
# gdsdiag probes csrc | tar -x -C .gpu-old`) in the same call: the live cuFile test, a real COMPAT
# stream's cost per verdict, the classifier alone, verdict latency, the per-read ratio with CUDA
# loaded (pinned, after the machine settles), the live trace tests and the GPU sweep tests.
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2 3"] bash benchmarks/history/gpu_trace_fold.sh $OUT
# (STEPS: which of the numbered steps to run, default all; the whole takes about ten minutes)
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3 4 5 6 7}
if wanted 1; then
  log "1. the live cuFile test (real libcufile compat calls under the tracer, the fold's record)"
  timeout 200 $PY -m pytest -q -rs -s -p no:cacheprovider tests/test_trace_cufile_live.py >"$OUT/cufile-live.txt" 2>&1
  log "  rc=$? $(grep -E '^calls |passed|failed|skipped' "$OUT/cufile-live.txt" | tr '\n' ' ')"; pack
fi
if wanted 2; then
  log "2. a real COMPAT stream: 50k x 4 KiB cuFileRead, old and new trees, 2 rounds"
  timeout 240 $PY benchmarks/trace_compat_rate.py --calls ${CALLS:-50000} --rounds ${ROUNDS:-2} "${OLDT[@]}" --tree . >"$OUT/compat-rate.json" 2>"$OUT/compat-rate.err"
  log "  rc=$?"; cat "$OUT/compat-rate.err" | tee -a "$OUT/run.log"; pack
fi
if wanted 3; then
  log "3. the classifier alone (50k I/Os per stream, 3 rounds), new then old"
  timeout 90 $PY benchmarks/classify_verdicts.py --ios 50000 --rounds 3 >"$OUT/classify-new.txt" 2>&1; log "  rc=$?"; tee -a "$OUT/run.log" < "$OUT/classify-new.txt"
  if [ -n "${OLD:-}" ]; then timeout 90 $PY benchmarks/classify_verdicts.py --ios 50000 --rounds 3 --tree "$OLD" >"$OUT/classify-old.txt" 2>&1; log "  old rc=$?"; tee -a "$OUT/run.log" < "$OUT/classify-old.txt"; fi
  pack
fi
if wanted 4; then
  log "4. verdict latency, compat and bounce (100 x 1 MiB, 20 ms apart, 4 s quiet tail)"
  timeout 90 $PY benchmarks/trace_latency.py --routes compat,bounce --n 100 --tail 4 >"$OUT/latency.json" 2>"$OUT/latency.err"
  log "  rc=$?"; $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("routes") or d)[:1500])' "$OUT/latency.json" 2>&1 | tee -a "$OUT/run.log"; pack
  settle
fi
if wanted 5; then
  log "5. trace_overhead.py posix 4 KiB 200k, CUDA loaded, 4 rounds, pinned (workload CPU 2, tracer CPU 3), old and new"
  timeout 120 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 200000 --rounds 4 --cuda --cpus 2,3 --variant new=. "${OLDV[@]}" >"$OUT/overhead-cuda.json" 2>"$OUT/overhead-cuda.err"
  log "  rc=$?"; $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("median") or d)[:1500])' "$OUT/overhead-cuda.json" 2>&1 | tee -a "$OUT/run.log"; tail -n 8 "$OUT/overhead-cuda.err" >> "$OUT/run.log"; pack
fi
if wanted 6; then
  log "6. live trace tests"
  timeout 170 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_end.py tests/test_trace_lost.py tests/test_trace_live.py >"$OUT/live-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
fi
if wanted 7; then
  log "7. GPU sweep tests"
  timeout 150 $PY -m pytest -q -rs -p no:cacheprovider tests/test_sweep_gpu.py tests/test_cufile_gpu.py >"$OUT/sweep-gpu-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/sweep-gpu-tests.txt")"; pack
fi
log "done"
