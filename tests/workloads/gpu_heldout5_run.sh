#!/usr/bin/env bash
# The fifth held-out set (tests/workloads/loaders_heldout5.py: PyPI loaders with their own engines —
# fastsafetensors, runai-model-streamer, kvikio) under `gdsdiag trace`, on the GPU machine. Their wheels
# ride in the kit (.device/whl). From the repository root there:
#   source .device/env.sh; bash tests/workloads/gpu_heldout5_run.sh $OUT
# (tests/workloads/heldout_run.sh: the runs, outputs and score; ONLY=, TRACE_TIMEOUT=)
set -u
source "$(dirname "$0")/heldout_run.sh"
heldout_begin "${1:-/tmp/out}" "5"
python3 -c 'import sys, torch, fastsafetensors, runai_model_streamer, kvikio; print("python", sys.version.split()[0], "torch", torch.__version__, "kvikio", kvikio.__version__)' > "$OUT/facts.txt" 2>&1
tr fst-auto-cold cold fst-auto
tr fst-nogds-cold cold fst-nogds
tr fst-nogds-warm warm fst-nogds
tr runai-uring-cold cold runai-uring
tr runai-libaio-cold cold runai-libaio
tr runai-sync-cold cold runai-sync
tr runai-sync-warm warm runai-sync
tr runai-hoststats-cold cold runai-hoststats
tr kvikio-posix-cold cold kvikio-posix
tr kvikio-cufile-cold cold kvikio-cufile
heldout_end
