"""Everything the checks read, gathered once per run from one root (live or snapshot)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property

from .. import cufile_json, cuobj_json
from ..platform import kernel, mounts, nvfs_proc, nvidia_proc, osinfo
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
    def os_release(self) -> osinfo.OsRelease:
        return osinfo.read_os_release(self.fs)

    @cached_property
    def cmdline(self) -> list[str] | None:
        return osinfo.read_cmdline(self.fs)

    @cached_property
    def arch(self) -> tuple[str | None, str]:
        return osinfo.architecture(self.fs, self.kconfig)

    @cached_property
    def persistenced(self) -> osinfo.Persistenced:
        return osinfo.read_persistenced(self.fs)

    @cached_property
    def nvfs(self) -> nvfs_proc.NvfsState:
        loaded = kernel.module_loaded(self.fs, "nvidia_fs", self.modules)
        return nvfs_proc.read_state(self.fs, loaded)

    @cached_property
    def cufile(self) -> cufile_json.CufileConfig:
        return cufile_json.load(self.fs, self.env)

    @cached_property
    def cuobj(self) -> cuobj_json.CuobjConfig:
        return cuobj_json.load(self.fs, self.env)

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
        """The evidence that this is a container, each sign named; [] when there is none that holds.
        /.dockerenv alone is not enough: a VM (or host) image built from a container carries it
        (issue 22: 'inside a container' on a VM). It counts with an overlay root filesystem."""
        return self.container_evidence()[0]

    def container_evidence(self) -> tuple[list[str], list[str]]:
        """(signs that it is a container, signs too weak alone). Signs: podman's /run/.containerenv,
        container=... in PID 1's environment (systemd's convention, set by podman, LXC, systemd-nspawn),
        PID 1's cgroup naming a container runtime (cgroup v1, or a v2 path), Kubernetes' service
        variable; /.dockerenv with the root filesystem on overlay (an image's layers)."""
        strong: list[str] = []
        weak: list[str] = []
        if self.fs.exists("/run/.containerenv"):
            strong.append("/run/.containerenv (podman)")
        env = self.fs.read_text("/proc/1/environ") or ""
        for var in env.split("\0"):
            if var.startswith("container="):
                strong.append(f"/proc/1/environ {var[:40]}")
                break
        cg = self.fs.read_text("/proc/1/cgroup") or ""
        for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
            if word in cg:
                strong.append(f"/proc/1/cgroup mentions {word}")
                break
        if self.live and os.environ.get("KUBERNETES_SERVICE_HOST"):
            strong.append("KUBERNETES_SERVICE_HOST is set")
        if self.fs.exists("/.dockerenv"):
            root = next((m for m in self.mounts if m.mount_point == "/"), None)
            if root is not None and root.fstype == "overlay":
                strong.append("/.dockerenv with the root filesystem on overlay")
            else:
                weak.append(
                    "/.dockerenv present, root filesystem "
                    + (root.fstype if root is not None else "unknown")
                    + " (an image built from a container carries the file)"
                )
        return strong, weak
