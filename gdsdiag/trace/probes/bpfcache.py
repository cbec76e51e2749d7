"""A cache of the compiled probe program, so a trace goes live without running clang again.

bcc compiles the C text with clang on every start (4-6 s on the GPU machine, 8-15 s on the 2-vCPU
dev VM: most of the start-up) and has no way to load a compiled object. What bcc hands the kernel
is plain: each function's instructions (after its rewriter, with the maps' descriptors in the
map-load instructions) and the maps' definitions. After a compile, ``save`` keeps those; a later
start whose program text, kernel (release and build) and bcc version are the same loads them with
libbcc's own ``bcc_create_map`` / ``bcc_prog_load`` after putting the new maps' descriptors into
the instructions (``CachedBPF``), and uses bcc's attach, table and ring-buffer code as usual. The
kernel's verifier checks the instructions as it does any program.

The cache lives in the private cache directory's ``bpf`` (gdsdiag/privdir.py: /var/cache/gdsdiag/bpf
as trace runs as root, never a user's HOME under ``sudo -E``), every component opened without
following a symlink and checked (owner, mode) on every use; one JSON file per key, written
atomically with mode 0600 through the checked directory's descriptor; a file not owned by us,
writable by others, a symlink or of another shape is ignored and the program compiled as before.
``GDSDIAG_BPF_CACHE=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import stat
import struct

FORMAT = 1
BPF_PSEUDO_MAP_FD = 1
_LD_IMM64 = 0x18
# map types whose tables the trace reads or writes from Python (others are the kernel's own)
_HASH, _ARRAY, _LRU_HASH, _RINGBUF = 1, 2, 9, 27


def cache_dir() -> str:
    from ... import privdir

    return os.path.join(privdir.location(), "bpf")


def _open_dir(create: bool) -> int:
    from ... import privdir

    return privdir.open_dir("bpf", create=create)


def enabled() -> bool:
    return os.environ.get("GDSDIAG_BPF_CACHE", "1") != "0"


def key(text: str, cflags: list[str], bcc_version: str) -> str:
    u = os.uname()
    h = hashlib.sha256()
    for part in (str(FORMAT), text, " ".join(cflags), bcc_version, u.release, u.version, u.machine):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:32]


def _name(k: str) -> str:
    return f"probes-{k}.json"


def _lib():
    from bcc.libbcc import lib

    lib.bcc_create_map.restype = ctypes.c_int
    lib.bcc_create_map.argtypes = [ctypes.c_int, ctypes.c_char_p] + [ctypes.c_int] * 4
    lib.bcc_prog_load.restype = ctypes.c_int
    lib.bcc_prog_load.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    for fn in ("bpf_table_key_size_id", "bpf_table_leaf_size_id"):
        getattr(lib, fn).restype = ctypes.c_size_t
        getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
    lib.bpf_num_tables.restype = ctypes.c_ulonglong
    lib.bpf_num_tables.argtypes = [ctypes.c_void_p]
    lib.bpf_table_name.restype = ctypes.c_char_p
    lib.bpf_table_name.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
    lib.bpf_table_fd_id.restype = ctypes.c_int
    lib.bpf_table_fd_id.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
    return lib


def save(b, k: str) -> None:
    """Keep what bcc compiled for this key (best effort: a cache that cannot be written is skipped)."""
    lib = _lib()
    mod = b.module
    tables = []
    for i in range(lib.bpf_num_tables(mod)):
        name = lib.bpf_table_name(mod, i).decode()
        tables.append(
            {
                "name": name,
                "fd": lib.bpf_table_fd_id(mod, i),
                "type": lib.bpf_table_type_id(mod, i),
                "key_size": lib.bpf_table_key_size_id(mod, i),
                "leaf_size": lib.bpf_table_leaf_size_id(mod, i),
                "max_entries": lib.bpf_table_max_entries_id(mod, i),
                "flags": lib.bpf_table_flags_id(mod, i),
                "key_desc": (lib.bpf_table_key_desc(mod, name.encode()) or b"").decode(),
                "leaf_desc": (lib.bpf_table_leaf_desc(mod, name.encode()) or b"").decode(),
            }
        )
    fds = {t["fd"] for t in tables}
    funcs = {}
    for i in range(lib.bpf_num_functions(mod)):
        name = lib.bpf_function_name(mod, i)
        start, size = lib.bpf_function_start(mod, name), lib.bpf_function_size(mod, name)
        insns = ctypes.string_at(start, size)
        for _, src, imm in _map_loads(insns):
            if src != BPF_PSEUDO_MAP_FD or imm not in fds:
                return  # something this loader does not relocate: keep compiling
        funcs[name.decode()] = insns.hex()
    doc = {
        "format": FORMAT,
        "license": lib.bpf_module_license(mod).decode(),
        "kern_version": lib.bpf_module_kern_version(mod),
        "tables": tables,
        "functions": funcs,
    }
    from ... import privdir

    try:
        dfd = _open_dir(create=True)
    except OSError:
        return  # no private directory (another owner, a symlink, not writable): no cache
    try:
        privdir.replace_into(dfd, _name(k), json.dumps(doc).encode())
        _prune(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


KEEP = 16  # programs kept (each ~300 KB): one per set of options and libcufile builds in use


def _prune(dfd: int) -> None:
    """Remove the oldest programs beyond KEEP: only regular files of ours named probes-*, looked
    at without following links, in the checked directory (never a directory a symlink points to)."""
    me = os.geteuid()
    found = []
    for name in os.listdir(dfd):
        if not name.startswith("probes-"):
            continue
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == me:
            found.append((st.st_mtime, name))
    for _, name in sorted(found)[:-KEEP]:
        try:
            os.unlink(name, dir_fd=dfd)
        except OSError:
            pass


def _map_loads(insns: bytes):
    """(offset, src_reg, imm) of each 64-bit immediate load that refers to a map."""
    i = 0
    while i + 16 <= len(insns):
        code, regs, _, imm = struct.unpack_from("<BBhi", insns, i)
        if code == _LD_IMM64:
            if regs >> 4:
                yield i, regs >> 4, imm
            i += 16
        else:
            i += 8


def load(k: str) -> dict | None:
    """The cached program for this key, or None (absent, not ours, writable by others, a symlink
    in the path, damaged)."""
    from ... import privdir
    from ...bounded import MAX_BPF_CACHE, loads_json

    try:
        dfd = _open_dir(create=False)
    except OSError:
        return None
    try:
        fd = privdir.open_file(dfd, _name(k), os.path.join(cache_dir(), _name(k)))
    except OSError:
        return None
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_BPF_CACHE + 1)
    if len(data) > MAX_BPF_CACHE:
        return None
    try:
        doc = loads_json(data.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    return doc


# The probes' programs attached to a perf event (bpf.Probes._major_faults): loaded as that type from
# the cache too. Loaded as a uprobe's (the default), the kernel refused the program's read of its
# perf context, the whole cached object was refused, and every start compiled with clang again.
PERF_EVENT_PROGRAMS = frozenset({"on_major_fault"})


def cached_bpf(bcc, doc: dict):
    """A bcc.BPF whose maps and programs come from the cache (no clang). Raises OSError when the
    kernel refuses a map or a program (the caller then compiles)."""
    BPF = bcc.BPF

    class CachedBPF(BPF):  # type: ignore[misc,valid-type]  # (bcc has no type information)
        def __init__(self):  # noqa: D107 - bcc's own attributes, without a compiled module
            self.kprobe_fds, self.uprobe_fds, self.tracepoint_fds, self.raw_tracepoint_fds = {}, {}, {}, {}
            self.kfunc_entry_fds, self.kfunc_exit_fds, self.lsm_fds = {}, {}, {}
            self.perf_buffers, self.open_perf_events = {}, {}
            self._ringbuf_manager = None
            self.tracefile = None
            self.debug = 0
            self.funcs, self.tables = {}, {}
            self.module = None
            self.map_fds: list[int] = []
            self.insns: dict[str, bytes] = {}  # each program as loaded (uprobemulti.py loads them again)
            self.license = b""
            self._defs: dict[str, dict] = {}

        def load_func(self, func_name, prog_type, device=None, attach_type=-1):
            name = func_name.encode() if isinstance(func_name, str) else func_name
            if name in self.funcs:
                return self.funcs[name]
            raise Exception(f"program {name!r} is not in the cached object")

        def get_table(self, name, keytype=None, leaftype=None, reducer=None):
            import bcc.table as bt

            name = name.decode() if isinstance(name, bytes) else name
            d = self._defs.get(name)
            if d is None:
                raise KeyError(name)
            cls = {_HASH: bt.HashTable, _LRU_HASH: bt.LruHash, _ARRAY: bt.Array, _RINGBUF: bt.RingBuf}.get(d["type"])
            if cls is None:
                raise KeyError(f"{name}: a map of type {d['type']} is not read from Python")
            t = cls.__new__(cls)
            t.bpf, t.map_id, t.map_fd, t._name, t._cbs = self, -1, d["new_fd"], name.encode(), {}
            t.ttype, t.flags, t.max_entries = d["type"], d["flags"], d["max_entries"]
            t.Key = keytype or (BPF._decode_table_type(json.loads(d["key_desc"])) if d["key_desc"] else None)
            t.Leaf = leaftype or (BPF._decode_table_type(json.loads(d["leaf_desc"])) if d["leaf_desc"] else None)
            return t

        def close(self):
            super().close()
            for fd in self.map_fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.map_fds = []

    lib = _lib()
    b = CachedBPF()
    try:
        remap = {}
        for t in doc["tables"]:
            fd = lib.bcc_create_map(
                t["type"], t["name"].encode()[:15], t["key_size"], t["leaf_size"], t["max_entries"], t["flags"]
            )
            if fd < 0:
                raise OSError(ctypes.get_errno(), f"map {t['name']}: {os.strerror(ctypes.get_errno())}")
            b.map_fds.append(fd)
            remap[t["fd"]] = fd
            b._defs[t["name"]] = {**t, "new_fd": fd}
        lic = doc["license"].encode()
        b.license = lic
        for name, hexed in doc["functions"].items():
            insns = bytearray(bytes.fromhex(hexed))
            for off, _, imm in list(_map_loads(bytes(insns))):
                struct.pack_into("<i", insns, off + 4, remap[imm])
            buf = (ctypes.c_char * len(insns)).from_buffer(insns)
            b.insns[name] = bytes(insns)
            ptype = (
                BPF.TRACEPOINT
                if name.startswith("tracepoint__")
                else BPF.RAW_TRACEPOINT
                if name.startswith("raw_tracepoint__")
                else BPF.PERF_EVENT
                if name in PERF_EVENT_PROGRAMS
                else BPF.KPROBE
            )
            fd = lib.bcc_prog_load(
                ptype, name.encode()[:15], ctypes.addressof(buf), len(insns), lic, doc["kern_version"], 0, None, 0
            )
            if fd < 0:
                raise OSError(ctypes.get_errno(), f"program {name}: {os.strerror(ctypes.get_errno())}")
            b.funcs[name.encode()] = BPF.Function(b, name.encode(), fd)
        # what BPF() does after a compile: attach every TRACEPOINT_PROBE and RAW_TRACEPOINT_PROBE
        for name in doc["functions"]:
            if name.startswith("raw_tracepoint__"):
                b.attach_raw_tracepoint(tp=name[len("raw_tracepoint__") :].encode(), fn_name=name.encode())
            elif name.startswith("tracepoint__"):
                cat, _, ev = name[len("tracepoint__") :].partition("__")
                b.attach_tracepoint(tp=f"{cat}:{ev}".encode(), fn_name=name.encode())
    except BaseException:
        b.cleanup()
        raise
    return b
