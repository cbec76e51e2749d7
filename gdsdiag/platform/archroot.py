"""A filesystem root served straight from a tar archive (a ``gdsdiag snapshot``, hwloc's sysfs trees).

Nothing is extracted: the archive is decompressed once into memory (within stated limits) and
the readers are served from its member index. Symbolic links are resolved inside the archive
only: an absolute target is re-rooted as on a live root (sysfs writes ``/sys/devices/...``), and a
link whose target is not in the archive, or that climbs above its top, is a named problem that is
never followed, so no archive can make gdsdiag read or write a host file. Limits (member size,
member count, total bytes) hold before any data is kept, and the compressed stream is read to its
end so a truncated or damaged archive is an error rather than a partial answer.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import posixpath
import tarfile
import zlib
from dataclasses import dataclass

from ..bounded import MiB, human, open_user_file, read_capped
from ..errors import GdsdiagError
from .fsroot import AttrDir, FsRoot

# Member names can never hold a NUL (tar stops at it), so this prefix marks a path that is not
# in the archive: reads of it fail like a missing file.
OUTSIDE = "/\0outside-archive"
MAX_HOPS = 40  # as the kernel's MAXSYMLINKS: the CVE-2025-4517 chain shape ends here
MAX_PATH = 4096  # a resolved path longer than PATH_MAX is refused like the kernel does


@dataclass(frozen=True)
class Limits:
    archive_bytes: int = 128 * MiB  # the file as sent (compressed)
    stream_bytes: int = 128 * MiB  # the tar stream once decompressed (headers + data + padding)
    member_bytes: int = 16 * MiB  # one member's data (its stated size, sparse or not)
    members: int = 200_000  # hwloc's largest test tree has 11,495; a 1,000-device node ~20,000
    total_bytes: int = 64 * MiB  # all members' data


DEFAULT_LIMITS = Limits()


def _decompress(raw: bytes, cap: int, path: str) -> bytes:
    """The whole tar stream, at most ``cap`` bytes; reading to the end makes the decompressor check
    its trailer (gzip CRC32 and length, bzip2 and xz checksums) and every concatenated member."""
    f: gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile
    if raw[:2] == b"\x1f\x8b":
        f = gzip.GzipFile(fileobj=io.BytesIO(raw))
    elif raw[:3] == b"BZh":
        f = bz2.BZ2File(io.BytesIO(raw))
    elif raw[:6] == b"\xfd7zXZ\x00":
        f = lzma.LZMAFile(io.BytesIO(raw))
    else:
        return raw
    try:
        data = f.read(cap + 1)
    except EOFError:
        raise GdsdiagError(
            f"{path} is truncated (the compressed stream ends early)",
            "copy the whole file again, or re-create it with gdsdiag snapshot",
        ) from None
    except (OSError, zlib.error, lzma.LZMAError, ValueError) as e:
        raise GdsdiagError(
            f"{path} is damaged ({e})", "copy the file again, or re-create it with gdsdiag snapshot"
        ) from None
    if len(data) > cap:
        raise GdsdiagError(
            f"{path} unpacks to more than {human(cap)}",
            "this is not a gdsdiag snapshot (they are a few MiB); do not open archive bombs",
        )
    return data


def _norm(name: str) -> str | None:
    """The absolute in-archive path of a member name, or None when the name climbs out."""
    p = posixpath.normpath("/" + name.lstrip("/"))
    if p.startswith("//"):
        p = "/" + p.lstrip("/")
    # normpath of an absolute path already clamps '..' at '/'; a name that used '..' to get
    # there is a crafted escape: refuse it rather than silently re-homing it.
    if ".." in name.split("/"):
        depth = 0
        for part in name.strip("/").split("/"):
            if part == "..":
                depth -= 1
                if depth < 0:
                    return None
            elif part not in ("", "."):
                depth += 1
    return p


class ArchiveRoot(FsRoot):
    """FsRoot over a tar archive (plain, gzip, bzip2 or xz). ``subdir`` serves a directory of the
    archive as ``/`` (hwloc's archives hold one top directory)."""

    def __init__(self, path: str, limits: Limits = DEFAULT_LIMITS, subdir: str | None = None):
        self.root = path  # what reports name as their source
        self.archive = path
        self.problems: list[str] = []
        self.limits = limits
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.special: dict[str, str] = {}  # device nodes, FIFOs: exist, never readable
        self.children: dict[str, set[str]] = {"/": set()}
        self._noted: set[str] = set()
        self._load(path)
        if subdir:
            self._reroot(subdir)

    def __repr__(self) -> str:
        return f"ArchiveRoot({self.archive!r})"

    def within(self, subdir: str) -> ArchiveRoot:
        """A directory of the already loaded archive served as ``/`` (no second decompression)."""
        other = self.fresh()
        other._reroot(subdir)
        return other

    def fresh(self) -> ArchiveRoot:
        """The same loaded archive with no problems remembered (one load, many independent runs)."""
        import copy

        other = copy.copy(self)
        other.problems, other._noted = [], set()
        return other

    @property
    def is_live(self) -> bool:
        return False

    def host(self, path: str) -> str:
        raise GdsdiagError("internal: an archive root has no host path", "report this as a gdsdiag bug")

    # -- loading -------------------------------------------------------------------------------

    def _load(self, path: str) -> None:
        lim = self.limits
        fix = "re-create it with gdsdiag snapshot -o FILE"
        with open_user_file(path, "snapshot", lim.archive_bytes, fix) as f:
            raw = read_capped(f, lim.archive_bytes, path, fix)
        stream = _decompress(raw, lim.stream_bytes, path)
        del raw
        bad = ("is not a readable tar archive", "re-create it with gdsdiag snapshot -o FILE")
        try:
            tar = tarfile.open(fileobj=io.BytesIO(stream), mode="r:")
        except (tarfile.TarError, EOFError, OSError, ValueError):
            raise GdsdiagError(f"{path} {bad[0]}", bad[1]) from None
        total = count = 0
        try:
            while True:
                m = tar.next()
                if m is None:
                    break
                count += 1
                if count > lim.members:
                    raise GdsdiagError(
                        f"{path} holds more than {lim.members} members",
                        "this is not a gdsdiag snapshot; do not open archive bombs",
                    )
                if m.size > lim.member_bytes:
                    raise GdsdiagError(
                        f"{path}: member {m.name[:200]!r} is {human(m.size)}, over the {human(lim.member_bytes)} limit",
                        "this is not a gdsdiag snapshot; do not open archive bombs",
                    )
                total += m.size if m.isreg() else 0
                if total > lim.total_bytes:
                    raise GdsdiagError(
                        f"{path} holds more than {human(lim.total_bytes)} of data",
                        "this is not a gdsdiag snapshot; do not open archive bombs",
                    )
                self._add(tar, m)
            end = tar.offset
        except (tarfile.TarError, ValueError, OverflowError) as e:
            # Python 3.10's tarfile lets some malformed headers through as ValueError ("negative seek
            # value", a hypothesis-generated archive): damaged, like any other unparseable header
            raise GdsdiagError(
                f"{path} is damaged ({e})", "copy the file again, or re-create it with gdsdiag snapshot"
            ) from None
        finally:
            tar.close()
        # tarfile ends quietly at the first header it cannot parse: what follows the last member
        # must be the end-of-archive padding (zeros) or the archive is damaged or cut short.
        if end > len(stream) or stream[end:].count(0) != len(stream) - end:
            raise GdsdiagError(
                f"{path} is damaged after member {count} (offset {end})",
                "copy the file again, or re-create it with gdsdiag snapshot",
            )

    def _add(self, tar: tarfile.TarFile, m: tarfile.TarInfo) -> None:
        if len(m.name) > MAX_PATH or len(m.linkname) > MAX_PATH:
            # no tar x could create it either (ENAMETOOLONG); resolving such names was quadratic
            self._note(f"{m.name[:200]!r}", "member or link name longer than PATH_MAX; ignored")
            return
        p = _norm(m.name)
        if p is None:
            self._note(f"{m.name[:200]!r}", "member name climbs out of the archive; ignored")
            return
        if p == "/":
            return
        # A member below a link lands where the link points, as 'tar x' would put it (gdsdiag
        # 0.1 snapshots store sys/class/net/eth0/device below the eth0 link); placing it through a
        # link that leaves the archive is refused like any escape.
        parent = posixpath.dirname(p)
        if parent != "/":
            try:
                rparent = self.resolve(parent)
            except OSError:
                return
            if rparent.startswith(OUTSIDE):
                self._note(p, "member sits below a link that leaves the archive; ignored")
                return
            p = posixpath.join(rparent, posixpath.basename(p))
        # a hard link's data, taken before anything below can replace its source (a link to itself,
        # or to a file that the link's own parent directories are about to turn into a directory)
        linked = None
        if m.islnk():
            src = _norm(m.linkname)
            linked = self.files.get(src) if src is not None else None
        self._forget(p)
        if m.isdir():
            self._mkdirs(p)
        elif m.issym():
            self._mkdirs(posixpath.dirname(p))
            self.links[p] = m.linkname
        elif m.islnk():
            # a hard link names an earlier member; only one already in the archive is served
            if linked is not None:
                self._mkdirs(posixpath.dirname(p))
                self.files[p] = linked
            else:
                self._note(p, f"hard link to {m.linkname[:200]!r}, which is not an earlier member; ignored")
                return
        elif m.isreg():
            fobj = tar.extractfile(m)
            data = fobj.read(self.limits.member_bytes + 1) if fobj is not None else b""
            self._mkdirs(posixpath.dirname(p))
            self.files[p] = data
        else:
            self._mkdirs(posixpath.dirname(p))
            self.special[p] = "a device node or FIFO"
            self.children[posixpath.dirname(p)].add(posixpath.basename(p))
            return
        self.children[posixpath.dirname(p)].add(posixpath.basename(p))

    def _forget(self, p: str) -> None:
        # a later member replaces an earlier one of the same name, as tar does
        self.files.pop(p, None)
        self.links.pop(p, None)
        self.special.pop(p, None)
        self.children.pop(p, None)

    def _mkdirs(self, p: str) -> None:
        chain = []
        while p not in self.children:
            chain.append(p)
            p = posixpath.dirname(p)
        for d in reversed(chain):
            self._forget(d)
            self.children[d] = set()
            self.children[posixpath.dirname(d)].add(posixpath.basename(d))

    def _reroot(self, subdir: str) -> None:
        base = "/" + subdir.strip("/")
        if base not in self.children:
            raise GdsdiagError(f"{self.archive} has no directory {subdir}", "name a directory of the archive")

        def move(d: dict) -> dict:
            return {
                ("/" + k[len(base) :].lstrip("/")): v for k, v in d.items() if k == base or k.startswith(base + "/")
            }

        self.files, self.links, self.special, self.children = (
            move(self.files),
            move(self.links),
            move(self.special),
            move(self.children),
        )
        self.children.setdefault("/", set())

    def _note(self, where: str, why: str) -> None:
        line = f"{where}: {why}"
        if line not in self._noted:
            self._noted.add(line)
            self.problems.append(line)

    # -- the FsRoot interface --------------------------------------------------------------------

    def resolve(self, path: str) -> str:
        # Bounded like the kernel's lookup (issue 24: 30 names of 20,000 components each took
        # > 120 s): a path over PATH_MAX is refused before any work, and the components still to
        # walk are a stack (pop from the end), not a list shifted one by one.
        if len(path) > MAX_PATH:
            self._note(path[:200], "path longer than PATH_MAX")
            raise OSError(errno.ENAMETOOLONG, "path too long", path[:200])
        parts = [p for p in path.split("/") if p]
        parts.reverse()
        out: list[str] = []
        hops = 0
        last_link: tuple[str, str] | None = None
        while parts:
            p = parts.pop()
            if p == ".":
                continue
            if p[0] == "\0":
                # the end of an absolute link's target: on a host it would name a host file, so a
                # target the archive lacks is a link out of it
                here = "/" + "/".join(out)
                if not self._present(here):
                    link, outside = p[1:].split("\0", 1)
                    self._note(link, f"link to {outside[:200]!r} points outside the archive; not followed")
                    return OUTSIDE + link
                continue
            if p == "..":
                if out:
                    out.pop()
                elif last_link is not None:
                    # '..' at the top reached through a link (the CVE-2025-4517 chain climbs this
                    # way): on a host this would leave the tree
                    self._note(last_link[0], f"link to {last_link[1][:200]!r} leaves the archive; not followed")
                    return OUTSIDE + last_link[0]
                continue
            candidate = "/" + "/".join(out + [p])
            target = self.links.get(candidate)
            if target is None:
                out.append(p)
                continue
            hops += 1
            last_link = (candidate, target)
            if hops > MAX_HOPS:
                self._note(candidate, "too many levels of symbolic links inside the archive")
                raise OSError(errno.ELOOP, "too many levels of symbolic links", candidate)
            if target.startswith("/"):
                new = posixpath.normpath(target)
                base: list[str] = []
            else:
                new = target
                base = out
            # climbing above the archive's top is leaving it: a named problem, never followed
            depth = len(base)
            for t in new.split("/"):
                if t == "..":
                    depth -= 1
                    if depth < 0:
                        self._note(candidate, f"link to {target[:200]!r} leaves the archive; not followed")
                        return OUTSIDE + candidate
                elif t not in ("", "."):
                    depth += 1
            out = list(base)
            check = ["\0" + candidate + "\0" + target] if target.startswith("/") else []
            parts.extend(reversed([t for t in new.split("/") if t] + check))
            if sum(map(len, parts)) + len(parts) > MAX_PATH * 4:
                self._note(candidate, "link target too long")
                raise OSError(errno.ENAMETOOLONG, "link target too long", candidate)
        result = "/" + "/".join(out)
        if len(result) > MAX_PATH:
            self._note(path, "resolved path longer than PATH_MAX")
            raise OSError(errno.ENAMETOOLONG, "path too long", path)
        return result

    def _lookup(self, path: str) -> str | None:
        """Resolved path, or None when it cannot be resolved (loop, too long, outside)."""
        try:
            r = self.resolve(path)
        except OSError:
            return None
        if r.startswith(OUTSIDE):
            return None
        return r

    def _present(self, r: str) -> bool:
        return r in self.files or r in self.children or r in self.special or r in self.links

    def follow_link(self, path: str) -> str:
        return self.resolve(path)

    def link_attrs(self, path: str) -> tuple[str, AttrDir]:
        real = self.resolve(path)
        return real, AttrDir(self, real, None)

    def _dirfd(self, path: str) -> int | None:
        return None  # no descriptors: AttrDir reads through read_checked

    def exists(self, path: str) -> bool:
        r = self._lookup(path)
        return r is not None and (r in self.files or r in self.children or r in self.special)

    def listdir(self, path: str) -> list[str]:
        r = self._lookup(path)
        if r is None:
            return []
        return sorted(self.children.get(r, ()))

    def read_checked(
        self, path: str, max_bytes: int | None, limit: int | None = None
    ) -> tuple[bytes | None, str | None]:
        try:
            r = self.resolve(path)
        except OSError as e:
            return None, e.strerror
        if r.startswith(OUTSIDE):
            return None, "a link on the way leaves the archive (not followed)"
        data = self.files.get(r)
        if data is None:
            if r in self.children:
                return None, "Is a directory"
            if r in self.special:
                return None, f"is {self.special[r]}, not a regular file"
            return None, "No such file or directory"
        if max_bytes is not None and len(data) > max_bytes:
            return None, f"is {human(len(data))}, over the {human(max_bytes)} limit"
        return (data if limit is None else data[:limit]), None

    def readlink_name(self, path: str) -> str | None:
        parent, name = posixpath.split(posixpath.normpath("/" + path.lstrip("/")))
        try:
            rp = self.resolve(parent)
        except OSError:
            return None
        t = self.links.get(posixpath.join(rp, name))
        if t is None:
            return None
        return posixpath.basename(t.rstrip("/")) or None
