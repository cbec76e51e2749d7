"""Uprobes as BPF links of the kernel's uprobe_multi kind (Linux >= 6.6) instead of bcc's perf events.

Why: the kernel detaches a perf-event uprobe under its global event mutex, waiting an RCU grace
period each time (~110 ms on the dev VM): 37 uprobes took 4 s to detach, the ~90 on the GPU machine
~10 s, and parallel closes do not help (the mutex serialises them). A uprobe_multi link is released
without that mutex, so closing all links at once (detach.py) shares one grace period among them.

bcc 0.26 cannot make such links, so this does what libbpf's attach would: the handler's instructions
(as bcc compiled them, map descriptors in place) are loaded once more as a kprobe-type program with
expected_attach_type BPF_TRACE_UPROBE_MULTI, and BPF_LINK_CREATE attaches it at the file offset bcc
itself resolves for the symbol or address. A kernel without uprobe_multi refuses the first attach,
and the caller goes back to bcc's attach_uprobe for the whole trace.
"""

from __future__ import annotations

import ctypes
import os
import platform

BPF_PROG_LOAD, BPF_LINK_CREATE = 5, 28
BPF_PROG_TYPE_KPROBE = 2
BPF_TRACE_UPROBE_MULTI = 48
BPF_F_UPROBE_MULTI_RETURN = 1
_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
_libc = ctypes.CDLL(None, use_errno=True)


class Unsupported(OSError):
    """This kernel (or machine) makes no uprobe_multi links: use perf-event uprobes."""


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    if _NR_BPF is None:
        raise Unsupported(f"no bpf syscall number known for {platform.machine()}")
    fd = _libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


class UprobeLinks:
    """The handlers loaded for uprobe_multi and the links made with them (all closed by close())."""

    def __init__(self, b, insns_of, license: bytes):
        self.b = b  # the bcc.BPF: its symbol resolution only
        self._insns_of = insns_of  # handler name -> its instructions (bytes)
        self._license = ctypes.create_string_buffer(license)
        self._progs: dict[str, int] = {}
        self.links: list[int] = []
        self.log = ctypes.create_string_buffer(1 << 16)

    def _prog(self, fn: str) -> int:
        fd = self._progs.get(fn)
        if fd is not None:
            return fd
        insns = self._insns_of(fn)
        buf = ctypes.create_string_buffer(insns, len(insns))
        attr = (ctypes.c_ubyte * 144)()
        ctypes.c_uint32.from_buffer(attr, 0).value = BPF_PROG_TYPE_KPROBE
        ctypes.c_uint32.from_buffer(attr, 4).value = len(insns) // 8
        ctypes.c_uint64.from_buffer(attr, 8).value = ctypes.addressof(buf)
        ctypes.c_uint64.from_buffer(attr, 16).value = ctypes.addressof(self._license)
        name = fn.encode()[:15]
        ctypes.memmove(ctypes.addressof(attr) + 48, name, len(name))
        ctypes.c_uint32.from_buffer(attr, 68).value = BPF_TRACE_UPROBE_MULTI
        try:
            fd = _bpf(BPF_PROG_LOAD, attr)
        except OSError as e:
            raise Unsupported(e.errno, f"load {fn} for uprobe_multi: {e.strerror}") from None
        self._progs[fn] = fd
        return fd

    def attach(self, path: str, fn: str, sym: str | None = None, addr: int | None = None, ret: bool = False) -> None:
        """One uprobe (ret: uretprobe) at SYM or ADDR of the file PATH, running handler FN."""
        from bcc import BPF

        p, offset = BPF._check_path_symbol(path.encode(), (sym or "").encode(), addr, -1, 0)
        prog = self._prog(fn)
        cpath = ctypes.create_string_buffer(p if isinstance(p, bytes) else p.encode())
        offs = (ctypes.c_uint64 * 1)(offset)
        attr = (ctypes.c_ubyte * 64)()
        ctypes.c_uint32.from_buffer(attr, 0).value = prog
        ctypes.c_uint32.from_buffer(attr, 8).value = BPF_TRACE_UPROBE_MULTI
        ctypes.c_uint64.from_buffer(attr, 16).value = ctypes.addressof(cpath)
        ctypes.c_uint64.from_buffer(attr, 24).value = ctypes.addressof(offs)
        ctypes.c_uint32.from_buffer(attr, 48).value = 1
        ctypes.c_uint32.from_buffer(attr, 52).value = BPF_F_UPROBE_MULTI_RETURN if ret else 0
        try:
            self.links.append(_bpf(BPF_LINK_CREATE, attr))
        except OSError as e:
            if not self.links and e.errno in (22, 38, 95, 524):  # EINVAL ENOSYS EOPNOTSUPP ENOTSUPP
                raise Unsupported(e.errno, f"uprobe_multi link: {e.strerror}") from None
            raise

    def fds(self) -> list[int]:
        """Links first (closing them detaches), then the programs."""
        return self.links + list(self._progs.values())

    def forget(self) -> None:
        self.links, self._progs = [], {}
