#!/usr/bin/env bash
# gdsdiag sweep vs fio on the GPU machine, one call (see docs/benchmarks-history.md for the figures).
# From the project root there: source .device/env.sh; cd <tree>; bash benchmarks/history/sweep_gpu_machine.sh $OUT
# Builds fio with its libcufile engine, writes the udev entry cuFile needs, runs the GPU sweep
# tests, then `gdsdiag sweep --compare-fio` (each point followed by fio's equivalent job on the same
# file): host 4k/1m x 1/4/16 threads, host iodepth 32 (fio io_uring), cufile 4k/1m x 1/4 threads,
# bounce 4k/1m x 1/4 (fio libcufile cuda_io=posix); and a cuFile run with a tiny compat pool.
set -u
OUT0=${1:-/tmp/out}; OUT=/tmp/t10-out; mkdir -p "$OUT" "$OUT0"
# the kit's functions (gds_build_fio, gds_udev_entry) are not inherited by this shell: source it here
for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; KIT=$k; break; }; done
T=${SECS:-3s}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
log "machine: $(nproc) CPUs, $(uname -r), $(python3 --version), gcc: $(command -v cc || echo none)"
( gds_build_fio $KIT ) 2>&1 | tail -1 | tee -a "$OUT/run.log"
export GDSDIAG_FIO=/tmp/fio/fio
cuf=$(python3 -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
D=/var/tmp/gds-t10; mkdir -p $D; gds_udev_entry $D
python3 -c 'from gdsdiag.sweep import native; l, w = native.load(); print("C loop:", "built" if l else "NOT built: " + str(w), "io_uring:", native.have_uring())' 2>&1 | tee -a "$OUT/run.log"
if ls whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --target /tmp/t10py whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/t10py; fi
log "GPU sweep tests"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_sweep_gpu.py 2>&1 | tail -15 | tee "$OUT/pytest_gpu.txt" | tee -a "$OUT/run.log"
sw() { local name=$1; shift; log "sweep $name: $*"
  timeout 170 python3 -m gdsdiag sweep --dir $D --size 2G --time $T ${NOFIO:---compare-fio} --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.txt"
  echo "rc=$?" >>"$OUT/$name.txt"; tail -25 "$OUT/$name.txt" >>"$OUT/run.log"; }
sw host --mode host --rw read --bs 4k,1m --threads 1,4,16 --no-verify
sw cufile --mode cufile --rw read --bs 4k,1m --threads 1,4 --no-verify
sw qd32 --mode host --rw read,randread --bs 4k,1m --threads 1 --iodepth 32 --no-verify
sw bounce --mode bounce --rw read --bs 4k,1m --threads 1,4 --no-verify
sw verified --mode host,cufile --rw read,write --bs 1m --threads 4
# a compat pool of one slab per size: what a stall looks like and what the sweep says
python3 - "$OUT" <<'PY'
import json, re, sys
from gdsdiag.cufile_json import strip_comments
doc = json.loads(strip_comments(open("/etc/cufile.json").read()))
doc.setdefault("properties", {}).update({"posix_pool_slab_size_kb": [4, 1024, 16384], "posix_pool_slab_count": [1, 1, 1]})
open("/tmp/cufile-tiny-pool.json", "w").write(json.dumps(doc))
PY
CUFILE_ENV_PATH_JSON=/tmp/cufile-tiny-pool.json NOFIO=" " sw tinypool --mode cufile --rw read --bs 1m --threads 1,4,16
log done
tar -C "$OUT" -czf "$OUT0/results.tgz" . && cp "$OUT/run.log" "$OUT0/run.log"
