#!/usr/bin/env bash
# Issue 10's goal table in one GPU-machine call (also runs the host rows on any Linux machine):
#   source .device/env.sh; cd <tree>; bash benchmarks/history/sweep_gpu_recheck.sh $OUT        # GPU machine
#   HOST_ONLY=1 D=/var/tmp/x bash benchmarks/history/sweep_gpu_recheck.sh /tmp/out              # host rows only
#   SKIP_GOAL=1 ...: leave out the goal rows already measured (host, cufile, qd32); the rest runs
# Every point is `gdsdiag sweep --compare-fio`: fio's equivalent job runs just before and just after
# it on the same open file (interleaved), ratio against the mean of the two. Order: the goal rows
# first (host psync 4k/1m x 1/4/16, cufile 4k/1m x 1/4, host iodepth 32 vs io_uring), then the
# queued cuFile modes (--iodepth 1 and 32), then a tiny compat pool (posix_pool_slab_count 1 per
# size, more threads and requests in flight than slabs), then the GPU sweep tests. Each step has a
# timeout and is skipped when the call's time is short, so the figures already taken come back.
# The raw outputs go to $OUT/raw and are re-packed into $OUT/results.tgz after every step: the
# device tool returns only a few files per call, and a call cut at its limit packs nothing after.
set -u
OUT0=${1:-/tmp/out}; OUT=$OUT0/raw; mkdir -p "$OUT"
pack() { tar -C "$OUT" -czf "$OUT0/results.tgz.tmp" . && mv "$OUT0/results.tgz.tmp" "$OUT0/results.tgz"; cp "$OUT/run.log" "$OUT0/run.log"; }
T=${SECS:-3s}; SIZE=${SIZE:-2G}; BUDGET=${BUDGET:-330}; START=$(date +%s)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
PY=${PYTHON:-python3}
if [ -z "${HOST_ONLY:-}" ]; then
  for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; KIT=$k; break; }; done
  ( gds_build_fio ${KIT:-.device} ) 2>&1 | tail -1 | tee -a "$OUT/run.log"
  export GDSDIAG_FIO=/tmp/fio/fio
  cuf=$($PY -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
  export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  D=${D:-/var/tmp/gds-h10}; mkdir -p $D; gds_udev_entry $D
else
  D=${D:-/var/tmp/gds-h10}; mkdir -p $D
fi
log "machine: $(nproc) CPUs, $(uname -r), $($PY --version 2>&1), fio: $(${GDSDIAG_FIO:-fio} --version 2>&1), THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
log "dir $D on $(df -h --output=source,fstype $D | tail -1)"
$PY -c 'from gdsdiag.sweep import native; l, w = native.load(); print("C loop:", "built" if l else "NOT built: " + str(w), "io_uring:", native.have_uring())' 2>&1 | tee -a "$OUT/run.log"
# sw NAME SECONDS_NEEDED ARGS...: one sweep, JSON + text, its ratio rows into run.log
sw() { local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then log "SKIP $name: $(left) s left, needs $need"; return; fi
  log "sweep $name: $*"
  local cap=$(( need + 60 )); [ "$(left)" -lt "$cap" ] && cap=$(left)
  timeout $cap $PY -m gdsdiag sweep --dir $D --size $SIZE --time $T --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.txt"
  echo "rc=$?" >>"$OUT/$name.txt"
  $PY benchmarks/sweep_fio_table.py "$name" "$OUT/$name.json" 2>&1 | tee -a "$OUT/run.log"
  grep -E "^rc=|rror" "$OUT/$name.txt" | tail -3 | tee -a "$OUT/run.log"; pack; }
F=--compare-fio
[ -z "${SKIP_GOAL:-}" ] && sw host 80 --mode host --rw read --bs 4k,1m --threads 1,4,16 --no-verify $F
[ -z "${HOST_ONLY:-}${SKIP_GOAL:-}" ] && sw cufile 60 --mode cufile --rw read --bs 4k,1m --threads 1,4 --no-verify $F
# fio's layout for the cufile 1 MiB x 4 gap: a cuFile handle per thread instead of one per point
[ -z "${HOST_ONLY:-}" ] && GDSDIAG_SWEEP_CUFILE_HANDLES=thread sw cufile_thr 30 --mode cufile --rw read --bs 1m --threads 4 --no-verify $F
[ -z "${SKIP_GOAL:-}" ] && sw qd32 60 --mode host --rw read,randread --bs 4k,1m --threads 1 --iodepth 32 --no-verify $F
if [ -z "${HOST_ONLY:-}" ]; then
  T=2s sw queued1 40 --mode cufile-batch,cufile-async --rw read --bs 4k,1m --threads 1 --no-verify $F
  T=2s sw queued32 30 --mode cufile-batch,cufile-async --rw read --bs 4k,1m --threads 1 --iodepth 32 --no-verify
  T=2s sw queued32v 20 --mode cufile-batch,cufile-async --rw read,write --bs 1m --threads 2 --iodepth 8
  # a compat pool of one slab per size, and more threads / requests in flight than slabs: does it stall?
  $PY - <<'PY' 2>&1 | tee -a "$OUT/run.log"
import json
from gdsdiag.cufile_json import strip_comments
doc = json.loads(strip_comments(open("/etc/cufile.json").read()))
doc.setdefault("properties", {}).update({"posix_pool_slab_size_kb": [4, 1024, 16384], "posix_pool_slab_count": [1, 1, 1]})
open("/tmp/cufile-tiny-pool.json", "w").write(json.dumps(doc))
print("tiny pool cufile.json written")
PY
  export CUFILE_ENV_PATH_JSON=/tmp/cufile-tiny-pool.json
  $PY -c '
from gdsdiag import cufile
d = cufile.Driver().open(); print("posix pool in effect under the tiny cufile.json:", cufile.driver.posix_pool_slabs()); d.close()' 2>&1 | tail -1 | tee -a "$OUT/run.log"
  T=2s sw tinypool 30 --mode cufile --rw read --bs 4k,1m --threads 16,32 --no-verify
  T=2s sw tinypool_q 20 --mode cufile-async,cufile-batch --rw read --bs 1m --threads 4 --iodepth 32 --no-verify
  unset CUFILE_ENV_PATH_JSON
  ls -la cufile.log 2>/dev/null && tail -40 cufile.log >"$OUT/cufile.log.tail" 2>/dev/null
  if [ "$(left)" -gt 60 ]; then
    log "GPU sweep tests ($(left) s left)"
    timeout $(( $(left) - 5 )) $PY -m pytest -q -p no:cacheprovider tests/test_sweep_gpu.py 2>&1 | tail -15 | tee "$OUT/pytest_gpu.txt" | tee -a "$OUT/run.log"
  else log "SKIP GPU sweep tests: $(left) s left"; fi
fi
log "done ($(( $(date +%s) - START )) s)"; pack
