"""Processes as /proc shows them: descendants of a pid (for --pid, which follows processes started
before the trace), processes by name (--comm) or cgroup (--cgroup), the open descriptors of a
process being adopted (path, position and flags, from /proc/PID/fd and fdinfo) and the files it
has mapped (/proc/PID/maps). Which of them a trace follows is decided in trace/targets.py."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import GdsdiagError


@dataclass
class ProcInfo:
    pid: int
    ppid: int
    comm: str
    exe: str | None


def describe(pid: int, proc: str = "/proc") -> ProcInfo | None:
    try:
        with open(f"{proc}/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
    try:
        exe = os.readlink(f"{proc}/{pid}/exe")
    except OSError:
        exe = None
    return ProcInfo(pid, ppid, comm, exe)


def all_procs(proc: str = "/proc") -> list[ProcInfo]:
    out = []
    for d in os.listdir(proc):
        if d.isdigit():
            i = describe(int(d), proc)
            if i is not None:
                out.append(i)
    return out


def descendants(roots: list[int], procs: list[ProcInfo] | None = None) -> list[int]:
    """The roots and every process below them (children of children …), roots first."""
    procs = all_procs() if procs is None else procs
    children: dict[int, list[int]] = {}
    for info in procs:
        children.setdefault(info.ppid, []).append(info.pid)
    seen: set[int] = set()
    out: list[int] = []
    todo = list(roots)
    while todo:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo.extend(sorted(children.get(p, [])))
    return out


def by_comm(name: str, procs: list[ProcInfo] | None = None) -> list[int]:
    procs = all_procs() if procs is None else procs
    return sorted(p.pid for p in procs if p.comm == name[:15])


def cgroup_target(path: str) -> tuple[int, int, str]:
    """(cgroup id, level, directory) of a cgroup v2 directory: the id is the directory's inode
    number (what bpf_get_current_cgroup_id() returns), the level its depth below the v2 root."""
    root = _cgroup2_root()
    if root is None:
        raise GdsdiagError(
            "no cgroup v2 hierarchy is mounted (--cgroup needs one)", "mount -t cgroup2 none /sys/fs/cgroup"
        )
    d = (
        path
        if os.path.isabs(path) and os.path.commonpath([root, os.path.abspath(path)]) == root
        else os.path.join(root, path.lstrip("/"))
    )
    d = os.path.abspath(d)
    if not os.path.isfile(os.path.join(d, "cgroup.procs")):
        raise GdsdiagError(
            f"{path} is not a cgroup v2 directory (no cgroup.procs under {d})",
            f"give a directory below {root}, e.g. system.slice/docker-ID.scope",
        )
    rel = os.path.relpath(d, root)
    level = 0 if rel == "." else len(rel.split(os.sep))
    return os.stat(d).st_ino, level, d


def cgroup_pids(d: str) -> list[int]:
    out = []
    for dirpath, _dirs, files in os.walk(d):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(dirpath, "cgroup.procs")) as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                pass
    return sorted(set(out))


def _cgroup2_root() -> str | None:
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    return parts[1]
    except OSError:
        pass
    return None


def mapped_paths(pid: int, needle: str, proc: str = "/proc") -> set[str]:
    """The paths of the process's mappings whose /proc/PID/maps line holds NEEDLE (empty where the
    process has gone or its maps cannot be read); a deleted file keeps its " (deleted)" suffix."""
    try:
        with open(f"{proc}/{pid}/maps") as f:
            return {line.split(None, 5)[5].strip() for line in f if line.count(" ") >= 5 and needle in line}
    except (OSError, IndexError):
        return set()


def exists(pid: int, proc: str = "/proc") -> bool:
    return os.path.exists(f"{proc}/{pid}")


def open_files(pid: int, proc: str = "/proc") -> list[tuple[int, str, int, int, int, int]]:
    """(fd, path, position, flags, kernel dev, inode) of each descriptor that names a file (sockets
    and pipes are left out)."""
    out: list[tuple[int, str, int, int, int, int]] = []
    try:
        fds = os.listdir(f"{proc}/{pid}/fd")
    except OSError:
        return out
    for d in fds:
        try:
            path = os.readlink(f"{proc}/{pid}/fd/{d}")
        except OSError:
            continue
        if not path.startswith("/"):
            continue
        pos = flags = 0
        try:
            with open(f"{proc}/{pid}/fdinfo/{d}") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k == "pos":
                        pos = int(v)
                    elif k == "flags":
                        flags = int(v.strip(), 8)
        except (OSError, ValueError):
            pass
        try:
            st = os.stat(f"{proc}/{pid}/fd/{d}")
            dev, ino = (os.major(st.st_dev) << 20) | os.minor(st.st_dev), st.st_ino
        except OSError:
            dev = ino = 0
        out.append((int(d), path, pos, flags, dev, ino))
    return sorted(out)
