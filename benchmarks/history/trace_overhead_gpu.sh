#!/usr/bin/env bash
# gdsdiag trace's cost per event, lost events and start-up on the GPU machine (issue 9), in one device
# call of about 5 minutes. From a copy of the tree there (e.g. .gpu-main):
#   source .device/env.sh; cd .gpu-main; bash benchmarks/history/trace_overhead_gpu.sh        # writes to $OUT
# Goals: <= 3 % throughput loss at 50k ops/s, 0 lost at 100k events/s, live within 5 s; and no lost
# events while libcufile's cuFileDriverOpen walks sysfs (fio's forked libcufile jobs lost 51,379
# events with the previous probe). Every step has its own timeout; summary.txt collects one line each.
# SKIP_APPS=1: no fio/kvikio steps (gpu_trace_run.sh runs them); ROUNDS=N: rounds per benchmark;
# SKIP_STARTUP=1: no start-up benchmark (each trace's summary has startup_s).
set -u
OUT=${OUT:-/tmp/gdsdiag-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
type gds_udev_entry >/dev/null 2>&1 || source ../.device/env.sh 2>/dev/null || source .device/env.sh 2>/dev/null
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
cuf=$(python3 -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
D=/var/tmp/gdsdiag-t9cost
rm -rf "$D"; mkdir -p "$D"
type gds_udev_entry >/dev/null 2>&1 && gds_udev_entry /var/tmp
T0=$(date +%s)
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; uname -r; python3 -V; nproc; uptime
  git log -1 --format='%h %s' 2>/dev/null; } > "$OUT/machine.txt"
cat "$OUT/machine.txt" > "$S"

line() {   # name, trace JSON-lines file, data dir: lost, events, I/Os on the data files, live-after
  python3 - "$@" >> "$S" <<'PY'
import json, sys
name, path, d = sys.argv[1:4]
ios, summ = [], {}
for l in open(path):
    if l.startswith("{"):
        v = json.loads(l)
        (ios.append(v) if v["type"] == "io" else summ.update(v))
mine = [v for v in ios if (v.get("path") or "").startswith(d)]
counted = sum(r["count"] for r in summ.get("host_io_counted", []) if r["path"].startswith(d))
routes = {}
for v in mine:
    routes[v["route"]] = routes.get(v["route"], 0) + 1
print(f"== {name}: lost {summ.get('lost_events')}, events {summ.get('events')}, data I/Os per line {len(mine)} {routes}, "
      f"counted in kernel {counted}, exit {summ.get('traced_exit_code')}, startup {summ.get('startup_s')}")
PY
  grep -h "live after" "$2.err" 2>/dev/null | tail -1 >> "$S"
}

# 1. the driver-open flood without a GPU: a sysfs/procfs walk of ~90k opens with 144 data I/Os
timeout 120 python3 -m gdsdiag trace --json --per-io -- python3 tests/workloads/sysfs_flood.py "$D" 1500 \
  > "$OUT/flood.jsonl" 2> "$OUT/flood.jsonl.err"
line flood-per-io "$OUT/flood.jsonl" "$D/"

# 2. the real one: fio's libcufile engine, forked jobs (each calls cuFileDriverOpen), and kvikio
[ -n "${SKIP_APPS:-}" ] || ( gds_build_fio ../.device || gds_build_fio .device ) > "$OUT/fio-build.txt" 2>&1
if [ -z "${SKIP_APPS:-}" ] && [ -x /tmp/fio/fio ]; then
  FIO="/tmp/fio/fio --name=r --directory=$D --size=8M --bs=128k --numjobs=2 --rw=read --direct=1"
  $FIO --ioengine=psync > "$OUT/fio-layout.txt" 2>&1
  timeout 60 python3 -m gdsdiag trace --json -- $FIO --ioengine=libcufile --gpu_dev_ids=0 --cuda_io=cufile \
    > "$OUT/fio-cufile-forked.jsonl" 2> "$OUT/fio-cufile-forked.jsonl.err"
  line fio-cufile-forked "$OUT/fio-cufile-forked.jsonl" "$D/"
  timeout 60 python3 -m gdsdiag trace --json -- $FIO --ioengine=psync \
    > "$OUT/fio-psync.jsonl" 2> "$OUT/fio-psync.jsonl.err"
  line fio-psync-counted "$OUT/fio-psync.jsonl" "$D/"
fi
[ -n "${SKIP_APPS:-}" ] || KVIKIO_COMPAT_MODE=OFF timeout 60 python3 -m gdsdiag trace --json -- python3 tests/workloads/kvikio_load.py "$D" \
  > "$OUT/kvikio-compat-off.jsonl" 2> "$OUT/kvikio-compat-off.jsonl.err"
[ -n "${SKIP_APPS:-}" ] || line kvikio-compat-off "$OUT/kvikio-compat-off.jsonl" "$D/"
echo "flood and real apps done at $(( $(date +%s) - T0 )) s" >> "$S"

# 3. cost per event: host I/O counted in the kernel (no CUDA in the process) and sent per I/O
bench() {  # name, args...
  local name=$1; shift
  timeout 150 python3 benchmarks/trace_overhead.py "$@" --dir /var/tmp > "$OUT/overhead-$name.json" 2>&1
  python3 - "$OUT/overhead-$name.json" "$name" >> "$S" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"== overhead {sys.argv[2]}: failed ({e})"); sys.exit()
print(f"== overhead {sys.argv[2]}: median loss {d['median_loss_pct']} %, fixed {d['tracer_fixed_cpu_s']} s")
for r in d["rounds"]:
    print("   untraced {untraced_ops_s} traced {traced_ops_s} ops/s ratio {ratio}, events {events} ({events_per_s}/s), "
          "lost {lost_events}, accounted {ios_accounted}, counted {counted_in_kernel}, tracer CPU {tracer_cpu_us_per_event} "
          "us/event {tracer_cpu_us_per_io} us/io".format(**r))
PY
}
R=${ROUNDS:-3}; R2=${ROUNDS:-2}
bench posix-4k-counted posix --bs 4096 --ops 400000 --rounds $R
bench posix-128k-counted posix --bs 131072 --ops 100000 --rounds $R
bench posix-4k-per-io-50k posix --bs 4096 --ops 250000 --rate 50000 --rounds $R2 --per-io
bench posix-4k-per-io-100k posix --bs 4096 --ops 500000 --rate 100000 --rounds $R2 --per-io
bench cufile-4k cufile --ops 50000 --rounds $R2
echo "overhead done at $(( $(date +%s) - T0 )) s" >> "$S"

# 4. start-up: where it goes (bcc compile with and without USDT handlers)
if [ -z "${SKIP_STARTUP:-}" ]; then
  timeout 150 python3 benchmarks/trace_startup.py --rounds 1 > "$OUT/startup.json" 2>&1
  tail -20 "$OUT/startup.json" >> "$S"
fi
echo "all done at $(( $(date +%s) - T0 )) s" >> "$S"
cat "$S"
