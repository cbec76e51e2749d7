"""gdsdiag kv: KV bytes/token from real model configs (fixtures/models/README.md cites each) and the
offload arithmetic."""

import json
import os
import subprocess
import sys

import pytest
from sweep_fixture import h200_sweep_doc

from gdsdiag.errors import GdsdiagError
from gdsdiag.kv import break_even, estimate, gbps_from_sweep, kv_shape

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "fixtures", "models")


def cfg(name):
    with open(os.path.join(MODELS, name)) as f:
        return json.load(f)


def test_qwen25_1_5b_gqa():
    s = kv_shape(cfg("qwen2.5-1.5b.config.json"))
    assert (s.attention, s.layers, s.kv_heads, s.head_dim, s.dtype_bytes) == ("GQA", 28, 2, 128, 2)
    assert s.bytes_per_token == 28_672


def test_llama31_70b_gqa():
    s = kv_shape(cfg("llama-3.1-70b.config.json"))
    assert (s.layers, s.kv_heads, s.head_dim) == (80, 8, 128)
    assert s.bytes_per_token == 327_680


def test_deepseek_v3_mla_uses_latent_not_kv_heads():
    c = cfg("deepseek-v3.config.json")
    assert c["num_key_value_heads"] == 128  # present in the real config: must be ignored for MLA
    s = kv_shape(c)
    assert s.attention == "MLA" and s.latent_dim == 576 and s.kv_heads is None
    assert s.bytes_per_token == 70_272  # arXiv:2505.09343 Table 1: 70.272 KB


def test_explicit_head_dim_and_mha_and_dtype_override():
    c = cfg("llama-3.1-70b.config.json")
    c["head_dim"] = 256  # an explicit head_dim wins over hidden/heads
    assert kv_shape(c).bytes_per_token == 2 * 80 * 8 * 256 * 2
    del c["num_key_value_heads"]
    del c["head_dim"]
    s = kv_shape(c, dtype="float8_e4m3fn")  # no num_key_value_heads: plain MHA
    assert s.attention == "MHA" and s.bytes_per_token == 2 * 80 * 64 * 128 * 1


def test_bad_configs_name_the_field():
    c = cfg("qwen2.5-1.5b.config.json")
    del c["num_hidden_layers"]
    with pytest.raises(GdsdiagError, match="num_hidden_layers"):
        kv_shape(c)
    with pytest.raises(GdsdiagError, match="unknown KV dtype"):
        kv_shape(cfg("qwen2.5-1.5b.config.json"), dtype="int3")


def test_break_even_formula():
    # p·(Trc − Tload) > (1 − p)·Tstore at equality: p = Tstore / (Trc − Tload + Tstore)
    p = break_even(1.0, 0.2, 0.2)
    assert p == pytest.approx(0.2 / 1.0)
    assert p * (1.0 - 0.2) == pytest.approx((1 - p) * 0.2)
    assert break_even(0.1, 0.2, 0.2) is None  # loading slower than recomputing


def test_estimate_llama_at_2gbps():
    s = kv_shape(cfg("llama-3.1-70b.config.json"))
    e = estimate(s, 8192, 2.0, 1.0, prefill_tps=4000)
    assert e["bytes"] == 327_680 * 8192
    assert e["t_load_s"] == pytest.approx(327_680 * 8192 / 2e9)
    assert e["t_store_s"] == pytest.approx(2 * e["t_load_s"])
    assert e["t_recompute_s"] == pytest.approx(8192 / 4000)
    assert e["break_even_hit_rate"] == pytest.approx(
        e["t_store_s"] / (e["t_recompute_s"] - e["t_load_s"] + e["t_store_s"])
    )


def test_gbps_from_real_sweep():
    rd, wr, src = gbps_from_sweep(h200_sweep_doc())
    doc = h200_sweep_doc()
    gpu_reads = [p["summary"]["gbps"] for p in doc["points"] if p["mode"] != "host" and "read" in p["rw"]]
    assert rd == max(gpu_reads) and "host" not in src
    with pytest.raises(GdsdiagError, match="not a gdsdiag sweep"):
        gbps_from_sweep({"points": []})


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gdsdiag", "kv", *args], capture_output=True, text=True, timeout=60)


def test_cli_json_and_text(tmp_path):
    p = _cli(
        "--model-config",
        os.path.join(MODELS, "qwen2.5-1.5b.config.json"),
        "--gbps",
        "2",
        "--tokens",
        "1000",
        "--prefill-tps",
        "10000",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["schema"] == "gdsdiag.kv/1" and d["shape"]["bytes_per_token"] == 28_672
    assert d["estimate"]["t_load_s"] == pytest.approx(28_672_000 / 2e9)
    sw = tmp_path / "sweep.json"
    sw.write_text(json.dumps(h200_sweep_doc()))
    p = _cli("--model-config", os.path.join(MODELS, "deepseek-v3.config.json"), "--sweep", str(sw))
    assert p.returncode == 0 and "70,272 B/token" in p.stdout and "MLA" in p.stdout


def test_cli_errors_are_one_line(tmp_path):
    p = _cli("--model-config", str(tmp_path / "missing.json"), "--gbps", "1")
    assert p.returncode == 4 and p.stderr.count("\n") == 1 and "cannot read model config" in p.stderr  # issue 23
    p = _cli("--model-config", os.path.join(MODELS, "qwen2.5-1.5b.config.json"))
    assert p.returncode == 4 and "exactly one of --sweep" in p.stderr  # a usage error (issue 23)
