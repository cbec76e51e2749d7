"""The fix bcc's failed compile gets names a real headers tree to link, never a placeholder: the
installed /usr/src/linux-headers-* (newest version, Debian's -ARCH build tree and its -common
source tree), or the package to install when there is none. Real directories in a tmp tree."""

import os

from gdsdiag.trace.bpf import _bcc_failure, _kernel_headers_hint, close_headers_tree


def _tree(root, name):
    os.makedirs(root / name / "include")


def test_newest_build_tree_and_its_common_source(tmp_path):
    for v in ("6.1.0-9", "6.1.0-57", "6.10.0-1"):
        _tree(tmp_path, f"linux-headers-{v}-amd64")
        _tree(tmp_path, f"linux-headers-{v}-common")
    os.makedirs(tmp_path / "linux-kbuild-6.1")
    assert close_headers_tree(str(tmp_path)) == (
        str(tmp_path / "linux-headers-6.10.0-1-amd64"),
        str(tmp_path / "linux-headers-6.10.0-1-common"),
    )


def test_a_tree_without_common_is_its_own_source(tmp_path):
    _tree(tmp_path, "linux-headers-6.8.0-31-generic")
    build = str(tmp_path / "linux-headers-6.8.0-31-generic")
    assert close_headers_tree(str(tmp_path)) == (build, build)


def test_no_tree(tmp_path):
    os.makedirs(tmp_path / "linux-headers-6.1.0-57-common")  # a source tree alone cannot be built against
    assert close_headers_tree(str(tmp_path)) is None


def test_the_hint_names_no_placeholder():
    line = _kernel_headers_hint(
        "In file included from <built-in>:2:\nfatal error: 'linux/types.h' file not found"
    ).line()
    rel = os.uname().release
    assert "linux-headers-X" not in line and f"/lib/modules/{rel}/build" in line
    assert "fatal error: 'linux/types.h' file not found" in line
    tree = close_headers_tree()
    if tree:
        assert f"ln -s {tree[0]} /lib/modules/{rel}/build" in line
    else:
        assert f"apt-get install linux-headers-{rel}" in line


def test_a_compile_error_gets_the_headers_fix():
    line = _bcc_failure("<built-in>:2: fatal error: 'linux/types.h' file not found").line()
    assert "bcc could not compile the probes" in line and "/build" in line


def test_a_program_the_kernel_refused_never_gets_the_headers_fix():
    # bcc's own words (bcc/__init__.py load_func) for a load the verifier ended with EAGAIN: seen on
    # the dev VM with a sampling profiler attached to gdsdiag (blocking mode stops the process)
    seen = "Failed to load BPF program b'raw_tracepoint__sys_enter': Resource temporarily unavailable"
    line = _bcc_failure(seen).line()
    assert "headers" not in line and "ln -s" not in line, line
    assert "the kernel refused the compiled probe program" in line and "Resource temporarily unavailable" in line
    assert "interrupted by a signal" in line
    eperm = _bcc_failure("Failed to load BPF program b'x': Operation not permitted").line()
    assert "headers" not in eperm and "root" in eperm
    other = _bcc_failure("Failed to attach BPF program b'x' to tracepoint raw_syscalls:sys_enter: Invalid argument")
    assert "headers" not in other.line() and "--ebpf" in other.line()
