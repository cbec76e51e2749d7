"""The fix bcc's failed compile gets names a real headers tree to link, never a placeholder: the
installed /usr/src/linux-headers-* (newest version, Debian's -ARCH build tree and its -common
source tree), or the package to install when there is none. Real directories in a tmp tree."""

import os
import re
import subprocess

from gdsdiag.trace.probes import bpf
from gdsdiag.trace.probes.bpf import _bcc_failure, _kernel_headers_hint
from gdsdiag.trace.probes.headers import close_headers_tree, family, fix_command, has_tree, os_release


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


def test_ubuntus_pair_links_the_generic_tree(tmp_path):
    """Ubuntu 24.04's linux-headers-generic installs two trees (as a fresh noble debootstrap got
    them, docs/fresh-box.md): linux-headers-6.8.0-155 (the sources' include/, no -common suffix)
    and linux-headers-6.8.0-155-generic (include/generated, include/config and links into the
    first). The -generic one is what bcc compiles against; the plain one lacks the generated
    headers. Two versions installed: the newest -generic."""
    for v in ("6.8.0-31", "6.8.0-155"):
        _tree(tmp_path, f"linux-headers-{v}")
        _tree(tmp_path, f"linux-headers-{v}-generic")
    build = str(tmp_path / "linux-headers-6.8.0-155-generic")
    assert close_headers_tree(str(tmp_path)) == (build, build)


def test_no_tree(tmp_path):
    os.makedirs(tmp_path / "linux-headers-6.1.0-57-common")  # a source tree alone cannot be built against
    assert close_headers_tree(str(tmp_path)) is None


def test_the_hint_names_no_placeholder(monkeypatch):
    monkeypatch.setattr(bpf, "has_tree", lambda rel: False)
    line = _kernel_headers_hint(
        "In file included from <built-in>:2:\nfatal error: 'linux/types.h' file not found"
    ).line()
    rel = os.uname().release
    assert "linux-headers-X" not in line and "<version>" not in line and f"/lib/modules/{rel}/build" in line
    assert "fatal error: 'linux/types.h' file not found" in line
    assert line.endswith(fix_command(rel))  # the command last on the line: copied whole


def test_with_a_tree_there_headers_are_not_named_the_cause(monkeypatch):
    monkeypatch.setattr(bpf, "has_tree", lambda rel: True)
    line = _kernel_headers_hint("<built-in>:9: error: use of undeclared identifier 'x'").line()
    assert "ln -s" not in line and "apt-get" not in line and "--ebpf" in line, line


def test_a_compile_error_gets_the_headers_fix(monkeypatch):
    monkeypatch.setattr(bpf, "has_tree", lambda rel: False)
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


# The fix for a box with no tree at all: one command, from what the distribution has. ``search``
# stands for apt-cache search --names-only (None: apt could not say).
def _debian_search(pattern):
    names = [
        "linux-headers-6.1.0-47-amd64",
        "linux-headers-6.1.0-50-amd64",
        "linux-headers-6.1.0-50-cloud-amd64",
        "linux-headers-6.1.0-50-rt-amd64",
        "linux-headers-6.1.0-50-common",
    ]
    return [n for n in names if re.search(pattern, n)]


def test_debian_names_its_nearest_package_and_links_build_and_source(tmp_path):
    cmd = fix_command("6.18.44-fc-v1300", str(tmp_path), {"ID": "debian"}, _debian_search, "x86_64")
    assert cmd == (
        "apt-get install -y linux-headers-6.1.0-50-amd64 && mkdir -p /lib/modules/6.18.44-fc-v1300"
        " && ln -sfn /usr/src/linux-headers-6.1.0-50-amd64 /lib/modules/6.18.44-fc-v1300/build"
        " && ln -sfn /usr/src/linux-headers-6.1.0-50-common /lib/modules/6.18.44-fc-v1300/source"
    )


def test_this_kernels_own_package_when_the_distribution_has_it(tmp_path):
    def search(pattern):
        return ["linux-headers-6.1.0-50-amd64"] if re.search(pattern, "linux-headers-6.1.0-50-amd64") else []

    cmd = fix_command("6.1.0-50-amd64", str(tmp_path), {"ID": "debian"}, search, "x86_64")
    assert cmd == "apt-get install -y linux-headers-6.1.0-50-amd64"


def test_without_apt_answers_the_metapackage_and_the_tree_it_installs(tmp_path):
    deb = fix_command("6.18.44-x", str(tmp_path), {"ID": "debian"}, lambda p: None, "aarch64")
    assert deb.startswith("apt-get update && apt-get install -y linux-headers-arm64 && mkdir -p /lib/modules/6.18.44-x")
    assert '"$(ls -d /usr/src/linux-headers-*[0-9]-arm64 | sort -V | tail -1)" /lib/modules/6.18.44-x/build' in deb
    ubu = fix_command("6.8.0-1062-azure", str(tmp_path), {"ID": "ubuntu", "ID_LIKE": "debian"}, lambda p: [], "x86_64")
    assert ubu.startswith("apt-get update && apt-get install -y linux-headers-generic && ")
    assert "linux-headers-6.8.0-1062-azure" not in ubu  # never a package this distribution lacks
    assert "/lib/modules/6.8.0-1062-azure/build" in ubu and "/lib/modules/6.8.0-1062-azure/source" in ubu


def test_an_installed_tree_is_linked_not_installed_again(tmp_path):
    _tree(tmp_path, "linux-headers-6.1.0-50-amd64")
    _tree(tmp_path, "linux-headers-6.1.0-50-common")
    cmd = fix_command("6.18.44-x", str(tmp_path), {"ID": "debian"}, _debian_search, "x86_64")
    assert cmd.startswith("mkdir -p /lib/modules/6.18.44-x && ln -sfn ") and "apt-get" not in cmd


def test_the_fix_commands_are_valid_shell(tmp_path):
    for osr in ({"ID": "debian"}, {"ID": "ubuntu"}, {"ID": "rhel"}):
        for search in (lambda p: None, _debian_search):
            cmd = fix_command("6.18.44-x", str(tmp_path), osr, search, "x86_64")
            assert subprocess.run(["sh", "-n", "-c", cmd]).returncode == 0, cmd


def test_has_tree_is_bccs_own_test(tmp_path):
    rel = tmp_path / "6.18.44-x"
    rel.mkdir()
    assert not has_tree("6.18.44-x", str(tmp_path))
    build, common = tmp_path / "b", tmp_path / "c"
    (build / "include").mkdir(parents=True)
    (common / "include/linux").mkdir(parents=True)
    (common / "include/linux/kconfig.h").write_text("")
    (rel / "build").symlink_to(build)
    assert not has_tree("6.18.44-x", str(tmp_path))  # Debian's build tree alone has no kconfig.h
    (rel / "source").symlink_to(common)
    assert has_tree("6.18.44-x", str(tmp_path))


def test_os_release_and_family(tmp_path):
    p = tmp_path / "os-release"
    p.write_text('PRETTY_NAME="Ubuntu 24.04 LTS"\nID=ubuntu\nID_LIKE=debian\n')
    osr = os_release(str(p))
    assert family(osr) == "ubuntu" and family({"ID": "debian"}) == "debian" and family({"ID": "arch"}) is None
    assert os_release(str(tmp_path / "none")) == {}


def test_run_leaves_words_unrun_on_an_unknown_distribution(monkeypatch, capsys):
    from gdsdiag.trace.probes import headers

    monkeypatch.setattr(headers, "has_tree", lambda rel=None: False)
    monkeypatch.setattr(headers, "close_headers_tree", lambda src="/usr/src": None)
    monkeypatch.setattr(headers, "os_release", lambda path="/etc/os-release": {"ID": "plan9"})
    ran = []
    monkeypatch.setattr(headers.subprocess, "run", lambda *a, **k: ran.append(a))
    assert headers.main(["--run"]) == 0 and ran == []
    assert "install your distribution's kernel headers" in capsys.readouterr().err


def test_main_prints_nothing_where_a_tree_is_there_and_the_command_where_not(monkeypatch, capsys):
    from gdsdiag.trace.probes import headers

    monkeypatch.setattr(headers, "has_tree", lambda rel=None: True)
    assert headers.main([]) == 0 and capsys.readouterr().out == ""
    monkeypatch.setattr(headers, "has_tree", lambda rel=None: False)
    monkeypatch.setattr(headers, "fix_command", lambda: "mkdir -p /lib/modules/x")
    assert headers.main([]) == 0 and capsys.readouterr().out == "mkdir -p /lib/modules/x\n"
