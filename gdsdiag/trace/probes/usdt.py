"""USDT probes as plain uprobes: a handler per (probe, argument layout), attached at each probe's
address in every copy of the library that has that layout.

bcc's own USDT support compiles argument readers for every location of every enabled probe into the
program; on the 2-vCPU dev VM that cost ~10 s of compile CPU for libcufile's 14 route probes, and it
cannot add a library found later without compiling again. Here the note's argument specification
(SystemTap SDT, x86-64 AT&T operands: ``-8@%rax``, ``8@40(%rbx)``, ``-4@%r13d``, ``1@%al``, ``$5``) is
turned into a few lines of C reading ``struct pt_regs`` or user memory, and only the arguments the
classifier uses are read. A later copy of the same build (same probe addresses and operands — the
usual case: a wheel's library copied into a container or a vendored directory) reuses the handlers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REGS = {
    "rax": "ax",
    "rbx": "bx",
    "rcx": "cx",
    "rdx": "dx",
    "rsi": "si",
    "rdi": "di",
    "rbp": "bp",
    "rsp": "sp",
    "eax": "ax",
    "ebx": "bx",
    "ecx": "cx",
    "edx": "dx",
    "esi": "si",
    "edi": "di",
    "ebp": "bp",
    "esp": "sp",
    "ax": "ax",
    "bx": "bx",
    "cx": "cx",
    "dx": "dx",
    "si": "si",
    "di": "di",
    "bp": "bp",
    "sp": "sp",
    "al": "ax",
    "bl": "bx",
    "cl": "cx",
    "dl": "dx",
    "sil": "si",
    "dil": "di",
    "bpl": "bp",
    "spl": "sp",
    "rip": "ip",
}
for _n in range(8, 16):
    for _suf in ("", "d", "w", "b"):
        _REGS[f"r{_n}{_suf}"] = f"r{_n}"
_CTYPE = {1: "s8", 2: "s16", 4: "s32", 8: "s64", -1: "s8", -2: "s16", -4: "s32", -8: "s64"}
_UTYPE = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


class UnsupportedSpec(ValueError):
    pass


def arg_reader(spec: str, k: int) -> str:
    """C that sets v[k] from one argument spec (``SIZE@OPERAND``), sign- or zero-extended by size."""
    m = re.fullmatch(r"(-?\d+)@(.+)", spec)
    if not m:
        raise UnsupportedSpec(spec)
    size, op = int(m.group(1)), m.group(2)
    if abs(size) not in (1, 2, 4, 8):
        raise UnsupportedSpec(spec)
    ctype = _CTYPE[size] if size < 0 else _UTYPE[size]
    if op.startswith("$"):
        return f"    v[{k}] = ({ctype})({int(op[1:], 0)});\n"
    # a register (%rax), or memory at a register plus a displacement (-8(%rbp))
    r = re.fullmatch(r"%(\w+)", op) or re.fullmatch(r"(-?\d*)\(%(\w+)\)", op)
    if r is None or (reg := _REGS.get(r.groups()[-1])) is None:
        raise UnsupportedSpec(spec)
    if len(r.groups()) == 1:
        return f"    v[{k}] = ({ctype})ctx->{reg};\n"
    off = int(r.group(1) or "0")
    return f"    {{ {ctype} t = 0; bpf_probe_read_user(&t, sizeof(t), (void *)(ctx->{reg} + ({off}))); v[{k}] = t; }}\n"


@dataclass(frozen=True)
class Site:
    key: str  # provider:name
    pc: int  # virtual address of the probe in the ELF
    args: str  # the note's argument specification


def layout(site: Site, nargs: int) -> tuple[str, tuple[str, ...]]:
    """What a handler depends on: the probe and the specs of the arguments it reads."""
    return site.key, tuple(site.args.split()[:nargs])


def handler(name: str, probe_id: int, specs: tuple[str, ...], fold_sys: str = "") -> str:
    """C for one probe site layout. FOLD_SYS (a syscall id's C name, SYS_PREAD64 / SYS_PWRITE64): the
    probe fires after that syscall of a cuFile call and carries the file offset (v[1]) and size (v[2]);
    a hit on the calling thread inside the call is added to the call's exit record (fold_usdt in
    probes/cufile_trace.c) instead of sent as its own."""
    reads = "".join(arg_reader(s, k) for k, s in enumerate(specs[:6]))
    fold = f"    if (fold_usdt({probe_id}, {fold_sys}, v[1], v[2]))\n        return 0;\n" if fold_sys else ""
    return (
        f"int {name}(struct pt_regs *ctx) {{\n    s64 v[6] = {{}};\n{reads}{fold}"
        f"    return emit(ctx, EV_USDT, {probe_id}, v[0], v[1], v[2], v[3], v[4], v[5], {len(specs)});\n}}\n"
    )
