#!/usr/bin/env bash
# One GPU-machine call for issue 11's last changes (2026-12-01):
#   source .device/env.sh; OLD=.gpu-old [TESTS="tests/..."] bash benchmarks/history/gpu_topology_trace.sh $OUT
# 1. `gdsdiag topology` on the H200 node's own sysfs, as root: --json to a pipe (the text now written
#    from pieces, documents/topology.document_text) and the text report, with this tree and with
#    the tree before the change (OLD: a copy of it, e.g. `git archive e0e7e31 gdsdiag`): the
#    outputs must be the same bytes. Then both timed, whole process, best of 7.
# 2. The trace tests on real libcufile (the classifier's verdicts are now the --json io lines
#    themselves) and the GPU tests of cuFile and the sweep.
# Everything goes into $OUT/raw, packed into $OUT/results.tgz after each step.
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
base=$BASE_PYTHONPATH
mkdir -p /var/tmp/gds-t && gds_udev_entry /var/tmp/gds-t >/dev/null 2>&1
machine_line

log "topology on this node: new vs old tree"
for tree in new old; do
  code=$PWD; [ $tree = old ] && code=$(cd "${OLD:-.gpu-old}" && pwd)
  PYTHONPATH=$code${base:+:$base} $PY -m gdsdiag topology --json >"$OUT/topo-$tree.json" 2>"$OUT/topo-$tree.err"
  echo "rc=$?" >>"$OUT/topo-$tree.err"
  PYTHONPATH=$code${base:+:$base} $PY -m gdsdiag topology >"$OUT/topo-$tree.txt" 2>&1
done
for f in json txt err; do
  if cmp -s "$OUT/topo-new.$f" "$OUT/topo-old.$f"; then log "topology .$f: same bytes ($(wc -c <"$OUT/topo-new.$f") bytes)"
  else log "topology .$f: DIFFERENT"; diff "$OUT/topo-old.$f" "$OUT/topo-new.$f" | head -20 | tee -a "$OUT/run.log"; fi
done
for tree in new old new old; do
  code=$PWD; [ $tree = old ] && code=$(cd "${OLD:-.gpu-old}" && pwd)
  PYTHONPATH=$code${base:+:$base} $PY - "$tree" <<'PY' 2>&1 | tee -a "$OUT/run.log"
import subprocess, sys, time, os
best = 9.0
for _ in range(7):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gdsdiag", "topology", "--json"], stdout=subprocess.DEVNULL, check=False)
    best = min(best, time.perf_counter() - t)
print(f"  {sys.argv[1]}: topology --json whole process best of 7: {best:.3f} s (load {os.getloadavg()[0]:.2f})")
PY
done
pack

log "trace + GPU tests"
TESTS=${TESTS:-tests/test_trace.py tests/test_trace_live.py tests/test_trace_doors.py tests/test_topology_json_text.py tests/test_cufile_gpu.py tests/test_sweep_gpu.py}
timeout 470 $PY -m pytest -v -p no:cacheprovider $TESTS >"$OUT/tests.txt" 2>&1
echo "rc=$?" >>"$OUT/tests.txt"
tail -3 "$OUT/tests.txt" | tee -a "$OUT/run.log"
grep -E "FAILED|ERROR|SKIPPED" "$OUT/tests.txt" | head -30 | tee -a "$OUT/run.log"
pack
