#!/usr/bin/env bash
# gdsdiag trace on real applications, on the GPU machine (one device call). From the repository root
# there: source .device/env.sh; bash tests/workloads/gpu_trace_run.sh $OUT
# Each workload: the trace's JSON lines, its record (.gz), stderr, and a one-line summary in summary.txt.
set -u
source .device/env.sh 2>/dev/null || source ../.device/env.sh    # its shell functions (gds_udev_entry, gds_build_fio)
FINAL=${1:-/tmp/out}; OUT=/tmp/t9out; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
trap 'tar -C /tmp -czf "$FINAL/t9out.tar.gz" t9out; cp "$OUT/summary.txt" "$FINAL/" 2>/dev/null' EXIT
D=/var/tmp/t9trace; rm -rf "$D"; mkdir -p "$D"
gds_udev_entry /var/tmp
T0=$(date +%s)
[ -n "${ONLY:-}" ] && [[ "$ONLY" != *fio* ]] || ( gds_build_fio ../.device || gds_build_fio .device ) > "$OUT/fio-build.txt" 2>&1
cuf=$(python3 -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
echo "fio built in $(( $(date +%s) - T0 )) s" >> "$OUT/fio-build.txt"
FIO="/tmp/fio/fio --name=r --directory=$D --size=8M --bs=128k --numjobs=2 --rw=read --direct=1"
# (--gpu_dev_ids=0 is a libcufile engine option: it must come after --ioengine, see below)
# lay the files out once, untraced (fio writes them on first use)
[ -n "${ONLY:-}" ] && [[ "$ONLY" != *fio* ]] || $FIO --ioengine=psync > "$OUT/fio-layout.txt" 2>&1
summ() {   # name
  python3 - "$OUT/$1.jsonl" "$1" >> "$OUT/summary.txt" <<'PY'
import json, sys, collections
ios, summ = [], None
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    v = json.loads(l)
    if v["type"] == "io": ios.append(v)
    else: summ = v
mine = [v for v in ios if v["path"] and v["path"].startswith("/var/tmp/t9trace/")]
c = collections.Counter((v["api"], v["op"], v["route"], v["confidence"]) for v in mine)
nopath = sum(1 for v in ios if not v["path"])
print(f"== {sys.argv[2]}: {len(mine)} I/Os on the data files ({len(ios)} in all, {nopath} without a path); " + "; ".join(f"{n} x {k}" for k, n in c.most_common()))
if summ:
    print(f"   lost {summ['lost_events']}, events {summ['events']}, exit {summ['traced_exit_code']}, startup {summ.get('startup_s')}")
    print("   processes: " + ", ".join(f"{p['pid']}:{p['comm']}({p['ios']})" for p in summ["processes"] if p["ios"]))
    print("   libraries: " + "; ".join(f"{l['kind']} {l['path']} usdt={l['usdt']} uprobes={l['uprobes']} pids={l['pids']}" for l in summ.get("libraries", [])))
ex = {}
for v in mine:  # one example of each (api, op, route, confidence)
    ex.setdefault((v["api"], v["op"], v["route"], v["confidence"]), v)
for v in list(ex.values())[:5]:
    print("   e.g.", v["comm"], v["pid"], v["api"], v["op"], v["path"].split("/")[-1], v["offset"], v["size"], v["route"], v["confidence"], v["evidence"][:3])
PY
}
tr() {     # name, command... (ONLY="name ..." runs those alone)
  local name=$1; shift
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  local t=$(date +%s.%N)
  timeout 45 python3 -m gdsdiag trace --json --record "$OUT/$name.rec.jsonl" -- "$@" > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
  echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" >> "$OUT/$name.err"
  gzip -f "$OUT/$name.rec.jsonl"
  summ "$name"
}
tr fio-cufile-forked $FIO --ioengine=libcufile --gpu_dev_ids=0 --cuda_io=cufile
tr fio-posix-forked $FIO --ioengine=libcufile --gpu_dev_ids=0 --cuda_io=posix
tr fio-psync $FIO --ioengine=psync
KVIKIO_COMPAT_MODE=ON tr kvikio-compat-on python3 tests/workloads/kvikio_load.py "$D"
KVIKIO_COMPAT_MODE=OFF tr kvikio-compat-off python3 tests/workloads/kvikio_load.py "$D"
tr cupy-load python3 tests/workloads/cupy_load.py "$D"
tr torch-load python3 tests/workloads/torch_load.py "$D"
tr torch-load-mmap python3 tests/workloads/torch_load.py "$D" mmap
# the libraries a program may map, probed before it starts, and libcuda's copy doors by name
python3 -c 'from gdsdiag.trace.probes.libfind import candidate_libraries as c; print("\n".join(c(["python3"])))' > "$OUT/preattach-candidates.txt" 2>&1
python3 -c 'import sys; from gdsdiag.trace.probes.bpf import _find_libcuda, cuda_copy_handler as h; from gdsdiag.trace.probes.elfsyms import dynamic_symbols as d
for s in sorted(d(_find_libcuda())):
    if s.startswith("cuMemcpy"): print(s, h(s))' > "$OUT/libcuda-memcpy-exports.txt" 2>&1
# one text-mode trace for the docs
[ -n "${ONLY:-}" ] || timeout 45 python3 -m gdsdiag trace -- $FIO --ioengine=libcufile --gpu_dev_ids=0 --cuda_io=posix > "$OUT/fio-posix-text.txt" 2>&1
python3 tests/workloads/cuda_doors.py > "$OUT/cuda-doors.txt" 2>&1
echo "workloads done at $(( $(date +%s) - T0 )) s" >> "$OUT/summary.txt"
[ -n "${SKIP_OVERHEAD:-}" ] || timeout 40 python3 benchmarks/trace_overhead.py posix --bs 4096 --ops 200000 --rounds 1 > "$OUT/overhead-posix-4k.json" 2>&1
echo "overhead bench done at $(( $(date +%s) - T0 )) s" >> "$OUT/summary.txt"
# the live tests with what is left of the call (BUDGET seconds in all)
left=$(( ${BUDGET:-220} - ($(date +%s) - T0) ))
[ "${TESTS:-}" = none ] || timeout $left python3 -m pytest -q -p no:cacheprovider ${TESTS:-tests/test_trace_live.py tests/test_trace.py -k "live or two or pid or tree or comm"} > "$OUT/tests.txt" 2>&1
echo "tests done at $(( $(date +%s) - T0 )) s (limit $left s)" >> "$OUT/summary.txt"
rm -rf "$D"
