#!/usr/bin/env bash
# Short second GPU-machine call: the GPU sweep tests, the compat pool in effect under a tiny
# cufile.json, and fio before/after (ABA) for the points where order mattered.
set -u
OUT0=${1:-/tmp/out}; OUT=/tmp/t10-out; mkdir -p "$OUT" "$OUT0"
for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; KIT=$k; break; }; done
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
( gds_build_fio $KIT ) 2>&1 | tail -1 | tee -a "$OUT/run.log"
export GDSDIAG_FIO=/tmp/fio/fio
cuf=$(python3 -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
D=/var/tmp/gds-t10; mkdir -p $D; gds_udev_entry $D
if ls whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --target /tmp/t10py whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/t10py; fi
log "GPU sweep tests"
timeout 75 python3 -m pytest -q -p no:cacheprovider tests/test_sweep_gpu.py 2>&1 | tail -12 | tee -a "$OUT/run.log"
python3 - <<'PY' 2>&1 | tee -a "$OUT/run.log"
import json
from gdsdiag.cufile_json import strip_comments
doc = json.loads(strip_comments(open("/etc/cufile.json").read()))
doc.setdefault("properties", {}).update({"posix_pool_slab_size_kb": [4, 1024, 16384], "posix_pool_slab_count": [1, 1, 1]})
open("/tmp/cufile-tiny-pool.json", "w").write(json.dumps(doc))
PY
CUFILE_ENV_PATH_JSON=/tmp/cufile-tiny-pool.json python3 -c '
from gdsdiag import cufile
d = cufile.Driver().open(); print("posix pool under the tiny cufile.json:", cufile.driver.posix_pool_slabs()); d.close()' 2>&1 | tail -1 | tee -a "$OUT/run.log"
log "ABA"
timeout 100 python3 -m gdsdiag sweep --dir $D --size 2G --time 2s --compare-fio --no-verify --json --mode host,cufile --rw read --bs 1m --threads 1 >"$OUT/aba.json" 2>"$OUT/aba.txt"
timeout 60 python3 -m gdsdiag sweep --dir $D --size 2G --time 2s --compare-fio --no-verify --json --mode host --rw read --bs 4k --threads 1 --iodepth 32 >"$OUT/aba32.json" 2>"$OUT/aba32.txt"
cat "$OUT/aba.txt" "$OUT/aba32.txt" | tee -a "$OUT/run.log"
log done
tar -C "$OUT" -czf "$OUT0/results.tgz" . && cp "$OUT/run.log" "$OUT0/run.log"
