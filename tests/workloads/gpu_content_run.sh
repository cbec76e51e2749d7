#!/usr/bin/env bash
# Issue 43 on the GPU machine, one call: verdicts backed by the bytes. Each step under its own timeout,
# everything under $1 (the device's $OUT), packed as it goes (benchmarks/gpu_common.sh).
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2 3 4 5 6 7"] bash tests/workloads/gpu_content_run.sh $OUT
# 1 the negative controls and loader shapes of tests/workloads/content_controls.py, copying to the GPU
#   through the real libcuda, under the trace (--record: the recording and its content checks)
# 2-5 the held-out loader sets 3, 4, 1, 2 (each loader prints its ground truth; score_loaders.py)
# 6 DRAM_BOUNCE verdict rate, 1 x 1 and 4 x 4 (benchmarks/trace_compat_rate.py), OLD's tree beside
# 7 the live trace tests that need a GPU (cuFile, the end of a trace)
# 8 names users recognise: checkpoints saved through temporary names, io_uring fixed files to the GPU
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/../../benchmarks/gpu_common.sh" "$FINAL"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3 4 5 6 7 8}
LIBCUDA=$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/{print $NF; exit}')
if wanted 1; then
  log "1. content controls through $LIBCUDA under the trace"
  d=/var/tmp/gdsdiag-content; rm -rf $d; mkdir -p $d
  env -u PYTHONUNBUFFERED timeout 120 $PY -m gdsdiag trace --json --per-io -o "$OUT/controls.jsonl" \
    --record "$OUT/controls.rec.jsonl" -- $PY tests/workloads/content_controls.py "$LIBCUDA" $d \
    >"$OUT/controls.app.txt" 2>"$OUT/controls.err"
  log "  rc=$?"
  $PY - "$OUT/controls.jsonl" "$OUT/controls.app.txt" <<'EOF' | tee -a "$OUT/run.log"
import json, os, sys
truth = next(json.loads(x) for x in open(sys.argv[2]) if x.startswith('{"type": "truth"'))
got = {}
for x in open(sys.argv[1]):
    v = json.loads(x)
    if v.get("type") == "io" and v["op"] == "read" and v["size"] >= 1 << 20 and "gdsdiag-content" in (v["path"] or ""):
        got[(os.path.basename(v["path"]), v["offset"])] = v
for c in truth["cases"]:
    v = got.get((c["file"], c["offset"]))
    want = "DRAM_BOUNCE high" if c["to_gpu"] else "not DRAM_BOUNCE"
    have = f"{v['route']} {v['confidence']}" if v else "no verdict"
    ok = (have == want) if c["to_gpu"] else (v is not None and v["route"] != "DRAM_BOUNCE")
    print(f"  {c['name']:20s} expected {want:18s} got {have:18s} {'ok' if ok else 'WRONG'}")
    if v:
        print("     " + " | ".join(v["evidence"])[:300])
EOF
  gzip -f "$OUT/controls.rec.jsonl"; rm -rf $d; pack
fi
for step in 2:3 3:4 4: 5:2; do
  n=${step%%:*} set=${step#*:}
  if wanted $n; then
    log "$n. held-out set ${set:-1} under the trace"
    TRACE_TIMEOUT=60 timeout 280 bash tests/workloads/gpu_heldout${set}_run.sh "$OUT" >"$OUT/ho$set.log" 2>&1
    log "  rc=$?"; cat "$OUT/ho${set}-score.txt" 2>/dev/null | tee -a "$OUT/run.log"; pack
  fi
done
wanted 6 && compat_rate 6 bounce 1 1 100000 "${BOUNCE_ROUNDS:-1}" $((20 + 60 * ${BOUNCE_ROUNDS:-1}))
wanted 6 && compat_rate 6 bounce 4 4 200000 "${BOUNCE_ROUNDS:-1}" $((30 + 90 * ${BOUNCE_ROUNDS:-1}))
if wanted 7; then
  log "7. live trace tests on the GPU"
  timeout 200 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_cufile_live.py tests/test_trace_end.py \
    tests/test_trace_content_live.py tests/test_hostile_libraries.py >"$OUT/live-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
fi
if wanted 8; then
  log "8. names: tests/workloads/gpu_names_run.sh"
  timeout 150 bash tests/workloads/gpu_names_run.sh "$OUT" >"$OUT/names.log" 2>&1
  log "  rc=$?"; cat "$OUT/names.log" | tee -a "$OUT/run.log"; pack
fi
log "done"; pack
