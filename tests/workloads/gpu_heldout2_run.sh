#!/usr/bin/env bash
# The second held-out set (tests/workloads/loaders_heldout2.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout2_run.sh $OUT
# Each run: the trace's JSON lines (-o: the loader's stdout stays its own, its GROUND_TRUTH line is
# appended after), its record (.gz) and stderr; score.txt is tests/workloads/score_loaders.py over all.
set -u
FINAL=${1:-/tmp/out}; OUT=/tmp/ho2out; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
trap 'tar -C /tmp -czf "$FINAL/ho2out.tar.gz" ho2out; cp "$OUT/score.txt" "$FINAL/ho2-score.txt" 2>/dev/null' EXIT
D=/var/tmp/gdsdiag-heldout2; rm -rf "$D"; mkdir -p "$D"
L=tests/workloads/loaders_heldout2.py
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1   # hf-bert loads a local folder; never ask a hub
T0=$(date +%s)
timeout 180 python3 $L prepare "$D" > "$OUT/prepare.txt" 2>&1 || echo "prepare rc=$?" >> "$OUT/prepare.txt"
echo "== prepare done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
python3 -c 'import h5py, pyarrow, torch, transformers, safetensors, cupy, jax, numpy; print("h5py", h5py.__version__, "hdf5", h5py.version.hdf5_version, "pyarrow", pyarrow.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numpy", numpy.__version__)' > "$OUT/facts.txt" 2>&1
tr() {     # name, state (cold|warm), loader  (ONLY="name ..." runs those alone)
  local name=$1 state=$2 loader=$3
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  if [ "$state" = cold ]; then python3 tests/workloads/loaders.py evict "$D/ho2" > "$OUT/$name.cache.txt" 2>&1
  else python3 tests/workloads/loaders.py warm "$D/ho2" > "$OUT/$name.cache.txt" 2>&1; fi
  local t=$(date +%s.%N)
  timeout ${TRACE_TIMEOUT:-90} python3 -m gdsdiag trace --json -o "$OUT/$name.jsonl" --record "$OUT/$name.rec.jsonl" -- python3 $L "$loader" "$D" > "$OUT/$name.app.txt" 2> "$OUT/$name.err"
  echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" >> "$OUT/$name.err"
  grep '^GROUND_TRUTH' "$OUT/$name.app.txt" >> "$OUT/$name.jsonl"
  gzip -f "$OUT/$name.rec.jsonl"
  echo "== $name done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
}
tr h5-slices-cold cold h5-slices
tr h5-slices-warm warm h5-slices
tr h5-gzip-cold cold h5-gzip
tr pq-torch-cold cold pq-torch
tr pq-torch-warm warm pq-torch
tr torch-fromfile-cold cold torch-fromfile
tr torch-fromfile-warm warm torch-fromfile
tr hf-bert-cold cold hf-bert
tr hf-bert-warm warm hf-bert
tr dl-files-cold cold dl-files
tr dl-files-warm warm dl-files
tr readinto-threads-cold cold readinto-threads
tr host-only-cold cold host-only
tr host-only-warm warm host-only
tr jax-npz-cold cold jax-npz
tr mmap-slices-cold cold mmap-slices
tr mmap-slices-warm warm mmap-slices
python3 tests/workloads/score_loaders.py "$OUT"/*.jsonl > "$OUT/score.txt" 2>&1
echo "all done at $(( $(date +%s) - T0 )) s" >> "$OUT/progress.txt"
rm -rf "$D"
