"""The proof matrix for people and for schedulers: the text table, a JUnit testsuite (one testcase
per cell), Prometheus families (one gauge per cell) and node-feature-discovery labels.

NFD's local feature source reads every file in ``/etc/kubernetes/node-feature-discovery/features.d/``
on the node: one feature a line, ``<key>[=<value>]`` (a missing value is ``true``), ``#`` lines
are comments except the ``# +expiry-time=<RFC 3339>`` directive after which the file's features
are ignored, and files whose names start with a dot are skipped, so a writer can create a dotfile
and rename it into place (NFD customization guide, "Local feature source" → "Feature files" and
"Input format": https://kubernetes-sigs.github.io/node-feature-discovery/stable/usage/customization-guide;
the parser is source/local/local.go in kubernetes-sigs/node-feature-discovery). A key with a
namespace (``gdsdiag.io/...``) becomes a node label as it is; label names and values follow the
Kubernetes rules (name ≤ 63 of [A-Za-z0-9._-], value ≤ 63 of the same, both starting and ending
alphanumeric), which every label below keeps by construction.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

from .proof import TEXT, ProofMatrix

NFD_MARK = "# gdsdiag validate --nfd"
NFD_PREFIX = "gdsdiag.io/"
NFD_EXPIRY_S = 24 * 3600  # labels vanish a day after the last proof unless it is rerun


def render(console, m: ProofMatrix) -> None:
    from rich.table import Table

    t = Table(title=f"proof matrix ({len(m.cells)} cells, {m.size >> 20} MiB read + write each, {m.seconds} s)")
    t.add_column("GPU")
    t.add_column("target")
    t.add_column("result", overflow="fold")
    t.add_column("read GB/s", justify="right")
    t.add_column("read p99 µs", justify="right")
    t.add_column("write GB/s", justify="right")
    t.add_column("write p99 µs", justify="right")
    for c in m.cells:
        j = c.to_json()
        from rich.text import Text

        t.add_row(  # the mount path and the outcome (which quotes libcufile's log) never read as markup
            Text(c.gpu or "-"),
            Text(c.target.path),
            Text(c.outcome.line),
            *(
                f"{v:g}" if isinstance(v, (int, float)) else "-"
                for v in (j["read_gbps"], j["read_p99_us"], j["write_gbps"], j["write_p99_us"])
            ),
        )
    console.print(t)
    if m.note:
        console.print(f"proof: {m.note}", markup=False, highlight=False, soft_wrap=True)
    from ..check.why import text_lines

    for c in m.cells:  # the lines again, unwrapped: what logs and grep see; then its why and fix
        why, fix = text_lines(c.why_chain, c.fix)
        for line in (f"proof {c.gpu or '-'} {c.target.path}: {c.outcome.line}", f"  why: {why}", f"  fix: {fix}"):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def junit_suite(m: ProofMatrix, hostname: str) -> ET.Element:
    suite = ET.Element(
        "testsuite",
        name=f"gdsdiag validate proof {hostname}",
        tests=str(len(m.cells)),
        failures=str(sum(c.outcome.result in ("mismatch", "no_route") for c in m.cells)),
        errors="0",
        skipped=str(sum(c.outcome.result == "skipped" for c in m.cells)),
        time=str(m.seconds),
    )
    for c in m.cells:
        tc = ET.SubElement(
            suite,
            "testcase",
            classname="gdsdiag.validate.proof",
            name=f"{c.gpu or 'no-gpu'} {c.target.path}",
            time=str(c.configured.get("seconds") or 0),
        )
        r = c.outcome.result
        if r in ("mismatch", "no_route"):
            ET.SubElement(tc, "failure", message=c.outcome.line, type=r).text = c.outcome.line
        elif r == "skipped":
            ET.SubElement(tc, "skipped", message=c.outcome.line)
        else:  # JUnit has no warning: COMPAT and the others pass and say so
            ET.SubElement(tc, "system-out").text = c.outcome.line
    return suite


def _lv(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus(m: ProofMatrix) -> str:
    """Families appended to validate's textfile. One series per cell in each: gpu and target
    are bounded by the node's GPUs and the --path list (at most proof.MAX_TARGETS), route and
    result are label values of the cell's one series (a cell never has two at once)."""
    out: list[str] = []

    def family(name, help_, rows):
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        out.extend(f"{name}{{{lab}}} {val}" for lab, val in rows)

    cells = [(c, f'gpu="{_lv(c.gpu or "none")}",target="{_lv(c.target.path)}"') for c in m.cells]
    family(
        "gdsdiag_proof_p2p_verified",
        "1 if a checksummed cuFile read+write from this GPU to this storage target went by P2P DMA "
        "(compat mode forbidden and cuFile's counters agree), else 0; route and result say what happened.",
        [
            (f'{lab},route="{c.outcome.route.value}",result="{c.outcome.result}"', int(c.outcome.result == "verified"))
            for c, lab in cells
        ],
    )
    docs = [(c.to_json(), lab) for c, lab in cells]
    family(
        "gdsdiag_proof_read_gbps",
        "Proof probe cuFile read throughput (GB/s, 1e9 B/s), as configured.",
        [(lab, j["read_gbps"]) for j, lab in docs if j["read_gbps"] is not None],
    )
    family(
        "gdsdiag_proof_write_gbps",
        "Proof probe cuFile write throughput (GB/s), as configured.",
        [(lab, j["write_gbps"]) for j, lab in docs if j["write_gbps"] is not None],
    )
    p99 = [(lab, j["read_p99_us"]) for j, lab in docs]
    family(
        "gdsdiag_proof_read_p99_seconds",
        "Proof probe cuFile read p99 latency (nearest rank over the probe's I/Os), as configured.",
        [(lab, round(v / 1e6, 9)) for lab, v in p99 if v is not None],
    )
    return "\n".join(out) + "\n"


def _gpu_key(label: str) -> str:
    return label.lower()  # GPU0 -> gpu0: a label name segment


def nfd_labels(m: ProofMatrix) -> dict[str, str]:
    """The node labels (docs/validate.md "Scheduling on proved nodes"). A GPU counts as verified
    only when every storage target proved P2P from it; the node only when every cell did."""
    cells = [c for c in m.cells if c.gpu]
    labels: dict[str, str] = {}
    node_ok = bool(cells) and all(c.outcome.result == "verified" for c in cells)
    labels[NFD_PREFIX + "p2p-verified"] = "true" if node_ok else "false"
    worst = max((c.outcome.result for c in m.cells), key=lambda r: list(TEXT).index(r), default="no_route")
    labels[NFD_PREFIX + "proof-result"] = worst.replace("_", "-")
    routes = sorted({c.outcome.route.value for c in m.cells})
    labels[NFD_PREFIX + "route"] = routes[0] if len(routes) == 1 else "mixed"
    per: dict[str, list] = {}
    for c in cells:
        per.setdefault(c.gpu or "", []).append(c)
    labels[NFD_PREFIX + "p2p-verified-gpus"] = str(
        sum(all(x.outcome.result == "verified" for x in v) for v in per.values())
    )
    for g, v in per.items():
        k = _gpu_key(g)
        labels[f"{NFD_PREFIX}{k}.p2p-verified"] = "true" if all(x.outcome.result == "verified" for x in v) else "false"
        rs = sorted({x.outcome.route.value for x in v})
        labels[f"{NFD_PREFIX}{k}.route"] = rs[0] if len(rs) == 1 else "mixed"
    return labels


def nfd_text(m: ProofMatrix, now: float | None = None, expiry_s: int = NFD_EXPIRY_S) -> str:
    t = now if now is not None else time.time()
    exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t + expiry_s))
    lines = [
        f"{NFD_MARK} ({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))}): labels from the proof matrix",
        f"# +expiry-time={exp}",
    ]
    lines += [f"{k}={v}" for k, v in nfd_labels(m).items()]
    return "\n".join(lines) + "\n"


def write_nfd(path: str, text: str) -> None:
    """NFD rereads the file on every pass, so a rerun must replace it: only a file gdsdiag wrote
    (first line NFD_MARK) is replaced, atomically, through a dotfile NFD skips (outfile.replace_own)."""
    from ..outfile import replace_own

    replace_own(path, text.encode("utf-8"), NFD_MARK, "--nfd", "feature file", hidden_tmp=True)
