"""The kernel headers tree bcc compiles the probes against, and the one command that provides one
where this kernel has none.

bcc reads ``/lib/modules/$(uname -r)/build`` (and ``source`` beside it, Debian's split tree). A
kernel of a cloud image or a custom build has no headers package of its own name, but the probes
read no kernel structs, so any recent tree serves: the fix installs the distribution's nearest one
and links it there, as ``.ci/run`` does. The command is computed from what this distribution has
(``/etc/os-release``; ``apt-cache search`` where apt is there), so it never names a package that
does not exist.

``python -m gdsdiag.trace.probes.headers`` prints the command (nothing when this kernel has a tree);
``--run`` runs it: the README's set-up does, so ``gdsdiag trace`` works on a fresh box.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable

MODULES = "/lib/modules"
SEARCH_TIMEOUT_S = 10  # apt-cache search reads the package lists: ~0.5 s here; a hung one must not hang the fix
# dpkg's architecture names for the machine names os.uname() gives (Debian's headers carry them)
DPKG_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x"}


def _version_key(path: str) -> list:
    """6.10 after 6.9: the numbers in a name compared as numbers."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", path)]


def has_tree(rel: str | None = None, modules: str = MODULES) -> bool:
    """True when bcc finds a tree for this kernel, by bcc's own test (frontends/clang/loader.cc):
    include/linux/kconfig.h under ``source`` where both ``build`` and ``source`` are there (Debian's
    split tree), else under ``build``."""
    d = os.path.join(modules, rel or os.uname().release)
    both = os.path.isdir(os.path.join(d, "build")) and os.path.isdir(os.path.join(d, "source"))
    return os.path.isfile(os.path.join(d, "source" if both else "build", "include/linux/kconfig.h"))


def close_headers_tree(src: str = "/usr/src") -> tuple[str, str] | None:
    """An installed headers tree to link when this kernel's own is missing: (build, source) paths,
    Debian's pair ``linux-headers-V-ARCH`` (build) and ``linux-headers-V-common`` (source), the
    newest version first; None when /usr/src has none. The probes read no kernel structs, so any
    tree bcc can compile against serves."""
    trees = sorted(glob.glob(os.path.join(src, "linux-headers-*")), key=_version_key, reverse=True)
    build = [t for t in trees if not t.endswith("-common") and os.path.isdir(os.path.join(t, "include"))]
    if not build:
        return None
    common = build[0].rsplit("-", 1)[0] + "-common"
    return build[0], common if os.path.isdir(common) else build[0]


def link_command(rel: str, build: str, source: str) -> str:
    """Links bcc finds: build and source (mkdir first: a kernel with no modules installed has no
    /lib/modules/REL at all; -sfn replaces a dangling link left by a removed tree)."""
    d = f"{MODULES}/{rel}"
    return f"mkdir -p {d} && ln -sfn {build} {d}/build && ln -sfn {source} {d}/source"


def os_release(path: str = "/etc/os-release") -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, sep, v = line.strip().partition("=")
                if sep:
                    out[k] = v.strip().strip("\"'")
    except OSError:  # no os-release: an unknown distribution, the fix says what is needed in words
        pass
    return out


def family(osr: dict[str, str]) -> str | None:
    """'ubuntu', 'debian' or 'rhel' (their headers packages differ), None for another."""
    ids = [osr.get("ID", ""), *osr.get("ID_LIKE", "").split()]
    for fam, names in (("ubuntu", {"ubuntu"}), ("debian", {"debian"}), ("rhel", {"rhel", "fedora", "centos"})):
        if names & set(ids):
            return fam
    return None


def apt_search(pattern: str) -> list[str] | None:
    """Package names matching the regex (apt-cache search --names-only); None when apt cannot say
    (no apt-cache, a timeout): then the fix names the distribution's metapackage instead."""
    try:
        p = subprocess.run(
            ["apt-cache", "search", "--names-only", pattern],
            capture_output=True,
            text=True,
            timeout=SEARCH_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    return [ln.split(" ", 1)[0] for ln in p.stdout.splitlines() if ln.strip()]


def _newest_tree(pattern: str) -> str:
    """A shell expression for the newest /usr/src tree of the pattern, once the metapackage put it there."""
    return f'"$(ls -d {pattern} | sort -V | tail -1)"'


def _debian_fix(rel: str, arch: str, search: Callable[[str], list[str] | None]) -> str:
    """The nearest linux-headers-V-N-ARCH Debian has (not -cloud or -rt: the plain flavour), named, and
    its trees linked; the metapackage where apt cannot say which."""
    found = search(rf"^linux-headers-[0-9.]+-[0-9]+-{arch}$") or []
    if found:
        pkg = sorted(found, key=_version_key)[-1]
        v = pkg[len("linux-headers-") : -len(f"-{arch}")]
        return f"apt-get install -y {pkg} && " + link_command(
            rel, f"/usr/src/{pkg}", f"/usr/src/linux-headers-{v}-common"
        )
    return f"apt-get update && apt-get install -y linux-headers-{arch} && " + link_command(
        rel, _newest_tree(f"/usr/src/linux-headers-*[0-9]-{arch}"), _newest_tree("/usr/src/linux-headers-*-common")
    )


def fix_command(
    rel: str | None = None,
    src: str = "/usr/src",
    osr: dict[str, str] | None = None,
    search: Callable[[str], list[str] | None] = apt_search,
    machine: str | None = None,
) -> str:
    """One copyable shell command that leaves bcc a headers tree for kernel ``rel``."""
    rel = rel or os.uname().release
    tree = close_headers_tree(src)
    if tree is not None:  # a tree is installed, only the links are missing
        return link_command(rel, *tree)
    fam = family(os_release() if osr is None else osr)
    if fam in ("debian", "ubuntu") and search(f"^linux-headers-{re.escape(rel)}$"):
        return f"apt-get install -y linux-headers-{rel}"  # this kernel's own: its package links it
    arch = DPKG_ARCH.get(machine or platform.machine(), machine or platform.machine())
    if fam == "debian":
        return _debian_fix(rel, arch, search)
    if fam == "ubuntu":  # the -generic tree carries its includes (links into the common one)
        newest = _newest_tree("/usr/src/linux-headers-*-generic")
        return "apt-get update && apt-get install -y linux-headers-generic && " + link_command(rel, newest, newest)
    if fam == "rhel":
        newest = _newest_tree("/usr/src/kernels/*")
        return "dnf install -y kernel-devel && " + link_command(rel, newest, newest)
    return f"install your distribution's kernel headers (for {rel}, or the nearest version), then " + link_command(
        rel, "/usr/src/<headers tree>", "/usr/src/<headers tree>"
    )


def main(argv: list[str]) -> int:
    """Print the command (nothing when this kernel has a tree); with --run, run it."""
    if has_tree():
        return 0
    cmd = fix_command()
    if "--run" not in argv:
        print(cmd)
        return 0
    if close_headers_tree() is None and family(os_release()) is None:
        # words, not a command: said, and the set-up goes on (only gdsdiag trace needs the tree)
        print(f"kernel headers for {os.uname().release}: {cmd}", file=sys.stderr)
        return 0
    print(f"kernel headers for {os.uname().release}: {cmd}", file=sys.stderr)
    return subprocess.run(["sh", "-c", cmd]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
