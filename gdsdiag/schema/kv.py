"""``gdsdiag.kv/1`` (docs/json.md)."""

from __future__ import annotations

from typing import TypedDict


class Shape(TypedDict):
    model: str
    attention: str
    layers: int
    kv_heads: int | None
    head_dim: int | None
    latent_dim: int | None
    dtype: str
    dtype_bytes: int
    bytes_per_token: int
    formula: str


class Estimate(TypedDict):
    tokens: int
    bytes: int
    read_gbps: float
    write_gbps: float
    t_load_s: float
    t_store_s: float
    t_recompute_s: float | None
    break_even_hit_rate: float | None
    note: str


class KvDoc(TypedDict):
    schema: str
    model_config: str
    shape: Shape
    bandwidth_source: str
    estimate: Estimate
