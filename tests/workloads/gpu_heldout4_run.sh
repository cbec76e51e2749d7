#!/usr/bin/env bash
# The fourth held-out set (tests/workloads/loaders_heldout4.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout4_run.sh $OUT
# (tests/workloads/heldout_run.sh: the runs, outputs and score; ONLY=, TRACE_TIMEOUT=)
set -u
source "$(dirname "$0")/heldout_run.sh"
heldout_begin "${1:-/tmp/out}" "4"
python3 -c 'import sys, torch, cupy, jax, numpy, safetensors, pyarrow; print("python", sys.version.split()[0], "torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numpy", numpy.__version__, "safetensors", safetensors.__version__, "pyarrow", pyarrow.__version__)
try:
    import kvikio; print("kvikio", kvikio.__version__)
except ImportError as e:
    print("kvikio missing:", e)' > "$OUT/facts.txt" 2>&1
dd --version 2>&1 | head -1 >> "$OUT/facts.txt"
tr shm-handoff-cold cold shm-handoff
tr shm-handoff-warm warm shm-handoff
tr pipe-stream-cold cold pipe-stream
tr pipe-stream-warm warm pipe-stream
tr torch-mmap-subset-cold cold torch-mmap-subset
tr torch-mmap-subset-warm warm torch-mmap-subset
tr st-slices-cold cold st-slices
tr st-slices-warm warm st-slices
tr preadv-scatter-cold cold preadv-scatter
tr executor-prefetch-cold cold executor-prefetch
tr executor-prefetch-warm warm executor-prefetch
tr fromfile-window-cold cold fromfile-window
tr memmap-gather-cold cold memmap-gather
tr memmap-gather-warm warm memmap-gather
tr txt-tokens-cold cold txt-tokens
tr legacy-torch-cold cold legacy-torch
tr sendfile-copy-cold cold sendfile-copy
tr sendfile-copy-warm warm sendfile-copy
tr kvikio-posix-cold cold kvikio-posix
tr arrow-ipc-cold cold arrow-ipc
tr arrow-ipc-warm warm arrow-ipc
tr ckpt-save-cold cold ckpt-save
heldout_end
