#!/usr/bin/env bash
# Issue 10's two open questions plus the GPU tests, in one GPU-machine call:
#   source .device/env.sh; bash benchmarks/history/gpu_async_zero.sh $OUT
# 1. tests/test_cufile_gpu.py and tests/test_sweep_gpu.py (real libcufile, real H200).
# 2. The cufile-async verified-read mismatch: a reproducer outside the sweep and the three buffer
#    layouts (GDSDIAG_SWEEP_ASYNC_BUFFERS); ASYNC_VARIANTS=1 adds the failing command, then one change at a time
#    (threads, iodepth, blocking streams, block size) and cufile-batch as the control. The
#    mismatch report now names whose bytes were found (tests/test_sweep_queued.py).
# 3. The 0-IOPS points: cold processes (fresh CuPy kernel cache) of the issue's command with
#    GDSDIAG_SWEEP_DEBUG=1 (each worker's setup / warm-up / run times), and the same command on the
#    sweep as the issue measured it (OLD=dir of that tree, e.g. commit 302c85b), to see whether a
#    worker's first cuFile I/O is what ate the old timed window.
# Each step is time-boxed; everything goes into $OUT/raw, packed into $OUT/results.tgz after
# each step (the device returns a few files per call).
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
BUDGET=${BUDGET:-480}; START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
D=${D:-/var/tmp/gds-async}; mkdir -p $D; gds_udev_entry $D >/dev/null 2>&1; gds_udev_entry /tmp >/dev/null 2>&1
machine_line
$PY -c 'from gdsdiag.sweep import native; l, w = native.load(); print("C loop:", "built" if l else "NOT built: " + str(w))' 2>&1 | tee -a "$OUT/run.log"

if [ -z "${SKIP_TESTS:-}" ]; then
  log "GPU tests"
  timeout 240 $PY -m pytest -v -p no:cacheprovider tests/test_cufile_gpu.py tests/test_sweep_gpu.py >"$OUT/gpu-tests.txt" 2>&1
  echo "rc=$?" >>"$OUT/gpu-tests.txt"; tail -3 "$OUT/gpu-tests.txt" | tee -a "$OUT/run.log"; grep -E "FAILED|ERROR" "$OUT/gpu-tests.txt" | head -20 | tee -a "$OUT/run.log"; pack
fi

# sw NAME ARGS...: one verified sweep, its verdict line into run.log
sw() { local name=$1; shift
  if [ "$(left)" -lt 30 ]; then log "SKIP $name: $(left) s left"; return; fi
  log "sweep $name: ${ENVS:-} $*"
  env ${ENVS:-} GDSDIAG_SWEEP_DEBUG=1 timeout 60 $PY -m gdsdiag sweep --dir $D --size ${SIZE:-512M} --time ${T:-2s} --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.txt"
  echo "rc=$?" >>"$OUT/$name.txt"
  $PY - "$OUT/$name.json" <<'PY' 2>&1 | tee -a "$OUT/run.log"
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("  (no JSON:", e, ")"); sys.exit()
for p in doc.get("points", []):
    s = p.get("summary") or {}
    print(f"  {p.get('mode')} {p.get('rw')} bs={p.get('bs')} thr={p.get('threads')} qd={p.get('iodepth')}: "
          f"{s.get('iops')} IOPS {s.get('gbps')} GB/s verified {p.get('verified_bytes')} error {p.get('error')}"
          f" loop {(p.get('loop') or {}).get('engine')}")
    f = p.get("fio")
    if f:
        print("    fio:", {k: f.get(k) for k in ("gbps", "iops", "ratio", "ratio_gbps", "ratio_iops") if k in f} or str(f)[:300])
PY
  grep -E "^rc=|error|mismatch" "$OUT/$name.txt" | grep -v "error kind" | tail -3 | tee -a "$OUT/run.log"; pack; }

# old_sw NAME SIZE ARGS...: cufile read x 4 threads, 4 s, --no-verify, on the OLD tree (CACHE=1: fresh CuPy cache)
old_sw() { local name=$1 size=$2; shift 2
  log "old sweep ($OLD) $name: --size $size --mode cufile --rw read --threads 4 --time 4s --no-verify $*"
  ( cd $OLD && env ${CACHE:+CUPY_CACHE_DIR=$(mktemp -d)} PYTHONPATH=$PWD:${PYTHONPATH#*:} timeout 90 $PY -m gdsdiag sweep --dir $D --size $size --time 4s --mode cufile --rw read --threads 4 --no-verify --json "$@" ) >"$OUT/$name.json" 2>"$OUT/$name.txt"
  echo "rc=$?" >>"$OUT/$name.txt"
  $PY -c '
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("  old: no JSON:", e); sys.exit()
for p in doc.get("points", []):
    s = p.get("summary") or {}
    print("  old", p.get("mode"), p.get("bs"), p.get("threads"), {k: s.get(k) for k in ("ops", "iops", "gbps")}, p.get("error"))
' "$OUT/$name.json" 2>&1 | tee -a "$OUT/run.log"; grep -E "^rc=|rror" "$OUT/$name.txt" | tail -3 | tee -a "$OUT/run.log"; pack; }

if [ -z "${SKIP_LAYOUTS:-}" ]; then
  log "reproducer outside the sweep: benchmarks/history/cufile_async_repro.py"
  timeout 120 $PY benchmarks/history/cufile_async_repro.py $D --rounds 20 2>&1 | tee "$OUT/repro.txt" | tee -a "$OUT/run.log"; pack
  for lay in shared based separate; do
    ENVS=GDSDIAG_SWEEP_ASYNC_BUFFERS=$lay sw l_${lay}_r1m --mode cufile-async --rw read --bs 1m --threads 2 --iodepth 8
    ENVS=GDSDIAG_SWEEP_ASYNC_BUFFERS=$lay sw l_${lay}_w1m --mode cufile-async --rw write --bs 1m --threads 2 --iodepth 8
    ENVS=GDSDIAG_SWEEP_ASYNC_BUFFERS=$lay sw l_${lay}_r4k --mode cufile-async --rw read --bs 4k --threads 2 --iodepth 8
  done
fi

if [ -n "${ASYNC_VARIANTS:-}" ]; then
  sw a_repro1 --mode cufile-async --rw read --bs 1m --threads 2 --iodepth 8
  sw a_repro2 --mode cufile-async --rw read --bs 1m --threads 2 --iodepth 8
  sw a_thr1 --mode cufile-async --rw read --bs 1m --threads 1 --iodepth 8
  sw a_qd2 --mode cufile-async --rw read --bs 1m --threads 2 --iodepth 2
  sw a_qd1 --mode cufile-async --rw read --bs 1m --threads 2 --iodepth 1
  ENVS=GDSDIAG_SWEEP_STREAMS=blocking sw a_blocking --mode cufile-async --rw read --bs 1m --threads 2 --iodepth 8
  sw a_4k --mode cufile-async --rw read --bs 4k --threads 2 --iodepth 8
  sw b_control --mode cufile-batch --rw read --bs 1m --threads 2 --iodepth 8
  sw a_write --mode cufile-async --rw write --bs 1m --threads 2 --iodepth 8
fi

if [ -z "${SKIP_ZERO:-}" ]; then
  for i in 1 2 3; do
    ENVS="CUPY_CACHE_DIR=$(mktemp -d)" T=4s sw z_new$i --mode cufile --rw read --bs 4k,1m --threads 4 --no-verify
    grep "gdsdiag sweep worker" "$OUT/z_new$i.txt" | head -8 | tee -a "$OUT/run.log"
  done
  if [ -n "${OLD:-}" ] && [ -d "$OLD" ]; then
    for i in 1 2 3; do
      if [ "$(left)" -lt 40 ]; then log "SKIP old$i"; break; fi
      CACHE=1 old_sw z_old$i ${SIZE:-512M} --bs 4k,1m
    done
  fi
fi
# CMP=1: cufile 1 MiB x 4 threads (the goal table's miss), interleaved: the C loop with fio's libcufile
# job before and after it, the Python loop (GDSDIAG_PYTHON_LOOP=1), and the old tree (OLD);
# ROUNDS=N rounds (3), CT=point time of the C-loop points (4s), C_ONLY=1 only the C loop and fio
if [ -n "${CMP:-}" ]; then
  ( gds_build_fio ) 2>&1 | tail -1 | tee -a "$OUT/run.log"; export GDSDIAG_FIO=/tmp/fio/fio
  for i in $(seq ${ROUNDS:-3}); do
    SIZE=2G T=${CT:-4s} sw c_new$i --mode cufile --rw read --bs 1m --threads 4 --no-verify --compare-fio
    [ -n "${C_ONLY:-}" ] && continue
    ENVS=GDSDIAG_PYTHON_LOOP=1 SIZE=2G T=4s sw c_py$i --mode cufile --rw read --bs 1m --threads 4 --no-verify
    if [ -n "${OLD:-}" ] && [ "$(left)" -gt 40 ]; then
      old_sw c_old$i 2G --bs 1m
    fi
  done
fi
log "done, $(left) s left of $BUDGET"
pack
