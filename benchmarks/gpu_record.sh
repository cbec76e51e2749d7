#!/usr/bin/env bash
# The trace's benchmarks of record and the topology/check timings on the GPU machine, this checkout
# against OLD (an earlier commit's gdsdiag/, probes/, csrc/: `git archive REV gdsdiag probes csrc |
# tar -x -C .gpu-old`) in the same call, so every figure has its peer from the same machine start
# (docs/benchmarks.md says which figure each step gives). Each step under its own timeout, everything
# under $1 (the device's $OUT), packed as it goes (benchmarks/gpu_common.sh).
#   source .device/env.sh; OLD=.gpu-old [STEPS="1 2"] bash benchmarks/gpu_record.sh $OUT
# A device call has 600 s and the steps' timeouts (below, per step: 1 390 s with its settle, 2 200,
# 3 240, 4 240, 5 150, 6 150, 7 390) sum to more: run STEPS="1 2", "3 4", "5 6" and "7" as four
# calls (each well under its timeouts' sum when nothing hangs). Without OLD every step measures this
# checkout alone.
# 1 verdict rate: a real DRAM_BOUNCE stream, 1 x 1 (100k) and 4 processes x 4 threads (200k),
#   GDSDIAG_NODE_FACTS=0 so that the tracer's CPU is its own (trace_compat_rate.py)
# 2 verdict latency per route, stdout a pipe (trace_latency.py, each tree)
# 3 end after the program and after a signal, TERM under load, start with a new filter (trace_end.py)
# 4 overhead: 4 KiB page-cache preads with CUDA loaded, pinned (workload CPU 2, tracer CPU 3), 5 rounds
# 5 overhead: 4 KiB cuFileRead in compat mode, 3 rounds
# 6 start-up: bcc compile + load, with and without libcufile's USDT probes (trace_startup.py)
# 7 topology on a generated 1,360-function tree and check on this node, whole process, against OLD
set -u
source "$(dirname "$0")/gpu_common.sh" "${1:-/tmp/out}"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2}
TREES=(${OLDDIR:+"$OLDDIR"} "$PWD")
if wanted 1; then
  settle 40
  export GDSDIAG_NODE_FACTS=0
  compat_rate 1 bounce 1 1 100000 1 150
  compat_rate 1 bounce 4 4 200000 1 200
  unset GDSDIAG_NODE_FACTS
fi
if wanted 2; then
  log "2. verdict latency, every route (100 x 1 MiB, 20 ms apart, 4 s quiet tail)"
  for t in "${TREES[@]}"; do
    n=$(basename "$t")
    env -u PYTHONUNBUFFERED timeout 100 $PY benchmarks/trace_latency.py --tree "$t" \
      --routes host,host-copying,bounce,compat --n 100 --tail 4 >"$OUT/latency-$n.json" 2>"$OUT/latency-$n.err"
    log "  $n rc=$? $(tr -d '\n ' <"$OUT/latency-$n.json" | grep -o '"p99_s":[0-9.]*' | tr '\n' ' ')"; pack
  done
fi
if wanted 3; then
  log "3. end after the program, after TERM/INT/HUP, TERM under load; start with a new --comm"
  tr_args=(); for t in "${TREES[@]}"; do tr_args+=(--tree "$t"); done
  env -u PYTHONUNBUFFERED timeout 240 $PY benchmarks/trace_end.py --rounds 2 "${tr_args[@]}" \
    --out "$OUT/end.json" >"$OUT/end.txt" 2>"$OUT/end.err"
  log "  rc=$?"; tail -4 "$OUT/end.err" | tee -a "$OUT/run.log"; pack
fi
if wanted 4; then
  settle 40
  log "4. overhead: 4 KiB preads, 300k, CUDA loaded, 5 rounds, pinned"
  timeout 200 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 300000 --rounds 5 --cuda --cpus 2,3 \
    "${OLDV[@]}" --variant "new=$PWD" >"$OUT/overhead-posix.json" 2>"$OUT/overhead-posix.err"
  log "  rc=$?"; tail -3 "$OUT/overhead-posix.err" | tee -a "$OUT/run.log"; pack
fi
if wanted 5; then
  log "5. overhead: 4 KiB cuFileRead (compat), 50k, 3 rounds"
  timeout 150 $PY benchmarks/trace_overhead.py cufile --ops 50000 --rounds 3 "${OLDV[@]}" --variant "new=$PWD" \
    >"$OUT/overhead-cufile.json" 2>"$OUT/overhead-cufile.err"
  log "  rc=$?"; tail -3 "$OUT/overhead-cufile.err" | tee -a "$OUT/run.log"; pack
fi
if wanted 6; then
  log "6. start-up: compile + load of the probes (this checkout)"
  timeout 150 $PY benchmarks/trace_startup.py --rounds 2 >"$OUT/startup.json" 2>"$OUT/startup.err"
  log "  rc=$?"; tail -3 "$OUT/startup.json" | tee -a "$OUT/run.log"; pack
fi
if wanted 7; then
  log "7. topology (1,360 functions) and check, whole process, alternating with OLD"
  timeout 150 $PY benchmarks/topology_1000.py --runs 8 --dir /var/tmp ${OLDDIR:+--against "$OLDDIR"} \
    >"$OUT/topology.json" 2>"$OUT/topology.err"
  log "  topology rc=$?"; pack
  for r in 1 2 3; do  # check_live.py times one checkout: three rounds, the trees alternating
    for t in "${TREES[@]}"; do
      n=$(basename "$t")
      timeout 40 $PY benchmarks/check_live.py --runs 5 --code "$t" >"$OUT/check-$n-$r.json" 2>"$OUT/check-$n-$r.err"
      log "  check $n round $r rc=$? $(tr -d '\n ' <"$OUT/check-$n-$r.json" | grep -o '"\(best\|median\)_s":[0-9.]*' | tr '\n' ' ')"
    done
  done
  pack
fi
log "done"; pack
