#!/usr/bin/env bash
# The held-out loaders (tests/workloads/loaders_heldout.py) under `gdsdiag trace`, on the GPU machine.
# From the repository root there: source .device/env.sh; bash tests/workloads/gpu_heldout_run.sh $OUT
# (tests/workloads/heldout_run.sh: the runs, outputs and score; ONLY=, TRACE_TIMEOUT=)
set -u
source "$(dirname "$0")/heldout_run.sh"
heldout_begin "${1:-/tmp/out}" ""
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
heldout_end
