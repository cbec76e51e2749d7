#!/usr/bin/env bash
# Issue 21's goals on the GPU machine in one call, this checkout against OLD (an earlier commit's
# gdsdiag/ and probes/, e.g. `git archive REV gdsdiag probes csrc | tar -x -C .gpu-old`) where a
# same-run baseline means something: the stop under load, verdict latency for every route (a quiet
# tail after the I/O), the classifier alone, the per-read overhead and its floor, and the live tests.
#   source .device/env.sh; OLD=.gpu-old bash benchmarks/history/gpu_trace_goals.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
summ() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("median") or d.get("routes") or d)[:1500])' "$1" 2>&1 | tee -a "$OUT/run.log"; }
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
log "1. verdict latency, every route (100 x 1 MiB, 20 ms apart, 4 s quiet tail), twice"
for r in 1 2; do
  timeout 90 $PY benchmarks/trace_latency.py --routes host,host-copying,bounce,compat --n 100 --tail 4 >"$OUT/latency-$r.json" 2>"$OUT/latency-$r.err"
  log "  rc=$?"; summ "$OUT/latency-$r.json"; pack
done
log "2. SIGTERM under --per-io load -> summary, old and new trees (3 rounds each)"
timeout 150 $PY benchmarks/trace_end.py --load-only --rounds 3 "${OLDT[@]}" --tree . --out "$OUT/stop-load.json" >"$OUT/stop-load.log" 2>&1
log "  rc=$?"; $PY -c '
import json,sys; d=json.load(open(sys.argv[1]))
for t, r in d["trees"].items():
    print(t, r["median"].get("TERM_under_load_to_summary_s"), [x.get("TERM_under_load_to_summary_s") for x in r["rounds"]], [x.get("TERM_under_load_stop_phases") for x in r["rounds"]][-1])
' "$OUT/stop-load.json" 2>&1 | tee -a "$OUT/run.log"; pack
log "3. the trace's own end: exit -> summary, signals, start (new tree, 2 rounds)"
timeout 120 $PY benchmarks/trace_end.py --rounds 2 --tree . --out "$OUT/end.json" >"$OUT/end.log" 2>&1
log "  rc=$?"; summ "$OUT/end.json"; pack
log "4. the classifier alone (50k I/Os per stream, 3 rounds), new then old"
timeout 60 $PY benchmarks/classify_verdicts.py --ios 50000 --rounds 3 >"$OUT/classify-new.txt" 2>&1; log "  rc=$?"; cat "$OUT/classify-new.txt" | tee -a "$OUT/run.log"
if [ -n "${OLD:-}" ]; then timeout 60 $PY benchmarks/classify_verdicts.py --ios 50000 --rounds 3 --tree "$OLD" >"$OUT/classify-old.txt" 2>&1; log "  old rc=$?"; tee -a "$OUT/run.log" < "$OUT/classify-old.txt"; fi
pack
settle
log "5. trace_overhead.py posix 4 KiB 400k counted, 4 rounds, old and new (workload on CPU 2, tracer on 3)"
timeout 70 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 400000 --rounds 4 --cpus 2,3 --variant new=. "${OLDV[@]}" >"$OUT/overhead-counted.json" 2>"$OUT/overhead-counted.err"
log "  rc=$?"; summ "$OUT/overhead-counted.json"; pack
log "6. trace_overhead.py posix 4 KiB 200k, CUDA loaded, 3 rounds"
timeout 70 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 200000 --rounds 3 --cuda --cpus 2,3 --variant new=. "${OLDV[@]}" >"$OUT/overhead-cuda.json" 2>"$OUT/overhead-cuda.err"
log "  rc=$?"; summ "$OUT/overhead-cuda.json"; pack
log "6b. the floor under any syscall tracer here (empty raw_syscalls programs) beside the probes"
timeout 60 $PY benchmarks/history/trace_floor.py --rounds 3 --ops 300000 >"$OUT/floor.json" 2>"$OUT/floor.err"
log "  rc=$?"; summ "$OUT/floor.json"; pack
log "7. live trace tests"
timeout 150 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_end.py tests/test_trace_lost.py tests/test_trace_live.py >"$OUT/live-tests.txt" 2>&1
log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
log "done"
