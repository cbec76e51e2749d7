#!/usr/bin/env bash
# kvikio through cuFile under gdsdiag trace, once per libcufile release carried in .whl/ (kvikio
# dlopens libcufile.so.0: LD_LIBRARY_PATH picks the copy). On the GPU machine, from the repo root:
#   source .device/env.sh; bash tests/workloads/gpu_trace_cufile_releases.sh
set -u
source .device/env.sh; gds_udev_entry /var/tmp; mkdir -p /var/tmp/kv  # (its functions are not inherited by this shell)
for w in .whl/nvidia_cufile-*.whl; do
  v=$(basename $w | cut -d- -f2); W=/tmp/cuf-$v; rm -rf $W; mkdir -p $W
  python3 -m zipfile -e "$w" $W >/dev/null 2>&1
  lib=$(dirname "$(ls $W/nvidia/*/lib/libcufile.so.0 | head -1)")
  LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} KVIKIO_COMPAT_MODE=OFF timeout 40 python3 -m gdsdiag trace --json -- python3 tests/workloads/kvikio_load.py /var/tmp/kv > /tmp/k-$v.jsonl 2> /tmp/k-$v.err
  echo "$v rc=$?: $(grep '"type": "io"' /tmp/k-$v.jsonl | python3 -c 'import sys,json,collections; print(dict(collections.Counter((v["api"],v["route"],v["confidence"]) for v in map(json.loads,sys.stdin) if "kvikio.dat" in (v["path"] or ""))))') | $(grep '"type": "summary"' /tmp/k-$v.jsonl | python3 -c 'import sys,json; s=json.loads(sys.stdin.read()); print("lost", s["lost_events"], [(l["path"].split("/")[2], l["usdt"], l["uprobes"], l["pids"]) for l in s["libraries"] if "cufile" in l["path"]])')"
done
