#!/usr/bin/env bash
# The held-out loaders (tests/workloads/loaders_heldout.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout_run.sh $OUT
# Each run: the trace's JSON lines (-o: the loader's stdout stays its own, its GROUND_TRUTH line is
# appended after), its record (.gz) and stderr; score.txt is tests/workloads/score_loaders.py over all.
set -u
FINAL=${1:-/tmp/out}; OUT=/tmp/hoout; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
trap 'tar -C /tmp -czf "$FINAL/hoout.tar.gz" hoout; cp "$OUT/score.txt" "$FINAL/ho-score.txt" 2>/dev/null' EXIT
D=/var/tmp/gdsdiag-heldout; rm -rf "$D"; mkdir -p "$D"
L=tests/workloads/loaders_heldout.py
T0=$(date +%s)
timeout 120 python3 $L prepare "$D" > "$OUT/prepare.txt" 2>&1 || echo "prepare rc=$?" >> "$OUT/prepare.txt"
tr() {     # name, state (cold|warm), loader  (ONLY="name ..." runs those alone)
  local name=$1 state=$2 loader=$3
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  rm -f "$D/ho/kv_out.bin"
  if [ "$state" = cold ]; then python3 tests/workloads/loaders.py evict "$D/ho" > "$OUT/$name.cache.txt" 2>&1
  else python3 tests/workloads/loaders.py warm "$D/ho" > "$OUT/$name.cache.txt" 2>&1; fi
  local t=$(date +%s.%N)
  timeout ${TRACE_TIMEOUT:-90} python3 -m gdsdiag trace --json -o "$OUT/$name.jsonl" --record "$OUT/$name.rec.jsonl" -- python3 $L "$loader" "$D" > "$OUT/$name.app.txt" 2> "$OUT/$name.err"
  echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" >> "$OUT/$name.err"
  grep '^GROUND_TRUTH' "$OUT/$name.app.txt" >> "$OUT/$name.jsonl"
  gzip -f "$OUT/$name.rec.jsonl"
  echo "== $name done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
}
tr st-loadfile-cold cold st-loadfile
tr st-loadfile-warm warm st-loadfile
tr torch-mmap-cold cold torch-mmap
tr torch-mmap-warm warm torch-mmap
tr pinned-stage-cold cold pinned-stage
tr zlib-decode-cold cold zlib-decode
tr odirect-cold cold odirect
tr kv-offload-warm warm kv-offload
tr mixed-cold cold mixed
tr mixed-warm warm mixed
tr dl-memmap-cold cold dl-memmap
tr dl-memmap-warm warm dl-memmap
python3 tests/workloads/score_loaders.py "$OUT"/*.jsonl > "$OUT/score.txt" 2>&1
echo "all done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
rm -rf "$D"
