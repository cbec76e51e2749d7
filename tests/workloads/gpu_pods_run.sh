#!/usr/bin/env bash
# Issue 48 on the GPU machine: two "pods" in real cgroups, named as kubelet and containerd / CRI-O name
# them, with a kubelet-like /var/log/pods tree (tests/pods_fixture.py, as the CPU tests build them),
# each running a real CUDA loader (tests/workloads/pod_cuda_loader.py: pread a 256 MiB file, copy it
# to the GPU, write its own ground truth) under `gdsdiag trace --json --pod NAME --namespace llm`;
# then tests/workloads/pods_score.py checks each pod's bytes, labels and routes against the ground
# truth: one line per pod, PASS/FAIL. From the repository root, as root:
#   source .device/env.sh; bash tests/workloads/gpu_pods_run.sh $OUT
# Everything under $1 (the device's $OUT), packed as it goes (benchmarks/gpu_common.sh); each step under
# its own timeout. DRY=1 (or no nvidia-smi): the CUDA part is skipped with the reason, the loaders only
# read, and the cgroups, the traces and the scoring run the same (HOST expected): how it is tested on
# the CPU VM (tests/test_gpu_pods_dry.py). BACKENDS="torch cupy" (default): pod 0's loader, pod 1's.
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/../../benchmarks/gpu_common.sh" "$FINAL"
machine_line
W=$(mktemp -d /var/tmp/gdsdiag-pods.XXXXXX)
DATA=$W/data/weights.bin
read -r -a BK <<<"${BACKENDS:-torch cupy}"
if [ -n "${DRY:-}" ] || ! nvidia-smi -L >/dev/null 2>&1; then
  BK=(none none); log "dry run (${DRY:+DRY=$DRY}${DRY:-no GPU: nvidia-smi -L failed}): the loaders copy nothing"
fi
TRACES=()
LOADERS=()
cleanup() {
  for p in "${TRACES[@]}" "${LOADERS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  timeout 30 $PY tests/pods_fixture.py rm "$W" 2>&1 | tee -a "$OUT/run.log"
  rm -rf "$W"
}
trap cleanup EXIT

log "1. two pods (tests/pods_fixture.py) and a 256 MiB file, cold"
timeout 30 $PY tests/pods_fixture.py make "$W" 2 >>"$OUT/run.log" 2>&1 || { log "  cannot make the pods: see above"; pack; exit 3; }
cp "$W/pods.json" "$OUT/pods.json"
mkdir -p "$W/data" && head -c $((256 << 20)) /dev/urandom >"$DATA" && sync "$DATA"
$PY -c "import os; fd = os.open('$DATA', os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)"
NAMES=($($PY -c "import json; print(' '.join(p['name'] for p in json.load(open('$W/pods.json'))['pods']))"))

log "2. a loader in each pod (${BK[*]}), waiting for the go"
for i in 0 1; do
  CG=$($PY -c "import json; print(' '.join(json.load(open('$W/pods.json'))['pods'][$i]['cgroups']))")
  timeout 400 $PY tests/workloads/pod_cuda_loader.py "${BK[$i]}" "$DATA" "$W/go" "$OUT/truth-$i.json" $CG \
    >"$OUT/loader-$i.out" 2>"$OUT/loader-$i.err" &
  LOADERS+=($!)
done
for i in 0 1; do
  for _ in $(seq 1 600); do grep -q ready "$OUT/loader-$i.out" 2>/dev/null && break; sleep 0.2; done
  grep -q ready "$OUT/loader-$i.out" || { log "  loader $i not ready in 120 s: $(tail -3 "$OUT/loader-$i.err")"; pack; exit 3; }
done

log "3. gdsdiag trace --json --pod <its name> --namespace llm, one per pod"
for i in 0 1; do
  timeout 300 $PY -m gdsdiag trace --json --pod "${NAMES[$i]}" --namespace llm --pod-logs "$W/var/log/pods" \
    --path "$W/data" -o "$OUT/trace-$i.jsonl" 2>"$OUT/trace-$i.err" &
  TRACES+=($!)
done
for i in 0 1; do
  for _ in $(seq 1 900); do grep -q "tracing, Ctrl-C" "$OUT/trace-$i.err" 2>/dev/null && break; sleep 0.2; done
  grep -q "tracing, Ctrl-C" "$OUT/trace-$i.err" || { log "  trace $i did not start: $(tail -3 "$OUT/trace-$i.err")"; pack; exit 3; }
done

log "4. go: both pods load the same file at once"
touch "$W/go"
for i in 0 1; do
  wait "${LOADERS[$i]}"; log "  loader $i rc=$? $(cat "$OUT/truth-$i.json" 2>/dev/null)"
done
LOADERS=()
sleep 1
for i in 0 1; do kill -INT "${TRACES[$i]}" 2>/dev/null; done
for i in 0 1; do wait "${TRACES[$i]}"; log "  trace $i rc=$?"; done
TRACES=()
pack

log "5. score"
timeout 60 $PY tests/workloads/pods_score.py "$OUT" | tee "$OUT/score.txt" | tee -a "$OUT/run.log"
log "  rc=${PIPESTATUS[0]}"
cp "$OUT/score.txt" "$FINAL/score.txt" 2>/dev/null
log "done"; pack
