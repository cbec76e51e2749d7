"""Which processes a trace follows, all in one place: the command it starts (held at a gate until
the probes are live), --pid and their descendants, --comm, --cgroup, --pod/--namespace, or (none
given) every process; and the libcufile copies they have mapped. /proc is read through procs.py,
the pods through pods.py; the kernel follows what they start from there (probes/bpf.py)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UsageError
from . import procs

if TYPE_CHECKING:
    from .pods import PodBook
    from .tree import Tree


@dataclass
class Targets:
    """What was asked (PIDS, CMD, COMM, CGROUP and its resolved (id, level, directory) CG, the pids
    of the pods asked for) and what it became: the command's process tree and its gate, the roots
    and every process below them that existed when the probes were attached."""

    pids: list[int]
    cmd: list[str] | None = None
    comm: str | None = None
    cgroup: str | None = None
    cg: tuple[int, int, str] | None = None
    in_pods: list[int] = field(default_factory=list)
    tree: Tree | None = None
    gate: int | None = None  # the pipe that holds CMD until the probes are live
    roots: list[int] = field(default_factory=list)
    existing: list[int] = field(default_factory=list)

    @classmethod
    def named(cls, pids: list[int] | None, cgroup: str | None) -> Targets:
        """The pids and cgroup asked for, each checked: a pid that is not running, a directory that
        is not a cgroup v2 one, is refused before anything is attached."""
        pids = list(pids or [])
        for p in pids:
            if not procs.exists(p):
                raise UsageError(f"no process {p}", "give the pid of a running process")
        return cls(pids, cgroup=cgroup, cg=procs.cgroup_target(cgroup) if cgroup else None)

    def select_pods(self, pod: str | None, namespace: str | None, book: PodBook) -> None:
        """The processes of the pods asked for (a name or UID, a namespace) running now."""
        from .pods import select

        if pod is not None or namespace is not None:
            self.in_pods, found = select(pod, namespace, [p.pid for p in procs.all_procs()], book.ids)
            book.of.update(found)

    def start_command(self, cmd: list[str] | None) -> None:
        """CMD started, held at its gate (it runs once open_gate is called)."""
        self.cmd = cmd
        if cmd:
            self.tree, self.gate = _gate_child(cmd)

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.tree.proc if self.tree else None

    def walk(self, comm: str | None) -> list[int]:
        """The roots (the pids, the command, the processes named COMM, those of the cgroup and of the
        pods) and every process below them now: those started later join in the kernel."""
        self.comm = comm
        proc = self.proc
        roots = self.pids + ([proc.pid] if proc else [])
        if comm:
            roots += procs.by_comm(comm)
        if self.cg:
            roots += procs.cgroup_pids(self.cg[2])
        roots += self.in_pods
        self.roots = roots
        self.existing = procs.descendants(roots) if roots else []
        return self.existing

    @property
    def selective(self) -> bool:
        return bool(self.cmd or self.pids or self.comm or self.cg or self.in_pods)

    @property
    def bpf_cgroup(self) -> tuple[int, int] | None:
        return (self.cg[0], self.cg[1]) if self.cg else None

    def walk_again(self) -> list[int]:
        """A fork between the /proc walk and the attach, caught by walking again now that the kernel
        follows: the processes not seen the first time (added to ``existing``)."""
        if not (self.selective and self.roots):
            return []
        late = [p for p in procs.descendants(self.roots) if p not in self.existing]
        self.existing += late
        return late

    def libcufiles(self, libcufile: str | None) -> list[str]:
        """The libcufile copies whose USDT contexts are compiled in: the --libcufile override, else
        the copy the bindings would load and every other copy the processes already running have mapped."""
        if libcufile:
            return [libcufile]
        from ..platform.libcufile import locate

        found = [p for p in [locate().path] if p]
        for p in self.existing:
            for lib in mapped_libraries(p, "libcufile.so"):
                if not any(_same_file(lib, x) for x in found):
                    found.append(lib)
        return found

    def open_gate(self) -> None:
        if self.proc and self.gate is not None:
            os.write(self.gate, b"go\n")
            os.close(self.gate)
            self.gate = None

    def abandon(self) -> None:
        """The probes could not be attached: the gate never opens, the command never runs untraced."""
        if self.tree and self.gate is not None:
            os.close(self.gate)
            self.tree.stop(0)
            self.tree.done()

    def stop_command(self, exit_code: int | None) -> int | None:
        """Ctrl-C, TERM, HUP, --duration or an error: the command's whole tree stops with the trace
        (a command that ended by itself leaves what it started in the background running). The
        command's exit code: EXIT_CODE if it had ended, else what stopping it gave."""
        if self.tree is not None:
            if self.gate is not None:
                os.close(self.gate)
            proc = self.proc
            if proc is not None and proc.poll() is None:
                exit_code = self.tree.stop()
            self.tree.done()
        return exit_code

    def all_gone(self, followed: dict) -> bool:
        """--pid without a command: every process followed has gone (FOLLOWED: the classifier's
        processes, pid -> info; those started later too)."""
        return bool(
            self.pids
            and not self.cmd
            and not any(procs.exists(p) for p in self.existing)
            and not any(procs.exists(p) for p, info in followed.items() if not info.get("exited"))
        )


def mapped_libraries(pid: int, prefix: str) -> list[str]:
    """The files named PREFIX* the process has mapped now (deleted ones left out)."""
    paths = procs.mapped_paths(pid, prefix)
    return sorted(p for p in paths if os.path.basename(p).startswith(prefix) and not p.endswith(" (deleted)"))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _gate_child(cmd: list[str]):
    """Start CMD held at a pipe so probes are attached and its pid registered before it runs."""
    import shutil

    if shutil.which(cmd[0]) is None and not os.path.exists(cmd[0]):
        raise UsageError(f"command not found: {cmd[0]}", "give the program to trace after --")
    r, w = os.pipe()
    # A shell waits on the pipe and then execs CMD in place: the pid we register is CMD's pid, and
    # nothing of CMD runs before the probes are attached. (A preexec_fn cannot wait: Popen blocks
    # until the child has exec'd.)
    # Only the word "go" opens the gate: if gdsdiag is stopped or killed before the probes are live,
    # the pipe closes, read fails and CMD never runs untraced (exit 125).
    # The pipe is moved to fd 3 in the child: dash accepts only one-digit descriptors in '<&N'.
    gate = 'IFS= read -r word <&3 && [ "$word" = go ] || exit 125; exec 3<&-; exec "$@"'
    # Its own process group (unless gdsdiag is a terminal's foreground job) and a parent-death
    # signal, so the whole tree can be stopped and nothing outlives a killed gdsdiag (tree.py).
    from .tree import Tree, child_setup, foreground_of_terminal

    own_group = not foreground_of_terminal()
    setup = child_setup(own_group, os.getpid())

    def preexec() -> None:
        os.dup2(r, 3)
        setup()

    from ..docout import child_stdout

    # CMD shares the user's stdout (docs/trace.md), not the stderr fd 1 points at in a --json run
    proc = subprocess.Popen(
        ["/bin/sh", "-c", gate, "gdsdiag-trace-gate", *cmd], pass_fds=(3,), preexec_fn=preexec, stdout=child_stdout()
    )
    os.close(r)
    return Tree(proc, own_group), w
