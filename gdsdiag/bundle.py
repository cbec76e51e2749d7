"""What a support bundle adds to a snapshot, and how ``--redact`` scrubs it.

A customer sends one file: the sysfs/procfs subset the readers use (snapshot.py), plus what a
support engineer asks for next — gdsdiag's own topology and check results, tool and driver
versions, ``nvidia-smi -q`` / ``nvidia-smi topo -m``, cufile.json, the end of cufile.log, and the
kernel log lines of nvidia/nvme/nvidia-fs — under ``gdsdiag/`` with a manifest of every entry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys

from .errors import GdsdiagError

COMMAND_TIMEOUT = 30  # seconds for each nvidia-smi / dmesg call
COMMAND_MAX = 4 << 20  # bytes kept of a command's output
LOG_TAIL = 256 << 10  # bytes kept of the end of each cufile.log
DMESG_RE = re.compile(rb"nvidia|nvme|nvfs|NVRM|nv_peer|p2p", re.I)


def run_command(argv: list[str]) -> tuple[bytes | None, str | None]:
    """(output, None) or (None, why). Never raises: a bundle is still useful without it."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found"
    try:
        p = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {COMMAND_TIMEOUT} s"
    except OSError as e:
        return None, e.strerror or str(e)
    out = p.stdout[:COMMAND_MAX]
    if p.returncode != 0:
        return out, f"exit status {p.returncode}"
    return out, None


def tail(path: str, n: int = LOG_TAIL) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    return tail_fd(fd, n)


def tail_fd(fd: int, n: int = LOG_TAIL) -> bytes | None:
    """The last ``n`` bytes of the regular file open on ``fd`` (closed here); None if not one."""
    from .bounded import check_regular

    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if check_regular(st, None):
            return None
        f.seek(max(0, st.st_size - n))
        return f.read(n)


def cufile_logs(fs, env: dict) -> list[str]:
    """Where cufile.log files are likely: logging.dir of cufile.json, CUFILE_LOGFILE_PATH, the
    working directory (libcufile's default) and gdsdiag's own log directory."""
    from . import cufile_json
    from .cufile._lib import default_log_path

    out = []
    if env.get("CUFILE_LOGFILE_PATH"):
        out.append(env["CUFILE_LOGFILE_PATH"])
    try:
        cfg = cufile_json.load(fs, env)
        d = ((cfg.data or {}).get("logging") or {}).get("dir")
        if isinstance(d, str) and d:
            out.append(os.path.join(d, "cufile.log"))
    except (GdsdiagError, OSError, ValueError):  # a broken cufile.json is check's finding (check.json), not here
        pass
    out += [os.path.join(os.getcwd(), "cufile.log"), default_log_path()]
    seen, uniq = set(), []
    for p in out:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq


def versions(fs) -> dict:
    from . import __version__
    from .platform import kernel, nvidia_proc

    d = nvidia_proc.read_driver(fs)
    nvfs = fs.read_text("/sys/module/nvidia_fs/version") or fs.read_text("/proc/driver/nvidia-fs/version")
    return {
        "gdsdiag": __version__,
        "python": sys.version.split()[0],
        "kernel": kernel.kernel_release(fs),
        "nvidia_driver": d.version,
        "nvidia_fs": nvfs,
    }


def results(fs) -> dict[str, tuple[bytes | None, str | None]]:
    """topology and check documents of the root being captured (as --json would print them)."""
    out: dict[str, tuple[bytes | None, str | None]] = {}
    try:
        from .documents.topology import document
        from .topology.findings import find
        from .topology.load import from_root
        from .topology.pairs import analyse_all

        topo = from_root(fs)
        pairs = analyse_all(topo)
        out["topology.json"] = (json.dumps(document(topo, pairs, find(topo, pairs)), indent=1).encode(), None)
    except Exception as e:  # a bug must not cost the customer the rest of the bundle
        out["topology.json"] = (None, f"{type(e).__name__}: {e}")
    try:
        from .check.context import CheckContext
        from .check.runner import run
        from .documents.check import document as check_document

        rep = run(CheckContext(fs, env=dict(os.environ) if fs.is_live else {}))
        out["check.json"] = (json.dumps(check_document(rep), indent=1).encode(), None)
    except Exception as e:  # as above: the failure is written in the bundle instead of the document
        out["check.json"] = (None, f"{type(e).__name__}: {e}")
    return out


# -- redaction ---------------------------------------------------------------------------------------

_IPV4 = rb"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])"
# colon-hex with at least two colons and either '::' or a hex letter (so log times 12:34:56 stay)
_IPV6 = rb"(?<![\w:.])(?=[0-9a-fA-F:]*(?:::|[a-fA-F]))(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:])"
_UUID = rb"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
# Where addresses are written as addresses (mount sources, RDMA address lists, logs, command output).
# Elsewhere a dotted quad is more often a version ("1.14.0.31"), so only this node's own addresses go.
_ADDRESS_FILES = re.compile(
    r"^/proc/(self/mountinfo|mounts|cmdline)$|/cufile(-env)?\.json$|^/gdsdiag/(dmesg|nvidia-smi|logs/)"
)
_SERIAL_LINE = re.compile(
    rb"^(\s*(?:Serial Number|Board Serial|GPU UUID|Module Serial|Chassis Serial)\s*:).*$", re.M | re.I
)
_UDEV_SERIAL = re.compile(rb"^(E:ID_(?:SERIAL|SERIAL_SHORT|WWN|WWN_WITH_EXTENSION|SCSI_SERIAL)=).*$", re.M)


class Redactor:
    """Removes hostnames, serial numbers and IP addresses; keeps the structure readers need."""

    def __init__(self, live: bool):
        self.hosts: set[bytes] = set()
        self.addrs: set[bytes] = set()
        self.count = 0
        if live:
            for h in (socket.gethostname(), socket.getfqdn()):
                if h and h not in ("localhost", "localhost.localdomain"):
                    self.hosts.add(h.encode())
                    self.hosts.add(h.split(".")[0].encode())
            import psutil

            try:
                interfaces = psutil.net_if_addrs()
            except OSError as e:  # without them this node's addresses would stay in the archive
                raise GdsdiagError(
                    f"--redact: cannot list this node's IP addresses ({e.strerror or e})",
                    "run without --redact and review the archive before sending it",
                ) from None
            for addrs in interfaces.values():
                for a in addrs:
                    if a.family in (socket.AF_INET, socket.AF_INET6) and a.address not in ("127.0.0.1", "::1"):
                        self.addrs.add(a.address.split("%")[0].encode())

    def _sub(self, pattern, repl: bytes, data: bytes) -> bytes:
        new, n = re.subn(pattern, repl, data)
        self.count += n
        return new

    def bytes_(self, path: str, data: bytes) -> bytes:
        if path.startswith("/sys/devices/") and path.endswith("/config"):
            return self.config_space(data)
        if b"\0" in data[:4096] or data[:2] == b"\x1f\x8b":
            return data  # binary (config.gz): substituting bytes would corrupt it, and holds no names
        for h in sorted(self.hosts, key=len, reverse=True):
            data = self._sub(rb"(?<![\w-])" + re.escape(h) + rb"(?![\w-])", b"REDACTED-HOST", data)
        for a in sorted(self.addrs, key=len, reverse=True):
            data = self._sub(rb"(?<![\w:.])" + re.escape(a) + rb"(?![\w:.])", b"REDACTED-IP", data)
        if _ADDRESS_FILES.search(path):
            data = self._sub(_IPV4, b"REDACTED-IP", data)
            data = self._sub(_IPV6, b"REDACTED-IP", data)
        data = self._sub(_UUID, b"REDACTED-UUID", data)
        data = self._sub(_SERIAL_LINE, rb"\1 REDACTED-SERIAL", data)
        if path.startswith("/run/udev/data/"):
            data = self._sub(_UDEV_SERIAL, rb"\1REDACTED-SERIAL", data)
        return data

    def config_space(self, data: bytes) -> bytes:
        """Zero the Device Serial Number extended capability (PCIe spec §7.9.3; id 0x0003)."""
        if len(data) <= 0x100:
            return data
        buf = bytearray(data)
        off, seen = 0x100, set()
        while 0x100 <= off <= len(buf) - 12 and off not in seen:
            seen.add(off)
            hdr = int.from_bytes(buf[off : off + 4], "little")
            if hdr in (0, 0xFFFFFFFF):
                break
            if hdr & 0xFFFF == 0x0003:
                buf[off + 4 : off + 12] = bytes(8)
                self.count += 1
            off = (hdr >> 20) & 0xFFC
        return bytes(buf)


def env_file(var: str, path: str, n: int, whole: bool) -> tuple[bytes | None, str | None]:
    """(data, None) or (None, why): a file the environment variable ``var`` names, for the bundle —
    whole (up to ``n`` bytes) or its last ``n`` bytes. As root, only what gdsdiag/envtrust.py allows
    (a file root owns, no one else can write, every user may read: under sudo -E these named a
    0600 root file, copied whole into a bundle sent outside); a refusal is a GdsdiagError."""
    from .bounded import check_regular
    from .envtrust import open_to_copy

    try:
        fd = open_to_copy(var, path)
    except OSError as e:
        return None, e.strerror or str(e)
    if not whole:
        return tail_fd(fd, n), None
    with os.fdopen(fd, "rb") as f:
        why = check_regular(os.fstat(f.fileno()), n)
        return (None, why) if why else (f.read(n), None)
