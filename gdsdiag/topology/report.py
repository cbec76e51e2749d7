"""``gdsdiag topology``: the PCIe graph, the pair analysis and the findings, from a live node, a
snapshot, or lspci text; optionally compared cell by cell with ``nvidia-smi topo -m``."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_TOOL_ERROR, EXIT_WARN
from ..platform.roots import node_root
from ..verdicts import Severity
from .findings import Finding, find
from .model import Topology
from .pairs import PairAnalysis, analyse_all


@dataclass
class TopologyReport:
    topo: Topology
    pairs: list[PairAnalysis]
    findings: list[Finding]
    cross_check: list[dict] | None = None  # nvidia-smi cells, when asked for
    cross_check_input: dict | None = None  # what of the nvidia-smi text was not read or compared
    routing: list[dict] | None = None  # cuFile dynamic-routing notes (topology.routing)
    leave_heap = True  # ~1M objects on a large node: the OS frees them at exit (errors.Report)

    @property
    def disagreements(self) -> int:
        # only cells compared and found different (and GPU rows whose NUMA node differs); a cell
        # not compared (agree None) is not one
        numa = (self.cross_check_input or {}).get("numa") or []
        return sum(1 for c in self.cross_check or [] if c["agree"] is False) + sum(
            1 for r in numa if r["agree"] is False
        )

    @property
    def exit_code(self) -> int:
        sev = {f.severity for f in self.findings}
        # A cross-check asked for that compared nothing did not do its job: never exit 0 (or 1)
        numa = (self.cross_check_input or {}).get("numa") or []
        if (
            self.cross_check is not None
            and not any(c["agree"] is not None for c in self.cross_check)
            and not any(r["agree"] is not None for r in numa)
        ):
            return EXIT_TOOL_ERROR
        if Severity.FAIL in sev:
            return EXIT_FAIL
        # Cells not compared, or text not read, are not agreement: a warning, named in the output
        not_compared = any(c["agree"] is None for c in self.cross_check or []) or any(r["agree"] is None for r in numa)
        unread = bool(self.cross_check_input and self.cross_check_input.get("unread"))
        if Severity.WARN in sev or self.disagreements or not_compared or unread:
            return EXIT_WARN
        return EXIT_OK


def topology(
    root: str = "/",
    snapshot: str | None = None,
    lspci_files: tuple[str, ...] = (),
    numa_map: str | None = None,
    cross_check: bool = False,
    smi_file: str | None = None,
) -> TopologyReport:
    if lspci_files:
        from .load import from_lspci

        topo = from_lspci(lspci_files, numa_map)
    else:
        from .load import from_root

        with node_root(root, snapshot) as fs:
            topo = from_root(fs)
            if not snapshot and not topo.devices and not fs.listdir("/sys/bus/pci/devices"):
                # a directory tree with no PCI device at all is not a node this command can
                # describe: an empty report ("no findings", exit 0) reads as a healthy node
                from ..errors import GdsdiagError

                raise GdsdiagError(
                    f"--root {root}: no PCI devices under its sys/bus/pci/devices",
                    "pass the top of a node's tree (the directory holding its sys/ and proc/), or --from a snapshot",
                )
        if snapshot:
            topo.source = snapshot
        elif fs.is_live:
            from .udev_names import enrich

            topo.problems += [n for n in enrich(topo) if "differs" in n]
    smi_text = smi_source = None
    if cross_check or smi_file:
        from ..importers.nvidia_smi import has_matrix, read_smi_text

        smi_text = read_smi_text(smi_file)
        what = "topo -m" if has_matrix(smi_text) else "nvlink -s"
        smi_source = f"nvidia-smi {what} text ({smi_file or 'run now'})"
        if topo.nvlink is None:  # the text is the only NVLink source there is
            from .load import attach_nvlink_status, attach_smi_text

            attach_smi_text(topo, smi_text, smi_source)
            attach_nvlink_status(topo, smi_text, smi_source)  # when 'nvlink -s' was pasted with it
    pairs = analyse_all(topo)
    from .routing import dynamic_routing

    report = TopologyReport(topo, pairs, find(topo, pairs), routing=dynamic_routing(topo, pairs))
    if smi_text is not None:
        from ..importers.nvidia_smi import parse_nvlink_status
        from .cross_check import cross_check_report

        if has_matrix(smi_text):
            report.cross_check, report.cross_check_input = cross_check_report(topo, pairs, smi_text, smi_source)
        elif not parse_nvlink_status(smi_text):
            # neither a matrix nor link states: the one-line error parse() gives
            cross_check_report(topo, pairs, smi_text, smi_source)
        # else: an 'nvidia-smi nvlink -s' text alone, read for its link states (findings); there
        # is no matrix to cross-check, so no cross-check (and no "nothing compared")
    return report
