#!/usr/bin/env bash
# Issue 45 on the GPU machine, one call: every validate --proof cell and every sweep point says why,
# and the why is the node's. Expected there (no nvidia-fs, no PCI P2PDMA, ext4 on a virtio disk):
# each cuFile answer's decisive fact is nvidia-fs absent (P2PDMA off and the file system behind it),
# a bounce point a bounce by design with the same three facts after it, a host point "none needed".
#   source .device/env.sh; [STEPS="1 2 3 4 5"] bash tests/workloads/gpu_why_run.sh $OUT
# 1 gdsdiag check --json (the node's facts the whys are built from, for the record)
# 2 validate --proof on /var/tmp, GPU 0, its --json document (proof.json)
# 3 a small sweep on /var/tmp/gdsdiag-why: cufile, cufile-batch, cufile-async, kvikio, bounce, host;
#   read and write, 64 KiB, 2 threads, 4 MiB a point (sweep.json)
# 4 tests/workloads/check_why.py over both documents (why-check.txt: one line per cell and point, then
#   the problems; rc 0 when every answer holds)
# 5 under the trace (where the kit carries bcc): torch.load(mmap=True) of a cold 16 MiB file, the file
#   row's major faults, page-cache share and GB/s against the ceiling (the GPU's PCIe link), and the
#   live tests of issue 45 (major faults against ru_majflt; the ceiling of the live node)
# Every step runs under timeout and writes into $1 as it goes (benchmarks/gpu_common.sh packs it).
set -u
FINAL=${1:-/tmp/out}
source "$(dirname "$0")/../../benchmarks/gpu_common.sh" "$FINAL"
machine_line
for d in /tmp /var/tmp; do gds_udev_entry $d >/dev/null 2>&1; done
STEPS=${STEPS:-1 2 3 4 5}
D=/var/tmp/gdsdiag-why
# validate reads its policy with PyYAML; carry .whl/PyYAML-*.whl where the kit's python lacks it
if ! $PY -c 'import yaml' 2>/dev/null; then
  shopt -s nullglob; w=(.whl/[Pp]y[Yy][Aa][Mm][Ll]-*.whl)
  if [ ${#w[@]} -gt 0 ]; then
    timeout 60 $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/gdsdiag-why-site "${w[@]}" >"$OUT/pip.txt" 2>&1
    export PYTHONPATH=$PYTHONPATH:/tmp/gdsdiag-why-site
  fi
  $PY -c 'import yaml' 2>/dev/null || log "no PyYAML for $PY: carry .whl/PyYAML-*.whl (validate cannot load its policy)"
fi
if wanted 1; then
  log "1. gdsdiag check --json"
  timeout 60 $PY -m gdsdiag check --path /var/tmp --json >"$OUT/check.json" 2>"$OUT/check.err"
  log "  rc=$? $($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["verdict"]["summary"])' "$OUT/check.json" 2>&1 | tail -1)"
  pack
fi
if wanted 2; then
  log "2. validate --proof --path /var/tmp --proof-gpus 0"
  timeout -k 5 100 $PY -m gdsdiag validate --path /var/tmp --proof --proof-gpus 0 --proof-timeout 40 \
    --json "$OUT/proof.json" >"$OUT/proof.txt" 2>"$OUT/proof.err"
  log "  rc=$?"; grep -E '^proof |^ *(why|fix):' "$OUT/proof.txt" | tee -a "$OUT/run.log"; pack
fi
if wanted 3; then
  log "3. sweep on $D: cufile, cufile-batch, cufile-async, kvikio, bounce, host"
  rm -rf $D; mkdir -p $D
  timeout -k 5 240 $PY -m gdsdiag sweep --dir $D --size 64M --json \
    --mode cufile,cufile-batch,cufile-async,kvikio,bounce,host --rw read,write --bs 64k --threads 2 --bytes 4m \
    >"$OUT/sweep.json" 2>"$OUT/sweep.txt"
  log "  rc=$?"; grep -E "^gdsdiag sweep|rror" "$OUT/sweep.txt" | tail -8 | tee -a "$OUT/run.log"
  rm -rf $D; pack
fi
if wanted 4; then
  log "4. every cell and point says why (tests/workloads/check_why.py)"
  args=(); [ -s "$OUT/proof.json" ] && args+=(--proof "$OUT/proof.json"); [ -s "$OUT/sweep.json" ] && args+=(--sweep "$OUT/sweep.json")
  timeout 60 $PY tests/workloads/check_why.py "${args[@]}" >"$OUT/why-check.txt" 2>&1
  log "  rc=$?"; cut -c1-220 "$OUT/why-check.txt" | tee -a "$OUT/run.log"; pack
fi
if wanted 5; then
  if $PY -c 'import bcc' 2>/dev/null; then
    log "5. torch.load(mmap=True) of a cold file under the trace: major faults, page cache, GB/s against the ceiling"
    rm -rf $D; mkdir -p $D
    env -u PYTHONUNBUFFERED timeout 120 $PY -m gdsdiag trace -- $PY tests/workloads/torch_load.py $D mmap \
      >"$OUT/trace-mmap.txt" 2>&1
    log "  rc=$?"; grep -A7 "^per file" "$OUT/trace-mmap.txt" | cut -c1-300 | tee -a "$OUT/run.log"
    env -u PYTHONUNBUFFERED timeout 120 $PY -m gdsdiag trace --json -- $PY tests/workloads/torch_load.py $D mmap \
      >"$OUT/trace-mmap.jsonl" 2>"$OUT/trace-mmap.err"
    log "  --json rc=$?"
    rm -rf $D
    timeout 200 $PY -m pytest -q -rs -p no:cacheprovider tests/test_trace_majflt_live.py tests/test_ceiling.py \
      tests/test_trace_said_live.py >"$OUT/live-tests.txt" 2>&1
    log "  live tests rc=$? $(tail -1 "$OUT/live-tests.txt")"
  else
    log "5. skipped: no bcc for $PY (carry the kit as .device)"
  fi
  pack
fi
log "done"; pack
