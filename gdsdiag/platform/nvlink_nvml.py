"""NVLink state from NVML (nvidia-ml-py, imported only here and only on a live node).

Per GPU and link: ``nvmlDeviceGetNvLinkState`` (active or not), ``nvmlDeviceGetNvLinkRemoteDeviceType``
(GPU / NVSwitch / IBM NPU) and ``nvmlDeviceGetNvLinkRemotePciInfo(_v2)`` (the far end's PCI address);
per GPU pair ``nvmlDeviceGetP2PStatus(..., NVML_P2P_CAPS_INDEX_NVLINK)``. Links straight to another GPU
count for that pair; on NVSwitch systems (HGX/DGX) every link goes to a switch and the pair gets the
smaller of the two GPUs' switch-link counts, which is what ``nvidia-smi topo -m`` prints (NV18 on an
HGX H100/H200 board)."""

from __future__ import annotations

from ..pci.nvlink import NvLinkGpu, NvLinkInfo, NvLinkPair

_TYPES = {0: "gpu", 1: "ibmnpu", 2: "nvswitch"}


def _bdf(bus_id) -> str:
    """NVML busId '00000000:07:00.0' (8-digit domain) -> '0000:07:00.0' as sysfs names it."""
    s = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    dom, bus, devfn = s.lower().split(":")
    return f"{int(dom, 16):04x}:{bus}:{devfn}"


def read_nvml() -> tuple[NvLinkInfo | None, str]:
    """(info, why-not). ``info`` None with a reason when NVML is unavailable; an info with no pairs
    when NVML answered and there is no NVLink (PCIe-only GPUs answer NOT_SUPPORTED per link)."""
    try:
        import pynvml
    except ImportError:
        from ..extras import install_command

        return None, f"nvidia-ml-py (pynvml) not installed: {install_command('nvml')}"
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML unavailable: {e}"
    try:
        return _read(pynvml), ""
    except Exception as e:  # an NVML answer this reader does not expect must not stop topology
        return None, f"NVML NVLink query failed: {type(e).__name__}: {e}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:  # after the answer (or its failure, told above): nothing is lost
            pass


def _read(nv) -> NvLinkInfo:
    info = NvLinkInfo(source="nvml")
    handles = {}
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        handles[_bdf(nv.nvmlDeviceGetPciInfo(h).busId)] = h
    direct: dict[frozenset, int] = {}
    maxlinks = getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)
    # nvidia-ml-py names it with or without _v2 depending on its version
    remote_pci = getattr(nv, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or nv.nvmlDeviceGetNvLinkRemotePciInfo
    for bdf, h in handles.items():
        g = NvLinkGpu(bdf)
        for link in range(maxlinks):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except nv.NVMLError:
                continue  # NOT_SUPPORTED / INVALID_ARGUMENT: no such link on this GPU
            if state != nv.NVML_FEATURE_ENABLED:
                g.links_inactive += 1
                continue
            g.links_active += 1
            if g.version is None:
                try:
                    g.version = nv.nvmlDeviceGetNvLinkVersion(h, link)
                except nv.NVMLError:
                    pass
            try:
                kind = _TYPES.get(nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link), "unknown")
            except (nv.NVMLError, AttributeError):
                kind = "unknown"
            g.remote_types[kind] = g.remote_types.get(kind, 0) + 1
            if kind == "nvswitch":
                g.to_nvswitch += 1
            elif kind == "gpu":
                try:
                    remote = _bdf(remote_pci(h, link).busId)
                except (nv.NVMLError, ValueError):
                    continue
                key = frozenset((bdf, remote))
                direct[key] = direct.get(key, 0) + 1
        if g.links_active or g.links_inactive:
            info.gpus[bdf] = g
    bdfs = sorted(handles)
    for i, a in enumerate(bdfs):
        for b in bdfs[i + 1 :]:
            key = frozenset((a, b))
            # each direct link is seen from both ends
            n = direct.get(key, 0) // 2 or direct.get(key, 0)
            via = False
            ga, gb = info.gpus.get(a), info.gpus.get(b)
            if not n and ga and gb and ga.to_nvswitch and gb.to_nvswitch:
                n, via = min(ga.to_nvswitch, gb.to_nvswitch), True
            if not n:
                continue
            try:
                ok = (
                    nv.nvmlDeviceGetP2PStatus(handles[a], handles[b], nv.NVML_P2P_CAPS_INDEX_NVLINK)
                    == nv.NVML_P2P_STATUS_OK
                )
            except nv.NVMLError:
                ok = None
            info.add(NvLinkPair(a, b, n, via_nvswitch=via, p2p_ok=ok, source="nvml"))
    return info
