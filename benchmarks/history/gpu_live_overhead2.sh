#!/usr/bin/env bash
# The second GPU call of issue 21's measurements (after gpu_live_overhead.sh): more rounds of the
# overhead pairs (the untraced rate itself moved 0.67-1.05 M/s between runs there), the COMPAT
# verdict latency and the cuFile workload (these need the kit's cffi wheel):
#   source .device/env.sh; OLD=.gpu-old bash benchmarks/history/gpu_live_overhead2.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
OLDV=()
if [ -n "${OLD:-}" ] && [ -d "$OLD/gdsdiag" ]; then OLDV=(--variant "old=$(cd "$OLD" && pwd)"); fi
summ() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("median")))' "$1" 2>&1 | tee -a "$OUT/run.log"; }
gds_udev_entry /var/tmp 2>/dev/null
log "1. trace_latency.py compat, bounce (100 I/Os 20 ms apart)"
timeout 30 $PY benchmarks/trace_latency.py --routes compat,bounce --n 100 >"$OUT/latency2.json" 2>"$OUT/latency2.err"
log "  rc=$?"; cut -c1-400 "$OUT/latency2.err" | tee -a "$OUT/run.log"; pack
log "2. the cuFile workload traced (its batch of 8 reads: the probe's batch loop)"
mkdir -p /var/tmp/tw && gds_udev_entry /var/tmp/tw 2>/dev/null
timeout 25 $PY -m gdsdiag trace --json -- $PY tests/workloads/cufile_workload.py /var/tmp/tw >"$OUT/cufile-workload.json" 2>"$OUT/cufile-workload.err"
log "  rc=$? $($PY -c '
import json, sys, collections
ios = [json.loads(x) for x in open(sys.argv[1]) if x.startswith("{\"type\": \"io\"")]
print(collections.Counter((v["api"], v["route"], v["size"]) for v in ios if v["path"] and "gdsdiag-trace-workload" in v["path"]).most_common())
' "$OUT/cufile-workload.json" 2>&1 | cut -c1-700)"
pack
log "3. trace_overhead.py posix 4 KiB 400k counted, 5 rounds"
timeout 45 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 400000 --rounds 5 --variant new=. "${OLDV[@]}" >"$OUT/overhead-counted2.json" 2>"$OUT/overhead-counted2.err"
log "  rc=$?"; summ "$OUT/overhead-counted2.json"; pack
log "4. trace_overhead.py posix 4 KiB 200k, CUDA loaded, 3 rounds"
timeout 55 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 200000 --rounds 3 --cuda --variant new=. "${OLDV[@]}" >"$OUT/overhead-cuda2.json" 2>"$OUT/overhead-cuda2.err"
log "  rc=$?"; summ "$OUT/overhead-cuda2.json"; pack
log "done"
