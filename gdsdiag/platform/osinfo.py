"""The node's operating-system facts that NVIDIA's GDS known issues name: the distribution
(/etc/os-release), the kernel command line, the CPU architecture, and whether
nvidia-persistenced runs. Every reader goes through an ``FsRoot`` so a snapshot answers as the
live node did; a fact that cannot be read is ``None`` (unknown), never a guess."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from .fsroot import FsRoot
from .kernel import KernelConfig

# os-release(5): /etc/os-release, else /usr/lib/os-release (the vendor's copy it links to)
OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")
# NVIDIA/nvidia-persistenced nvpd_defs.h: NVPD_VAR_RUNTIME_DATA_PATH "/var/run/" NVPD_DAEMON_NAME,
# NVPD_SOCKET_NAME "socket"; the sample systemd unit removes that directory on stop
# (init/systemd/nvidia-persistenced.service.template: ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced).
PERSISTENCED_DIRS = ("/var/run/nvidia-persistenced", "/run/nvidia-persistenced")
# the kernel truncates a task's comm to TASK_COMM_LEN - 1 = 15 bytes
PERSISTENCED_COMM = "nvidia-persistenced"[:15]


@dataclass
class OsRelease:
    source: str | None  # the file read; None when neither exists
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str | None:
        return self.fields.get("ID")

    @property
    def version_id(self) -> str | None:
        return self.fields.get("VERSION_ID")

    @property
    def id_like(self) -> list[str]:
        return self.fields.get("ID_LIKE", "").split()

    @property
    def pretty(self) -> str:
        return self.fields.get("PRETTY_NAME") or " ".join(x for x in (self.id, self.version_id) if x) or "?"


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value lines; values may be double- or single-quoted, with shell escapes (os-release(5)).
    A line that is not an assignment is ignored, as systemd does."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^([A-Z][A-Z0-9_]*)=(.*)$", line)
        if not m:
            continue
        raw = m.group(2)
        try:
            words = shlex.split(raw) if raw else [""]
        except ValueError:  # an unbalanced quote: keep the text as written
            words = [raw.strip("\"'")]
        out[m.group(1)] = " ".join(words)
    return out


def read_os_release(fs: FsRoot) -> OsRelease:
    for path in OS_RELEASE_PATHS:
        text = fs.read_text(path)
        if text is not None:
            return OsRelease(path, parse_os_release(text))
    return OsRelease(None)


def read_cmdline(fs: FsRoot) -> list[str] | None:
    """/proc/cmdline as words (None: not readable). Words after a lone '--' go to init, not the
    kernel (Documentation/admin-guide/kernel-parameters.rst), so they are left out."""
    text = fs.read_text("/proc/cmdline")
    if text is None:
        return None
    words = text.split()
    return words[: words.index("--")] if "--" in words else words


def architecture(fs: FsRoot, kconfig: KernelConfig) -> tuple[str | None, str]:
    """('x86_64' | 'aarch64' | None, what it was read from). The running kernel's build config
    decides (CONFIG_X86_64 / CONFIG_ARM64); without it /proc/cpuinfo's x86-only 'vendor_id'
    (GenuineIntel, AuthenticAMD) or arm64's 'CPU implementer' line."""
    if kconfig.source is not None:
        if kconfig.value("CONFIG_X86_64") == "y":
            return "x86_64", f"{kconfig.source}: CONFIG_X86_64=y"
        if kconfig.value("CONFIG_ARM64") == "y":
            return "aarch64", f"{kconfig.source}: CONFIG_ARM64=y"
    cpu = fs.read_text("/proc/cpuinfo") or ""
    m = re.search(r"^vendor_id\s*:\s*(\S+)", cpu, re.M)
    if m and m.group(1) in ("GenuineIntel", "AuthenticAMD", "HygonGenuine"):
        return "x86_64", f"/proc/cpuinfo: vendor_id {m.group(1)}"
    if re.search(r"^CPU implementer\s*:", cpu, re.M):
        return "aarch64", "/proc/cpuinfo: CPU implementer"
    return None, "kernel config and /proc/cpuinfo: no architecture found"


def kaslr(cmdline: list[str] | None, kconfig: KernelConfig) -> tuple[bool | None, str]:
    """(KASLR on?, why). 'nokaslr' on the command line turns it off; otherwise it is on exactly
    when the kernel was built with CONFIG_RANDOMIZE_BASE=y (kernel-parameters: "nokaslr: When
    CONFIG_RANDOMIZE_BASE is set, this disables kernel and module base offset ASLR")."""
    if cmdline is not None and "nokaslr" in cmdline:
        return False, "/proc/cmdline: nokaslr"
    built = kconfig.value("CONFIG_RANDOMIZE_BASE")
    if built is None:
        return None, "kernel config not found, no nokaslr on the command line"
    if built != "y":
        return False, f"{kconfig.source}: CONFIG_RANDOMIZE_BASE not set"
    if cmdline is None:
        return None, f"{kconfig.source}: CONFIG_RANDOMIZE_BASE=y, /proc/cmdline unreadable"
    return True, f"{kconfig.source}: CONFIG_RANDOMIZE_BASE=y; /proc/cmdline: no nokaslr"


@dataclass
class Persistenced:
    running: bool | None  # None: cannot be told from this root
    evidence: list[str]


def read_persistenced(fs: FsRoot) -> Persistenced:
    """A live node: a process whose comm is 'nvidia-persiste'. Any root: the daemon's runtime
    directory (its socket, or its pid file) — the sample unit removes it when the daemon stops."""
    ev: list[str] = []
    if fs.is_live:
        for pid in fs.listdir("/proc"):
            if pid.isdigit() and (fs.read_text(f"/proc/{pid}/comm") or "").strip() == PERSISTENCED_COMM:
                return Persistenced(True, [f"/proc/{pid}/comm: {PERSISTENCED_COMM}"])
        ev.append(f"/proc/*/comm: no {PERSISTENCED_COMM}")
    for d in PERSISTENCED_DIRS:
        names = [n for n in fs.listdir(d) if n in ("socket", "nvidia-persistenced.pid")]
        if names:
            if fs.is_live:  # the directory outlived the daemon (killed without its ExecStopPost)
                ev.append(f"{d}: {', '.join(sorted(names))} left behind")
                return Persistenced(False, ev)
            return Persistenced(True, [f"{d}: {', '.join(sorted(names))}"])
    if fs.is_live:
        return Persistenced(False, ev + [f"{' and '.join(PERSISTENCED_DIRS)}: absent"])
    # a snapshot without the directory: not running then, or taken before gdsdiag recorded it
    return Persistenced(None, [f"{' and '.join(PERSISTENCED_DIRS)}: not in the snapshot"])
