"""The known-messages table (messages.json, data not code) and the CU_FILE error codes of
gdsdiag/cufile/errors.py, matched against one message at a time."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..cufile.errors import CUDA_ERRORS, HINTS, OP_ERRORS
from ..verdicts import Severity

SEVERITIES = tuple(Severity)  # fail, warn, info: the one scale (verdicts.Severity)
KINDS = ("cufile-log", "gdsio", "gdscheck", "nvfs-stats", "gds-stats", "dmesg")
_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "messages.json")


@dataclass(frozen=True)
class Entry:
    id: str
    kinds: tuple[str, ...]
    pattern: re.Pattern
    severity: Severity
    title: str
    meaning: str
    cause: str
    fix: str
    sources: tuple[str, ...]


@dataclass
class Explanation:
    """What one message means: an Entry, or a CU_FILE error code, or both."""

    id: str
    severity: Severity
    title: str
    meaning: str
    cause: str
    fix: str
    sources: list[str]
    code: dict | None = None  # {"code": 5030, "name": ..., "text": ...}
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Catalog:
    entries: tuple[Entry, ...]
    codes: dict  # "5030" -> {"cause", "sources"} (additions to errors.py)
    urls: dict


@lru_cache(maxsize=1)
def load() -> Catalog:
    with open(_DATA, encoding="utf-8") as f:
        raw = json.load(f)
    urls = raw["urls"]
    entries = tuple(
        Entry(
            e["id"],
            tuple(e["kinds"]),
            re.compile(e["pattern"], re.ASCII),  # \d, \w, \s: ASCII only (int() of a match never meets '²')
            Severity(e["severity"]),
            e["title"],
            e["meaning"],
            e["cause"],
            e["fix"],
            tuple(urls.get(s, s) for s in e["sources"]),
        )
        for e in raw["entries"]
    )
    codes = {
        k: {"cause": v["cause"], "sources": [urls.get(s, s) for s in v["sources"]]}
        for k, v in raw["error_codes"].items()
    }
    return Catalog(entries, codes, urls)


# NVIDIA's error texts, longest first so "invalid device pointer" does not shadow a longer one.
_TEXTS = sorted(((text, code) for code, (_, text) in OP_ERRORS.items() if code), key=lambda t: -len(t[0]))
_CODE_RX = re.compile(r"(?:err(?:or)?\s*[=:]?\s*|failed:\s*|ret(?:urned)?\s*[=:]?\s*)-?(50[0-5]\d)\b", re.I)


def find_code(text: str) -> int | None:
    """A CU_FILE error code in the message: a number (err=5030, checks failed: -5014) or NVIDIA's
    text after 'error' (cuFileHandleRegister error: internal error)."""
    m = _CODE_RX.search(text)
    if m and int(m.group(1)) in OP_ERRORS:
        return int(m.group(1))
    low = text.lower()
    for t, code in _TEXTS:
        i = low.find(t.lower())
        # NVIDIA's texts are short phrases: trust one only right after "error"/"failed"
        if i >= 0 and re.search(r"(error|failed)\W*$", low[max(0, i - 40) : i]):
            return code
    return None


def code_info(code: int) -> dict:
    name, text = OP_ERRORS[code]
    return {"code": code, "name": name, "text": text}


def _code_explanation(code: int) -> Explanation:
    cat = load()
    name, text = OP_ERRORS[code]
    extra = cat.codes.get(str(code), {})
    sources = [cat.urls["API"], cat.urls["TSG_API_ERRORS"]] + [
        s for s in extra.get("sources", []) if s not in (cat.urls["API"], cat.urls["TSG_API_ERRORS"])
    ]
    return Explanation(
        id=f"cufile-error-{code}",
        severity=Severity.FAIL,
        title=f"{name} ({code})",
        meaning=f'a cuFile call failed with {name} ({code}), NVIDIA\'s text: "{text}".',
        cause=extra.get("cause")
        or "not documented beyond NVIDIA's text; the lines logged just before by the same pid usually say why.",
        fix=HINTS.get(code) or "fix the first error logged by the same pid before this line.",
        sources=sources,
        code=code_info(code),
    )


def by_id(entry_id: str) -> Explanation:
    """The explanation of the table's entry ENTRY_ID, for a reading chosen by the input's context
    (analyse.py), not by the line's pattern."""
    e = next(x for x in load().entries if x.id == entry_id)
    return Explanation(e.id, e.severity, e.title, e.meaning, e.cause, e.fix, list(e.sources))


def _small_int(s: str) -> bool:
    return s.isascii() and s.isdigit() and len(s) <= 10


@lru_cache(maxsize=1 << 16)
def explain(kind: str, text: str) -> Explanation | None:
    """The explanation of one message of an input of ``kind``, or None when nothing is known.
    Cached: a long cufile.log repeats the same few messages (the result is never mutated)."""
    code = find_code(text)
    for e in load().entries:
        if kind not in e.kinds:
            continue
        m = e.pattern.search(text)
        if m:
            fields = {k: v for k, v in m.groupdict().items() if v is not None}
            # a CUresult is a small number: 5,000 digits must not reach int() (issue 24)
            if "cuerr" in fields and _small_int(fields["cuerr"]):
                fields["cuda_error"] = CUDA_ERRORS.get(int(fields["cuerr"]), "CUresult " + fields["cuerr"])
            if "cu" in fields and _small_int(fields["cu"]):
                fields["cuda_error"] = CUDA_ERRORS.get(int(fields["cu"]), "CUresult " + fields["cu"])
            return Explanation(
                e.id,
                e.severity,
                e.title,
                e.meaning,
                e.cause,
                e.fix,
                list(e.sources),
                code_info(code) if code else None,
                fields,
            )
    if code:
        return _code_explanation(code)
    return None
