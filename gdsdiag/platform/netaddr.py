"""Which network interface of a node holds an address, and which RDMA device serves an interface,
read under a root (live node, tree or snapshot) from procfs and sysfs: what a cuObject endpoint
(cuobj.json's properties.rdma_dev_addr_list: "IP addresses and RDMA device or interface names",
NVIDIA cuObjClient API, RDMA Multipathing) is on this node.

Formats, as the kernel writes them:
- /proc/net/if_inet6: one IPv6 address a line, 32 hex digits, then index, prefix length, scope,
  flags (hex) and the interface name (net/ipv6/addrconf.c if6_seq_show).
- /proc/net/fib_trie: the IPv4 tables; a local address is a '|-- A.B.C.D' line followed by a
  '/32 host LOCAL' line (net/ipv4/fib_trie.c fib_trie_seq_show). It does not name the interface.
- /proc/net/route: Iface, Destination, Gateway, Flags, RefCnt, Use, Metric, Mask, … with the
  addresses as host-order hex (net/ipv4/fib_trie.c fib_route_seq_show): the interface of the
  subnet that holds a local address is the interface holding it.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
from dataclasses import dataclass

from .fsroot import FsRoot
from .pci_sysfs import owner_bdf


@dataclass
class LocalAddresses:
    """The node's own addresses: address -> interface ('' where the interface is not known)."""

    by_address: dict[str, str]
    readable: bool  # False: neither /proc/net/if_inet6 nor /proc/net/fib_trie could be read


def _ipv4_local(text: str) -> set[str]:
    out: set[str] = set()
    last = None
    for line in text.splitlines():
        m = re.match(r"^\s*\|--\s+(\d{1,3}(?:\.\d{1,3}){3})\s*$", line)
        if m:
            last = m.group(1)
            continue
        if last and re.match(r"^\s*/32 host LOCAL\s*$", line):
            out.add(last)
    return out


def _ipv4_routes(text: str) -> list[tuple[ipaddress.IPv4Network, str]]:
    nets = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 8:
            continue
        try:
            dest = socket.inet_ntoa(struct.pack("<I", int(parts[1], 16)))
            mask = socket.inet_ntoa(struct.pack("<I", int(parts[7], 16)))
            nets.append((ipaddress.IPv4Network(f"{dest}/{mask}", strict=False), parts[0]))
        except (ValueError, struct.error, OSError):
            continue
    return nets


def read_local_addresses(fs: FsRoot) -> LocalAddresses:
    out: dict[str, str] = {}
    v6 = fs.read_text("/proc/net/if_inet6")
    for line in (v6 or "").splitlines():
        parts = line.split()
        if len(parts) == 6 and re.fullmatch(r"[0-9a-fA-F]{32}", parts[0]):
            addr = ipaddress.IPv6Address(bytes.fromhex(parts[0]))
            out[str(addr)] = parts[5]
    v4 = fs.read_text("/proc/net/fib_trie")
    if v4 is not None:
        routes = _ipv4_routes(fs.read_text("/proc/net/route") or "")
        for a in sorted(_ipv4_local(v4)):
            ip = ipaddress.IPv4Address(a)
            best = [(n, i) for n, i in routes if ip in n and n.prefixlen > 0]
            best.sort(key=lambda x: -x[0].prefixlen)
            out[a] = best[0][1] if best else ("lo" if ip.is_loopback else "")
    return LocalAddresses(out, v6 is not None or v4 is not None)


def rdma_devices_of(fs: FsRoot, interface: str) -> list[str]:
    """The RDMA devices (/sys/class/infiniband) on the PCI function of a network interface."""
    bdf = owner_bdf(fs, f"/sys/class/net/{interface}")
    if bdf is None:
        return []
    return [d for d in fs.listdir("/sys/class/infiniband") if owner_bdf(fs, f"/sys/class/infiniband/{d}") == bdf]


def active_ports(fs: FsRoot, device: str) -> tuple[list[str], list[str]]:
    """(ports whose state is ACTIVE, every port with its state) of an RDMA device."""
    active, seen = [], []
    for port in fs.listdir(f"/sys/class/infiniband/{device}/ports"):
        st = (fs.read_text(f"/sys/class/infiniband/{device}/ports/{port}/state") or "unknown").strip()
        seen.append(f"port {port}: {st}")
        if "ACTIVE" in st:
            active.append(port)
    return active, seen
