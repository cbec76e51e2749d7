#!/usr/bin/env bash
# Issue 25 on the GPU machine: 'gdsdiag validate --proof' on /var/tmp and GPU 0 — a checksummed
# cuFile read+write as configured and with compat mode forbidden (private cufile.json through
# CUFILE_ENV_PATH_JSON), one line per cell — with every output it has: text, --json, --junit,
# --prom and --nfd; then the GPU test of tests/test_validate_proof.py if time is left.
#   source .device/env.sh; bash benchmarks/gpu_proof.sh $OUT
# Expected there (one H200, no nvidia-fs, libcufile 1.15, ext4 on virtio): COMPAT with check's reason
# and "P2P not possible here: compat forbidden → error N …". Every step runs under `timeout`; no step
# starts after DEADLINE s (default 110), so the run ends within 120 s. Outputs in $OUT (the five
# documents and run.log) and packed in $OUT/results.tgz with the stderr of each step.
set -u
source "$(dirname "$0")/gpu_common.sh" "${1:-/tmp/out}"
DEADLINE=${DEADLINE:-110}
START=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - START))); }
# step SECONDS OUTFILE CMD...: CMD under timeout min(SECONDS, time left); 'skipped' when none is left
step() {
  local want=$1 out=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 5 ]; then echo "skipped: out of time" >"$out"; echo "rc=skip" >>"$out.err"; return; fi
  [ "$want" -gt "$l" ] && want=$l
  timeout -k 5 "$want" "$@" >"$out" 2>"$out.err"
  echo "rc=$?" >>"$out.err"
}
# without a udev entry for the root disk every cuFileHandleRegister fails with 5027 on this VM
ENVSH=; for k in .device ../.device; do [ -f $k/env.sh ] && { ENVSH=$k/env.sh; break; }; done
if [ -n "$ENVSH" ]; then
  timeout 20 bash -c "source $ENVSH; gds_udev_entry /var/tmp" >"$OUT/udev.txt" 2>&1
  log "gds_udev_entry /var/tmp: rc=$?"
else
  log "no .device/env.sh: no gds_udev_entry, so cuFileHandleRegister may fail with 5027"
fi
machine_line
# validate reads its policy with PyYAML; carry .whl/PyYAML-*.whl where the kit's python lacks it
if ! $PY -c 'import yaml' 2>/dev/null; then
  shopt -s nullglob; w=(.whl/[Pp]y[Yy][Aa][Mm][Ll]-*.whl)
  if [ ${#w[@]} -gt 0 ]; then
    timeout 60 $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/gdsdiag-proof-site "${w[@]}" >"$OUT/pip.txt" 2>&1
    export PYTHONPATH=$PYTHONPATH:/tmp/gdsdiag-proof-site
  fi
  $PY -c 'import yaml' 2>/dev/null || log "no PyYAML for $PY: carry .whl/PyYAML-*.whl (validate cannot load its policy)"
fi
ls -d /var/tmp/gdsdiag-proof-* >"$OUT/leftovers-before.txt" 2>/dev/null
log "validate --proof --path /var/tmp --proof-gpus 0"
step 95 "$OUT/validate-proof.txt" $PY -m gdsdiag validate --path /var/tmp --proof --proof-gpus 0 --proof-timeout 40 \
  --json "$OUT/validate-proof.json" --junit "$OUT/validate-proof.xml" --prom "$OUT/validate-proof.prom" \
  --nfd "$OUT/gdsdiag-proof.features"
log "validate --proof: $(tail -1 "$OUT/validate-proof.txt.err"), $(( $(date +%s) - START )) s"
grep '^proof ' "$OUT/validate-proof.txt" | tee -a "$OUT/run.log"
grep -v '^#' "$OUT/gdsdiag-proof.features" 2>/dev/null | tr '\n' ' ' | sed 's/^/nfd: /' | tee -a "$OUT/run.log"; echo | tee -a "$OUT/run.log"
# the promise: nothing of the probe is left in /var/tmp
ls -d /var/tmp/gdsdiag-proof-* >"$OUT/leftovers-after.txt" 2>/dev/null
log "left in /var/tmp: $(comm -13 <(sort "$OUT/leftovers-before.txt") <(sort "$OUT/leftovers-after.txt") | tr '\n' ' ')(end)"
if [ "$(left)" -gt 30 ]; then
  step 30 "$OUT/test-proof-gpu.txt" $PY -m pytest -q -p no:cacheprovider tests/test_validate_proof.py -k gpu_machine_proof
  log "GPU test: $(tail -1 "$OUT/test-proof-gpu.txt") $(tail -1 "$OUT/test-proof-gpu.txt.err")"
fi
for f in validate-proof.txt validate-proof.json validate-proof.xml validate-proof.prom gdsdiag-proof.features; do
  [ -f "$OUT/$f" ] && cp "$OUT/$f" "$OUT0/$f"
done
log "done in $(( $(date +%s) - START )) s"
pack
