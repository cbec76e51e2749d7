#!/usr/bin/env bash
# The per-read cost of 'gdsdiag trace' on the GPU machine for several checkouts side by side (a
# bisect when one regressed): every folder under TREES (each holding an earlier commit's gdsdiag/
# and probes/, e.g. `git archive REV gdsdiag probes | tar -x -C .trees/REV`) is one variant of
# benchmarks/trace_overhead.py, interleaved round by round in one run: 4 KiB page-cache preads
# counted in the kernel, then the same with CUDA loaded (one event per read); then the tracer's
# own profile (cProfile) under the counted load for the first and last tree.
#   source .device/env.sh; TREES=.trees bash benchmarks/history/gpu_trace_trees.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
HERE=$PWD
V=(); for t in "${TREES:?TREES=DIR of checkouts}"/*/; do V+=(--variant "$(basename "$t")=$(cd "$t" && pwd)"); done
log "variants: ${V[*]}"
settle
log "1. counted in the kernel: 4 KiB 400k preads, ${ROUNDS:-6} rounds (workload on CPU 2, tracer on 3)"
timeout 200 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 400000 --rounds "${ROUNDS:-6}" --cpus 2,3 "${V[@]}" >"$OUT/counted.json" 2>"$OUT/counted.err"
log "  rc=$?"; $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["median"]))' "$OUT/counted.json" 2>&1 | tee -a "$OUT/run.log"; pack
log "2. the tracer's profile under the counted load (2M preads), first and last tree"
W=$($PY -c 'import sys; sys.path.insert(0, "benchmarks"); from trace_prog_cost import WORKLOAD; print(WORKLOAD)' 2>/dev/null)
dd if=/dev/urandom of=/var/tmp/gds-prof.bin bs=1M count=64 status=none
first=$(ls -d "$TREES"/*/ | head -1); last=$(ls -d "$TREES"/*/ | tail -1)
for t in "$first" "$last"; do n=$(basename "$t")
  (cd "$t" && echo g | PYTHONPATH=$PWD${BASE_PYTHONPATH:+:$BASE_PYTHONPATH} timeout 60 $PY "$HERE/benchmarks/profile_command.py" "$OUT/prof-$n.out" --print 16 -- trace --json -- $PY -c "$W" /var/tmp/gds-prof.bin 2000000 "" >"$OUT/prof-$n.jsonl" 2>"$OUT/prof-$n.err")
  log "  $n rc=$?"; grep -A18 ncalls "$OUT/prof-$n.err" | cut -c1-160 | tee -a "$OUT/run.log"
done; pack
log "3. CUDA loaded (an event per read): 4 KiB 200k preads, ${CROUNDS:-4} rounds"
timeout 260 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 200000 --rounds "${CROUNDS:-4}" --cuda --cpus 2,3 "${V[@]}" >"$OUT/cuda.json" 2>"$OUT/cuda.err"
log "  rc=$?"; $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["median"]))' "$OUT/cuda.json" 2>&1 | tee -a "$OUT/run.log"; pack
log "done"
