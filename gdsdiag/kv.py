"""KV-cache offload arithmetic: what a measured storage bandwidth means for a model's KV cache.

Pure functions over a Hugging Face ``config.json`` (already parsed) and a few numbers.

- Standard multi-head / grouped-query attention caches one K and one V vector per KV head per layer:
  bytes/token = 2 × num_hidden_layers × num_key_value_heads × head_dim × dtype bytes. GQA models set
  ``num_key_value_heads`` < ``num_attention_heads``; ``head_dim`` is explicit in newer configs and
  otherwise hidden_size / num_attention_heads (the transformers default).
- Multi-head latent attention (DeepSeek-V2/V3, ``kv_lora_rank`` present) caches, per layer, the
  compressed latent c_KV (kv_lora_rank values) plus the decoupled RoPE key k^R (qk_rope_head_dim
  values), shared by all heads and with no separate V: (kv_lora_rank + qk_rope_head_dim) × layers ×
  dtype bytes (DeepSeek-V2 paper, arXiv:2405.04434 §2.1.2–2.1.3, Table 1: "(d_c + d_h^R) l"). Those
  configs still carry ``num_key_value_heads`` = num_attention_heads, which must NOT be used.
- Break-even hit rate for offloading: a prefix hit saves recomputation but costs a load; every miss
  costs a store. Offload pays when p·(T_recompute − T_load) > (1 − p)·T_store, i.e.
  p > T_store / (T_recompute − T_load + T_store) when T_recompute > T_load (otherwise never).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .errors import GdsdiagError

if TYPE_CHECKING:
    from .schema import kv as schema

# torch dtype names as they appear in config.json "torch_dtype" (and the newer "dtype").
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "fp8": 1,
    "int8": 1,
}


@dataclass
class KvShape:
    model: str
    attention: str  # "MHA", "GQA", "MQA" or "MLA"
    layers: int
    kv_heads: int | None  # None for MLA (one latent shared by all heads)
    head_dim: int | None
    latent_dim: int | None  # MLA: kv_lora_rank + qk_rope_head_dim
    dtype: str
    dtype_bytes: int
    bytes_per_token: int
    formula: str

    def to_json(self) -> schema.Shape:
        # the fields are the document's keys (tests/test_json_schema.py checks them against the type)
        return cast("schema.Shape", dict(self.__dict__))


MAX_DIM = 1 << 24  # layer, head and dimension counts (real models: < 2^17)


def _int(cfg: dict, key: str, where: str) -> int:
    from .bounded import short_repr

    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= MAX_DIM:
        raise GdsdiagError(
            f"{where}: '{key}' is {short_repr(v)}, not an integer from 1 to {MAX_DIM:,}",
            "give the model's Hugging Face config.json (it names the layer and head counts)",
        )
    return v


def text_config(cfg: dict) -> dict:
    """Multimodal configs nest the language model under text_config (e.g. Llama-3.2-Vision, Qwen2-VL
    keeps it flat): the KV cache is the language model's."""
    tc = cfg.get("text_config")
    return tc if isinstance(tc, dict) and "num_hidden_layers" in tc else cfg


def kv_shape(cfg: dict, dtype: str | None = None, where: str = "config.json") -> KvShape:
    if not isinstance(cfg, dict):
        raise GdsdiagError(f"{where} is not a JSON object", "give the model's Hugging Face config.json")
    from .bounded import clip, short_repr

    c = text_config(cfg)
    arch = cfg.get("architectures")
    arch = [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else []
    mt = cfg.get("model_type")
    model = clip(",".join(arch[:8]) or (mt if isinstance(mt, str) else "?"), 200)
    dt = dtype or c.get("torch_dtype") or c.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype")
    if dt is None:
        raise GdsdiagError(f"{where} names no torch_dtype", "pass --kv-dtype (e.g. bfloat16)")
    if not isinstance(dt, str):
        raise GdsdiagError(f"{where}: torch_dtype is {short_repr(dt)}, not a name", "pass --kv-dtype (e.g. bfloat16)")
    dt = dt.replace("torch.", "")
    if dt not in DTYPE_BYTES:
        raise GdsdiagError(f"unknown KV dtype {short_repr(dt)}", f"use one of {', '.join(sorted(DTYPE_BYTES))}")
    nb = DTYPE_BYTES[dt]
    layers = _int(c, "num_hidden_layers", where)
    if c.get("kv_lora_rank"):
        rank = _int(c, "kv_lora_rank", where)
        rope = _int(c, "qk_rope_head_dim", where)
        return KvShape(
            model,
            "MLA",
            layers,
            None,
            None,
            rank + rope,
            dt,
            nb,
            layers * (rank + rope) * nb,
            f"{layers} layers × (kv_lora_rank {rank} + qk_rope_head_dim {rope}) × {nb} B",
        )
    heads = _int(c, "num_attention_heads", where)
    kv_heads = c.get("num_key_value_heads")
    kv_heads = heads if kv_heads is None else _int(c, "num_key_value_heads", where)
    if c.get("head_dim"):
        head_dim = _int(c, "head_dim", where)
    else:
        hidden = _int(c, "hidden_size", where)
        if hidden % heads:
            raise GdsdiagError(
                f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}",
                "the config needs an explicit head_dim",
            )
        head_dim = hidden // heads
    att = "MHA" if kv_heads == heads else "MQA" if kv_heads == 1 else "GQA"
    return KvShape(
        model,
        att,
        layers,
        kv_heads,
        head_dim,
        None,
        dt,
        nb,
        2 * layers * kv_heads * head_dim * nb,
        f"2 × {layers} layers × {kv_heads} KV heads × head_dim {head_dim} × {nb} B",
    )


def break_even(t_recompute: float, t_load: float, t_store: float) -> float | None:
    """Smallest hit rate p with p·(T_recompute − T_load) > (1 − p)·T_store; None if loading is never
    faster than recomputing (offload cannot pay at any hit rate)."""
    gain = t_recompute - t_load
    if gain <= 0:
        return None
    return t_store / (gain + t_store)


def estimate(
    shape: KvShape, tokens: int, read_gbps: float, write_gbps: float, prefill_tps: float | None = None
) -> schema.Estimate:
    """The estimate as the ``estimate`` object of the gdsdiag.kv/1 document: that TypedDict is its
    one definition (schema/kv.py), the text output reads the same keys."""
    if tokens <= 0:
        raise GdsdiagError(f"--tokens {tokens} must be positive", "give the prefix length in tokens")
    if read_gbps <= 0 or write_gbps <= 0:
        raise GdsdiagError(
            "bandwidth must be positive", "give --gbps N (GB/s, 1e9 bytes) or a sweep with read and write points"
        )
    nbytes = shape.bytes_per_token * tokens
    t_load, t_store = nbytes / (read_gbps * 1e9), nbytes / (write_gbps * 1e9)
    t_rc = p = None
    note = "give --prefill-tps to compare with recomputation"
    if prefill_tps is not None:
        if prefill_tps <= 0:
            raise GdsdiagError(
                f"--prefill-tps {prefill_tps} must be positive", "give the measured prefill rate in tokens/s"
            )
        t_rc = tokens / prefill_tps
        p = break_even(t_rc, t_load, t_store)
        note = (
            f"offload pays above a {p:.1%} prefix hit rate"
            if p is not None
            else "loading is slower than recomputing: offload to this storage never pays"
        )
    return {
        "tokens": tokens,
        "bytes": nbytes,
        "read_gbps": read_gbps,
        "write_gbps": write_gbps,
        "t_load_s": t_load,
        "t_store_s": t_store,
        "t_recompute_s": t_rc,
        "break_even_hit_rate": p,  # None: no prefill rate given, or offload never pays
        "note": note,
    }


# what gbps_from_sweep reads of a sweep document
SWEEP_POINTS = {
    "points": (
        [
            {
                "mode!": str,
                "rw!": str,
                "bs!": int,
                "threads!": int,
                "error": (str, None),
                "route": (str, {"*": (float, None)}, None),  # /1 a label, /2 a mix of shares
                "summary": ({"gbps": (float, None)}, None),
            }
        ],
        None,
    )
}


def gbps_from_sweep(doc: dict, where: str = "sweep") -> tuple[float, float, str]:
    """(read GB/s, write GB/s, which points) from a gdsdiag sweep document (/1 or /2): the best
    verified GPU point of each direction (what a KV offload engine tuned for this storage can reach)."""
    from .routes import Route, dominant, point_shares
    from .schema.sweep import READABLE

    if not isinstance(doc, dict) or doc.get("schema") not in READABLE:
        raise GdsdiagError(f"{where} is not a gdsdiag sweep document", "give the output of 'gdsdiag sweep --json'")
    from .bounded import check_shape

    check_shape(where, doc, SWEEP_POINTS, "gdsdiag sweep document")
    best: dict = {}
    for p in doc.get("points") or []:
        if p.get("error") or dominant(point_shares(p.get("route"), p.get("route_mix")) or {}) == Route.HOST:
            continue  # host I/O never reaches GPU memory (--mode host): not a KV load
        g = (p.get("summary") or {}).get("gbps")
        if not g or g <= 0:
            continue
        d = "read" if "read" in p.get("rw", "") else "write"
        if d not in best or g > best[d][0]:
            best[d] = (g, f"{p['mode']} {p['rw']} bs={p['bs']} threads={p['threads']}")
    if "read" not in best:
        raise GdsdiagError(f"{where} has no GPU read point", "run 'gdsdiag sweep --rw read,write --mode cufile --json'")
    w = best.get("write", best["read"])
    return (
        best["read"][0],
        w[0],
        f"read: {best['read'][1]}; write: {w[1]}" + ("" if "write" in best else " (no write point: read figure used)"),
    )
