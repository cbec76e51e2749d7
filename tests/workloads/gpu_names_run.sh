#!/usr/bin/env bash
# Names users recognise on the GPU machine (issue 43 goal 3), from the repository root there:
#   source .device/env.sh; bash tests/workloads/gpu_names_run.sh $OUT
# 1. tests/workloads/names_gpu.py: GPU checkpoints saved through temporary names (torch.save, safetensors,
#    an O_TMPFILE, a directory), checked against its ground truth (names_gpu.py check: PASS/FAIL lines);
# 2. tests/workloads/uring_fixed.c with "gpu": io_uring registered files and buffers, each READ_FIXED's
#    buffer copied to the GPU (the two fixed reads DRAM_BOUNCE high under their paths, the plain READ HOST).
# Outputs (JSON lines, recordings, stderr) in $OUT/names/.
set -u
OUT=${1:-/tmp/out}/names; rm -rf "$OUT"; mkdir -p "$OUT"
D=/var/tmp/gdsdiag-names; rm -rf "$D"; mkdir -p "$D/w" "$D/u"
python3 -m gdsdiag trace --json -o "$OUT/writer.jsonl" --record "$OUT/writer.rec.jsonl" -- \
  python3 tests/workloads/names_gpu.py write "$D/w" > "$OUT/writer.app.txt" 2> "$OUT/writer.err"
echo "rc=$?" >> "$OUT/writer.err"
grep '^GROUND_TRUTH' "$OUT/writer.app.txt" >> "$OUT/writer.jsonl"
python3 tests/workloads/names_gpu.py check "$OUT/writer.jsonl" | tee "$OUT/writer.score.txt"
gcc -O2 -o "$OUT/uring_fixed" tests/workloads/uring_fixed.c
python3 -m gdsdiag trace --json --per-io -o "$OUT/uring.jsonl" --record "$OUT/uring.rec.jsonl" -- \
  "$OUT/uring_fixed" "$D/u/u1.dat" "$D/u/u2.dat" gpu > "$OUT/uring.app.txt" 2> "$OUT/uring.err"
echo "rc=$?" >> "$OUT/uring.err"
cat "$OUT/uring.app.txt"
python3 - "$OUT/uring.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    v = json.loads(line)
    if v["type"] == "io" and v["api"] == "io_uring":
        print(v["op"], v["path"], v["offset"], v["size"], v["route"], v["confidence"], "|", "; ".join(v["evidence"]))
PY
gzip -f "$OUT"/*.rec.jsonl
rm -rf "$D"
