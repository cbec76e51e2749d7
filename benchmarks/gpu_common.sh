# Sourced by the benchmarks/gpu_*.sh scripts (GPU machine): $1 is the device's $OUT. Sets OUT (a deep
# folder: the device returns only a few files, so the raw outputs are packed), log, pack, PY, the
# kit's environment (bcc, wheels, gds_udev_entry), libcufile's directory on LD_LIBRARY_PATH and this
# checkout first on PYTHONPATH (BASE_PYTHONPATH keeps what the kit set).
OUT0=${1:-/tmp/out}; OUT=$OUT0/k/e/e/p/raw; mkdir -p "$OUT"
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/run.log"; }
pack() { tar -C "$OUT" -czf "$OUT0/results.tgz.tmp" . && mv "$OUT0/results.tgz.tmp" "$OUT0/results.tgz"; cp "$OUT/run.log" "$OUT0/run.log"; }
PY=${PYTHON:-python3}
for k in .device ../.device; do [ -f $k/env.sh ] && { source $k/env.sh; break; }; done
cuf=$($PY -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cuf:+$cuf:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BASE_PYTHONPATH=${PYTHONPATH:-}
export PYTHONPATH=$PWD${BASE_PYTHONPATH:+:$BASE_PYTHONPATH}
machine_line() {
  log "machine: $(nproc) CPUs, $(uname -r), $($PY --version 2>&1), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
}
