#!/usr/bin/env bash
# The third held-out set (tests/workloads/loaders_heldout3.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout3_run.sh $OUT
# (tests/workloads/heldout_run.sh: the runs, outputs and score; ONLY=, TRACE_TIMEOUT=)
set -u
source "$(dirname "$0")/heldout_run.sh"
heldout_begin "${1:-/tmp/out}" "3"
python3 -c 'import sys, torch, cupy, jax, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numpy", numpy.__version__)' > "$OUT/facts.txt" 2>&1
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
heldout_end
