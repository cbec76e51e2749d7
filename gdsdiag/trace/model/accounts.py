"""The classifier's books: per file, what its bytes did (routes, bytes, processes, threads, how,
page-cache share, extent, renames) and per traced tree; ``file_summary`` and ``tree_summary`` read
them out with each file's why. Every verdict goes in once (Classifier._emit, or a batch's rows at
once), and so does the I/O the kernel counted (add_counted). Reads the process state (procstate.py)
and the data-flow model's passed-over jobs; pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...routes import Route
from ...units import size_text
from .dataflow import DataFlow
from .events import Event
from .mechanism import describe, rate
from .procstate import ProcState, moved
from .records import MAX_FILE_PIDS, MAX_FILE_TIDS, MAX_FILES
from .why import REPLAY, file_why

if TYPE_CHECKING:
    from ...check.facts import NodeFacts
    from ...schema import trace as schema

RENAMED_FROM_MAX = 8  # earlier names kept per file (renamed_from); a file saved a thousand times names the first


def add_pid_bytes(f: dict, pid: int, route: str, nbytes: int) -> None:
    """NBYTES of PID on ROUTE into file account F's by_pid (tree_summary's source); a process past
    MAX_FILE_PIDS of the file goes under its lowest one (a file read by thousands of processes:
    the account stays bounded)."""
    by_pid = f["by_pid"]
    mine = by_pid.get(pid)
    if mine is None:
        if len(by_pid) >= MAX_FILE_PIDS:
            pid = min(by_pid)
        mine = by_pid.setdefault(pid, {})
    mine[route] = mine.get(route, 0) + nbytes


class Accounts:
    """The per-file accounts (``files``: path -> its account) and what reads them out."""

    def __init__(self, state: ProcState, flow: DataFlow):
        self.state, self.flow = state, flow
        self.files: dict[str, dict] = {}  # path -> what its bytes did (file_summary)
        self.node: NodeFacts | None = None  # the node's GDS facts (check/facts.py), for each file's why
        self.node_missing = REPLAY  # why self.node is None (a live trace sets its own reason)
        # major page faults per mapped data file (the perf event page-faults-major, put in the file by
        # its address); None where that event was not attached: not counted, rather than none
        self.major_faults: dict[str, int] | None = None
        # --block: requests the traced processes issued per (device, R|W|…): [requests, bytes]
        # (block_summary; the device that served the bytes, e.g. the virtio disk under every read)
        self.block: dict[tuple[int, str], list[int]] = {}

    def on_block(self, e: Event) -> None:
        a = e.args
        if len(a) < 4:
            return
        op = chr(a[3]) if 32 < a[3] < 127 else "?"  # (rwbs' first letter: R, W, D discard, F flush)
        row = self.block.get((a[0], op))
        if row is None:
            row = self.block[(a[0], op)] = [0, 0]
        row[0] += 1
        row[1] += max(a[2], 0)

    def block_summary(self, name_of=None) -> list[dict]:
        """Per block device and direction: requests and bytes the traced processes issued (--block).
        NAME_OF(major, minor) -> its name (the live node's /sys/dev/block), else none."""
        out = []
        for (dev, op), (n, nbytes) in sorted(self.block.items(), key=lambda x: -x[1][1]):
            major, minor = dev >> 20, dev & 0xFFFFF  # (the kernel's dev_t in block tracepoints)
            out.append(
                {
                    "device": f"{major}:{minor}",
                    "name": name_of(major, minor) if name_of else None,
                    "op": op,
                    "requests": n,
                    "bytes": nbytes,
                }
            )
        return out

    def add_verdict(self, v: schema.IoLine, was: str, cached: int, filled: int, how: str, inferred: bool) -> None:
        """Verdict V (its path final, WAS the name its I/O used) into its file's account."""
        path = v["path"]
        assert path
        n = v["size"]
        if n < 0:
            n = 0
        off = v["offset"]
        t0 = v["ts"]
        f = self.account(
            path,
            1,
            n,
            v["route"],
            v["api"],
            v["pid"],
            off + n if off >= 0 else 0,
            t0,
            t0 + (v["latency_ns"] or 0),
            (v["tid"],),
        )
        if was != path:
            names = f.setdefault("renamed_from", [])
            if was not in names and len(names) < RENAMED_FROM_MAX:
                names.append(was)
        if cached:
            f["page_cache_bytes"] += cached
        if filled:
            f["device_fill_bytes"] += filled
        if how:
            f["how"].add(how)
        if inferred:
            f["inferred"] = True  # (file_summary: its split with other files is inferred)
        if v["route"] == Route.UNKNOWN and "unknown_why" not in f and v["evidence"]:
            f["unknown_why"] = v["evidence"][-1]  # (file_summary names its own reason, not a stock one)

    def account(
        self,
        path: str,
        ios: int,
        nbytes: int,
        route: str,
        api: str,
        pid: int,
        end: int,
        t0: int = 0,
        t1: int = 0,
        tids: Iterable[int] = (),
    ) -> dict:
        """IOS verdicts of NBYTES by PID through API on ROUTE, reaching file offset END, into PATH's
        account (file_summary); the account. T0..T1: when they started and ended (0: not known, the
        kernel's counts), TIDS the threads that made them."""
        f = self.files.get(path)
        if f is None and len(self.files) >= MAX_FILES:
            path = "(other files)"  # (a data set of millions of files: the account stays bounded)
            f = self.files.get(path)
        if f is None:
            f = self.files[path] = {
                "path": path,
                "ios": 0,
                "bytes": 0,
                "routes": {},
                "page_cache_bytes": 0,
                "device_fill_bytes": 0,
                "via": set(),
                "pids": set(),
                "how": set(),
                "max_offset": 0,
                "via_to_gpu": set(),
                "by_pid": {},
                "first_ns": 0,
                "last_ns": 0,
                "tids": set(),
            }
        if t0:
            if not f["first_ns"] or t0 < f["first_ns"]:
                f["first_ns"] = t0
            if t1 > f["last_ns"]:
                f["last_ns"] = t1
        if tids and len(f["tids"]) < MAX_FILE_TIDS:
            f["tids"].update(tids)
        f["ios"] += ios
        f["bytes"] += nbytes
        routes = f["routes"]
        routes[route] = routes.get(route, 0) + nbytes
        # (per process as well: tree_summary gives each tree the bytes its own processes moved)
        add_pid_bytes(f, pid, route, nbytes)
        name = "cuFile" if api.startswith("cuFile") else api  # ("mmap" is its own api)
        f["via"].add(name)
        if route != Route.HOST and route != Route.UNKNOWN:
            f["via_to_gpu"].add(name)  # (what moved the bytes that reached a GPU: the why's "how")
        if len(f["pids"]) < MAX_FILE_PIDS:
            f["pids"].add(pid)
        if end > f["max_offset"]:
            f["max_offset"] = end
        return f

    def add_counted(self, rows: list[dict]) -> None:
        """The host I/O the kernel counted (counted.CountedIo.rows: processes without CUDA, no line
        each) into the per-file and per-tree accounts, as the route totals have them: one set of
        books (issue 43: a summary said HOST 49.0MiB and, below it, 32M per file and per tree). Its
        file offsets are not known: the extent stays what the per-I/O lines reached."""
        for r in rows:
            f = self.account(r["path"], r["count"], r["bytes"], r["route"], r["api"], r["pid"], 0)
            was = r.get("renamed_from")  # (the row's file was opened by another name: _on_rename)
            if was:
                names = f.setdefault("renamed_from", [])
                if was not in names and len(names) < RENAMED_FROM_MAX:
                    names.append(was)
            if r.get("lost"):
                # (its records dropped, ring full: said apart from the file's other UNKNOWN bytes,
                # whose reason stays its own; via keeps the api, as its sent I/Os have it)
                lost = f.setdefault("lost_in_kernel", {"ios": 0, "bytes": 0})
                lost["ios"] += r["count"]
                lost["bytes"] += r["bytes"]
                continue
            f["via"].discard(r["api"])
            if r.get("why") and "unknown_why" not in f:
                f["unknown_why"] = r["why"]
            f["via"].add(f"{r['api']} (counted in the kernel)")

    def renamed(self, old: str, new: str, everything: bool) -> None:
        """The accounts of OLD (and, EVERYTHING, of every path under it) under NEW."""
        if not everything:
            if old in self.files:
                self.move(old, new)
            return
        for path in [p for p in self.files if moved(p, old, new) is not None]:
            self.move(path, moved(path, old, new) or new)

    def move(self, path: str, new: str) -> None:
        """PATH's account under its new name (added to an account already there: the file it
        replaced had that name too, as a checkpoint saved again over its last copy), the old name in
        renamed_from."""
        f = self.files.pop(path)
        f["path"] = new
        names = f.setdefault("renamed_from", [])
        if path not in names and len(names) < RENAMED_FROM_MAX and "\0" not in path:  # (not an exchange's step)
            names.append(path)
        into = self.files.get(new)
        if into is None:
            self.files[new] = f
            return
        for k in ("ios", "bytes", "page_cache_bytes", "device_fill_bytes"):
            into[k] += f[k]
        for k, n in f["routes"].items():
            into["routes"][k] = into["routes"].get(k, 0) + n
        for k in ("via", "how", "via_to_gpu"):
            into[k] |= f[k]
        for k, cap in (("pids", MAX_FILE_PIDS), ("tids", MAX_FILE_TIDS)):
            into[k] |= set(sorted(f[k])[: max(0, cap - len(into[k]))])
        # (each process's bytes too: tree_summary reads them, and a merge that left them out lost
        # the renamed file's bytes from every tree)
        for pid, routes in f["by_pid"].items():
            for route, n in routes.items():
                add_pid_bytes(into, pid, route, n)
        if f["first_ns"] and (not into["first_ns"] or f["first_ns"] < into["first_ns"]):
            into["first_ns"] = f["first_ns"]
        into["last_ns"] = max(into["last_ns"], f["last_ns"])
        if "lost_in_kernel" in f:
            lost = into.setdefault("lost_in_kernel", {"ios": 0, "bytes": 0})
            lost["ios"] += f["lost_in_kernel"]["ios"]
            lost["bytes"] += f["lost_in_kernel"]["bytes"]
        if "unknown_why" in f:
            into.setdefault("unknown_why", f["unknown_why"])
        into["max_offset"] = max(into["max_offset"], f["max_offset"])
        if f.get("inferred"):
            into["inferred"] = True
        kept = into.setdefault("renamed_from", [])
        kept += [n for n in names if n not in kept][: RENAMED_FROM_MAX - len(kept)]

    def file_summary(self) -> list[dict]:
        """Per file: its bytes per route, how they got there, and why — the user's question, answered."""
        out = []
        for f in sorted(self.files.values(), key=lambda f: -f["bytes"]):
            total = f["bytes"] or 1
            r = f["routes"]
            p2p = sum(n for k, n in r.items() if Route(k).is_p2p)
            bounce = r.get(Route.DRAM_BOUNCE, 0)
            host = r.get(Route.HOST, 0)
            compat = r.get(Route.COMPAT, 0)
            mm = f["page_cache_bytes"] + f["device_fill_bytes"]
            why = _route_why(f, bounce, compat, p2p, host)
            lost = f.get("lost_in_kernel")
            unused = self.state.cufile_unused(f["pids"]) if bounce or host else None
            if unused:
                why.append(unused)
            if f.get("inferred") and any(self.state.job_of(pid) in self.flow.passed_over_jobs for pid in f["pids"]):
                why.append(
                    "not known for certain: copies from a staging buffer took file bytes while bytes of several "
                    "files were waiting, and some of those were never copied; which file's bytes reached the "
                    "GPU is inferred from order (the I/O lines say low)"
                )
            row = {
                "path": f["path"],
                "ios": f["ios"],
                "bytes": f["bytes"],
                "extent": f["max_offset"],
                "routes": dict(r),
                "to_gpu_share": round((bounce + compat + p2p) / total, 4),
                "p2p_share": round(p2p / total, 4),
                "page_cache_hit": round(f["page_cache_bytes"] / mm, 4) if mm else None,
                **self._major_faults(f, mm),
                "via": sorted(f["via"]),
                "pids": sorted(f["pids"]),
                "how": sorted(f["how"]),
                "why": "; ".join(why),
                "mechanism": describe(
                    sorted(f["via"]),
                    self._opens(f["path"], f.get("renamed_from")),
                    len(f["tids"]),
                    bool(unused),
                ),
                "via_to_gpu": sorted(f["via_to_gpu"]),
                "threads": len(f["tids"]),
                "gbps": rate(f["bytes"], f["first_ns"], f["last_ns"]),
            }
            ceil = self.node.ceilings(f["path"], bool(bounce or compat or p2p)) if self.node is not None else None
            row["ceiling"] = ceil.to_json() if ceil is not None else None
            row["against_ceiling"] = ceil.against(row["gbps"]) if ceil is not None and row["gbps"] else None
            called = any(self.state.cufile_calls.get(pid) for pid in f["pids"])
            chain, fix = file_why(row, self.node, unused, self.state.program_said(f["pids"]), called, self.node_missing)
            row["why_chain"], row["fix"] = [x.to_json() for x in chain], fix
            out.append(row)
            if f.get("renamed_from"):
                out[-1]["renamed_from"] = list(f["renamed_from"])
            if lost:
                out[-1]["lost_in_kernel"] = dict(lost)
        return out

    def _major_faults(self, f: dict, mm: int) -> dict:
        """The file's major page faults (under its names in the trace) and their rate per GiB of the
        bytes its mappings brought in (MM: filled from the device and taken from the page cache);
        None where faults were not counted, or nothing came through a mapping."""
        if self.major_faults is None or not mm:
            return {"major_faults": None, "major_faults_per_gib": None}
        n = sum(self.major_faults.get(p, 0) for p in (f["path"], *f.get("renamed_from", ())))
        return {"major_faults": n, "major_faults_per_gib": round(n / (mm / (1 << 30)), 1)}

    def _opens(self, path: str, was: list[str] | None) -> tuple[int, int]:
        """(opens with O_DIRECT, opens) of PATH under its names in the trace."""
        d = n = 0
        for p in (path, *(was or ())):
            got = self.state.opens_of.get(p)
            if got:
                d, n = d + got[0], n + got[1]
        return d, n

    def needs_node_facts(self, gpu_program: bool = False) -> bool:
        """Whether a file's why will ask for the node's facts (trace/why.py: its COMPAT or
        DRAM_BOUNCE bytes), or the trace's answer for bytes it cannot see: a GPU_PROGRAM (it mapped
        libcuda or libcufile) none of whose file bytes the trace saw reach a GPU (check/why.py
        untraced_why: a kernel-bypass NVMe driver or cuObject over RDMA on the node)."""
        if any(f["routes"].get(Route.COMPAT) or f["routes"].get(Route.DRAM_BOUNCE) for f in self.files.values()):
            return True
        return gpu_program and not any(Route(k).is_p2p for f in self.files.values() for k in f["routes"])

    def tree_summary(self) -> list[dict]:
        """Per traced process tree (job): the bytes of its files on each route."""
        jobs: dict[int, dict] = {}
        for f in self.files.values():
            # (by_pid holds the file's processes, as pids does: a process past MAX_FILE_PIDS of the
            # file counts under the lowest of them in both)
            for pid, routes in f["by_pid"].items():
                j = self.state.job_of(pid)
                tree = jobs.get(j)
                if tree is None:
                    tree = jobs[j] = {"root": j, "comm": self.state.proc(j)["comm"], "pids": set(), "routes": {}}
                tree["pids"].add(pid)
                for k, n in routes.items():
                    tree["routes"][k] = tree["routes"].get(k, 0) + n
        return [{**d, "pids": sorted(d["pids"])} for d in jobs.values()]


def _route_why(f: dict, bounce: int, compat: int, p2p: int, host: int) -> list[str]:
    """The parts of file account F's why its routes give (BOUNCE, COMPAT, P2P and HOST: its bytes on
    each), and its UNKNOWN bytes' reason."""
    r = f["routes"]
    why = []
    if bounce:
        via = "mmap" if "mmap" in f["via"] else "read"
        why.append(
            "no cuFile call: the program "
            + ("mapped the file" if via == "mmap" else "read it into host memory")
            + " and copied it to the GPU"
            + (" through a host staging buffer" if "staged" in f["how"] else "")
            + (" (read by one process of the job, copied by another)" if "job" in f["how"] else "")
        )
    if compat:
        why.append("cuFile ran in compatibility mode (POSIX I/O through libcufile's bounce buffers)")
    if p2p:
        why.append("cuFile took a P2P route")
    if host and not (bounce or compat or p2p):
        why.append("no CUDA copy took these bytes: host I/O, not on the GPU data path")
    lost = f.get("lost_in_kernel")
    if r.get(Route.UNKNOWN, 0) > (lost["bytes"] if lost else 0):
        # (the reason its first UNKNOWN line gave: a copy that was not its bytes, a buffer
        # overwritten, bytes that may have gone through shared memory; the stock text was the
        # last one's alone, and said so of a checksummed file too)
        why.append(
            "not known: " + f["unknown_why"]
            if f.get("unknown_why")
            else "not known: host memory no traced read explains went to a GPU after these reads, and "
            "they were not paired with it (a text file, or a process without CUDA); the I/O lines name the copy"
        )
    if lost:
        why.append(
            f"not known: {lost['ios']} I/Os ({size_text(lost['bytes'])}) have no per-I/O detail (the events "
            "ring was full: the kernel counted them with their file and bytes, their route is not known)"
        )
    return why
