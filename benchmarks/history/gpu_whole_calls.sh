#!/usr/bin/env bash
# Issue 21 on the GPU machine, one call: whole cuFile calls paired in bulk (gdsdiag/trace/probes/wholecalls.py)
# under real cuFile streams, this checkout against OLD (`git archive REV gdsdiag probes csrc | tar -x -C
# .gpu-old`, the tree before the pairing) in the same call; the held-out loaders (attribution); the
# live cuFile tests. Each step under its own timeout, everything under $1 (the device's $OUT).
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2 3 4 5 6 7 8 9 10 11 12 13 14"] bash benchmarks/history/gpu_whole_calls.sh $OUT
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/../gpu_common.sh" "$FINAL"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3 4 5}
if wanted 1; then
  log "1. held-out loaders under the trace (tests/workloads/gpu_heldout_run.sh)"
  TRACE_TIMEOUT=60 timeout 200 bash tests/workloads/gpu_heldout_run.sh "$FINAL" >"$OUT/heldout.log" 2>&1
  log "  rc=$? $(tail -3 "$FINAL/ho-score.txt" 2>/dev/null | tr '\n' ' ')"; pack
fi
if wanted 2; then
  log "2. live cuFile trace tests"
  timeout 150 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_cufile_live.py tests/test_trace_end.py \
    >"$OUT/live-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
fi
wanted 3 && compat_rate 3 compat 1 1 100000 1 110
wanted 4 && compat_rate 4 compat 4 4 400000 1 120
# DRAM_BOUNCE (pread to host memory, then its copy to the GPU): bounce pairs taken in bulk since 0835900
# (BOUNCE_ROUNDS: rounds of each tree, interleaved, for the machine start's noise)
wanted 6 && compat_rate 6 bounce 1 1 100000 "${BOUNCE_ROUNDS:-1}" $((20 + 60 * ${BOUNCE_ROUNDS:-1}))
wanted 10 && compat_rate 10 bounce 4 4 200000 "${BOUNCE_ROUNDS:-1}" $((30 + 90 * ${BOUNCE_ROUNDS:-1}))
# (sustained: 800k calls from 4 x 4, several seconds of stream, most of it after the processes' start-up
# reads stopped waiting for a copy (WINDOW_NS, 3 s): the stream's own cost beyond its first seconds)
wanted 13 && compat_rate 13 bounce 4 4 800000 "${BOUNCE_ROUNDS:-1}" $((60 + 120 * ${BOUNCE_ROUNDS:-1}))
# (the same with CUDA's libraries faulting in under the trace: the page cache dropped before each run)
wanted 14 && compat_rate 14 bounce 4 4 200000 "${BOUNCE_ROUNDS:-1}" $((40 + 100 * ${BOUNCE_ROUNDS:-1})) --cold
if wanted 5; then
  log "5. the classifier's live path on this machine, paired and decoded (trace_poll_pace.py, classify_verdicts.py)"
  timeout 40 $PY benchmarks/history/trace_poll_pace.py >"$OUT/pace.txt" 2>&1
  log "  rc=$?"; cat "$OUT/pace.txt" | tee -a "$OUT/run.log"
  for t in $OLDDIR $PWD; do  # (OLD's tree first, when given: the live path's CPU per verdict, both)
    timeout 90 $PY benchmarks/classify_verdicts.py --ios 30000 --rounds 3 --tree "$t" >"$OUT/classify.txt" 2>&1
    log "  rc=$? tree $t"; grep "^live" "$OUT/classify.txt" | tee -a "$OUT/run.log"
    cat "$OUT/classify.txt" >>"$OUT/classify-all.txt"
  done
  pack
fi
if wanted 7; then
  # (the pairing holds a call's records until they are older than the reorder cut and looks at them at
  # most every 10 ms: its verdicts' latency, against the goal's 0.5 s, beside the routes it does not take)
  log "7. verdict latency from the evidence being complete (trace_latency.py)"
  env -u PYTHONUNBUFFERED timeout 150 $PY benchmarks/trace_latency.py --routes compat,bounce,host-copying --n 100 \
    >"$OUT/latency.json" 2>"$OUT/latency.err"
  log "  rc=$?"; cat "$OUT/latency.err" | grep '^{' | tee -a "$OUT/run.log"; pack
fi
# the same COMPAT stream again and again: a run of the day lost 8-18k events with no I/O lost (whose?)
wanted 8 && compat_rate 8 compat 1 1 30000 4 200
if wanted 9; then
  # (the probe sent the CUDA driver's anonymous mappings, fd 0, as file mappings, each opening the
  # kernel's 200 ms page-fill window: with the libraries out of the page cache, a burst of fills)
  log "9. CUDA's start-up with the page cache dropped first, OLD's probe and this one: events lost"
  compat_workload
  for r in 1 2 3; do
    for t in $OLDDIR $PWD; do
      sync; echo 3 >/proc/sys/vm/drop_caches; rm -f /tmp/cold.jsonl
      PYTHONPATH=$t${BASE_PYTHONPATH:+:$BASE_PYTHONPATH} timeout 90 $PY -m gdsdiag trace --json --per-io \
        -o /tmp/cold.jsonl -- $PY $WL $DAT 3000 4096 /tmp/truth-c.json 1 compat 1 >/dev/null 2>>"$OUT/cold.err"
      log "  round $r $t rc=$? $(grep '"type": "summary"' /tmp/cold.jsonl | $PY -c 'import json, sys
s = json.loads(sys.stdin.read()); print(json.dumps({k: s.get(k) for k in ("events", "lost_events", "lost_by_process")}))')"
    done
  done
  pack
fi
if wanted 11; then
  # (issue 21: traced/plain >= 0.90 at >= 700k 4 KiB page-cache reads/s with CUDA loaded, 0 lost;
  # pinned: the workload on CPU 2, the tracer on CPU 3, after the machine settled)
  settle
  log "11. trace_overhead.py posix 4 KiB 300k, CUDA loaded, 5 rounds, old and new (CPUs 2,3)"
  timeout 150 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 300000 --rounds 5 --cuda --cpus 2,3 \
    --variant new=. "${OLDV[@]}" >"$OUT/overhead-cuda.json" 2>"$OUT/overhead-cuda.err"
  log "  rc=$?"; $PY -c 'import json, sys; d = json.load(open(sys.argv[1])); print(json.dumps(d.get("median", d))[:1500])' \
    "$OUT/overhead-cuda.json" 2>&1 | tee -a "$OUT/run.log"; pack
fi
if wanted 12; then
  # (the floor under any syscall tracer: two empty raw_syscalls programs; the workload's own CPU per
  # pread, everything on CPU 2 so the rounds share one core's clock)
  settle
  log "12. trace_floor.py, 7 rounds, on CPU 2"
  timeout 120 taskset -c 2 $PY benchmarks/history/trace_floor.py --rounds 7 --ops 300000 >"$OUT/floor.json" 2>"$OUT/floor.err"
  log "  rc=$?"; $PY -c 'import json, sys; d = json.load(open(sys.argv[1])); print(json.dumps(d)[:3000])' \
    "$OUT/floor.json" 2>&1 | tee -a "$OUT/run.log"; pack
fi
log "done"
