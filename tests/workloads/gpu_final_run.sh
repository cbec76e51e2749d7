#!/usr/bin/env bash
# One GPU-machine call for the trace issues: the loaders (gpu_loaders_run.sh, scored against their own
# ground truth), the workloads that must keep working (gpu_trace_run.sh: fio cuFile/POSIX forked, fio
# psync, kvikio both modes, CuPy, torch.load), and kvikio through cuFile with libcufile 1.20 (a wheel
# carried in .whl/) beside 1.15. From the repository root there:
#   source .device/env.sh; bash tests/workloads/gpu_final_run.sh $OUT
set -u
FINAL=${1:-/tmp/out}; mkdir -p "$FINAL"
T0=$(date +%s)
timeout 330 bash tests/workloads/gpu_loaders_run.sh "$FINAL" > "$FINAL/loaders.log" 2>&1
echo "loaders rc=$? at $(( $(date +%s) - T0 )) s" >> "$FINAL/final.txt"
ONLY="fio-cufile-forked fio-posix-forked fio-psync kvikio-compat-on kvikio-compat-off cupy-load torch-load torch-load-mmap" \
  SKIP_OVERHEAD=1 TESTS=none timeout 150 bash tests/workloads/gpu_trace_run.sh "$FINAL" > "$FINAL/apps.log" 2>&1
echo "apps rc=$? at $(( $(date +%s) - T0 )) s" >> "$FINAL/final.txt"
# kvikio through cuFile, libcufile 1.20 (kvikio dlopens libcufile.so.0: LD_LIBRARY_PATH picks the copy)
W=/tmp/cuf120; rm -rf $W; mkdir -p $W /var/tmp/k120
w=$(ls .whl/nvidia_cufile-1.20*.whl 2>/dev/null | head -1)
if [ -n "$w" ]; then
  python3 -m zipfile -e "$w" $W >/dev/null 2>&1
  lib=$(dirname "$(ls $W/nvidia/*/lib/libcufile.so.0 | head -1)")
  for v in 120 115; do
    if [ $v = 120 ]; then ld=$lib:${LD_LIBRARY_PATH:-}; else ld=${LD_LIBRARY_PATH:-}; fi
    LD_LIBRARY_PATH=$ld KVIKIO_COMPAT_MODE=OFF timeout 40 python3 -m gdsdiag trace --json --record /tmp/k$v.rec.jsonl -- python3 tests/workloads/kvikio_load.py /var/tmp/k120 > /tmp/k$v.jsonl 2> /tmp/k$v.err
    echo "kvikio libcufile $v rc=$?: $(grep -c '"route": "COMPAT"' /tmp/k$v.jsonl) COMPAT lines, confidence $(grep -o '"confidence": "[a-z]*"' /tmp/k$v.jsonl | sort | uniq -c | tr '\n' ' ')" >> "$FINAL/final.txt"
    grep '"type": "summary"' /tmp/k$v.jsonl | python3 -c 'import sys,json; s=json.loads(sys.stdin.read()); print("  libraries:", [(l["path"], l["usdt"], l["uprobes"]) for l in s["libraries"]])' >> "$FINAL/final.txt" 2>&1
    gzip -f /tmp/k$v.rec.jsonl
  done
  tar -C /tmp -czf "$FINAL/k120.tar.gz" k120.rec.jsonl.gz k115.rec.jsonl.gz k120.jsonl k115.jsonl k120.err k115.err 2>/dev/null
fi
echo "all done at $(( $(date +%s) - T0 )) s" >> "$FINAL/final.txt"
cat "$FINAL/final.txt"
