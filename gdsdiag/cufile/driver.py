"""The cuFile driver: open/close, decoded properties, setters, parameters by name, version."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._lib import Library, load
from .errors import check

STATUS_FLAGS = (
    "CU_FILE_LUSTRE_SUPPORTED",
    "CU_FILE_WEKAFS_SUPPORTED",
    "CU_FILE_NFS_SUPPORTED",
    "CU_FILE_GPFS_SUPPORTED",
    "CU_FILE_NVME_SUPPORTED",
    "CU_FILE_NVMEOF_SUPPORTED",
    "CU_FILE_SCSI_SUPPORTED",
    "CU_FILE_SCALEFLUX_CSD_SUPPORTED",
    "CU_FILE_NVMESH_SUPPORTED",
    "CU_FILE_BEEGFS_SUPPORTED",
    "CU_FILE_NVME_P2P_SUPPORTED",
    "CU_FILE_SCATEFS_SUPPORTED",
)
CONTROL_FLAGS = ("CU_FILE_USE_POLL_MODE", "CU_FILE_ALLOW_COMPAT_MODE")
FEATURE_FLAGS = (
    "CU_FILE_DYN_ROUTING_SUPPORTED",
    "CU_FILE_BATCH_IO_SUPPORTED",
    "CU_FILE_STREAMS_SUPPORTED",
    "CU_FILE_PARALLEL_IO_SUPPORTED",
)

SIZE_PARAMS = (
    "PROFILE_STATS",
    "EXECUTION_MAX_IO_QUEUE_DEPTH",
    "EXECUTION_MAX_IO_THREADS",
    "EXECUTION_MIN_IO_THRESHOLD_SIZE_KB",
    "EXECUTION_MAX_REQUEST_PARALLELISM",
    "PROPERTIES_MAX_DIRECT_IO_SIZE_KB",
    "PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB",
    "PROPERTIES_PER_BUFFER_CACHE_SIZE_KB",
    "PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB",
    "PROPERTIES_IO_BATCHSIZE",
    "POLLTHRESHOLD_SIZE_KB",
    "PROPERTIES_BATCH_IO_TIMEOUT_MS",
)
BOOL_PARAMS = (
    "PROPERTIES_USE_POLL_MODE",
    "PROPERTIES_ALLOW_COMPAT_MODE",
    "FORCE_COMPAT_MODE",
    "FS_MISC_API_CHECK_AGGRESSIVE",
    "EXECUTION_PARALLEL_IO",
    "PROFILE_NVTX",
    "PROPERTIES_ALLOW_SYSTEM_MEMORY",
    "USE_PCIP2PDMA",
    "PREFER_IO_URING",
    "FORCE_ODIRECT_MODE",
    "SKIP_TOPOLOGY_DETECTION",
    "STREAM_MEMOPS_BYPASS",
)
STRING_PARAMS = ("LOGGING_LEVEL", "ENV_LOGFILE_PATH", "LOG_DIR")


def _flags(lib, value: int, names) -> list[str]:
    return [n for n in names if value >> getattr(lib, n) & 1]


@dataclass
class DriverProperties:
    nvfs_major: int
    nvfs_minor: int
    poll_threshold_kb: int
    max_direct_io_size_kb: int
    status_flags: list[str]  # storage types the nvidia-fs path supports
    control_flags: list[str]  # USE_POLL_MODE, ALLOW_COMPAT_MODE
    feature_flags: list[str]
    max_device_cache_size_kb: int
    per_buffer_cache_size_kb: int
    max_device_pinned_mem_size_kb: int
    max_batch_io_size: int
    max_batch_io_timeout_msecs: int
    raw: dict = field(default_factory=dict)

    @property
    def nvfs_loaded(self) -> bool:
        """nvidia-fs version 0.0 means libcufile found no nvidia-fs (kvikio's test, driver.cpp)."""
        return (self.nvfs_major, self.nvfs_minor) != (0, 0)

    @property
    def compat_allowed(self) -> bool:
        return "CU_FILE_ALLOW_COMPAT_MODE" in self.control_flags

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d.pop("raw")
        d["nvfs_loaded"] = self.nvfs_loaded
        return d


def version(library: Library | None = None) -> int:
    return (library or load()).version


class Driver:
    """``with Driver() as drv:`` opens the cuFile driver and always closes it.

    Opening can block forever with libcufile 1.19/1.20 when libcuda.so.1 is missing; use
    ``gdsdiag.cufile.probe.probe_driver_open()`` first where that may happen.
    """

    def __init__(self, library: Library | None = None):
        self.L = library or load()
        self.is_open = False

    def open(self) -> Driver:
        check("cuFileDriverOpen", self.L.lib.cuFileDriverOpen())
        self.is_open = True
        return self

    def close(self) -> None:
        if self.is_open:
            self.is_open = False
            check("cuFileDriverClose", self.L.lib.cuFileDriverClose_v2())

    def __enter__(self) -> Driver:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- properties -------------------------------------------------------------------------
    def properties(self) -> DriverProperties:
        ffi, lib = self.L.ffi, self.L.lib
        p = ffi.new("CUfileDrvProps_t *")
        check("cuFileDriverGetProperties", lib.cuFileDriverGetProperties(p))
        n = p.nvfs
        return DriverProperties(
            nvfs_major=n.major_version,
            nvfs_minor=n.minor_version,
            poll_threshold_kb=n.poll_thresh_size,
            max_direct_io_size_kb=n.max_direct_io_size,
            status_flags=_flags(lib, n.dstatusflags, STATUS_FLAGS),
            control_flags=_flags(lib, n.dcontrolflags, CONTROL_FLAGS),
            feature_flags=_flags(lib, p.fflags, FEATURE_FLAGS),
            max_device_cache_size_kb=p.max_device_cache_size,
            per_buffer_cache_size_kb=p.per_buffer_cache_size,
            max_device_pinned_mem_size_kb=p.max_device_pinned_mem_size,
            max_batch_io_size=p.max_batch_io_size,
            max_batch_io_timeout_msecs=p.max_batch_io_timeout_msecs,
            raw={"dstatusflags": n.dstatusflags, "dcontrolflags": n.dcontrolflags, "fflags": p.fflags},
        )

    def set_poll_mode(self, poll: bool, threshold_kb: int) -> None:
        check("cuFileDriverSetPollMode", self.L.lib.cuFileDriverSetPollMode(poll, threshold_kb))

    def set_max_direct_io_size(self, kb: int) -> None:
        check("cuFileDriverSetMaxDirectIOSize", self.L.lib.cuFileDriverSetMaxDirectIOSize(kb))

    def set_max_cache_size(self, kb: int) -> None:
        check("cuFileDriverSetMaxCacheSize", self.L.lib.cuFileDriverSetMaxCacheSize(kb))

    def set_max_pinned_mem_size(self, kb: int) -> None:
        check("cuFileDriverSetMaxPinnedMemSize", self.L.lib.cuFileDriverSetMaxPinnedMemSize(kb))

    def use_count(self) -> int:
        return int(self.L.lib.cuFileUseCount())

    def bar_size_kb(self, gpu_index: int) -> int:
        v = self.L.ffi.new("size_t *")
        check("cuFileGetBARSizeInKB", self.L.lib.cuFileGetBARSizeInKB(gpu_index, v))
        return int(v[0])


# --- parameters (work before and after open; Set* only before open) -----------------------------


def _enum(lib, name: str, allowed) -> int:
    short = name.upper().replace("CUFILE_PARAM_", "")
    if short not in allowed:
        raise ValueError(f"unknown parameter {name!r}; known: {', '.join(allowed)}")
    return getattr(lib, "CUFILE_PARAM_" + short)


def get_parameter(name: str, library: Library | None = None):
    """Value of a CUFILE_PARAM_* by name (size_t, bool or string parameter)."""
    L = library or load()
    ffi, lib = L.ffi, L.lib
    short = name.upper().replace("CUFILE_PARAM_", "")
    if short in SIZE_PARAMS:
        v = ffi.new("size_t *")
        check(f"cuFileGetParameterSizeT({short})", lib.cuFileGetParameterSizeT(_enum(lib, short, SIZE_PARAMS), v))
        return int(v[0])
    if short in BOOL_PARAMS:
        v = ffi.new("bool *")
        check(f"cuFileGetParameterBool({short})", lib.cuFileGetParameterBool(_enum(lib, short, BOOL_PARAMS), v))
        return bool(v[0])
    if short in STRING_PARAMS:
        buf = ffi.new("char[]", 4096)
        check(
            f"cuFileGetParameterString({short})",
            lib.cuFileGetParameterString(_enum(lib, short, STRING_PARAMS), buf, 4096),
        )
        return ffi.string(buf).decode(errors="replace")
    raise ValueError(f"unknown parameter {name!r}")


def set_parameter(name: str, value, library: Library | None = None) -> None:
    L = library or load()
    lib = L.lib
    short = name.upper().replace("CUFILE_PARAM_", "")
    if short in SIZE_PARAMS:
        check(
            f"cuFileSetParameterSizeT({short})", lib.cuFileSetParameterSizeT(_enum(lib, short, SIZE_PARAMS), int(value))
        )
    elif short in BOOL_PARAMS:
        check(
            f"cuFileSetParameterBool({short})", lib.cuFileSetParameterBool(_enum(lib, short, BOOL_PARAMS), bool(value))
        )
    elif short in STRING_PARAMS:
        check(
            f"cuFileSetParameterString({short})",
            lib.cuFileSetParameterString(_enum(lib, short, STRING_PARAMS), str(value).encode()),
        )
    else:
        raise ValueError(f"unknown parameter {name!r}")


def parameter_range(name: str, library: Library | None = None) -> tuple[int, int]:
    L = library or load()
    lo, hi = L.ffi.new("size_t *"), L.ffi.new("size_t *")
    check(
        f"cuFileGetParameterMinMaxValue({name})",
        L.lib.cuFileGetParameterMinMaxValue(_enum(L.lib, name, SIZE_PARAMS), lo, hi),
    )
    return int(lo[0]), int(hi[0])


def posix_pool_slabs(library: Library | None = None) -> list[tuple[int, int]]:
    """(slab size KiB, count) of the compat-mode host bounce-buffer pools. libcufile wants the exact
    number of slabs as ``len`` (anything else is CU_FILE_INVALID_VALUE), so try the lengths in turn,
    the default three first."""
    L = library or load()
    last = None
    for n in [3] + [i for i in range(1, 17) if i != 3]:
        sizes, counts = L.ffi.new("size_t[]", n), L.ffi.new("size_t[]", n)
        st = L.lib.cuFileGetParameterPosixPoolSlabArray(sizes, counts, n)
        if st.err == 0:
            return [(int(sizes[i]), int(counts[i])) for i in range(n)]
        last = st
    check("cuFileGetParameterPosixPoolSlabArray", last)
    return []


def set_posix_pool_slabs(slabs: list[tuple[int, int]], library: Library | None = None) -> None:
    L = library or load()
    sizes = L.ffi.new("size_t[]", [s for s, _ in slabs])
    counts = L.ffi.new("size_t[]", [c for _, c in slabs])
    check("cuFileSetParameterPosixPoolSlabArray", L.lib.cuFileSetParameterPosixPoolSlabArray(sizes, counts, len(slabs)))


def all_parameters(library: Library | None = None) -> dict:
    out = {}
    for n in SIZE_PARAMS + BOOL_PARAMS + STRING_PARAMS:
        try:
            out[n] = get_parameter(n, library)
        except Exception as e:  # some versions reject deprecated ones (PROFILE_NVTX): keep going
            out[n] = f"error: {e}"
    return out
