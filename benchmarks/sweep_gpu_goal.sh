#!/usr/bin/env bash
# The sweep against fio, like for like, every point, fio's forked jobs and --thread, in interleaved
# rounds (one call; docs/benchmarks-history.md "gdsdiag sweep against fio"):
#   source .device/env.sh; cd <tree>; bash benchmarks/sweep_gpu_goal.sh $OUT           # GPU machine
#   HOST_ONLY=1 D=/var/tmp/x bash benchmarks/sweep_gpu_goal.sh /tmp/out                  # CPU machine
# Each round, one new sweep process per mode: `gdsdiag sweep --compare-fio --fio-jobs both` over
# read 4k/1m x 1/4 threads (fio's forked run and --thread run before each point, then the point,
# then both again in reverse order; the sweep's host buffers in fio's 4 KiB pages), host first,
# then cufile. Then the medians over rounds: python3 benchmarks/sweep_goal_table.py OUT/raw/*.json
# A verified smoke sweep of every GPU mode runs first (the engines end to end, briefly), with thread
# and with process workers. MODES, WORKERS, FIO, BS, TH, T, ROUNDS, SIZE, BUDGET: see below.
set -u
OUT0=${1:-/tmp/out}; OUT=$OUT0/raw; mkdir -p "$OUT"
pack() { tar -C "$OUT" -czf "$OUT0/results.tgz.tmp" . && mv "$OUT0/results.tgz.tmp" "$OUT0/results.tgz"; cp "$OUT/run.log" "$OUT0/run.log" 2>/dev/null; }
PY=${PYTHON:-python3}; T=${T:-1.5s}; ROUNDS=${ROUNDS:-3}; SIZE=${SIZE:-2G}; BUDGET=${BUDGET:-320}; START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -z "${HOST_ONLY:-}" ]; then
  for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; KIT=$k; break; }; done
  ( gds_build_fio ${KIT:-.device} ) 2>&1 | tail -1 | tee -a "$OUT/run.log"
  export GDSDIAG_FIO=/tmp/fio/fio
  cuf=$($PY -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
  export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
fi
D=${D:-/var/tmp/gds-goal}; mkdir -p $D; [ -z "${HOST_ONLY:-}" ] && gds_udev_entry $D
log "machine: $(nproc) CPUs, $(uname -r), $($PY --version 2>&1), fio: $(${GDSDIAG_FIO:-fio} --version 2>&1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
log "dir $D on $(df --output=source,fstype $D | tail -1); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
sw() { local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then log "SKIP $name: $(left) s left, needs $need"; return; fi
  log "sweep $name: $*"
  timeout $(( need + 60 )) $PY -m gdsdiag sweep --dir $D --size $SIZE --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.txt"
  echo "rc=$?" >>"$OUT/$name.txt"; grep -E "^gdsdiag sweep \[|^rc=|rror|^fio " "$OUT/$name.txt" | tail -14 | tee -a "$OUT/run.log"; pack; }
if [ -z "${HOST_ONLY:-}" ]; then
  [ -z "${NO_SMOKE:-}" ] && sw smoke 30 --mode cufile,cufile-batch,cufile-async,kvikio,bounce --rw read,write --bs 64k --threads 2 --bytes 4m --iodepth 1
  # the GPU engines with a process per worker, verified (each its own driver, handle and slice)
  sw smoke-process 30 --mode ${SMOKE_MODES:-cufile,cufile-batch,cufile-async,bounce} --workers process --rw read,write --bs 64k --threads 2 --bytes 4m --iodepth 1
fi
# MODES: which modes (host cufile); WORKERS: the sweep's worker kinds (thread process), alternated
# in each round (odd rounds threads first); FIO=match: fio's jobs of the same kind only (forked for
# process workers, --thread for threads), FIO=both: both kinds beside every point
MODES=${MODES:-host cufile}; WORKERS=${WORKERS:-thread process}; FIO=${FIO:-both}; BS=${BS:-4k,1m}; TH=${TH:-1,4}
[ -n "${HOST_ONLY:-}" ] && MODES=host
F="--rw read --bs $BS --threads $TH --time $T --no-verify --compare-fio"
for r in $(seq 1 $ROUNDS); do
  ks=$WORKERS; [ $((r % 2)) -eq 0 ] && ks=$(echo $WORKERS | tr ' ' '\n' | tac | tr '\n' ' ')
  for m in $MODES; do for w in $ks; do
    fj=both; [ "$FIO" = match ] && fj=$w
    sw r$r-$m-$w $([ $m = host ] && echo 40 || echo 45) --mode $m --workers $w --fio-jobs $fj $F
  done; done
done
$PY benchmarks/sweep_goal_table.py "$OUT"/r*-*.json 2>&1 | tee -a "$OUT/run.log"
# threads against forked processes for one 4 KiB reader, the same C loop (benchmarks/history/sweep_loop_bench.c)
if [ -z "${NO_LOOPBENCH:-}" ] && [ "$(left)" -gt 25 ] && cc -O2 -pthread -I csrc -o /tmp/loopbench benchmarks/history/sweep_loop_bench.c csrc/ioloop.c; then
  F1=$(ls $D/gdsdiag-sweep-* 2>/dev/null | head -1); [ -n "$F1" ] || { F1=$D/lb; ${GDSDIAG_FIO:-fio} --name=mk --filename=$F1 --size=1G --rw=write --bs=1m --direct=1 --output=/dev/null; }
  for r in 1 2 3; do for sp in thread fork; do
    /tmp/loopbench $F1 4096 1 1 $sp pages clock2 | tee -a "$OUT/loopbench.jsonl"; done; done
  rm -f $D/lb
fi
log "done ($(( $(date +%s) - START )) s)"; pack
