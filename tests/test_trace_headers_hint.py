"""The fix bcc's failed compile gets names a real headers tree to link, never a placeholder: the
installed /usr/src/linux-headers-* (newest version, Debian's -ARCH build tree and its -common
source tree), or the package to install when there is none. Real directories in a tmp tree."""

import os

from gdsdiag.trace.bpf import _kernel_headers_hint, close_headers_tree


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
