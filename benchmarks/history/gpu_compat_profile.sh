#!/usr/bin/env bash
# Where a real COMPAT per-I/O stream's tracer CPU goes (issue 21), on the GPU machine: 100k x 4 KiB
# cuFileRead calls of one thread (gdsdiag's cffi bindings, libcufile's compat path) untraced, traced
# (gdsdiag's and the workload's user/system CPU from os.wait4, and a 100-call trace for the tracer's
# start and end), then traced under py-spy (sampling, --nonblocking: a blocking sampler stops the
# process and the kernel's verifier then refuses the load with EAGAIN). The py-spy wheel is carried
# in the kit's whl/ (pip download py-spy). Aggregate the samples with benchmarks/spy_top.py.
#   source .device/env.sh; [RATE=250] [SPY=path/to/py-spy] bash benchmarks/history/gpu_compat_profile.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
SPY=${SPY:-$(ls /tmp/site/bin/py-spy 2>/dev/null || command -v py-spy)}
W=$OUT/wl.py
cat > "$W" <<'X'
import os, resource, sys, time
import cupy as cp
import gdsdiag.cufile as cf
path, calls = sys.argv[1], int(sys.argv[2])
dev = cp.empty(4096, dtype=cp.uint8)
with cf.Driver(), cf.FileHandle(path, "r") as fh, cf.BufferRegistration(dev):
    t0 = time.monotonic()
    for i in range(calls):
        fh.read(dev, 4096, (i % 16384) * 4096)
    t = time.monotonic() - t0
r = resource.getrusage(resource.RUSAGE_SELF)
print("WL", calls, round(t, 3), r.ru_utime, r.ru_stime, file=sys.stderr)
X
cat > "$OUT/split.py" <<'X'
import os, subprocess, sys
out = sys.argv[1]
p = subprocess.Popen(sys.argv[2:], stdout=open(out, "w"), stderr=open(out + ".err", "w"))
_, st, ru = os.wait4(p.pid, 0)
wl = [x for x in open(out + ".err").read().split("\n") if x.startswith("WL")]
print("wait4 user", ru.ru_utime, "sys", ru.ru_stime, "|", wl)
X
f=/var/tmp/gdsdiag-compat-rate.dat; [ -f $f ] || head -c 67108864 /dev/urandom > $f
timeout 60 $PY -m gdsdiag trace --json --per-io -- $PY "$W" $f 100 >/dev/null 2>&1  # (fills the compiled-program cache)
log "untraced"; timeout 60 $PY "$OUT/split.py" "$OUT/plain.out" $PY "$W" $f 100000 | tee -a "$OUT/run.log"
log "traced, 100 calls (start and end)"; timeout 60 $PY "$OUT/split.py" "$OUT/short.out" $PY -m gdsdiag trace --json --per-io -- $PY "$W" $f 100 | tee -a "$OUT/run.log"
log "traced, 100k calls"; timeout 90 $PY "$OUT/split.py" "$OUT/traced.out" $PY -m gdsdiag trace --json --per-io -- $PY "$W" $f 100000 | tee -a "$OUT/run.log"
log "  verdict lines: $(grep -c '"type": "io"' "$OUT/traced.out")"
log "traced under py-spy (${RATE:-250} Hz)"
timeout 120 $SPY record --nonblocking -r ${RATE:-250} -f raw -o "$OUT0/spy-compat.txt" -- $PY -m gdsdiag trace --json --per-io -- $PY "$W" $f 100000 >"$OUT/spy.out" 2>"$OUT/spy.err"
log "  rc=$? $(grep WL "$OUT/spy.err")"; pack
