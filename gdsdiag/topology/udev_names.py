"""Enrich a live topology from udev (pyudev): model names from the hardware database, ID_PATH.

Only for the live root: a snapshot or a test tree has no udev database. sysfs stays the source of
truth — udev's PCI_ID is compared with what the sysfs reader found and a mismatch is reported.
"""

from __future__ import annotations

from .model import Topology


def enrich(topo: Topology) -> list[str]:
    """Returns notes (why nothing was added, or mismatches); never raises."""
    try:
        import pyudev  # lazy: keeps 'gdsdiag --help' light and pyudev optional
    except ImportError:
        from ..extras import pip_command

        return [f"pyudev not installed: model names from sysfs/procfs only ({pip_command(['pyudev'])})"]
    notes: list[str] = []
    try:
        ctx = pyudev.Context()
    except (OSError, ImportError) as e:  # pyudev's own errors from loading libudev
        return [f"udev unavailable ({e}): model names from sysfs/procfs only"]
    unknown = 0
    for dev in topo.devices.values():
        try:
            props = pyudev.Devices.from_sys_path(ctx, f"/sys/bus/pci/devices/{dev.bdf}").properties
        except (pyudev.DeviceNotFoundError, OSError):  # not in this node's udev database
            unknown += 1
            continue
        pci_id = props.get("PCI_ID")
        if pci_id and dev.fn.vendor is not None and dev.fn.device is not None:
            ours = f"{dev.fn.vendor:04X}:{dev.fn.device:04X}"
            if pci_id.upper() != ours:
                notes.append(f"{dev.bdf}: udev PCI_ID {pci_id} differs from sysfs {ours}")
        model = props.get("ID_MODEL_FROM_DATABASE")
        if model and not dev.model:
            vendor = props.get("ID_VENDOR_FROM_DATABASE")
            dev.model = f"{vendor} {model}" if vendor else model
        path = props.get("ID_PATH")
        if path and path not in dev.names:
            dev.names.append(path)
    if unknown:
        notes.append(f"{unknown} PCI functions not in the udev database: their names from sysfs/procfs only")
    return notes
