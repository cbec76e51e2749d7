# Sourced by the benchmarks/gpu_*.sh scripts (GPU machine): $1 is the device's $OUT. Sets OUT (a deep
# folder: the device returns only a few files, so the raw outputs are packed), log, pack, PY, the
# kit's environment (bcc, wheels, gds_udev_entry), libcufile's directory on LD_LIBRARY_PATH and this
# checkout first on PYTHONPATH (BASE_PYTHONPATH keeps what the kit set).
OUT0=${1:-/tmp/out}; OUT=$OUT0/k/e/e/p/raw; mkdir -p "$OUT"
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
pack() { tar -C "$OUT" -czf "$OUT0/results.tgz.tmp" . && mv "$OUT0/results.tgz.tmp" "$OUT0/results.tgz"; cp "$OUT/run.log" "$OUT0/run.log"; }
PY=${PYTHON:-python3}
for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; break; }; done
# (without the kit, a step that registers files with libcufile fails for want of udev's entry, far
# from the cause: a line now, naming it)
type gds_udev_entry >/dev/null 2>&1 || log "no kit: .device/env.sh not found (no bcc, no gds_udev_entry: cuFileHandleRegister fails here); carry the kit as .device"
cuf=$($PY -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BASE_PYTHONPATH=${PYTHONPATH:-}
export PYTHONPATH=$PWD${BASE_PYTHONPATH:+:$BASE_PYTHONPATH}
# OLD=DIR, an earlier commit's gdsdiag/, probes/, csrc/ (`git archive REV gdsdiag probes csrc | tar -x
# -C DIR`) to measure beside this checkout: OLDDIR its absolute path, OLDT/OLDV the arguments the
# benchmarks take it with (--tree DIR / --variant old=DIR); all empty without it
OLDDIR=; OLDT=(); OLDV=()
if [ -n "${OLD:-}" ] && [ -d "$OLD/gdsdiag" ]; then
  OLDDIR=$(cd "$OLD" && pwd); OLDT=(--tree "$OLDDIR"); OLDV=(--variant "old=$OLDDIR")
fi
# wanted N: whether step N is among $STEPS (numbers, space-separated; each script sets its default)
wanted() { [[ " ${STEPS:-} " == *" $1 "* ]]; }
machine_line() {
  log "machine: $(nproc) CPUs, $(uname -r), $($PY --version 2>&1), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
}
# settle [MAX_S]: wait (at most MAX_S, default 40 s) until the machine is quiet — fewer than half a
# CPU busy over one second (/proc/stat) — so what the kit's unpacking or a previous step left running
# does not land in a ratio; logs how busy it was when it went on
settle() {
  local max=${1:-40} t0=$SECONDS busy
  while :; do
    busy=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; sleep 1; awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
    busy=$(echo $busy | awk '{b=$3-$1; i=$4-$2; printf "%.2f", (b+i) ? '"$(nproc)"'*b/(b+i) : 0}')
    awk "BEGIN{exit !($busy < 0.5)}" && break
    [ $((SECONDS - t0)) -ge "$max" ] && break
  done
  log "settled: $busy CPUs busy after $((SECONDS - t0)) s"
}
# compat_rate STEP KIND PROCS THREADS CALLS ROUNDS TIMEOUT [OPTION]: benchmarks/trace_compat_rate.py over
# a real KIND stream (compat|bounce), OLD's tree (if given) and this checkout, its per-round lines
# logged; OPTION (e.g. --cold) is passed on and named in the files
compat_rate() {
  local tag=$2-$3x$4${8:+${8#--}}
  log "$1. a real $2 stream: $5 x 4 KiB from $3 process(es) x $4 thread(s), old and new trees, $6 round(s) ${8:-}"
  env -u PYTHONUNBUFFERED timeout "$7" $PY benchmarks/trace_compat_rate.py --kind "$2" --procs "$3" --threads "$4" \
    --calls "$5" --rounds "$6" ${8:-} "${OLDT[@]}" --tree . >"$OUT/rate-$tag.json" 2>"$OUT/rate-$tag.err"
  log "  rc=$?"; cat "$OUT/rate-$tag.err" | tee -a "$OUT/run.log"; pack
}
# compat_workload: trace_compat_rate.py's own workload written to WL and its 64 MiB file at DAT (the
# one trace_compat_rate.py reads, made if missing), for a step that runs it under a trace of its own:
#   $PY $WL $DAT CALLS BS TRUTH PROCS compat|bounce THREADS
compat_workload() {
  WL=/tmp/gdsdiag-wl.py DAT=/var/tmp/gdsdiag-compat-rate.dat
  $PY -c "import sys; sys.path.insert(0, 'benchmarks'); import trace_compat_rate as t; open('$WL', 'w').write(t.WORKLOAD)"
  [ -f $DAT ] || head -c $((64 << 20)) /dev/urandom >$DAT
}
