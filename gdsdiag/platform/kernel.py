"""Kernel facts: release, loaded modules, module parameters, build config, and the few
/proc/kallsyms symbols the GDS routes depend on. All readers go through an ``FsRoot``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .fsroot import FsRoot

# Registration symbols nvidia-fs looks up with __symbol_get() (gds-nvidia-fs src/nvfs-dma.c
# modules_list[]): symbol -> (driver shown by gdscheck, module that normally exports it).
NVFS_REGISTRATION_SYMBOLS = {
    "nvme_v1_register_nvfs_dma_ops": ("NVMe", "nvme"),
    "nvme_v2_register_nvfs_dma_ops": ("NVMe", "nvme"),
    "nvme_rdma_v1_register_nvfs_dma_ops": ("NVMeOF", "nvme_rdma"),
    "rpcrdma_register_nvfs_dma_ops": ("NFS", "rpcrdma"),
    "lustre_v1_register_nvfs_dma_ops": ("DDN EXAScaler", "lnet"),
    "beegfs_v1_register_nvfs_dma_ops": ("BeeGFS", "beegfs"),
    "ibm_scale_v1_register_nvfs_dma_ops": ("IBM Spectrum Scale", "mmfslinux"),
    "nvmesh_v1_register_nvfs_dma_ops": ("NVMesh", "nvmeib_common"),
    "sfxv_v1_register_nvfs_dma_ops": ("ScaleFlux CSD", "sfxvdriver"),
    "scatefs_register_nvfs_dma_ops": ("ScaTeFS", "scatefs"),
    "scsi_v1_register_dma_scsi_ops": ("SCSI", "scsi_mod"),
}
# PCI P2PDMA: NVIDIA's troubleshooting guide §14 greps p2pdma_pgmap_ops; the NVIDIA UVM driver
# calls pci_p2pdma_add_resource() to publish the GPU's BAR1 (kernel-open/nvidia-uvm/uvm_pmm_gpu.c).
P2PDMA_SYMBOLS = ("p2pdma_pgmap_ops", "pci_p2pdma_add_resource", "pci_p2pdma_map_segment", "__pci_p2pdma_update_state")
OTHER_SYMBOLS = ("nvidia_p2p_get_pages_persistent", "nvidia_p2p_dma_map_pages")
INTERESTING_SYMBOLS = frozenset(NVFS_REGISTRATION_SYMBOLS) | frozenset(P2PDMA_SYMBOLS) | frozenset(OTHER_SYMBOLS)


@dataclass
class Kallsyms:
    readable: bool
    symbols: dict[str, str | None] = field(default_factory=dict)  # name -> module (None: vmlinux)
    source: str = "/proc/kallsyms"

    def has(self, name: str) -> bool:
        return name in self.symbols


def read_kallsyms(fs: FsRoot, wanted=INTERESTING_SYMBOLS) -> Kallsyms:
    """Find ``wanted`` names in /proc/kallsyms. The type letter is ignored on purpose: exported
    module functions show as lowercase 't' on recent kernels.

    One read and one regular-expression scan for just those names: splitting each of the
    ~120,000 lines in Python took over a second, most of 'gdsdiag check'."""
    out = Kallsyms(readable=False)
    raw = fs.read_bytes("/proc/kallsyms")
    if not raw:
        return out
    out.readable = True
    for name in sorted(wanted):
        key = name.encode()
        i = raw.find(key)
        while i >= 0:
            # a whole name between the type letter's blank and the end of line / module column
            end = i + len(key)
            if raw[i - 1 : i] in (b" ", b"\t") and raw[end : end + 1] in (b"\n", b"\t", b" ", b""):
                line_end = raw.find(b"\n", end)
                rest = raw[end : line_end if line_end >= 0 else len(raw)].strip()
                mod = rest.strip(b"[]").decode("ascii", "replace") if rest.startswith(b"[") else None
                out.symbols[name] = mod
                break
            i = raw.find(key, end)
    return out


def read_modules(fs: FsRoot) -> dict[str, str]:
    """Loaded modules from /proc/modules: name -> state (Live/Loading/Unloading)."""
    mods: dict[str, str] = {}
    for line in (fs.read_text("/proc/modules") or "").splitlines():
        parts = line.split()
        if len(parts) >= 5:
            mods[parts[0]] = parts[4]
    return mods


def module_loaded(fs: FsRoot, name: str, mods: dict[str, str] | None = None) -> bool:
    mods = read_modules(fs) if mods is None else mods
    return name in mods or fs.exists(f"/sys/module/{name}/initstate")


def module_param(fs: FsRoot, module: str, param: str) -> str | None:
    return fs.read_text(f"/sys/module/{module}/parameters/{param}")


def kernel_release(fs: FsRoot) -> str | None:
    rel = fs.read_text("/proc/sys/kernel/osrelease")
    if rel:
        return rel
    m = re.search(r"Linux version (\S+)", fs.read_text("/proc/version") or "")
    return m.group(1) if m else None


def kernel_version_tuple(release: str | None) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass
class KernelConfig:
    source: str | None
    options: dict[str, str] = field(default_factory=dict)

    def value(self, key: str) -> str | None:
        """'y', 'm', a value, 'n' for '# CONFIG_X is not set', None when unknown."""
        if self.source is None:
            return None
        return self.options.get(key, "n")


MAX_KCONFIG = 16 << 20


def read_kernel_config(fs: FsRoot, release: str | None = None) -> KernelConfig:
    release = release or kernel_release(fs)
    candidates = [f"/boot/config-{release}"] if release else []
    candidates.append("/proc/config.gz")
    for path in candidates:
        raw = fs.read_bytes(path)
        if raw is None:
            continue
        if path.endswith(".gz"):
            # bounded (issue 24: 4.5 KB of snapshot held 2.5 GiB of zeros here): a real kernel
            # config is ~250 KiB; past MAX_KCONFIG the rest is not read
            try:
                import zlib

                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                raw = d.decompress(raw, MAX_KCONFIG)
            except zlib.error:
                continue
        cfg = KernelConfig(source=path)
        for line in raw.decode("utf-8", "replace").splitlines():
            m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
            if m:
                cfg.options[m.group(1)] = m.group(2).strip('"')
            else:
                m = re.match(r"^# (CONFIG_\w+) is not set", line)
                if m:
                    cfg.options[m.group(1)] = "n"
        return cfg
    return KernelConfig(source=None)
