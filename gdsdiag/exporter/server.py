"""Serve the collector on one port; refresh the verdicts on an interval; optionally trace."""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass


@dataclass
class State:
    report: object | None = None
    when: float | None = None
    errors: int = 0
    last_error: str | None = None
    trace: object | None = None


def refresh(state: State, make_report) -> None:
    try:
        state.report = make_report()
        state.when = time.time()
    except Exception as e:  # a refresh must never kill the exporter: count it and say why
        state.errors += 1
        state.last_error = f"{type(e).__name__}: {getattr(e, 'cause', None) or e}"
        print(f"gdsdiag exporter: refresh failed: {state.last_error}", file=sys.stderr, flush=True)


# Serving limits (docs/security.md). One thread serves every connection through a selector, so a
# client can hold a connection but never a thread: idle connections time out, and past MAX_CONNS
# the oldest one still sending its request is dropped for the newcomer. The metrics are built once
# per round for every request complete in that round, so 200 scrapes at once cost one collection.
LISTEN_BACKLOG = 1024
REQUEST_TIMEOUT = 10.0  # seconds to send a whole request, and again to take the whole answer
MAX_REQUEST = 8192  # bytes of request line and headers
MAX_CONNS_CAP = 4096
SELECT_TIMEOUT = 0.2  # how soon the serving thread sees a stop (the exporter ends within 1 s of INT/TERM)


def _max_conns() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNS_CAP
    return max(16, min(MAX_CONNS_CAP, soft - 64))  # descriptors left for the collector's own files


class _Conn:
    __slots__ = ("sock", "fd", "inbuf", "out", "deadline", "answered", "closed")

    def __init__(self, sock, now: float):
        self.sock = sock
        self.fd = sock.fileno()  # the table's key, kept: a closed socket's fileno() is -1
        self.inbuf = b""
        self.out = b""
        self.deadline = now + REQUEST_TIMEOUT
        self.answered = False
        self.closed = False


_WAKE = object()  # the selector's mark of MetricsServer's wake-up socket


def _reply(status: str, body: bytes, ctype: str = "text/plain; charset=utf-8") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


class MetricsServer:
    """/metrics over HTTP/1.x, one answer per connection, within the limits above."""

    def __init__(self, addr: str, port: int, render):
        import selectors
        import socket

        self._render = render
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        self._lsock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._lsock.bind(sockaddr)
            self._lsock.listen(LISTEN_BACKLOG)
        except BaseException:
            self._lsock.close()
            raise
        self._lsock.setblocking(False)
        self.server_address = self._lsock.getsockname()
        self.server_port = self.server_address[1]
        self.max_conns = _max_conns()
        self._stop = threading.Event()
        self._conns: dict[int, _Conn] = {}
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._lsock, selectors.EVENT_READ, None)
        # shutdown() writes a byte here so the serving thread's select returns at once: without it
        # the exit waited out the round (SELECT_TIMEOUT), a fifth of the exporter's 0.4 s stop
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)

    def serve_forever(self) -> None:
        try:
            while not self._stop.is_set():
                self.serve_round(SELECT_TIMEOUT)
        finally:
            self.close()

    def close(self) -> None:
        """Every connection and the listening socket (the end of serve_forever, or a test's)."""
        for c in list(self._conns.values()):
            self._close(c)
        self._sel.close()
        self._lsock.close()
        self._wake_r.close()
        self._wake_w.close()

    def serve_round(self, timeout: float) -> None:
        """One select round: accept, read, answer the requests complete in it, write, expire.

        A connection can be closed part-way through a round (evicted for a newcomer when the table
        is full, a failed send) while the selector's list for the round still names it: each step
        skips a closed one (issue 42: a request complete in the round whose connection was then
        evicted was answered on a closed socket, ``ValueError: Invalid file descriptor: -1``, and
        the serving thread ended for good)."""
        import selectors

        ready = self._sel.select(timeout=timeout)
        now = time.monotonic()
        complete = []
        for key, events in ready:
            if key.data is _WAKE:
                return  # shutdown(): the thread sees its stop now, not at the round's timeout
            if key.data is None:
                self._accept(now)
                continue
            c = key.data
            if c.closed:
                continue
            if events & selectors.EVENT_READ and not c.answered:
                if self._read(c):
                    complete.append(c)
            if events & selectors.EVENT_WRITE and c.answered and not c.closed:
                self._write(c)
        complete = [c for c in complete if not c.closed]
        if complete:
            self._answer(complete)
        for c in [c for c in self._conns.values() if c.deadline < now]:
            self._close(c)  # idle, or too slow to send its request or take its answer

    def _accept(self, now: float) -> None:
        import selectors

        for _ in range(256):  # a bounded batch, so a flood of connections cannot starve answers
            try:
                sock, _ = self._lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors: the connections below time out and free some
            if len(self._conns) >= self.max_conns:
                waiting = [c for c in self._conns.values() if not c.answered]
                victim = min(waiting or self._conns.values(), key=lambda c: c.deadline)
                self._close(victim)
            sock.setblocking(False)
            c = _Conn(sock, now)
            self._conns[sock.fileno()] = c
            self._sel.register(sock, selectors.EVENT_READ, c)

    def _read(self, c: _Conn) -> bool:
        """True when the request is complete (an empty line ends its headers)."""
        try:
            data = c.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self._close(c)
            return False
        if not data:
            self._close(c)
            return False
        c.inbuf += data
        if b"\r\n\r\n" in c.inbuf or b"\n\n" in c.inbuf:
            return True
        if len(c.inbuf) > MAX_REQUEST:
            self._send(c, _reply("431 Request Header Fields Too Large", b"request too large\n"))
        return False

    def _answer(self, complete: list) -> None:
        body = None
        for c in complete:
            line = c.inbuf.split(b"\n", 1)[0].decode("latin-1").split()
            if len(line) != 3 or not line[2].startswith("HTTP/1."):
                self._send(c, _reply("400 Bad Request", b"bad request\n"))
            elif line[0] not in ("GET", "HEAD"):
                self._send(c, _reply("405 Method Not Allowed", b"GET only\n"))
            elif line[1].split("?", 1)[0] in ("/metrics", "/"):
                if body is None:
                    try:
                        body = self._render()
                    except Exception as e:  # a collector failure is one 500, never the server's end
                        body = e
                if isinstance(body, Exception):
                    self._send(c, _reply("500 Internal Server Error", f"{type(body).__name__}\n".encode()))
                else:
                    from prometheus_client import CONTENT_TYPE_LATEST

                    r = _reply("200 OK", body, CONTENT_TYPE_LATEST)
                    self._send(c, r if line[0] == "GET" else r[: len(r) - len(body)])
            else:
                self._send(c, _reply("404 Not Found", b"try /metrics\n"))

    def _send(self, c: _Conn, data: bytes) -> None:
        import selectors

        if c.closed:  # (evicted earlier in this round: nothing to answer on)
            return
        c.answered, c.out, c.inbuf = True, data, b""
        c.deadline = time.monotonic() + REQUEST_TIMEOUT
        self._sel.modify(c.sock, selectors.EVENT_WRITE, c)
        self._write(c)

    def _write(self, c: _Conn) -> None:
        try:
            n = c.sock.send(c.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(c)
            return
        c.out = c.out[n:]
        if not c.out:
            self._close(c)

    def _close(self, c: _Conn) -> None:
        if c.closed:
            return
        c.closed = True
        self._conns.pop(c.fd, None)
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    def shutdown(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # (closed, or its buffer full of earlier wakes: the round's timeout ends it)
        if self._thread is not None:
            self._thread.join(timeout=0.5)  # (a daemon: a scrape under way is cut by the exit)

    _thread: threading.Thread | None = None


def start(fs, port: int, addr: str, state: State):
    from prometheus_client import CollectorRegistry, generate_latest

    from .collect import Collector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(fs, state))
    server = MetricsServer(addr, port, lambda: generate_latest(registry))
    thread = threading.Thread(target=server.serve_forever, name="gdsdiag-metrics", daemon=True)
    server._thread = thread
    thread.start()
    return server, thread


def refresher(state: State, make_report, interval: float, stop: threading.Event) -> threading.Thread:
    def loop():
        while not stop.is_set():
            refresh(state, make_report)
            stop.wait(interval)

    t = threading.Thread(target=loop, name="gdsdiag-verdicts", daemon=True)
    t.start()
    return t


def trace_windows(state: State, path_filter: str | None, window: float, stop: threading.Event) -> None:
    """gdsdiag trace needs the main thread (it installs signal handlers): run it there in windows,
    so its per-window verdict list stays bounded; counters accumulate across windows. A window's
    handlers take INT/TERM/HUP to end the trace cleanly; the signal then ends the exporter too, as
    the exception the command's own handler would have raised."""
    from ..signals import Stopped
    from ..validate import adapters

    while not stop.is_set():
        signum = adapters.trace_window(window, path_filter, state.trace)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        if signum:
            raise Stopped(signum)
