"""Every CUfileOpError as a named exception with NVIDIA's text, plus the CUDA driver error when
the code is CU_FILE_CUDA_DRIVER_ERROR, and the decoding of negative ssize_t returns.

The table is NVIDIA's CUFILEOP_STATUS_ENTRIES (cufile.h 1.15; identical through 1.20). The
header's string function is static inline, not exported, so the text has to live here;
tests/test_cufile_header.py compares this table with the installed header.
"""

from __future__ import annotations

import errno as _errno
import os

from ..errors import EXIT_FAIL, GdsdiagError

CUFILEOP_BASE_ERR = 5000

# code: (name, NVIDIA's text)
OP_ERRORS: dict[int, tuple[str, str]] = {
    0: ("CU_FILE_SUCCESS", "cufile success"),
    5001: (
        "CU_FILE_DRIVER_NOT_INITIALIZED",
        "nvidia-fs driver is not loaded. Set allow_compat_mode to true in cufile.json file to enable compatible mode",
    ),
    5002: ("CU_FILE_DRIVER_INVALID_PROPS", "invalid property"),
    5003: ("CU_FILE_DRIVER_UNSUPPORTED_LIMIT", "property range error"),
    5004: ("CU_FILE_DRIVER_VERSION_MISMATCH", "nvidia-fs driver version mismatch"),
    5005: ("CU_FILE_DRIVER_VERSION_READ_ERROR", "nvidia-fs driver version read error"),
    5006: ("CU_FILE_DRIVER_CLOSING", "driver shutdown in progress"),
    5007: ("CU_FILE_PLATFORM_NOT_SUPPORTED", "GPUDirect Storage not supported on current platform"),
    5008: ("CU_FILE_IO_NOT_SUPPORTED", "GPUDirect Storage not supported on current file"),
    5009: ("CU_FILE_DEVICE_NOT_SUPPORTED", "GPUDirect Storage not supported on current GPU"),
    5010: ("CU_FILE_NVFS_DRIVER_ERROR", "nvidia-fs driver ioctl error"),
    5011: ("CU_FILE_CUDA_DRIVER_ERROR", "CUDA Driver API error"),
    5012: ("CU_FILE_CUDA_POINTER_INVALID", "invalid device pointer"),
    5013: ("CU_FILE_CUDA_MEMORY_TYPE_INVALID", "invalid pointer memory type"),
    5014: ("CU_FILE_CUDA_POINTER_RANGE_ERROR", "pointer range exceeds allocated address range"),
    5015: ("CU_FILE_CUDA_CONTEXT_MISMATCH", "cuda context mismatch"),
    5016: ("CU_FILE_INVALID_MAPPING_SIZE", "access beyond maximum pinned size"),
    5017: ("CU_FILE_INVALID_MAPPING_RANGE", "access beyond mapped size"),
    5018: ("CU_FILE_INVALID_FILE_TYPE", "unsupported file type"),
    5019: ("CU_FILE_INVALID_FILE_OPEN_FLAG", "unsupported file open flags"),
    5020: ("CU_FILE_DIO_NOT_SET", "fd direct IO not set"),
    5022: ("CU_FILE_INVALID_VALUE", "invalid arguments"),
    5023: ("CU_FILE_MEMORY_ALREADY_REGISTERED", "device pointer already registered"),
    5024: ("CU_FILE_MEMORY_NOT_REGISTERED", "device pointer lookup failure"),
    5025: ("CU_FILE_PERMISSION_DENIED", "driver or file access error"),
    5026: ("CU_FILE_DRIVER_ALREADY_OPEN", "driver is already open"),
    5027: ("CU_FILE_HANDLE_NOT_REGISTERED", "file descriptor is not registered"),
    5028: ("CU_FILE_HANDLE_ALREADY_REGISTERED", "file descriptor is already registered"),
    5029: ("CU_FILE_DEVICE_NOT_FOUND", "GPU device not found"),
    5030: ("CU_FILE_INTERNAL_ERROR", "internal error"),
    5031: ("CU_FILE_GETNEWFD_FAILED", "failed to obtain new file descriptor"),
    5033: ("CU_FILE_NVFS_SETUP_ERROR", "NVFS driver initialization error"),
    5034: ("CU_FILE_IO_DISABLED", "GPUDirect Storage disabled by config on current file"),
    5035: ("CU_FILE_BATCH_SUBMIT_FAILED", "failed to submit batch operation"),
    5036: ("CU_FILE_GPU_MEMORY_PINNING_FAILED", "failed to allocate pinned GPU Memory"),
    5037: ("CU_FILE_BATCH_FULL", "queue full for batch operation"),
    5038: ("CU_FILE_ASYNC_NOT_SUPPORTED", "cuFile stream operation not supported"),
    5039: ("CU_FILE_INTERNAL_BATCH_SETUP_ERROR", "batch setup internal error - retry later"),
    5040: ("CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR", "batch submit internal error - retry later"),
    5041: ("CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR", "batch get status internal error - retry later"),
    5042: ("CU_FILE_INTERNAL_BATCH_CANCEL_ERROR", "batch cancel internal error - retry later"),
    5043: ("CU_FILE_NOMEM_ERROR", "cufile no memory error - retry later"),
    5044: ("CU_FILE_IO_ERROR", "cufile io error"),
    5045: ("CU_FILE_INTERNAL_BUF_REGISTER_ERROR", "cufile buf registration error"),
    5046: ("CU_FILE_HASH_OPR_ERROR", "cufile hash operation error"),
    5047: ("CU_FILE_INVALID_CONTEXT_ERROR", "cufile invalid context error"),
    5048: ("CU_FILE_NVFS_INTERNAL_DRIVER_ERROR", "nvfs internal driver error"),
    5049: ("CU_FILE_BATCH_NOCOMPAT_ERROR", "compat mode off error"),
    5050: ("CU_FILE_IO_MAX_ERROR", "GPUDirect Storage Max Error"),
}

# CUresult names for the values cuFile passes through most (cuda.h cudaError_enum).
CUDA_ERRORS = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    400: "CUDA_ERROR_INVALID_HANDLE",
    500: "CUDA_ERROR_NOT_FOUND",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    801: "CUDA_ERROR_NOT_SUPPORTED",
    999: "CUDA_ERROR_UNKNOWN",
}

# What to do about the errors users meet most (GDS troubleshooting guide §4 and what the GPU machine showed).
HINTS = {
    5001: "load nvidia_fs or set properties.allow_compat_mode true",
    5008: "the filesystem or the fd's flags are not supported: check 'gdsdiag check --path DIR'",
    5013: "managed (cudaMallocManaged) memory is not supported: use cudaMalloc / cupy.empty",
    5020: "open the file with O_DIRECT (or allow compat mode)",
    5027: "cuFileHandleRegister failed; without /run/udev libcufile cannot read ID_FS_USAGE — see 'gdsdiag check'",
    5033: "no usable CUDA driver (libcuda.so.1) or nvidia-fs setup failed: see cufile.log",
}


class CuFileError(GdsdiagError):
    """A cuFile call failed. ``code`` is the CUfileOpError value, ``name`` its enum name. Part of
    gdsdiag's one error hierarchy: a failure of the data path under test, so it ends a command with
    exit 2 (failures), not 3 (the tool could not run)."""

    exit_code = EXIT_FAIL
    code = -1
    name = "CU_FILE_UNKNOWN_ERROR"

    def __init__(self, call: str, code: int | None = None, cuda_error: int | None = None, detail: str = ""):
        self.call = call
        if code is not None:
            self.code = code
            self.name = OP_ERRORS.get(code, ("CU_FILE_UNKNOWN_ERROR", ""))[0]
        self.text = OP_ERRORS.get(self.code, (self.name, "unknown cufile error"))[1]
        self.cuda_error = cuda_error
        msg = f"{call}: {self.name} ({self.code}): {self.text}"
        if cuda_error:
            msg += f" [CUDA {CUDA_ERRORS.get(cuda_error, 'CUresult')} ({cuda_error})]"
        if detail:
            msg += f" — {detail}"
        hint = HINTS.get(self.code)
        if hint:
            msg += f" — {hint}"
        super().__init__(msg)  # the hint is part of the one line already


class CuFileOSError(CuFileError):
    """A cuFile I/O call returned -1 with errno set (or -errno)."""

    name = "ERRNO"

    def __init__(self, call: str, err: int):
        self.errno = err
        self.call, self.code, self.cuda_error = call, -err, None
        self.text = os.strerror(err)
        GdsdiagError.__init__(self, f"{call}: {_errno.errorcode.get(err, err)} ({err}): {self.text}")


def _class_name(enum_name: str) -> str:
    parts = enum_name.replace("CU_FILE_", "").split("_")
    if parts[-1] == "ERROR":  # CU_FILE_IO_ERROR -> IoError, not IoErrorError
        parts = parts[:-1]
    return "".join(p.capitalize() for p in parts) + "Error"


#: name -> exception class, e.g. ERRORS["CU_FILE_HANDLE_NOT_REGISTERED"] is HandleNotRegisteredError
ERRORS: dict[str, type[CuFileError]] = {}
_BY_CODE: dict[int, type[CuFileError]] = {}
for _code, (_name, _text) in OP_ERRORS.items():
    if _code == 0:
        continue
    _cls = type(_class_name(_name), (CuFileError,), {"code": _code, "name": _name, "__doc__": _text})
    ERRORS[_name] = _cls
    _BY_CODE[_code] = _cls
    globals()[_cls.__name__] = _cls


def error_for(call: str, code: int, cuda_error: int | None = None, detail: str = "") -> CuFileError:
    cls = _BY_CODE.get(code, CuFileError)
    return cls(call, code, cuda_error, detail)


def check(call: str, status) -> None:
    """Raise the named exception for a CUfileError_t that is not success."""
    if status.err != 0:
        raise error_for(call, status.err, status.cu_err if status.err == 5011 else None)


def check_ssize(call: str, ret: int, errno_value: int = 0) -> int:
    """cuFileRead/Write return bytes done, -1 with errno set, or -CUfileOpError (|value| > 5000)."""
    if ret >= 0:
        return ret
    if ret == -1:
        raise CuFileOSError(call, errno_value or _errno.EIO)
    if -ret > CUFILEOP_BASE_ERR:
        raise error_for(call, -ret)
    raise CuFileOSError(call, -ret)
