#!/usr/bin/env bash
# Issues 43/45 on the GPU machine, one call: PyPI loaders with their own engines, the loaders' own words,
# the held-out set 1 rerun, the verdict rate against an older tree. Each step under its own timeout,
# everything under $1 (the device's $OUT), packed as it goes (benchmarks/gpu_common.sh).
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2 3 4 5"] bash tests/workloads/gpu_pypi_run.sh $OUT
# 1 held-out set 5: fastsafetensors, runai-model-streamer, kvikio (tests/workloads/gpu_heldout5_run.sh)
# 2 held-out set 1 again (dl-memmap and the others)
# 3 DRAM_BOUNCE verdict rate 1 x 1 and 4 x 4, OLD's tree beside, the node-facts child off (GDSDIAG_NODE_FACTS=0)
# 4 the content controls through the real libcuda, and the loader's-own-words workload
# 5 the live trace tests that need a GPU
# 6 DRAM_BOUNCE 4 x 4 under the trace, this tree and OLD's, each sampled by py-spy (carried as
#   .device/py-spy.xz) once it is live, and recorded (--record) for replay on the CPU machine
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/../../benchmarks/gpu_common.sh" "$FINAL"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3 4 5}
LIBCUDA=$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/{print $NF; exit}')
if wanted 1; then
  log "1. held-out set 5 (PyPI loaders) under the trace"
  TRACE_TIMEOUT=90 timeout 420 bash tests/workloads/gpu_heldout5_run.sh "$OUT" >"$OUT/ho5.log" 2>&1
  log "  rc=$?"; cat "$OUT/ho5-score.txt" 2>/dev/null | tee -a "$OUT/run.log"; pack
fi
if wanted 2; then
  log "2. held-out set 1 under the trace"
  TRACE_TIMEOUT=60 timeout 300 bash tests/workloads/gpu_heldout_run.sh "$OUT" >"$OUT/ho1.log" 2>&1
  log "  rc=$?"; cat "$OUT/ho-score.txt" 2>/dev/null | tee -a "$OUT/run.log"; pack
fi
if wanted 3; then
  export GDSDIAG_NODE_FACTS=0
  compat_rate 3 bounce 1 1 100000 1 80
  compat_rate 3 bounce 4 4 200000 1 120
  unset GDSDIAG_NODE_FACTS
fi
if wanted 4; then
  log "4. content controls and the loader's own words through $LIBCUDA under the trace"
  d=/var/tmp/gdsdiag-content; rm -rf $d; mkdir -p $d
  env -u PYTHONUNBUFFERED timeout 120 $PY -m gdsdiag trace --json --per-io -o "$OUT/controls.jsonl" \
    -- $PY tests/workloads/content_controls.py "$LIBCUDA" $d >"$OUT/controls.app.txt" 2>"$OUT/controls.err"
  log "  controls rc=$?"
  head -c $((64 << 20)) /dev/urandom > $d/said.bin
  env -u PYTHONUNBUFFERED timeout 60 $PY -m gdsdiag trace -- $PY tests/workloads/said_fallback.py "$LIBCUDA" $d/said.bin \
    >"$OUT/said.txt" 2>&1
  log "  said rc=$?"; grep -A4 "^per file" "$OUT/said.txt" | tee -a "$OUT/run.log"
  rm -rf $d; pack
fi
if wanted 5; then
  log "5. live trace tests on the GPU"
  timeout 200 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_cufile_live.py tests/test_trace_end.py \
    tests/test_trace_content_live.py tests/test_trace_said_live.py tests/test_hostile_libraries.py \
    tests/test_trace_names_live.py >"$OUT/live-tests.txt" 2>&1
  log "  rc=$? $(tail -1 "$OUT/live-tests.txt")"; pack
fi
if wanted 6; then
  log "6. DRAM_BOUNCE 4 x 4: where the tracer's time goes (py-spy), and the stream recorded"
  SPY=/tmp/py-spy; [ -x $SPY ] || xz -dc .device/py-spy.xz >$SPY && chmod +x $SPY
  compat_workload
  export GDSDIAG_NODE_FACTS=0
  for tree in . ${OLDDIR:+$OLDDIR}; do
    tag=$([ "$tree" = . ] && echo new || echo old)
    rec=(); [ $tag = new ] && [ "${RECORD:-0}" = 1 ] && rec=(--record "$OUT/rec-bounce-4x4-$tag.jsonl.gz")
    # (env execs python: $! is the tracer itself, for py-spy; timeout would fork it as a child)
    (cd "$tree" && exec env -u PYTHONUNBUFFERED $PY -m gdsdiag trace --json --per-io "${rec[@]}" \
      -o "$OUT/prof-$tag.jsonl" -- sh -c "sleep 4; exec $PY $WL $DAT 200000 4096 /tmp/truth-$tag 4 bounce 4") \
      >/dev/null 2>"$OUT/prof-$tag.err" &
    tp=$!
    (sleep 120; kill $tp 2>/dev/null) &
    dog=$!
    sleep 3
    timeout 60 $SPY record -p $tp -r 250 -f raw -o "$OUT/prof-$tag.txt" >"$OUT/prof-$tag.spy" 2>&1
    wait $tp; log "  $tag rc=$? $(tail -1 "$OUT/prof-$tag.err" | cut -c1-160)"; kill $dog 2>/dev/null
    [ -s "$OUT/prof-$tag.txt" ] && $PY - "$OUT/prof-$tag.txt" >"$OUT/prof-$tag.top" <<'PYEOF'
import collections, sys
incl, own, tot = collections.Counter(), collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n); tot += n
    frames = stack.split(";")
    own[frames[-1]] += n
    for fr in set(frames):
        incl[fr] += n
print("samples", tot)
for k, v in incl.most_common(60):
    print(f"{v:7d} incl {k[:150]}")
for k, v in own.most_common(40):
    print(f"{v:7d} self {k[:150]}")
PYEOF
    # (the verdict lines stay there: the summary and the recording come back, each under 16 MiB)
    grep '"type": "summary"' "$OUT/prof-$tag.jsonl" >"$OUT/prof-$tag.summary.json"; rm -f "$OUT/prof-$tag.jsonl"
    [ -f "$OUT/rec-bounce-4x4-$tag.jsonl.gz" ] && mv "$OUT/rec-bounce-4x4-$tag.jsonl.gz" "$OUT0/"
  done
  unset GDSDIAG_NODE_FACTS; pack
fi
log "done"; pack
