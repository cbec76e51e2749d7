#!/usr/bin/env bash
# The third held-out set (tests/workloads/loaders_heldout3.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout3_run.sh $OUT
# Each run: the trace's JSON lines (-o: the loader's stdout stays its own, its GROUND_TRUTH line is
# appended after), its record (.gz) and stderr; score.txt is tests/workloads/score_loaders.py over all.
set -u
FINAL=${1:-/tmp/out}; OUT=/tmp/ho3out; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
trap 'tar -C /tmp -czf "$FINAL/ho3out.tar.gz" ho3out; cp "$OUT/score.txt" "$FINAL/ho3-score.txt" 2>/dev/null' EXIT
D=/var/tmp/gdsdiag-heldout3; rm -rf "$D"; mkdir -p "$D"
L=tests/workloads/loaders_heldout3.py
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1   # (no loader here asks a hub; as the second set)
T0=$(date +%s)
timeout 180 python3 $L prepare "$D" > "$OUT/prepare.txt" 2>&1 || echo "prepare rc=$?" >> "$OUT/prepare.txt"
echo "== prepare done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
python3 -c 'import sys, torch, cupy, jax, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numpy", numpy.__version__)' > "$OUT/facts.txt" 2>&1
tr() {     # name, state (cold|warm), loader  (ONLY="name ..." runs those alone)
  local name=$1 state=$2 loader=$3
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  if [ "$state" = cold ]; then python3 tests/workloads/loaders.py evict "$D/ho3" > "$OUT/$name.cache.txt" 2>&1
  else python3 tests/workloads/loaders.py warm "$D/ho3" > "$OUT/$name.cache.txt" 2>&1; fi
  local t=$(date +%s.%N)
  timeout ${TRACE_TIMEOUT:-90} python3 -m gdsdiag trace --json -o "$OUT/$name.jsonl" --record "$OUT/$name.rec.jsonl" -- python3 $L "$loader" "$D" > "$OUT/$name.app.txt" 2> "$OUT/$name.err"
  echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" >> "$OUT/$name.err"
  grep '^GROUND_TRUTH' "$OUT/$name.app.txt" >> "$OUT/$name.jsonl"
  gzip -f "$OUT/$name.rec.jsonl"
  echo "== $name done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
}
tr csv-numpy-cold cold csv-numpy
tr jsonl-tokens-cold cold jsonl-tokens
tr jsonl-tokens-warm warm jsonl-tokens
tr pickle-dict-cold cold pickle-dict
tr pickle-dict-warm warm pickle-dict
tr torch-load-zip-cold cold torch-load-zip
tr torch-load-zip-warm warm torch-load-zip
tr npy-shards-cold cold npy-shards
tr tar-stream-cold cold tar-stream
tr tar-stream-warm warm tar-stream
tr host-stats-cold cold host-stats
tr host-stats-warm warm host-stats
tr pinned-streams-cold cold pinned-streams
tr gzip-jax-cold cold gzip-jax
tr osread-loop-cold cold osread-loop
tr osread-loop-warm warm osread-loop
python3 tests/workloads/score_loaders.py "$OUT"/*.jsonl > "$OUT/score.txt" 2>&1
echo "all done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
rm -rf "$D"
