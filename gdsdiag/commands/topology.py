"""``gdsdiag topology``: the PCIe graph, the pair analysis and the findings, from a live node, a
snapshot, or lspci text; optionally compared cell by cell with ``nvidia-smi topo -m``."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN
from ..topology.findings import Finding, find
from ..topology.model import Topology
from ..topology.pairs import PairAnalysis, analyse_all
from ._source import node_root


@dataclass
class TopologyReport:
    topo: Topology
    pairs: list[PairAnalysis]
    findings: list[Finding]
    cross_check: list[dict] | None = None     # nvidia-smi cells, when asked for

    @property
    def disagreements(self) -> int:
        return sum(1 for c in self.cross_check or [] if not c["agree"])

    @property
    def exit_code(self) -> int:
        sev = {f.severity for f in self.findings}
        if "fail" in sev:
            return EXIT_FAIL
        if "warn" in sev or self.disagreements:
            return EXIT_WARN
        return EXIT_OK


def topology(root: str = "/", snapshot: str | None = None, lspci_files: tuple[str, ...] = (),
             numa_map: str | None = None, cross_check: bool = False, smi_file: str | None = None) -> TopologyReport:
    if lspci_files:
        from ..importers.lspci import load_lspci
        topo = load_lspci(lspci_files, numa_map)
    else:
        from ..topology.load import from_root
        with node_root(root, snapshot) as fs:
            topo = from_root(fs)
        if snapshot:
            topo.source = snapshot
        elif fs.is_live:
            from ..platform.udev_names import enrich
            topo.problems += [n for n in enrich(topo) if "differs" in n]
    pairs = analyse_all(topo)
    report = TopologyReport(topo, pairs, find(topo, pairs))
    if cross_check or smi_file:
        from ..importers.nvidia_smi import cross_check as run_cross_check
        from ..importers.nvidia_smi import read_smi_text
        report.cross_check = run_cross_check(topo, pairs, read_smi_text(smi_file))
    return report
