#!/usr/bin/env bash
# The loaders of tests/workloads/loaders.py under `gdsdiag trace`, cold and warm, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_loaders_run.sh $OUT
# Each run: the trace's JSON lines (with the loader's GROUND_TRUTH line), its record (.gz) and stderr;
# score.txt is tests/workloads/score_loaders.py over all of them.
set -u
FINAL=${1:-/tmp/out}; OUT=/tmp/ldout; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
trap 'tar -C /tmp -czf "$FINAL/ldout.tar.gz" ldout; cp "$OUT/score.txt" "$FINAL/" 2>/dev/null' EXIT
D=/var/tmp/gdsdiag-loaders; rm -rf "$D"; mkdir -p "$D"
L=tests/workloads/loaders.py
T0=$(date +%s)
timeout 120 python3 $L prepare "$D" > "$OUT/prepare.txt" 2>&1 || echo "prepare rc=$?" >> "$OUT/prepare.txt"
ls /sys/kernel/tracing/events/exceptions > "$OUT/facts.txt" 2>&1; uname -r >> "$OUT/facts.txt"
python3 -c 'import safetensors, transformers, pyarrow, torch; print(safetensors.__version__, transformers.__version__, pyarrow.__version__, torch.__version__)' >> "$OUT/facts.txt" 2>&1
tr() {     # name, state (cold|warm), loader  (ONLY="name ..." runs those alone)
  local name=$1 state=$2 loader=$3
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  if [ "$state" = cold ]; then python3 $L evict "$D" > "$OUT/$name.cache.txt" 2>&1; else python3 $L warm "$D" > "$OUT/$name.cache.txt" 2>&1; fi
  local t=$(date +%s.%N)
  timeout ${TRACE_TIMEOUT:-60} python3 -m gdsdiag trace --json --record "$OUT/$name.rec.jsonl" -- python3 $L "$loader" "$D" > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
  echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" >> "$OUT/$name.err"
  gzip -f "$OUT/$name.rec.jsonl"
  echo "== $name done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
}
tr st-load-cold cold st-load
tr st-load-warm warm st-load
tr hf-load-cold cold hf-load
tr hf-load-warm warm hf-load
tr dl-load-cold cold dl-load
tr dl-spawn-warm warm dl-spawn
tr pq-load-cold cold pq-load
tr np-memmap-warm warm np-memmap
tr np-memmap-cold cold np-memmap
tr jax-load-cold cold jax-load
tr h5-load-warm warm h5-load
# a running process found by --pid (imports and CUDA done before the trace): st-load once it sees DIR/go
if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" st-pid "* ]]; then
  python3 $L evict "$D" > "$OUT/st-pid.cache.txt" 2>&1; rm -f "$D/go"
  python3 $L st-wait "$D" > "$OUT/st-pid.app.txt" 2>&1 &
  for _ in $(seq 300); do grep -q '^ready' "$OUT/st-pid.app.txt" 2>/dev/null && break; sleep 0.1; done
  pid=$(awk '/^ready/ {print $2}' "$OUT/st-pid.app.txt")
  timeout 60 python3 -m gdsdiag trace --json --record "$OUT/st-pid.rec.jsonl" --pid "$pid" > "$OUT/st-pid.jsonl" 2> "$OUT/st-pid.err" &
  tp=$!
  for _ in $(seq 300); do grep -q 'tracing' "$OUT/st-pid.err" 2>/dev/null && break; sleep 0.1; done
  touch "$D/go"; wait $tp; echo "rc=$?" >> "$OUT/st-pid.err"
  grep '^GROUND_TRUTH' "$OUT/st-pid.app.txt" >> "$OUT/st-pid.jsonl"; gzip -f "$OUT/st-pid.rec.jsonl"
  echo "== st-pid done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
fi
python3 tests/workloads/score_loaders.py "$OUT"/*.jsonl > "$OUT/score.txt" 2>&1
echo "all done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
rm -rf "$D"
