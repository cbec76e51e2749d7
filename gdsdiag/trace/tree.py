"""The traced command's process tree: started in a process group of its own, with a parent-death
signal and a watcher, so that stopping the trace stops all of it and a killed gdsdiag leaves
nothing running.

- The command gets a process group of its own, unless gdsdiag runs in the foreground of a terminal
  (there the terminal's Ctrl-C already reaches the whole job, and a background group could not read
  the terminal): stopping the trace signals that group, and every descendant /proc shows (those that
  left the group with setsid too).
- PR_SET_PDEATHSIG(SIGKILL): the kernel kills the command itself when gdsdiag dies in any way.
- A watcher (a shell in a session of its own, signals ignored) holds the read end of a pipe whose
  write end only gdsdiag holds; when gdsdiag dies without saying "done", the pipe ends and the
  watcher kills the command's process group (SIGKILL cannot be caught, so this is the only way).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time

PR_SET_PDEATHSIG = 1
TERM_GRACE_S = 0.5  # SIGTERM, then SIGKILL: the summary must be out within a second of the stop

_libc = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls it


def foreground_of_terminal() -> bool:
    """True when gdsdiag's process group is the foreground group of the terminal on 0, 1 or 2."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def child_setup(own_group: bool, parent: int):
    """What the forked child does before it execs the gate: its own group, the death signal."""

    def setup() -> None:
        if own_group:
            os.setpgid(0, 0)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # gdsdiag died before the prctl: nothing would kill us later
            os._exit(125)

    return setup


# (POSIX kill syntax: dash's kill takes neither -KILL before -- nor a bare -9 before a negative pid)
_WATCH = 'trap "" INT TERM HUP QUIT; IFS= read -r word; [ "$word" = done ] || kill -s KILL -- "-$1" 2>/dev/null; exit 0'


class Tree:
    """The command's process (a subprocess.Popen), its group, and the watcher of gdsdiag's life."""

    def __init__(self, proc: subprocess.Popen, own_group: bool):
        self.proc = proc
        self.own_group = own_group
        self._watch_w: int | None = None
        self._watcher: subprocess.Popen | None = None
        if own_group:
            r, w = os.pipe()
            try:
                self._watcher = subprocess.Popen(
                    ["/bin/sh", "-c", _WATCH, "gdsdiag-trace-watch", str(proc.pid)],
                    stdin=r,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a job-control kill of gdsdiag's group does not reach it
                    close_fds=True,
                )
                self._watch_w = w
            except OSError:
                os.close(w)
            finally:
                os.close(r)

    def members(self) -> list[int]:
        """The command and every process below it (as /proc shows them now), itself excluded."""
        from .procs import descendants

        me = os.getpid()
        return [p for p in descendants([self.proc.pid]) if p != me]

    def _signal(self, sig: int, pids: list[int]) -> None:
        if self.own_group:
            try:
                os.killpg(self.proc.pid, sig)
            except OSError:
                pass
        for p in pids:
            try:
                os.kill(p, sig)
            except OSError:
                pass

    def stop(self, grace: float = TERM_GRACE_S) -> int | None:
        """SIGTERM to the whole tree, SIGKILL to what is left after GRACE seconds; the command's
        exit status (Popen's: -N for a signal)."""
        pids = self.members()
        self._signal(signal.SIGTERM, pids)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not any(_alive(p) for p in pids if p != self.proc.pid):
                break
            time.sleep(0.02)
        left = [p for p in self.members() + pids if _alive(p)]
        if left or self.proc.poll() is None:
            self._signal(signal.SIGKILL, left)
        try:
            return self.proc.wait(1)
        except subprocess.TimeoutExpired:
            return None

    def done(self) -> None:
        """The trace is over and the tree handled: tell the watcher to leave it alone."""
        if self._watch_w is not None:
            try:
                os.write(self._watch_w, b"done\n")
            except OSError:
                pass
            os.close(self._watch_w)
            self._watch_w = None
        if self._watcher is not None:
            try:
                self._watcher.wait(1)
            except subprocess.TimeoutExpired:
                self._watcher.kill()


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :][:1] not in ("Z", "X")
