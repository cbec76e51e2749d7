#!/usr/bin/env bash
# The second held-out set (tests/workloads/loaders_heldout2.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout2_run.sh $OUT
# (tests/workloads/heldout_run.sh: the runs, outputs and score; ONLY=, TRACE_TIMEOUT=)
set -u
source "$(dirname "$0")/heldout_run.sh"
heldout_begin "${1:-/tmp/out}" "2"
python3 -c 'import h5py, pyarrow, torch, transformers, safetensors, cupy, jax, numpy; print("h5py", h5py.__version__, "hdf5", h5py.version.hdf5_version, "pyarrow", pyarrow.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numpy", numpy.__version__)' > "$OUT/facts.txt" 2>&1
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
heldout_end
