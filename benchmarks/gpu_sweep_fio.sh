#!/usr/bin/env bash
# Issue 46 goal 5 on the GPU machine: cufile 1 MiB x 4 threads against fio's libcufile engine like for
# like — the same open file, the same size, O_DIRECT, libcufile's compat path (no nvidia-fs there) —
# in ROUNDS (5) interleaved repetitions, each `gdsdiag sweep --compare-fio` (fio's equivalent job just
# before and just after the point on the sweep's own file: gdsdiag/sweep/fio.py), for each worker kind
# against the fio kind that matches it (threads vs fio --thread, a process per worker vs fio's forked
# jobs), with verification on and off; the ratios per setting (median, spread) at the end
# (benchmarks/sweep_fio_rounds.py). fio 3.33 is built from the kit's source with its libcufile engine.
#   source .device/env.sh; [OLD=.gpu-old] [ROUNDS=5] [SECS=2s] bash benchmarks/gpu_sweep_fio.sh $OUT
# The kit must carry fio's source (.device/fio_3.33.orig.tar.gz: make-kit.sh without --no-fio);
# KIT=DIR names another kit folder (e.g. .devgpu). OLD=DIR (an older tree's gdsdiag/ csrc/ probes/)
# runs the same sweeps of that tree in every round, beside this one.
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/gpu_common.sh" "$FINAL"
machine_line
OUT=$(cd "$OUT" && pwd)  # absolute: each sweep runs from /
ROUNDS=${ROUNDS:-5}; T=${SECS:-2s}; SIZE=${SIZE:-1G}  # ~15 s a sweep: 20 sweeps (30 with OLD) in 5-8 min
# the kit: KIT, else .device (what gpu_common.sh sources), ../.device or .devgpu; fio's source is
# looked for in the same folders (the first that has fio_*.orig.tar.gz)
ENVKIT=; SRCKIT=
for k in ${KIT:-} .device ../.device .devgpu; do
  [ -z "$ENVKIT" ] && [ -f "$k/env.sh" ] && ENVKIT=$k
  [ -z "$SRCKIT" ] && ls "$k"/fio_*.orig.tar.gz >/dev/null 2>&1 && SRCKIT=$k
done
# gpu_common.sh sources .device/env.sh; a kit under another name (KIT=.devgpu) is sourced here
if ! type gds_udev_entry >/dev/null 2>&1 && [ -n "$ENVKIT" ]; then
  source "$ENVKIT/env.sh"; BASE_PYTHONPATH=${PYTHONPATH:-}; export PYTHONPATH=$PWD${BASE_PYTHONPATH:+:$BASE_PYTHONPATH}
fi
log "1. fio from the kit's source (kit ${ENVKIT:-none}, fio source in ${SRCKIT:-none of $KIT .device ../.device .devgpu})"
[ -n "$SRCKIT" ] && ( timeout 300 bash -c "source ${ENVKIT:-$SRCKIT}/env.sh >/dev/null 2>&1; gds_build_fio $SRCKIT" ) 2>&1 | tail -2 | tee -a "$OUT/run.log"
[ -x /tmp/fio/fio ] || { log "no fio: the kit carries no fio_*.orig.tar.gz (make-kit.sh without --no-fio), or its build failed (/tmp/fio-src/*.log)"; cp /tmp/fio-src/*.log "$OUT/" 2>/dev/null; pack; exit 3; }
export GDSDIAG_FIO=/tmp/fio/fio
log "fio: $($GDSDIAG_FIO --version), libcufile engine: $($GDSDIAG_FIO --enghelp 2>&1 | grep -c libcufile)"
D=/var/tmp/gdsdiag-sweep-fio; rm -rf $D; mkdir -p $D; gds_udev_entry $D 2>/dev/null
log "dir $D on $(df -h --output=source,fstype $D | tail -1)"
$PY -c 'from gdsdiag.sweep import native; l, w = native.load(); print("C loop:", "built" if l else "NOT built: " + str(w))' 2>&1 | tee -a "$OUT/run.log"
mkdir -p "$OUT/rounds"
# one sweep: TAG (tree-setting) ROUND PYTHONPATH-tree WORKERS VERIFY-ARG
one() {
  local tag=$1 r=$2 tree=$3 workers=$4 ver=$5
  settle 5
  # from / : `python -m` puts the working directory first on sys.path, which would shadow OLD's tree
  (cd / && PYTHONPATH=$tree${BASE_PYTHONPATH:+:$BASE_PYTHONPATH} timeout 240 $PY -m gdsdiag sweep --dir $D --size $SIZE \
    --time $T --mode cufile --rw read --bs 1m --threads 4 --workers $workers --compare-fio $ver --json \
    >"$OUT/rounds/$tag-r$r.json" 2>"$OUT/rounds/$tag-r$r.err")
  log "  $tag round $r: rc=$? $(grep -o '÷fio.*' "$OUT/rounds/$tag-r$r.err" | tail -1)"
}
for r in $(seq 1 "$ROUNDS"); do
  log "2. round $r of $ROUNDS"
  # the order turns every round, so no setting always follows the same one
  if [ $((r % 2)) = 1 ]; then order="thread process"; else order="process thread"; fi
  for w in $order; do
    one "new-$w-verify" "$r" "$PWD" "$w" ""
    one "new-$w-noverify" "$r" "$PWD" "$w" "--no-verify"
    [ -n "$OLDDIR" ] && one "old-$w-verify" "$r" "$OLDDIR" "$w" ""
  done
  pack
done
log "3. ratios (sweep GB/s / fio GB/s of the same point, fio before and after it)"
$PY benchmarks/sweep_fio_rounds.py "$OUT/rounds" | tee -a "$OUT/run.log"
$PY benchmarks/sweep_fio_rounds.py "$OUT/rounds" -v >"$OUT/rounds-detail.txt"
log "done"; pack
