"""Everything the checks read, gathered once per run from one root (live or snapshot)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property

from .. import cufile_json
from ..platform import kernel, mounts, nvfs_proc, nvidia_proc
from ..platform.fsroot import FsRoot
from ..platform.libcufile import LibcufileInfo

SNAPSHOT_LIBCUFILE = "/gdsdiag/libcufile.json"  # written by 'gdsdiag snapshot' (not a kernel file)


_S = (str, None)
# what libcufile() reads of a snapshot's gdsdiag/libcufile.json
_LIBCUFILE_SHAPE = {
    "path": _S,
    "found_via": _S,
    "version": _S,
    "candidates": ([{"via!": str, "path!": str}], None),
    "trace_probes_present": ([str], None),
    "usdt_probe_count": (int, None),
    "probe_error": _S,
}


@dataclass
class CheckContext:
    fs: FsRoot
    env: dict = field(default_factory=dict)
    libcufile_path: str | None = None

    @property
    def live(self) -> bool:
        return self.fs.is_live

    @cached_property
    def driver(self) -> nvidia_proc.NvidiaDriver:
        return nvidia_proc.read_driver(self.fs)

    @cached_property
    def modules(self) -> dict[str, str]:
        return kernel.read_modules(self.fs)

    @cached_property
    def kallsyms(self) -> kernel.Kallsyms:
        return kernel.read_kallsyms(self.fs)

    @cached_property
    def release(self) -> str | None:
        return kernel.kernel_release(self.fs)

    @cached_property
    def kconfig(self) -> kernel.KernelConfig:
        return kernel.read_kernel_config(self.fs, self.release)

    @cached_property
    def nvfs(self) -> nvfs_proc.NvfsState:
        loaded = kernel.module_loaded(self.fs, "nvidia_fs", self.modules)
        return nvfs_proc.read_state(self.fs, loaded)

    @cached_property
    def cufile(self) -> cufile_json.CufileConfig:
        return cufile_json.load(self.fs, self.env)

    @cached_property
    def libcufile(self) -> LibcufileInfo | None:
        if self.live:
            from ..platform.libcufile import locate

            return locate(self.libcufile_path)
        raw = self.fs.read_text(SNAPSHOT_LIBCUFILE)
        if raw is None:
            return None
        from ..bounded import loads_json, shape_error

        try:
            d = loads_json(raw)
        except ValueError:
            return None
        # a snapshot is outside data: a file of another shape is named, never a crash (issue 24)
        why = shape_error(d, _LIBCUFILE_SHAPE)
        if why:
            return LibcufileInfo(
                path=None, found_via=None, probe_error=f"the snapshot's {SNAPSHOT_LIBCUFILE} is damaged ({why})"
            )
        if (d.get("usdt_probe_count") or 0) > 100_000:  # null is allowed by the shape
            return LibcufileInfo(
                path=None, found_via=None, probe_error=f"{SNAPSHOT_LIBCUFILE}: probe count out of range"
            )
        info = LibcufileInfo(
            path=d.get("path"),
            found_via=d.get("found_via"),
            version=d.get("version"),
            candidates=[(c["via"], c["path"]) for c in d.get("candidates") or []],
        )
        info.trace_probes_present = d.get("trace_probes_present") or []
        info.probes = ["?"] * max(0, d.get("usdt_probe_count") or 0)
        info.probe_error = d.get("probe_error")
        return info

    @cached_property
    def topology(self):
        from ..topology.load import from_root

        return from_root(self.fs)

    @cached_property
    def pairs(self):
        from ..topology.pairs import analyse_all

        return analyse_all(self.topology)

    @cached_property
    def mounts(self) -> list[mounts.Mount]:
        return mounts.read_mounts(self.fs)

    def in_container(self) -> list[str]:
        signs = []
        for f in ("/.dockerenv", "/run/.containerenv"):
            if self.fs.exists(f):
                signs.append(f)
        cg = self.fs.read_text("/proc/1/cgroup") or ""
        for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
            if word in cg:
                signs.append(f"/proc/1/cgroup mentions {word}")
                break
        if self.live and os.environ.get("KUBERNETES_SERVICE_HOST"):
            signs.append("KUBERNETES_SERVICE_HOST is set")
        return signs
