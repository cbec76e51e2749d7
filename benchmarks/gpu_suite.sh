#!/usr/bin/env bash
# The test suite's GPU and root tests on the GPU machine, from this checkout (they skip on CI: no GPU,
# no libcufile I/O). One call: the GPU tests (cuFile, sweep engines, validate --proof, NVLink via
# NVML), the live trace tests (bcc from the kit), and the loaders' recordings replayed, each step
# under its own timeout, written to OUT as it goes.
#   source .device/env.sh; bash benchmarks/gpu_suite.sh $OUT
set -u
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1; fi
export PYTHONPATH=/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1
# (a new bash: the kit's functions are defined again here) libcufile reads ID_FS_USAGE from udev's
# database, which this machine has no udevd to write: the entry for the test directories' filesystem
[ -f .device/env.sh ] && source .device/env.sh >/dev/null 2>&1
for d in /tmp /var/tmp; do gds_udev_entry "$d" 2>/dev/null; done
{ echo "start $(date -u +%FT%TZ) $(uname -r)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
  python3 -c 'import sys; print(sys.version.split()[0])'; } > "$OUT/steps.txt"
py=(python3 -m pytest -q -rs -p no:cacheprovider)
timeout ${T_GPU:-200} "${py[@]}" tests/test_cufile_gpu.py tests/test_sweep_gpu.py tests/test_validate_proof.py \
  tests/test_nvlink_live.py > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests: rc=$? at $(el) s" >> "$OUT/steps.txt"
timeout ${T_LIVE:-240} "${py[@]}" tests/test_trace_live.py tests/test_trace_end.py tests/test_trace_doors.py \
  tests/test_trace_counted.py tests/test_trace_lost.py tests/test_trace_aio.py > "$OUT/live-tests.txt" 2>&1
echo "live trace tests: rc=$? at $(el) s" >> "$OUT/steps.txt"
timeout ${T_REPLAY:-60} "${py[@]}" tests/test_trace_loaders.py tests/test_trace_replay_stream.py > "$OUT/replay-tests.txt" 2>&1
echo "replay tests: rc=$? at $(el) s" >> "$OUT/steps.txt"
