#!/usr/bin/env bash
# Issue 21 on the GPU machine, old and new side by side in one call (timeouts sum to 384 s; ~260 s expected):
#   source .device/env.sh; OLD=.gpu-old bash benchmarks/history/gpu_live_overhead.sh $OUT
# OLD: a copy of the tree before the change (git archive <base> gdsdiag probes | tar -x -C DIR), the
# baseline of every step; "classic" is this tree with GDSDIAG_RAW_SYSCALLS=0 (raw_syscalls
# tracepoints instead of raw tracepoints), to split the two kernel-side changes.
# 1. trace_prog_cost.py: the probes' own BPF run time per syscall and the workload's CPU per 4 KiB
#    pread, counted in the kernel and with CUDA loaded (cuInit: every read sent to Python);
# 2. trace_overhead.py posix 4 KiB full speed, counted and --cuda (the goal: >= 0.90, 0 lost at
#    >= 700k/s with CUDA loaded), and --cuda paced at 100k/s (goal >= 0.97);
# 3. trace_end.py --load-only: SIGTERM -> summary under --per-io load, its phases (startup_s stop_*);
# 4. trace_latency.py: verdict latency per route (HOST, DRAM_BOUNCE through cudaMemcpy, COMPAT);
# 5. first compile (no cache), old and new: where the start goes;
# 6. tests/test_trace_end.py and tests/test_trace_lost.py.
# Every step under `timeout`; results in $OUT/raw, packed into $OUT/results.tgz after each step.
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
OLDV=()
if [ -n "${OLD:-}" ] && [ -d "$OLD/gdsdiag" ]; then OLDV=(--variant "old=$(cd "$OLD" && pwd)"); fi
NEWV=(--variant "classic=.,GDSDIAG_RAW_SYSCALLS=0" --variant "new=.")
summ() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("median")))' "$1" 2>&1 | tee -a "$OUT/run.log"; }

log "0. fentry/fexit here? (a KFUNC_PROBE on __x64_sys_pread64 loaded and attached)"
timeout 15 $PY - <<'PYEOF' 2>&1 | tail -2 | tee -a "$OUT/run.log"
from gdsdiag.trace.probes.bpf import import_bcc
bcc = import_bcc()
try:
    b = bcc.BPF(text="KFUNC_PROBE(__x64_sys_pread64) { return 0; }\nKRETFUNC_PROBE(__x64_sys_pread64) { return 0; }")
    print("fentry/fexit: loaded and attached", list(b.kfunc_entry_fds) + list(b.kfunc_exit_fds))
    b.cleanup()
except Exception as e:
    print("fentry/fexit: refused:", type(e).__name__, str(e).strip().splitlines()[-1][:200] if str(e).strip() else "")
PYEOF
pack

log "1a. trace_prog_cost.py counted (4 KiB preads, 300k)"
timeout 55 $PY benchmarks/trace_prog_cost.py --rounds 3 --ops 300000 "${OLDV[@]}" "${NEWV[@]}" >"$OUT/prog-cost-counted.json" 2>"$OUT/prog-cost-counted.err"
log "  rc=$?"; summ "$OUT/prog-cost-counted.json"; pack
log "1b. trace_prog_cost.py --cuda (cuInit first: every read sent)"
timeout 45 $PY benchmarks/trace_prog_cost.py --rounds 2 --ops 300000 --cuda "${OLDV[@]}" --variant new=. >"$OUT/prog-cost-cuda.json" 2>"$OUT/prog-cost-cuda.err"
log "  rc=$?"; summ "$OUT/prog-cost-cuda.json"; pack

log "2a. trace_overhead.py posix 4 KiB 400k, counted in the kernel"
timeout 40 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 400000 --rounds 3 "${OLDV[@]}" --variant new=. >"$OUT/overhead-counted.json" 2>"$OUT/overhead-counted.err"
log "  rc=$?"; summ "$OUT/overhead-counted.json"; pack
log "2b. trace_overhead.py posix 4 KiB 300k, CUDA loaded (per I/O)"
timeout 50 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 300000 --rounds 2 --cuda --variant new=. "${OLDV[@]}" >"$OUT/overhead-cuda.json" 2>"$OUT/overhead-cuda.err"
log "  rc=$?"; summ "$OUT/overhead-cuda.json"; pack
log "2c. trace_overhead.py posix 4 KiB paced at 100k/s, 200k, CUDA loaded"
timeout 35 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 200000 --rate 100000 --rounds 2 --cuda --variant new=. "${OLDV[@]}" >"$OUT/overhead-cuda-100k.json" 2>"$OUT/overhead-cuda-100k.err"
log "  rc=$?"; summ "$OUT/overhead-cuda-100k.json"; pack

log "3. trace_end.py --load-only (SIGTERM under --per-io load), new 3 rounds, old 1"
timeout 25 $PY benchmarks/trace_end.py --load-only --rounds 3 --tree . --out "$OUT/term-load-new.json" >/dev/null 2>"$OUT/term-load-new.err"
log "  new rc=$?"; grep '"round"' "$OUT/term-load-new.err" | cut -c1-600 | tee -a "$OUT/run.log"
if [ -n "${OLD:-}" ]; then
  timeout 15 $PY benchmarks/trace_end.py --load-only --rounds 1 --tree "$OLD" --out "$OUT/term-load-old.json" >/dev/null 2>"$OUT/term-load-old.err"
  log "  old rc=$?"; grep '"round"' "$OUT/term-load-old.err" | cut -c1-400 | tee -a "$OUT/run.log"
fi
pack

log "4. trace_latency.py (host, bounce, compat; 100 I/Os 20 ms apart)"
gds_udev_entry /var/tmp 2>/dev/null
timeout 35 $PY benchmarks/trace_latency.py --n 100 >"$OUT/latency.json" 2>"$OUT/latency.err"
log "  rc=$?"; cat "$OUT/latency.err" | cut -c1-400 | tee -a "$OUT/run.log"; pack

log "4b. the cuFile workload traced (its batch of 8 reads: the probe's batch loop), new tree"
mkdir -p /var/tmp/tw && gds_udev_entry /var/tmp/tw 2>/dev/null
timeout 25 $PY -m gdsdiag trace --json -- $PY tests/workloads/cufile_workload.py /var/tmp/tw >"$OUT/cufile-workload.json" 2>"$OUT/cufile-workload.err"
log "  rc=$? $($PY -c '
import json, sys, collections
ios = [json.loads(x) for x in open(sys.argv[1]) if x.startswith("{\"type\": \"io\"")]
print(collections.Counter((v["api"], v["route"], v["size"]) for v in ios if v["path"] and "gdsdiag-trace-workload" in v["path"]).most_common())
' "$OUT/cufile-workload.json" 2>&1 | cut -c1-600)"
pack

log "5. first compile (GDSDIAG_BPF_CACHE=0), old and new"
for t in ${OLD:-} .; do
  t0=$(date +%s.%N)
  (cd "$t" && GDSDIAG_BPF_CACHE=0 PYTHONPATH=$(pwd)${BASE_PYTHONPATH:+:$BASE_PYTHONPATH} timeout 12 $PY -m gdsdiag trace --json -- true >"$OUT/compile-$(basename "$t").json" 2>"$OUT/compile-$(basename "$t").err")
  log "  $t: rc=$? wall $(awk "BEGIN{print $(date +%s.%N) - $t0}") s; $(grep -o 'live after [0-9.]* s' "$OUT/compile-$(basename "$t").err"); $($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["startup_s"])' "$OUT/compile-$(basename "$t").json" 2>&1 | cut -c1-300)"
done
pack

log "6. tests/test_trace_end.py tests/test_trace_lost.py"
timeout 35 $PY -m pytest -q -p no:cacheprovider tests/test_trace_end.py tests/test_trace_lost.py >"$OUT/tests.txt" 2>&1
echo "rc=$?" >>"$OUT/tests.txt"
tail -3 "$OUT/tests.txt" | tee -a "$OUT/run.log"
pack
log "done"
