"""The ``moe:`` profile section: routed expert GEMMs measured by the suite against the cost model."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from costmodel.compute import compute_times
from costmodel.fit.measurements import FitReport, Measurements
from costmodel.fit.moe import _predicted_s, fit_moe_section
from costmodel.specs import Recipe, load_cluster, load_model, load_profile
from costmodel.specs.params import GemmParams

from conftest import layout


class _Suite(dict):
    path = Path("synthetic.jsonl")


def _records(prof: dict, gpu, factor: dict) -> list:
    """Qwen3-30B-A3B FC1 records at EP 8, each mode's time ``factor[mode]`` x what the model charges."""
    g = prof["gemm"]["bf16"]
    gp = GemmParams(eta_max=g["eta_max"], k_half=g["k_half"], launch_s=g["launch_s"], tile_m=g["tile_m"],
                    tile_n=g["tile_n"], num_sms=g["num_sms"])
    out = []
    rng = np.random.default_rng(0)
    for mode in ("grouped", "sequential"):
        for tokens in (2048, 4096, 8192):
            counts = rng.multinomial(tokens * 8 * 8, [1 / 128] * 128)[:16].tolist()
            r = dict(model="qwen3-30b-a3b", ep=8, tokens=tokens, topk=8, mode=mode, dtype="bf16", counts=counts,
                     n=1536, k=2048, _line=1)
            r["time_s"] = factor[mode] * _predicted_s(r, gp, gpu.peak_flops["bf16"], gpu, prof["hbm"]["efficiency"])
            out.append(r)
    return out


def test_fit_recovers_the_slowdown_of_each_mode_and_compute_applies_it():
    """Synthetic records 1.3 x (grouped) and 1.1 x (sequential) the model: the fit gives those medians;
    a profile with them makes the expert GEMMs, and only they, that much slower."""
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    prof = yaml.safe_load(Path(p.path).read_text())
    meas = Measurements(suites=[_Suite(moe_gemm=_records(prof, c.gpu, {"grouped": 1.3, "sequential": 1.1}))])
    sec = fit_moe_section(meas, c.gpu, prof, FitReport())
    assert sec["grouped_gemm_slowdown"] == pytest.approx(1.3, rel=1e-3)
    assert sec["sequential_gemm_slowdown"] == pytest.approx(1.1, rel=1e-3)
    assert sec["fit"]["grouped"]["n_points"] == 3
    m = load_model("qwen3-30b-a3b")
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall", moe_grouped_gemm=True)
    t = layout(tp=1, dp=8, ep=8, etp=1, zero=1)
    base, slow = compute_times(m, r, c, p, t), compute_times(m, r, c, replace(p, moe_grouped_slowdown=1.3), t)
    # the weight GEMMs grow by 0.3 x the expert part, which is most of them for 128 experts of top-8
    grown = slow.layer_gemm_fwd_s[0] - base.layer_gemm_fwd_s[0]
    assert 0.15 * base.layer_gemm_fwd_s[0] < grown < 0.3 * base.layer_gemm_fwd_s[0]
    assert slow.layer_flops_fwd[0] == base.layer_flops_fwd[0]
    assert slow.layer_attn_fwd_s[0] == base.layer_attn_fwd_s[0]


def test_no_records_no_section_and_a_bad_section_names_the_field(tmp_path):
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    prof = yaml.safe_load(Path(p.path).read_text())
    assert fit_moe_section(Measurements(suites=[_Suite(moe_gemm=[])]), c.gpu, prof, FitReport()) is None
    prof["moe"] = {"grouped_gemm_slowdown": -1}
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(prof))
    from costmodel.errors import InputError
    with pytest.raises(InputError) as e:
        load_profile(str(f))
    assert "moe.grouped_gemm_slowdown" in str(e.value)
