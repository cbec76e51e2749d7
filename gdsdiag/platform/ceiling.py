"""The GB/s a node's hardware allows on a file's path, read without measuring anything: the PCIe
link of the storage device and of the GPU (current speed x width, as the kernel shows them in
sysfs, less the line encoding of that generation), the storage device's queue limits, and a pinned
host <-> GPU copy rate where a caller measured one (`gdsdiag sweep`'s ``ceilings.pinned_copy``).
Where nothing on the node says, the answer is "unknown" with the reason (a VM's virtio disk has no
PCIe link in sysfs), never a guess.

A reader under a root (``FsRoot``), pure otherwise. The API, for the trace's file rows and any
per-pod or per-node view:

- ``for_path(fs, path, gpus="one", pinned_copy_gbps=None) -> PathCeilings``: the ceilings on the
  path of the file or directory PATH (its mount's block devices), and of the GPU side where GPUS
  says which ("one": the node's GPU where every GPU's link is the same, else unknown; a PCI address;
  None: host I/O, no GPU on the path).
- ``PathCeilings.lowest`` (the narrowest known ``Ceiling``), ``.against(gbps)`` (one line: "2.10
  GB/s of a 7.88 GB/s PCIe Gen4 x4 link (the disk's, 0000:01:00.0)"), ``.to_json()``.
- ``link_ceiling(fs, bdf, whose) -> Ceiling``: one PCI function's link; ``gpu_ceiling(fs, gpus)``
  the GPU side's; ``queue_limits(fs, name)`` a block device's.

The encoding per generation is pci/config_space.lane_gbytes_per_s (8b/10b to 5 GT/s, 128b/130b to
32 GT/s, FLIT 242/256 at 64 GT/s: the PCI Express Base Specification's line codes); the result is
the link's raw data rate after encoding, above what packet headers leave for payload."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..pci.config_space import gen_of, lane_gbytes_per_s
from . import mounts
from .fsroot import FsRoot
from .pci_sysfs import parse_link_speed

# the queue limits a block device's sysfs shows that bound its I/O (block/blk-sysfs.c)
QUEUE_LIMITS = ("max_sectors_kb", "max_hw_sectors_kb", "nr_requests", "read_ahead_kb", "rotational")
NVIDIA = 0x10DE


@dataclass(frozen=True)
class Ceiling:
    """One limit on a path: its GB/s (None: unknown), what it is, and where that was read."""

    whose: str  # "disk" | "GPU" | "pinned copy"
    gbps: float | None
    what: str  # "PCIe Gen4 x4 link" / "unknown: vda is virtio, 0000:00:01.0 shows no PCIe link (…)"
    source: str
    at: str = ""  # the PCI function ("0000:01:00.0"), "each of 8 GPUs", "2 members"

    def to_json(self) -> dict:
        return {"whose": self.whose, "gbps": self.gbps, "what": self.what, "at": self.at, "source": self.source}

    def text(self) -> str:
        """ "the disk's 7.88 GB/s PCIe Gen4 x4 link (0000:01:00.0)"."""
        at = f" ({self.at})" if self.at else ""
        return f"the {self.whose}'s {self.gbps:.2f} GB/s {self.what}{at}"


@dataclass
class PathCeilings:
    """The ceilings of one path: each side's link, a measured pinned copy, and the queue limits."""

    ceilings: list[Ceiling] = field(default_factory=list)
    queue: dict[str, dict[str, int]] = field(default_factory=dict)  # block device -> limit -> value

    @property
    def lowest(self) -> Ceiling | None:
        known = [c for c in self.ceilings if c.gbps is not None]
        return min(known, key=lambda c: c.gbps or 0.0) if known else None

    def against(self, gbps: float | None) -> str:
        """GB/s against the narrowest known ceiling, and what is not known beside it."""
        low = self.lowest
        unknown = [f"{c.whose}: {c.what.removeprefix('unknown: ')}" for c in self.ceilings if c.gbps is None]
        got = f"{gbps:.2f} GB/s" if gbps is not None else "GB/s not known"
        if low is None:
            why = "; ".join(unknown) or "nothing on the path was read"
            return f"{got}; ceiling unknown ({why})"
        return f"{got} of {low.text()}" + (f"; not known: {'; '.join(unknown)}" if unknown else "")

    def to_json(self) -> dict:
        low = self.lowest
        return {
            "gbps": low.gbps if low else None,  # the narrowest known
            "limit": low.text() if low else "unknown",
            "ceilings": [c.to_json() for c in self.ceilings],
            "queue": self.queue,
        }


def link_ceiling(fs: FsRoot, bdf: str, whose: str) -> Ceiling:
    """The link of the PCI function BDF as the kernel shows it (current_link_speed/width:
    drivers/pci/pci-sysfs.c prints the PCIe capability's LnkSta), after its generation's encoding."""
    base = f"/sys/bus/pci/devices/{bdf}"
    source = f"{base}/current_link_speed"
    speed = parse_link_speed(fs.read_text(source))
    width = fs.read_int(f"{base}/current_link_width")
    if not speed or not width or width <= 0:
        what = (
            f"unknown: {bdf} shows no PCIe link (no current_link_speed)"
            if not fs.exists(source)
            else f"unknown: {bdf}'s link reads {fs.read_text(source)!r} x{width}"
        )
        return Ceiling(whose, None, what, source)
    gen = gen_of(speed)
    name = f"PCIe Gen{gen} x{width} link" if gen else f"PCIe {speed:g} GT/s x{width} link"
    return Ceiling(whose, round(lane_gbytes_per_s(speed) * width, 2), name, source, bdf)


def _gpus(fs: FsRoot) -> list[str]:
    """The NVIDIA display/3D controllers of the node (class 03xxxx), by PCI address."""
    out = []
    for bdf in fs.listdir("/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{bdf}"
        cls = fs.read_int(f"{base}/class", 16)
        if fs.read_int(f"{base}/vendor", 16) == NVIDIA and cls is not None and cls >> 16 == 0x03:
            out.append(bdf)
    return sorted(out)


def gpu_ceiling(fs: FsRoot, gpus: str = "one") -> Ceiling:
    """The GPU side's link. GPUS: a PCI address, or "one": the node's GPU where it has one, or where
    every GPU's link is the same (a copy does not name its GPU: a traced copy's GPU is not known)."""
    if gpus != "one":
        return link_ceiling(fs, gpus, "GPU")
    found = _gpus(fs)
    if not found:
        return Ceiling("GPU", None, "unknown: no NVIDIA GPU in /sys/bus/pci/devices", "/sys/bus/pci/devices")
    links = [link_ceiling(fs, b, "GPU") for b in found]
    if len(links) == 1:
        return links[0]
    if len({(c.gbps, c.what) for c in links}) == 1 and links[0].gbps is not None:
        return Ceiling("GPU", links[0].gbps, links[0].what, "/sys/bus/pci/devices", f"each of {len(links)} GPUs")
    return Ceiling(
        "GPU",
        None,
        f"unknown: {len(links)} GPUs with different links, and a copy does not name its GPU",
        "/sys/bus/pci/devices",
    )


def queue_limits(fs: FsRoot, name: str) -> dict[str, int]:
    """The queue limits of block device NAME that bound its I/O (those its sysfs shows)."""
    got = {}
    for k in QUEUE_LIMITS:
        v = fs.read_int(f"/sys/class/block/{name}/queue/{k}")
        if v is not None:
            got[k] = v
    return got


def for_path(
    fs: FsRoot,
    path: str,
    gpus: str | None = "one",
    pinned_copy_gbps: float | None = None,
    mount_list: list[mounts.Mount] | None = None,
) -> PathCeilings:
    """The ceilings on PATH's path: the link of the PCI function serving its mount's block device
    (its members' links together, for a striped or mirrored set), the GPU side's (GPUS: see
    gpu_ceiling; None: host I/O, no GPU on the path), a pinned copy a caller measured, and each
    device's queue limits. MOUNT_LIST: the root's mounts where the caller has read them."""
    out = PathCeilings()
    m = mounts.mount_for(path, mounts.read_mounts(fs) if mount_list is None else mount_list)
    chain = mounts.block_chain(fs, m.dev) if m is not None and not m.dev.startswith("0:") else None
    if chain is None:
        where = f"{m.fstype} {m.source}" if m is not None else "no mount found"
        out.ceilings.append(
            Ceiling("disk", None, f"unknown: {path} is on {where}, no block device under it", "/proc/self/mountinfo")
        )
    else:
        disks = []
        for leaf in chain.leaves():
            q = queue_limits(fs, leaf.name)
            if q:
                out.queue[leaf.name] = q
            if leaf.pci is None:
                disks.append(
                    Ceiling("disk", None, f"unknown: {leaf.name} has no PCI function", f"/sys/class/block/{leaf.name}")
                )
            else:
                c = link_ceiling(fs, leaf.pci, "disk")
                if c.gbps is None and leaf.kind == "virtio":
                    c = Ceiling(
                        "disk", None, f"unknown: {leaf.name} is virtio, {c.what.removeprefix('unknown: ')}", c.source
                    )
                disks.append(c)
        unknown = [c for c in disks if c.gbps is None]
        if len(disks) == 1 or unknown:
            out.ceilings.append(unknown[0] if unknown else disks[0])
        else:
            # (a striped or mirrored set reads from every member at once: their links add up)
            total = round(sum(c.gbps or 0.0 for c in disks), 2)
            links = ", ".join(f"{c.what} {c.at}" for c in disks)
            out.ceilings.append(
                Ceiling(
                    "disk", total, f"links of its members together ({links})", disks[0].source, f"{len(disks)} members"
                )
            )
    if gpus is not None:
        out.ceilings.append(gpu_ceiling(fs, gpus))
        if pinned_copy_gbps is not None:
            out.ceilings.append(
                Ceiling("pinned copy", pinned_copy_gbps, "pinned host-to-GPU copy, measured", "gdsdiag sweep")
            )
    return out


def node_gpu_link(root: str = "/") -> tuple[float | None, str]:
    """gpu_ceiling("one") of the node under ROOT as (GB/s, what it is): the trace's scale-out view,
    the most a pod's bytes can reach its GPU at; (None, why not) where it is not known or the node's
    files cannot be read."""
    from ..errors import GdsdiagError
    from .roots import node_root

    try:
        with node_root(root) as fs:
            c = gpu_ceiling(fs, "one")
    except (OSError, ValueError, GdsdiagError) as e:
        return None, f"unknown: {root} not read ({e})"
    return (c.gbps, c.text()) if c.gbps is not None else (None, c.what)
