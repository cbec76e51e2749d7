#!/usr/bin/env bash
# Issue 21 on the GPU machine, one call: where the tracer's CPU goes on real per-I/O streams. A real
# stream costs it about twice what the same verdicts cost benchmarks/classify_verdicts.py's live loop
# (H100, 2026-12-06: COMPAT 11.3 against 4.8 µs a verdict, DRAM_BOUNCE 24.9 against 14.0). Per KIND
# (bounce, compat), trace_compat_rate.py's own workload, 100k x 4 KiB from one thread:
#  - the trace under cProfile (prof-KIND.out, read with pstats here);
#  - a 50k-call stream recorded (--record; rec-KIND.jsonl.gz), to replay and time on any machine;
#  - the tracer's CPU with OLD2's tree and this one, as trace_compat_rate measures it (1 round).
# SHAPE="PROCS THREADS" (default "1 1"), CALLS (profiled; default 100000; the recording half of it) and
# KINDS (default "bounce compat") choose the stream; the files are named KIND-PxT when SHAPE is given.
#   source .device/env.sh; OLD2=.gpu-old2 [STEPS="1 2 3"] [SHAPE="4 4" CALLS=200000 KINDS=bounce] \
#     bash benchmarks/history/gpu_stream_profile.sh $OUT
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/../gpu_common.sh" "$FINAL"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d 2>/dev/null; done
STEPS=${STEPS:-1 2 3}
compat_workload
read -r NP NT <<<"${SHAPE:-1 1}"
CALLS=${CALLS:-100000}
for kind in ${KINDS:-bounce compat}; do
  tag=$kind${SHAPE:+-${NP}x$NT}
  if wanted 1; then
    log "1. $tag: the trace under cProfile, $CALLS calls"
    rm -f "$OUT/prof-$tag.jsonl"
    env -u PYTHONUNBUFFERED timeout 120 $PY benchmarks/profile_command.py "$OUT/prof-$tag.out" -- trace --json --per-io \
      -o "$OUT/prof-$tag.jsonl" -- $PY $WL $DAT $CALLS 4096 /tmp/truth-p.json $NP $kind $NT >/dev/null 2>"$OUT/prof-$tag.err"
    log "  rc=$? $(cat /tmp/truth-p.json) verdicts $(grep -c '"type": "io"' "$OUT/prof-$tag.jsonl")"
    rm -f "$OUT/prof-$tag.jsonl"; pack
  fi
  if wanted 2; then
    log "2. $tag: the stream recorded, $((CALLS / 2)) calls"
    rm -f "$FINAL/rec-$tag.jsonl" "$OUT/rec-$tag.out"  # (beside results.tgz: the device returns 16 MiB a file)
    env -u PYTHONUNBUFFERED timeout 120 $PY -m gdsdiag trace --json --per-io --record "$FINAL/rec-$tag.jsonl" \
      -o "$OUT/rec-$tag.out" -- $PY $WL $DAT $((CALLS / 2)) 4096 /tmp/truth-r.json $NP $kind $NT >/dev/null 2>"$OUT/rec-$tag.err"
    log "  rc=$? $(cat /tmp/truth-r.json) verdicts $(grep -c '"type": "io"' "$OUT/rec-$tag.out")"
    gzip -f "$FINAL/rec-$tag.jsonl"; rm -f "$OUT/rec-$tag.out"; pack
  fi
done
if wanted 3; then
  [ -n "${OLD2:-}" ] && OLDT=(--tree "$(cd "$OLD2" && pwd)")
  compat_rate 3 compat 1 1 30000 1 90
fi
log "done"
