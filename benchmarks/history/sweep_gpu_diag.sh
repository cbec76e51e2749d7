#!/usr/bin/env bash
# Where the sweep's time goes against fio, on one machine in one call (issue: sweep >= 0.97x fio):
#   source .device/env.sh; cd <tree>; bash benchmarks/history/sweep_gpu_diag.sh $OUT          # GPU machine
#   HOST_ONLY=1 D=/var/tmp/x bash benchmarks/history/sweep_gpu_diag.sh /tmp/out                 # any Linux box
# A. host 4 KiB reads, 1 and 4 workers, ROUNDS interleaved rounds: a bare pread loop, the same with
#    two clock reads per I/O (fio's psync does that), the sweep's C loop (csrc/ioloop.c linked into
#    benchmarks/history/sweep_loop_bench.c) in threads or forked processes, 4 KiB-page or huge-page buffers,
#    fio psync forked and --thread; then the sweep itself with --compare-fio.
# B. (GPU) fio's libcufile engine at 4 KiB: forked 1/2/4 jobs, --thread, cuda_io=posix, four
#    independent fio processes; threads and GPU processes seen part-way; CUDA copies alone from 4
#    processes against 4 threads (benchmarks/history/cuda_ctx_bench.py); under MPS where it exists.
# C. (GPU) cufile 1 MiB x 4: the sweep (4 points interleaved with fio --thread before/after, with
#    per-worker lines and the block device's counters), fio forked, fio with cuFile stats level 3.
# Every run is one line of $OUT/raw/diag.jsonl (benchmarks/history/sweep_diag_run.py: output, wall time,
# the disk's own counters over the run); everything is re-packed into $OUT/results.tgz as it goes.
set -u
OUT0=${1:-/tmp/out}; OUT=$OUT0/raw; mkdir -p "$OUT"
pack() { tar -C "$OUT" -czf "$OUT0/results.tgz.tmp" . && mv "$OUT0/results.tgz.tmp" "$OUT0/results.tgz"; cp "$OUT/run.log" "$OUT0/run.log" 2>/dev/null; }
PY=${PYTHON:-python3}; T=${T:-2}; ROUNDS=${ROUNDS:-2}; BUDGET=${BUDGET:-280}; START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
FIO=fio
if [ -z "${HOST_ONLY:-}" ]; then
  for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; KIT=$k; break; }; done
  ( gds_build_fio ${KIT:-.device} ) 2>&1 | tail -1 | tee -a "$OUT/run.log"
  FIO=/tmp/fio/fio; export GDSDIAG_FIO=$FIO
  cuf=$($PY -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
  export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
fi
D=${D:-/var/tmp/gds-sw}; mkdir -p $D; [ -z "${HOST_ONLY:-}" ] && gds_udev_entry $D
DEV=$(lsblk -no PKNAME "$(df --output=source $D | tail -1)" 2>/dev/null | head -1); [ -n "$DEV" ] || DEV=$(basename "$(df --output=source $D | tail -1)")
R() { $PY benchmarks/history/sweep_diag_run.py "$OUT/diag.jsonl" --dev $DEV "$@" 2>&1 | tee -a "$OUT/run.log"; }
{
  echo "machine: $(nproc) CPUs, $(uname -r), $($PY --version 2>&1), fio: $($FIO --version 2>&1)"
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) (available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource))"
  echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled); dir $D on $(df --output=source,fstype $D | tail -1), disk $DEV max_segments $(cat /sys/block/$DEV/queue/max_segments 2>/dev/null) scheduler $(cat /sys/block/$DEV/queue/scheduler 2>/dev/null)"
  grep -m1 -o 'constant_tsc\|nonstop_tsc' /proc/cpuinfo | sort -u | tr '\n' ' '; echo "(cpu flags)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,compute_mode,driver_version --format=csv,noheader
  command -v nvidia-cuda-mps-control >/dev/null && echo "MPS: $(command -v nvidia-cuda-mps-control)" || echo "MPS: not installed"
  $FIO --debug=time --name=t --filename=$D/clk --size=1m --bs=4k --rw=read --output=/dev/null 2>&1 | grep -m2 -i "clocksource\|tsc"
} 2>&1 | tee -a "$OUT/run.log"
rm -f $D/clk
cc -O2 -pthread -I csrc -o /tmp/loopbench benchmarks/history/sweep_loop_bench.c csrc/ioloop.c 2>&1 | tee -a "$OUT/run.log"
R clock -- /tmp/loopbench clock
F=$D/data; SIZE=${SIZE:-2G}
[ -f $F ] || $FIO --name=mk --filename=$F --size=$SIZE --rw=write --bs=1m --direct=1 --ioengine=psync --output=/dev/null
BYTES=$(stat -c %s $F); SLICE4=$(( (BYTES - 4096) / 4 / 4096 * 4096 )); SLICE1=$(( (BYTES - 4096) / 4096 * 4096 ))
# fio's psync job as --compare-fio words it, forked (fio's default) or --thread
fiojob() { local nj=$1 spawn=$2 bs=$3; shift 3; local sl=$(( (BYTES - 4096) / nj / bs * bs ))
  echo $FIO --name=j --filename=$F --direct=1 --bs=$bs --rw=read --numjobs=$nj --offset=4096 --size=$sl --offset_increment=$sl \
    --time_based --runtime=${T}s --output-format=json $([ $spawn = thread ] && echo --thread) "$@"; }

log "A. host 4 KiB: loops, buffers, threads/processes, fio ($ROUNDS rounds of ${T}s runs)"
for r in $(seq 1 $ROUNDS); do
  for j in 1 4; do
    R "A r$r j$j bare thread pages" -- /tmp/loopbench $F 4096 $T $j thread pages bare
    R "A r$r j$j clock2 thread pages" -- /tmp/loopbench $F 4096 $T $j thread pages clock2
    R "A r$r j$j clock2 fork pages" -- /tmp/loopbench $F 4096 $T $j fork pages clock2
    R "A r$r j$j sweep thread huge" -- /tmp/loopbench $F 4096 $T $j thread huge sweep
    R "A r$r j$j sweep thread pages" -- /tmp/loopbench $F 4096 $T $j thread pages sweep
    R "A r$r j$j fio psync fork" -- $(fiojob $j fork 4096 --ioengine=psync)
    R "A r$r j$j fio psync thread" -- $(fiojob $j thread 4096 --ioengine=psync)
  done
  pack
done
log "A. the sweep itself (--compare-fio, fio --thread before/after each point), 1/4 threads twice"
R "A sweep cli huge" -- $PY -m gdsdiag sweep --dir $D --size $SIZE --mode host --rw read --bs 4k --threads 1,4,1,4 --time ${T}s --no-verify --compare-fio --json
GDSDIAG_SWEEP_BUFFERS=pages R "A sweep cli pages" -- $PY -m gdsdiag sweep --dir $D --size $SIZE --mode host --rw read --bs 4k --threads 1,4 --time ${T}s --no-verify --compare-fio --json
pack
[ -n "${HOST_ONLY:-}" ] && { log "done ($(( $(date +%s) - START )) s)"; pack; exit 0; }

log "B. fio libcufile 4 KiB: forked vs --thread ($(left) s left)"
CF="--ioengine=libcufile --cuda_io=cufile --gpu_dev_ids=0"
R "B cufile fork nj1" -- $(fiojob 1 fork 4096 $CF)
R "B cufile fork nj4" --sample-at 1.5 -- $(fiojob 4 fork 4096 $CF)
R "B cufile thread nj4" --sample-at 1.5 -- $(fiojob 4 thread 4096 $CF)
R "B posix fork nj4" -- $(fiojob 4 fork 4096 --ioengine=libcufile --cuda_io=posix --gpu_dev_ids=0)
R "B posix thread nj4" -- $(fiojob 4 thread 4096 --ioengine=libcufile --cuda_io=posix --gpu_dev_ids=0)
R "B psync fork nj4" -- $(fiojob 4 fork 4096 --ioengine=psync)
# four independent fio processes, one job each, on the four slices: what forking alone does
log "B. four separate fio processes, one cufile job each"
for i in 0 1 2 3; do
  $FIO --name=s$i --filename=$F --direct=1 --bs=4096 --rw=read --offset=$(( 4096 + i * SLICE4 )) --size=$SLICE4 \
    --time_based --runtime=${T}s --output-format=json $CF >"$OUT/B-separate-$i.json" 2>&1 &
done; wait
$PY -c 'import json,sys; v=[json.loads(open(p).read()[open(p).read().find("{"):])["jobs"][0]["read"]["iops"] for p in sys.argv[1:]]; print("B separate x4: iops", [round(x) for x in v], "sum", round(sum(v)))' "$OUT"/B-separate-*.json 2>&1 | tee -a "$OUT/run.log"
log "B. CUDA copies alone: 4 KiB host->GPU from 1 / 4 threads / 4 processes"
R "B ctx thread w1" -- $PY benchmarks/history/cuda_ctx_bench.py --workers 1 --spawn thread
R "B ctx thread w4" -- $PY benchmarks/history/cuda_ctx_bench.py --workers 4 --spawn thread
R "B ctx process w4" --sample-at 7 -- $PY benchmarks/history/cuda_ctx_bench.py --workers 4 --spawn process
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d && sleep 1 && log "MPS daemon up"
  R "B MPS ctx process w4" -- $PY benchmarks/history/cuda_ctx_bench.py --workers 4 --spawn process
  R "B MPS cufile fork nj4" -- $(fiojob 4 fork 4096 $CF)
  echo quit | nvidia-cuda-mps-control; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
pack

log "C. cufile 1 MiB x 4 ($(left) s left)"
$PY - <<'PY' 2>&1 | tee -a "$OUT/run.log"
import json
from gdsdiag.cufile_json import strip_comments
doc = json.loads(strip_comments(open("/etc/cufile.json").read()))
doc.setdefault("profile", {})["cufile_stats"] = 3
open("/tmp/cufile-stats3.json", "w").write(json.dumps(doc))
print("cufile.json with profile.cufile_stats 3 at /tmp/cufile-stats3.json")
PY
for r in 1 2; do
  R "C r$r fio cufile 1m thread" -- $(fiojob 4 thread 1048576 $CF)
  CUFILE_ENV_PATH_JSON=/tmp/cufile-stats3.json R "C r$r fio cufile 1m thread stats3" -- $(fiojob 4 thread 1048576 $CF)
  R "C r$r fio cufile 1m fork" -- $(fiojob 4 fork 1048576 $CF)
done
pack
GDSDIAG_SWEEP_DEBUG=1 R "C sweep cufile 1m x4 x4" -- timeout $(( $(left) - 10 )) $PY -m gdsdiag sweep --dir $D --size $SIZE --mode cufile --rw read --bs 1m --threads 4,4,4,4 --time ${T}s --no-verify --compare-fio --json
log "done ($(( $(date +%s) - START )) s)"; pack
