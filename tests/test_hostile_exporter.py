"""Issue 24, item 4: the exporter keeps serving whatever clients on 127.0.0.1 do: 200 scrapes at
once, 1,000 connections that never send a request (against an fd limit lower than that), slow
and oversized requests. The exporter runs as the CLI runs it, in a child process; every loop here
is bounded and stops by itself."""

import concurrent.futures
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("prometheus_client")
from check_fixtures import add_nvidia_fs, unpack_h200  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = unpack_h200(str(tmp_path_factory.mktemp("h200")))
    add_nvidia_fs(root)
    return root


def _exporter(tree, nofile=None, extra=()):
    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    p = subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", "exporter", "--root", tree, "--port", "0", "--interval", "3600", *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        cwd=REPO,
        preexec_fn=limit,
    )
    deadline = time.monotonic() + 60
    line = b""
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        m = re.search(rb"serving http://([^:]+):(\d+)/metrics", line)
        if m:
            return p, m.group(1).decode(), int(m.group(2))
        if not line and p.poll() is not None:
            break
    p.kill()
    raise AssertionError(f"exporter did not start: {line!r}")


def scrape(port, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        assert r.status == 200
        return r.read()


def test_binds_loopback_by_default(tree):
    p, addr, port = _exporter(tree)
    try:
        assert addr == "127.0.0.1"
        with socket.socket() as s:
            s.connect(("127.0.0.1", port))
            assert s.getsockname()[0] == "127.0.0.1"
        assert b"gdsdiag_nvfs_up" in scrape(port)
    finally:
        p.kill()
        p.wait()


def test_200_concurrent_scrapes(tree):
    p, _, port = _exporter(tree)
    try:
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(200) as pool:
            bodies = list(pool.map(lambda _: scrape(port, timeout=20), range(200)))
        took = time.monotonic() - t
        assert all(b"gdsdiag_nvfs_up" in b for b in bodies)
        assert took < 20, f"200 concurrent scrapes took {took:.1f} s"
    finally:
        p.kill()
        p.wait()


def test_1000_idle_connections_never_stop_it_serving(tree):
    """Against an exporter whose descriptor limit (512) is below the connection count: the old
    thread-per-connection server stopped accepting at the limit and every scrape hung."""
    p, _, port = _exporter(tree, nofile=512)
    idle = []
    try:
        for i in range(1000):
            s = socket.socket()
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            if i % 3 == 0:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a request never finished
            idle.append(s)
            if i % 250 == 249:
                assert b"gdsdiag_nvfs_up" in scrape(port)
        for _ in range(10):
            assert b"gdsdiag_nvfs_up" in scrape(port)
        assert p.poll() is None
    finally:
        for s in idle:
            s.close()
        p.kill()
        p.wait()


def test_idle_connection_is_closed_and_bad_requests_answered(tree, monkeypatch):
    from gdsdiag.exporter import server as srv
    from gdsdiag.exporter.server import State, start
    from gdsdiag.platform.fsroot import FsRoot

    monkeypatch.setattr(srv, "REQUEST_TIMEOUT", 1.0)
    server, _ = start(FsRoot(tree), 0, "127.0.0.1", State())
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
            t = time.monotonic()
            assert s.recv(10) == b""  # closed by the server, not by our timeout
            assert time.monotonic() - t < 5
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
            s.sendall(b"X" * 20000)
            assert s.recv(100).startswith(b"HTTP/1.1 431")
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
            s.sendall(b"\x00\xff garbage\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 400")
        assert b"gdsdiag_nvfs_up" in scrape(server.server_port)
    finally:
        server.shutdown()
