"""Parse ``nvidia-smi topo -m`` (``topology/cross_check.py`` compares its labels with ours, ``--cross-check``).

Formats seen in real captures (../shared/corpus/nvidia-smi-topo/ and our GPU machine): TAB-separated
(piped) or space-aligned (terminal); ANSI underline on the header; ``NV#`` cells; a ``NIC Legend``
mapping NICk to mlx5_N or netdev names; old headers naming mlx5_N directly with no legend; an optional
``GPU NUMA ID`` column; NIC rows with empty affinity cells.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

from ..bounded import ascii_int
from ..errors import GdsdiagError

# the underline nvidia-smi puts on the header; also its remnants once a paste lost the ESC byte
# ('[4mGPU0 ... GPU NUMA ID[0m', seen in an sglang check_env paste), only where they can stand
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m|\[[0-9]{1,2}m(?=GPU0)|(?<=\S)\[[0-9]{1,2}m(?=\s*$)")
LEVELS = {"X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}
AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")

# nvidia-smi pads cells with tabs and spaces but, on wide matrices, drops the separator between two
# fields now and then: a header 'NIC7NIC8' (NVIDIA/nccl-tests#311), cells 'NODENODE', 'PIXSYS',
# ' X PIX' (sgl-project/sglang#14092, 36 NICs). Splitting on whitespace then shifts every later cell
# by one, so rows and headers are read as a sequence of the tokens nvidia-smi can print, not of
# whitespace-separated words. NV# is at most two digits (NV18 on NVSwitch systems): a third digit
# would be a CPU list glued to it.
CELL_RE = re.compile(r"X|SYS|NODE|PHB|PXB|PIX|SOC|NV\d{1,2}(?![0-9])")
LABEL_RE = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|GPU\d+|NIC\d+|mlx\d+_(?:bond_)?\d+")
ROW_RE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_(?:bond_)?\d+)(?=\s|[A-Z])")
CPULIST_RE = re.compile(r"^[0-9]{1,20}(?:-[0-9]{1,20})?(?:,[0-9]{1,20}(?:-[0-9]{1,20})?)*$")  # ASCII, int()-safe
# Linux's largest NUMA node count (CONFIG_NODES_SHIFT 10: MAX_NUMNODES 1024): a list naming more
# nodes than that is not a node list, and is not expanded.
MAX_NODES = 1024
# Lines around the matrix that nvidia-smi itself prints, or a shell echoing the command.
KNOWN_LINE_RES = (
    re.compile(r"^\s*Legend:\s*$"),
    re.compile(r"^\s*NIC Legend:\s*$"),
    re.compile(r"^\s*(X|SYS|NODE|PHB|PXB|PIX|SOC|NV#|C2C)\s*=\s*\S"),
    # a shell prompt (user@host:dir$, #, dgx2>) and the command; no two quantifiers can take the same
    # characters, so a long line costs linear time (two '\s*' around an optional prompt were quadratic)
    re.compile(
        r"^\s*(?:(?:[^\s@]+@[^\s:~]+[:~][^$#]*[$#]|[$#]|[^\s>]*>)\s*)?(?:sudo\s+)?nvidia-smi\s+(?:topo|nvlink)\b"
    ),
    # 'nvidia-smi nvlink -s' pasted with the matrix: read by parse_nvlink_status
    re.compile(r"^GPU \d+: .+"),
    re.compile(r"^\s*Link \d+: (?:[0-9.]+ GB/s|<inactive>)\s*$"),
)


@dataclass
class SmiMatrix:
    columns: list[str]
    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa: dict[str, int | None] = field(default_factory=dict)  # the CPU node (first listed)
    numa_affinity: dict[str, list[int]] = field(default_factory=dict)  # every node listed: '0,3-9,11-17'
    gpu_numa_id: dict[str, int | None] = field(default_factory=dict)  # the node that is the GPU's memory
    nic_legend: dict[str, str] = field(default_factory=dict)
    # Every line or cell the parser did not read, named ('line 12: ...'): never dropped in silence.
    unread: list[str] = field(default_factory=list)
    # Glued fields the parser split (what it read, so a person can check it): 'GPU0: NODENODE'.
    split_glued: list[str] = field(default_factory=list)
    rows_unread: list[str] = field(default_factory=list)  # matrix rows named in unread

    def device_name(self, col: str) -> str:
        return self.nic_legend.get(col, col)


# Where the device cells end: an affinity value ('0-55,112-167', '0', 'N/A') is never a cell, so a
# row short of cells stops there instead of taking its CPU list for a cell
_AFFINITY_START = re.compile(r"\d|N/A")


def _scan(
    text: str, pattern: re.Pattern[str], limit: int | None = None, stop: re.Pattern[str] | None = None
) -> tuple[list[str | None], list[str], str, dict[int, str]]:
    """(tokens, glued words, rest, unknown): ``text`` read as ``pattern`` tokens with optional
    whitespace between them, up to ``limit`` tokens or a word ``stop`` matches. A whitespace word
    that is not made of such tokens counts as one token, None, its text in ``unknown`` under its
    index; 'rest' is what follows the last token read."""
    out: list[str | None] = []
    glued: list[str] = []
    unknown: dict[int, str] = {}
    pos = 0
    while limit is None or len(out) < limit:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        word_end = pos
        while word_end < len(text) and not text[word_end].isspace():
            word_end += 1
        m = pattern.match(text, pos)
        if m is None:
            if stop is not None and stop.match(text, pos):
                break
            unknown[len(out)] = text[pos:word_end]
            out.append(None)
            pos = word_end
            continue
        if m.end() < word_end and pattern.match(text, m.end()) is not None:
            glued.append(text[pos:word_end])
        out.append(m.group())
        pos = m.end()
    return out, glued, text[pos:], unknown


def _header_index(lines: list[str]) -> int | None:
    """The 'topo -m' header line: GPU0 first, indented (as nvidia-smi prints it); else, for text
    whose leading whitespace was lost (a web page: NVIDIA's configuration guide shows 'GPU0 GPU1
    ...' flush left), a line that starts with GPU0 and holds nothing but column labels."""
    for i, ln in enumerate(lines):
        if re.match(r"^\s+GPU0(?![0-9])", ln):
            return i
    for i, ln in enumerate(lines):
        if re.match(r"^GPU0\s+GPU1(?![0-9])", ln):
            labels, _, rest, _ = _scan(ln, LABEL_RE)
            if labels and None not in labels and not rest.strip():
                return i
    return None


# a paste that lost the newline after the command: 'nvidia-smi topo -m      GPU0    GPU1 ...'
# (aikitoria/open-gpu-kernel-modules#12); the command is blanked out, the header kept in place
_CMD_GLUED_RE = re.compile(r"^(?:[^\n]*?\s)?nvidia-smi\s+topo\s+-(?:m|mp|matrix)\b(?=\s+GPU0(?![0-9]))")


def _lines(text: str) -> tuple[list[str], str | None]:
    lines = [ANSI_RE.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    for i, ln in enumerate(lines):
        g = _CMD_GLUED_RE.match(ln)
        if g:
            lines[i] = " " * g.end() + ln[g.end() :]
            return lines, f"line {i + 1}: the command {g.group(0).strip()!r} and the header"
    return lines, None


def has_matrix(text: str) -> bool:
    """Whether the text holds a 'topo -m' header line."""
    return _header_index(_lines(text)[0]) is not None


def parse(text: str) -> SmiMatrix:
    lines, cmd_glued = _lines(text)
    header_i = _header_index(lines)
    if header_i is None:
        raise GdsdiagError(
            "no 'nvidia-smi topo -m' matrix found (header starting with GPU0)",
            "pass the output of 'nvidia-smi topo -m' unchanged",
        )
    labels, glued, _, _ = _scan(lines[header_i], LABEL_RE)
    unread: list[str] = []
    header: list[str] = []
    unknown_words = iter(_unknown_words(lines[header_i], labels))
    for lab in labels:
        if lab is None:
            # A column name of no known pattern (an older driver's own device names): kept as a
            # column so the cells stay in place, and named.
            name = next(unknown_words, "?")
            unread.append(f"line {header_i + 1}: header column '{name}' is not a GPU/NIC label; read as a device")
            header.append(name)
        else:
            header.append(lab)
    devs = [t for t in header if t not in AFFINITY_HEADERS]
    aff = [t for t in header if t in AFFINITY_HEADERS]
    m = SmiMatrix(columns=devs)
    m.split_glued += [f"header: {g}" for g in glued] + ([cmd_glued] if cmd_glued else [])
    matrix_end = header_i
    for i in range(header_i + 1, len(lines)):
        ln = lines[i]
        if not ln.strip():
            if m.cells:
                break
            continue
        rm = ROW_RE.match(ln)
        # a row whose label is no column is still a row: 'topo -mp' trimmed to its first columns
        # (NVIDIA's configuration guide shows 8 of a DGX-2's columns for all 16 GPUs and 4 NICs)
        if rm is None:
            if m.cells:
                break  # the matrix is over: what follows is checked line by line below
            unread.append(f"line {i + 1}: not a matrix row: {ln.strip()[:120]!r}")
            continue
        matrix_end = i
        row = rm.group(1)
        cells, glued_cells, rest, odd = _scan(ln[rm.end() :], CELL_RE, len(devs), _AFFINITY_START)
        m.split_glued += [f"{row}: {g}" for g in glued_cells]
        if len(cells) < len(devs):
            why = f"{len(cells)} cells for {len(devs)} columns"
            unread.append(f"line {i + 1}: row {row} not read ({why}): {_clip(ln.strip(), 160)}")
            m.rows_unread.append(row)
            continue
        # A whole-word cell of no known kind, in a row of the right length: the others are in place,
        # that one is '?' (never compared) and named
        for j, word in odd.items():
            unread.append(f"line {i + 1}: row {row}, column {devs[j]}: cell {_clip(word)} is of no known kind")
        for col, val in zip(devs, cells):
            m.cells[(row, col)] = val if val is not None else "?"
        _affinity(m, row, aff, rest.split(), i + 1, unread)
    for i, ln in enumerate(lines):
        if i <= matrix_end:
            continue
        mm = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", ln)
        if mm:
            m.nic_legend[mm.group(1)] = mm.group(2)
        elif ln.strip() and not any(r.match(ln) for r in KNOWN_LINE_RES):
            unread.append(f"line {i + 1}: not part of 'nvidia-smi topo -m': {ln.strip()[:120]!r}")
    for i, ln in enumerate(lines[:header_i]):
        # '#' lines on top are comments (a capture's source lines, as explain reads them too)
        if ln.strip() and not ln.startswith("#") and not any(r.match(ln) for r in KNOWN_LINE_RES):
            unread.append(f"line {i + 1}: before the matrix, not read: {ln.strip()[:120]!r}")
    unread.sort(key=lambda u: int(u.split(":")[0].split()[1]))
    if len(unread) > MAX_UNREAD:  # every one counted, the first named: a hostile text stays small
        unread = unread[:MAX_UNREAD] + [f"{len(unread) - MAX_UNREAD} more lines or cells not read"]
    m.unread = unread
    if not m.cells:
        if re.search(r"^\s*OK\s+= Status Ok\s*$", text, re.M):
            # 'topo -p2p r|w|n|a|p' prints the same header over OK/CNS/GNS/... cells and its own legend
            raise GdsdiagError(
                "this is 'nvidia-smi topo -p2p' output (P2P capability: OK/CNS/GNS/TNS/NS), not the "
                "'nvidia-smi topo -m' link matrix",
                "pass the output of 'nvidia-smi topo -m'",
            )
        raise GdsdiagError(
            "the nvidia-smi matrix has no rows it could read" + (f" ({m.unread[0]})" if m.unread else ""),
            "pass the whole 'nvidia-smi topo -m' output",
        )
    return m


MAX_UNREAD = 50


def _clip(value: str, n: int = 60) -> str:
    """A value quoted for a message, cut to ``n`` characters (one line, whatever the input holds)."""
    return repr(value if len(value) <= n else value[:n] + "...")


def _unknown_words(line: str, labels: list[str | None]) -> list[str]:
    """The header words read as unknown labels, in order: the line's words once the known labels
    (and affinity headings) are cut out, in one pass (a hostile header of many words stays linear)."""
    known = [lab for lab in labels if lab is not None]
    if not known:
        return line.split()
    pattern = re.compile("|".join(re.escape(k) for k in sorted(set(known), key=len, reverse=True)))
    return pattern.sub(" ", line).split()


def _affinity(m: SmiMatrix, row: str, aff: list[str], vals: list[str], lineno: int, unread: list[str]) -> None:
    """The affinity cells after the device cells, in header order. Empty cells vanish in split(),
    which keeps the order (a NIC row has none; 'N/A' stands in for an unknown one). A value of the
    wrong shape is named and not used."""
    if len(vals) > len(aff):
        unread.append(
            f"line {lineno}: row {row}: {len(vals) - len(aff)} cells past the last column: {vals[len(aff) :]}"
        )
    for head, v in zip(aff, vals):
        if head == "CPU Affinity":
            if CPULIST_RE.match(v) or v == "N/A":
                m.cpu_affinity[row] = v
            else:
                unread.append(f"line {lineno}: row {row}: CPU Affinity {_clip(v)} is not a CPU list")
        elif head == "NUMA Affinity":
            if v == "N/A":
                m.numa_affinity[row], m.numa[row] = [], None
                continue
            try:
                nodes = _nodelist(v)
            except ValueError as e:
                unread.append(f"line {lineno}: row {row}: NUMA Affinity {_clip(v)} {e}")
                m.numa[row] = None
                continue
            m.numa_affinity[row] = nodes
            # Grace Hopper/Blackwell list the CPU node first, then memory-only nodes: '0,3-9,11-17'
            m.numa[row] = nodes[0] if nodes else None
        elif head == "GPU NUMA ID":
            node = ascii_int(v, MAX_NODES - 1)  # (isdigit() is true for '²': issue 24)
            if node is not None:
                m.gpu_numa_id[row] = node
            elif v == "N/A":
                m.gpu_numa_id[row] = None
            else:
                unread.append(f"line {lineno}: row {row}: GPU NUMA ID {_clip(v)} is not a node number")


def parse_nvlink_status(text: str) -> list[dict]:
    """'nvidia-smi nvlink -s' -> [{"index": 3, "name": ..., "uuid": ..., "links": {0: 25.781, 3: None}}]
    (None: '<inactive>'). Lines it does not know (elisions, other commands) are skipped."""
    out: list[dict] = []
    for raw in text.splitlines():
        ln = ANSI_RE.sub("", raw).strip()
        # (ASCII numbers int() can read; the UUID stops at a parenthesis, so no line costs quadratic time)
        m = re.match(r"^GPU ([0-9]{1,6}): (.+?)(?: \(UUID: ([^()]*)\))?$", ln)
        if m:
            out.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3), "links": {}})
            continue
        m = re.match(r"^Link ([0-9]{1,6}): (?:([0-9]{1,9}(?:\.[0-9]{1,9})?) GB/s|<inactive>)", ln)
        if m and out:
            out[-1]["links"][int(m.group(1))] = float(m.group(2)) if m.group(2) else None
    return out


def _nodelist(text: str) -> list[int]:
    """'0,3-9,11-17' -> [0, 3, 4, ..., 17]. Order kept: the first is the CPU node. ValueError
    (saying why) for text that is not a node list, or one naming more than MAX_NODES nodes: a
    range such as '0-4000000000' is refused before it is expanded."""
    out: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        # ASCII digits only ('²'.isdigit() is true; a million digits is no node): bounded.ascii_int
        first, last = ascii_int(lo), ascii_int(hi) if sep else ascii_int(lo)
        if first is None or last is None:
            raise ValueError("is not a NUMA node list")
        if last < first:
            raise ValueError(f"has a backwards range {part.strip()}")
        if last >= MAX_NODES or len(out) + last - first + 1 > MAX_NODES:
            raise ValueError(f"names nodes past {MAX_NODES - 1} (Linux's MAX_NUMNODES is {MAX_NODES}): not expanded")
        out.extend(range(first, last + 1))
    return out


def read_smi_text(path: str | None) -> str:
    if path:
        from ..bounded import read_user_text  # regular files under a stated size only

        return read_user_text(path, "nvidia-smi output")
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise GdsdiagError(
            "nvidia-smi not found for --cross-check",
            "install the NVIDIA driver utilities or pass a saved output with --nvidia-smi FILE",
        )
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise GdsdiagError("nvidia-smi topo -m timed out after 60 s", "check the driver with nvidia-smi") from None
    if out.returncode != 0:
        raise GdsdiagError(f"nvidia-smi topo -m failed: {out.stderr.strip()[:200]}", "check the driver with nvidia-smi")
    return out.stdout
