#!/usr/bin/env bash
# libcufile support matrix on the GPU machine (issue 22): for each nvidia-cufile release carried as a
# wheel in .whl/ (git-ignored; fetch them on the CPU machine with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl nvidia-cufile==VER
# for VER in 1.15.1.6 1.16.1.26 1.17.1.22 1.18.1.6 1.19.1.55 1.20.0.107: 8.4 MB in all), unpack it and
# point gdsdiag at that libcufile (GDSDIAG_LIBCUFILE, and its directory first on LD_LIBRARY_PATH so its
# own libcufile_rdma.so.1 is the one loaded), then run
#   1. the library's USDT notes (count, and which of the probes gdsdiag trace keys on are present),
#   2. gdsdiag cufile --json (driver open in a child, bounded by --timeout),
#   3. gdsdiag check --json,
#   4. the cuFile binding tests (tests/test_cufile_gpu.py: open, properties, handle/buffer
#      registration, read/write, batch, stats),
# and writes one summary line per release to $OUT/k/e/e/p/raw/run.log (also $OUT/run.log).
#   source .device/env.sh; bash benchmarks/gpu_cufile_matrix.sh $OUT
# Every step runs under `timeout`; the whole run stops starting steps at DEADLINE s (default 225), so
# it ends within 240 s whatever hangs. Raw outputs: $OUT/k/e/e/p/raw/<release>/, packed to results.tgz.
set -u
source "$(dirname "$0")/gpu_common.sh" "${1:-/tmp/out}"
DEADLINE=${DEADLINE:-225}
START=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - START))); }
# step SECONDS OUTFILE CMD...: CMD under timeout min(SECONDS, time left); 'skipped' when none is left
step() {
  local want=$1 out=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 5 ]; then echo "skipped: out of time" >"$out"; echo "rc=skip" >>"$out"; return; fi
  [ "$want" -gt "$l" ] && want=$l
  timeout -k 5 "$want" "$@" >"$out" 2>"$out.err"
  echo "rc=$?" >>"$out.err"
}
type gds_udev_entry >/dev/null 2>&1 && gds_udev_entry /tmp >/dev/null 2>&1
machine_line
base_ld=$LD_LIBRARY_PATH
shopt -s nullglob
found=(.whl/nvidia_cufile*-*.whl)
[ ${#found[@]} -eq 0 ] && { log "no wheels in .whl/: nothing to do (carry .whl)"; pack; exit 3; }
# newest and oldest first (the two the issue compares), then the rest newest to oldest: if the
# deadline cuts the run short, what is missing is the middle of the range
mapfile -t wheels < <(printf '%s\n' "${found[@]}" | sort -t- -k2 -V -r | awk 'NR==1{print; next} {rest[NR]=$0} END{n=NR; print rest[n]; for(i=2;i<n;i++) print rest[i]}')
log "${#wheels[@]} releases: $(for w in "${wheels[@]}"; do basename "$w" | cut -d- -f2; done | tr '\n' ' ')"
for w in "${wheels[@]}"; do
  ver=$(basename "$w" | cut -d- -f2)
  d=$OUT/$ver; mkdir -p "$d"
  u=/tmp/gdsdiag-cufile-$ver; rm -rf "$u"; mkdir -p "$u"
  timeout 60 $PY -m zipfile -e "$w" "$u" >/dev/null 2>&1
  lib=$(ls "$u"/nvidia/*/lib/libcufile.so.0 2>/dev/null | head -1)
  if [ -z "$lib" ]; then log "$ver: no libcufile.so.0 in the wheel"; continue; fi
  export GDSDIAG_LIBCUFILE=$lib GDSDIAG_LOG_DIR=$d/logs
  export LD_LIBRARY_PATH=$(dirname "$lib")${base_ld:+:$base_ld}
  step 20 "$d/usdt.txt" $PY -c 'import sys
from gdsdiag.platform.libcufile import TRACE_PROBES, read_usdt_notes
p = read_usdt_notes(sys.argv[1]); keys = {x.key for x in p}
print(f"{len(p)} notes, {len(keys)} probes, trace probes {sum(k in keys for k in TRACE_PROBES)}/{len(TRACE_PROBES)}"
      + "".join(f" missing:{k}" for k in TRACE_PROBES if k not in keys))' "$lib"
  step 45 "$d/cufile.json" $PY -m gdsdiag cufile --json --timeout 30 --libcufile "$lib"
  step 40 "$d/check.json" $PY -m gdsdiag check --json --libcufile "$lib"
  step 60 "$d/tests.txt" $PY -m pytest -q -p no:cacheprovider tests/test_cufile_gpu.py
  # one line per release, from what the steps wrote (a step that did not run says so)
  $PY - "$ver" "$d" <<'PY' 2>&1 | tee -a "$OUT/run.log"
import json, os, re, sys
ver, d = sys.argv[1], sys.argv[2]
def rc(name):
    try:
        m = re.findall(r"^rc=(\S+)", open(os.path.join(d, name + ".err")).read(), re.M)
        return m[-1] if m else "?"
    except OSError:
        return "skip"
def doc(name):
    try:
        return json.load(open(os.path.join(d, name)))
    except (OSError, ValueError):
        return None
usdt = open(os.path.join(d, "usdt.txt")).read().strip().splitlines()[:1] if os.path.exists(os.path.join(d, "usdt.txt")) else []
c = doc("cufile.json")
if c:
    o = c.get("driver_open") or {}
    p = o.get("properties") or {}
    opened = ("OK nvfs " + (f"{p.get('nvfs_major')}.{p.get('nvfs_minor')}" if p.get("nvfs_loaded") else "not loaded (compat)")
              if o.get("ok") else f"FAILED {o.get('name') or ''} {str(o.get('error'))[:80]}")
    cuf = f"cufile rc={rc('cufile.json')} v{c.get('version')} open {opened}"
else:
    cuf = f"cufile rc={rc('cufile.json')} no JSON"
k = doc("check.json")
chk = f"check rc={rc('check.json')} " + (k["verdict"]["summary"] if k else "no JSON")
t = open(os.path.join(d, "tests.txt")).read() if os.path.exists(os.path.join(d, "tests.txt")) else ""
tl = [ln for ln in t.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)]
tests = f"tests rc={rc('tests.txt')} " + (tl[-1].strip("= ") if tl else "no summary")
print(f"{ver}: usdt {usdt[0] if usdt else '?'} | {cuf} | {chk} | {tests}")
PY
  unset GDSDIAG_LIBCUFILE GDSDIAG_LOG_DIR
  export LD_LIBRARY_PATH=$base_ld
  rm -rf "$u"
  pack
done
log "done in $(( $(date +%s) - START )) s"
pack
