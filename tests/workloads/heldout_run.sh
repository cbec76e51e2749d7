# Sourced by gpu_heldout_run.sh, gpu_heldout2_run.sh and gpu_heldout3_run.sh (GPU machine, repository
# root): one held-out set's loaders under `gdsdiag trace`. Each run: the trace's JSON lines (-o: the
# loader's stdout stays its own, its GROUND_TRUTH line is appended after), its record (.gz) and stderr;
# score.txt is tests/workloads/score_loaders.py over all. Set N ("" for the first, 2, 3): the loaders
# tests/workloads/loaders_heldoutN.py, their data in /var/tmp/gdsdiag-heldoutN/hoN, the outputs in
# /tmp/hoNout, packed to FINAL/hoNout.tar.gz, the score FINAL/hoN-score.txt.

# heldout_begin FINAL N: the set's folders made afresh, its data prepared (PREPARE_TIMEOUT, 180 s)
heldout_begin() {
  FINAL=$1; N=$2; OUT=/tmp/ho${N}out; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
  trap 'tar -C /tmp -czf "$FINAL/ho${N}out.tar.gz" "ho${N}out"; cp "$OUT/score.txt" "$FINAL/ho${N}-score.txt" 2>/dev/null' EXIT
  D=/var/tmp/gdsdiag-heldout${N}; rm -rf "$D"; mkdir -p "$D"
  L=tests/workloads/loaders_heldout${N}.py
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1   # (a loader that loads a local model folder never asks a hub)
  T0=$(date +%s)
  timeout "${PREPARE_TIMEOUT:-180}" python3 $L prepare "$D" > "$OUT/prepare.txt" 2>&1 || echo "prepare rc=$?" >> "$OUT/prepare.txt"
  echo "== prepare done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
}

# tr NAME cold|warm LOADER: one traced run (ONLY="name ..." runs those alone; TRACE_TIMEOUT, 90 s)
tr() {
  local name=$1 state=$2 loader=$3
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  rm -f "$D/ho${N}/kv_out.bin"   # (the first set's kv-offload writes it: each run starts without it)
  if [ "$state" = cold ]; then python3 tests/workloads/loaders.py evict "$D/ho${N}" > "$OUT/$name.cache.txt" 2>&1
  else python3 tests/workloads/loaders.py warm "$D/ho${N}" > "$OUT/$name.cache.txt" 2>&1; fi
  local t
  t=$(date +%s.%N)
  timeout "${TRACE_TIMEOUT:-90}" python3 -m gdsdiag trace --json -o "$OUT/$name.jsonl" --record "$OUT/$name.rec.jsonl" -- python3 $L "$loader" "$D" > "$OUT/$name.app.txt" 2> "$OUT/$name.err"
  echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" >> "$OUT/$name.err"
  grep '^GROUND_TRUTH' "$OUT/$name.app.txt" >> "$OUT/$name.jsonl"
  gzip -f "$OUT/$name.rec.jsonl"
  echo "== $name done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
}

# heldout_end: the score, and the set's data removed
heldout_end() {
  python3 tests/workloads/score_loaders.py "$OUT"/*.jsonl > "$OUT/score.txt" 2>&1
  echo "all done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
  rm -rf "$D"
}
