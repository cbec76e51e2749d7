#!/usr/bin/env bash
# Issue 21 (gdsdiag trace live) and issue 24 item 7 on the GPU machine, in one call (< 200 s):
#   source .device/env.sh; [OLD=.gpu-old] bash benchmarks/history/gpu_live.sh $OUT
# OLD: a copy of the tree before the change, for the baseline in the same run (made here with
#   git archive 445cc82 gdsdiag probes | tar -x -C .gpu-old); without it the old figures are skipped.
# 1. start: a first compile (an empty compiled-program cache: HOME of its own) and the cached start,
#    then two more filters (--comm, --cgroup) that must not compile again;
# 2. benchmarks/trace_end.py: `trace -- true` whole command, exit -> summary, INT/TERM/HUP and a
#    double TERM -> summary with a traced tree that ignores TERM (tree_left must be 0), TERM under
#    --per-io load (one round); the old tree: `trace -- true` once, whole command and its end (the
#    wall time after "live": ~20 s there, so only this);
# 3. what is attached: uprobe_multi links vs perf-event uprobes, probes detached and how long;
# 4. benchmarks/trace_overhead.py posix (counted in the kernel) and --per-io, one round each;
# 5. tests/test_trace_end.py (the end, signals, the tree, nothing left in the kernel).
# Every step under `timeout` (their sum 179 s; ~95 s on the 2-vCPU dev VM); results in $OUT/raw, packed into
# $OUT/results.tgz after each step.
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
base=$BASE_PYTHONPATH
machine_line
command -v bpftool >/dev/null && log "bpftool: $(bpftool version 2>&1 | head -1)" || log "bpftool: not installed"

log "1. start: first compile, cached, and new filter values (no compile)"
home=$(mktemp -d /tmp/gdsdiag-home.XXXXXX)
for run in compile cached comm cgroup; do
  extra=()
  [ $run = comm ] && extra=(--comm "bench$RANDOM")
  [ $run = cgroup ] && extra=(--cgroup /)
  lim=7; [ $run = compile ] && lim=20
  t0=$(date +%s.%N)
  HOME=$home timeout $lim $PY -m gdsdiag trace --json "${extra[@]}" -- true >"$OUT/start-$run.json" 2>"$OUT/start-$run.err"
  rc=$?
  t1=$(date +%s.%N)
  su=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["startup_s"])' "$OUT/start-$run.json" 2>&1)
  log "  $run: rc=$rc wall $(awk "BEGIN{print $t1 - $t0}") s; $(grep -o 'live after [0-9.]* s' "$OUT/start-$run.err"); startup_s $su"
done
rm -rf "$home"
pack

log "2. trace_end.py (new tree, 1 round)"
timeout 32 $PY benchmarks/trace_end.py --rounds 1 --tree . --out "$OUT/trace_end-new.json" 2>"$OUT/trace_end-new.err" >/dev/null
log "  rc=$?"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); [print("  ", k, v) for t in d["trees"].values() for k, v in t["median"].items()]' \
  "$OUT/trace_end-new.json" 2>&1 | tee -a "$OUT/run.log"
pack
if [ -n "${OLD:-}" ] && [ -d "$OLD/gdsdiag" ]; then
  # once (its first start compiles its own program text): the end is the wall time after "live"
  log "2b. old tree $OLD: trace -- true, whole command"
  old=$(cd "$OLD" && pwd)
  t0=$(date +%s.%N)
  (cd "$old" && PYTHONPATH=$old${base:+:$base} timeout 32 $PY -m gdsdiag trace -- true >"$OUT/old-true.txt" 2>&1)
  rc=$?
  wall=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  live=$(grep -o 'live after [0-9.]*' "$OUT/old-true.txt" | grep -o '[0-9.]*$')
  log "  old: rc=$rc wall $wall s; live after ${live:-?} s; so its end took $(awk "BEGIN{print $wall - ${live:-0}}") s"
  pack
else
  log "2b. no OLD tree: old figures skipped"
fi

log "3. what is attached, and the detach"
timeout 12 $PY - <<'PY' 2>&1 | tee -a "$OUT/run.log"
import os, time
from gdsdiag.platform.libcufile import locate
from gdsdiag.trace.probes.bpf import Probes
for um in ("1", "0"):
    os.environ["GDSDIAG_UPROBE_MULTI"] = um
    t = time.monotonic()
    p = Probes([locate().path] if locate().path else [], [os.getpid()], trace_all=False)
    att = time.monotonic() - t
    links = len(p._um.links) if p._um else 0
    perf = len(p.b.uprobe_fds)
    tps = len(p.b.tracepoint_fds)
    notes = [f for f in p.failed if "uprobe_multi" in f or "ring" in f]
    p.close()
    print(f"  GDSDIAG_UPROBE_MULTI={um}: uprobe_multi links {links}, perf uprobes {perf}, tracepoints {tps}, "
          f"setup {att:.2f} s, detach {p.timing['detach_s']:.2f} s {notes}")
PY
pack

log "4. trace_overhead.py posix (kernel-counted) and --per-io, 1 round each"
timeout 12 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 400000 --rounds 1 >"$OUT/overhead-posix.json" 2>&1
log "  posix rc=$? $(tail -c 600 "$OUT/overhead-posix.json" | tr '\n' ' ')"
timeout 20 $PY benchmarks/trace_overhead.py posix --bs 4096 --ops 100000 --rounds 1 --per-io >"$OUT/overhead-perio.json" 2>&1
log "  per-io rc=$? $(tail -c 600 "$OUT/overhead-perio.json" | tr '\n' ' ')"
pack

log "5. tests/test_trace_end.py"
timeout 30 $PY -m pytest -q -p no:cacheprovider tests/test_trace_end.py >"$OUT/tests.txt" 2>&1
echo "rc=$?" >>"$OUT/tests.txt"
tail -3 "$OUT/tests.txt" | tee -a "$OUT/run.log"
pack
log "done"
