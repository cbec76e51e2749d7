#!/usr/bin/env bash
# Why the sweep's process workers read below fio's forked libcufile jobs at 4 KiB x 4 (GPU machine):
# fio's jobs start their clocks only after each has set up its own CUDA context and cuFile driver,
# so their measured windows do not coincide. Per round: fio's forked run with per-job IOPS logs
# (absolute timestamps), analysed by benchmarks/history/fio_job_windows.py (the spread of the jobs' starts
# and ends, fio's rate over the window all four ran), then the sweep's process workers at the same
# point; one fio job alone first, for the rate with nothing to contend with.
#   source .device/env.sh; bash benchmarks/history/gpu_fio_stagger.sh $OUT
set -u
source "$(dirname "$0")/../gpu_common.sh" "${1:-/tmp/out}"
machine_line
( gds_build_fio .device ) 2>&1 | tail -1 | tee -a "$OUT/run.log"
D=/var/tmp/gds-stagger; mkdir -p $D; gds_udev_entry $D; F=$D/f
timeout 30 /tmp/fio/fio --name=mk --filename=$F --size=2G --rw=write --bs=1m --direct=1 --output=/dev/null
J="--filename=$F --direct=1 --bs=4k --rw=read --iodepth=1 --ioengine=libcufile --cuda_io=cufile --gpu_dev_ids=0 --size=512M --offset_increment=512M --time_based --runtime=3 --output-format=json"
log "fio one job alone"
timeout 30 /tmp/fio/fio --name=one $J --numjobs=1 >"$OUT/one.json" 2>"$OUT/one.err"
$PY -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print("one job:", round(j["iops"]), "IOPS, clat p50", j["clat_ns"]["percentile"]["50.000000"]/1e3, "us")' "$OUT/one.json" 2>&1 | tee -a "$OUT/run.log"
for r in 1 2 3; do
  log "round $r: fio 4 forked jobs, per-job IOPS logs"
  rm -f $OUT/r${r}_iops.*.log
  timeout 30 /tmp/fio/fio --name=four $J --numjobs=4 --write_iops_log=$OUT/r$r --log_avg_msec=20 --log_unix_epoch=1 >"$OUT/r$r-fio.json" 2>"$OUT/r$r-fio.err"
  $PY benchmarks/history/fio_job_windows.py "$OUT/r$r-fio.json" $OUT/r${r}_iops.*.log 2>&1 | tee "$OUT/r$r-windows.json" | tee -a "$OUT/run.log"
  log "round $r: the sweep's process workers, the same point"
  timeout 60 $PY -m gdsdiag sweep --dir $D --size 2G --mode cufile --workers process --rw read --bs 4k --threads 4 --time 3s --no-verify --json >"$OUT/r$r-sweep.json" 2>"$OUT/r$r-sweep.err"
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"][0]["summary"]; print("sweep:", round(p["iops"]), "IOPS, p50", p["lat_us"].get("p50"), "us")' "$OUT/r$r-sweep.json" 2>&1 | tee -a "$OUT/run.log"
  pack
done
log "done"; pack
