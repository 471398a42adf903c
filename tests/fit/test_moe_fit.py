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
    """Qwen3-30B-A3B FC1 records at EP 8, each mode's time ``factor[mode]`` x what the model charges
    (the profile's per-group time of the grouped GEMM included)."""
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
            r["time_s"] = factor[mode] * _predicted_s(r, gp, gpu.peak_flops["bf16"], gpu, prof["hbm"]["efficiency"],
                                                      prof["moe"]["grouped_gemm_group_s"])
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
    # the base profile's per-group time (TE's grouped GEMM benchmark) is kept beside the refit slowdowns
    assert sec["grouped_gemm_group_s"] == prof["moe"]["grouped_gemm_group_s"] == pytest.approx(2.69e-6, rel=0.01)
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


def test_te_grouped_gemm_pays_a_per_group_time_that_both_shapes_agree_on():
    """TE PR 2045 (H100, BF16): 8 groups of 4096 rows and 16 of 2048 (768 x 2048, equal FLOPs) take
    164.2 and 186.1 us with TE 2.7's multi-stream grouped GEMM; one batched GEMM of the same rows is
    142.8 us by the H100 fit, so each group adds 2.67 and 2.70 us: a per-group cost (TE 2.2: 7.5 and
    7.2 us).  compute_times adds it per local expert to each grouped call, once forward, twice backward."""
    from costmodel.fit.builtin.grouped_gemm import read_grouped_gemm_tables
    rows = read_grouped_gemm_tables(Path(__file__).resolve().parents[2] / "hardware" / "profiles" / "data"
                                    / "te_grouped_gemm_h100_pr2045.md")
    assert [(r["g"], r["tflops"].get("TE V2.7")) for r in rows] == [(8, None), (16, None), (8, 627.903), (16, 553.945)]
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    fit = yaml.safe_load(Path(p.path).read_text())["moe"]["fit"]
    per = [x["per_group_us"] for x in fit["per_shape"]]
    assert per == pytest.approx([2.67, 2.70], abs=0.02)
    assert [x["measured_us"] for x in fit["per_shape"]] == pytest.approx([164.16, 186.08], abs=0.01)
    assert [x["per_group_us"] for x in fit["cross_checks"]["TE V2.2"]] == pytest.approx([7.47, 7.23], abs=0.02)
    assert p.moe_grouped_group_s == pytest.approx(2.69e-6, rel=0.01)
    m = load_model("qwen3-30b-a3b")
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall", moe_grouped_gemm=True)
    t = layout(tp=1, dp=8, ep=8, etp=1, zero=1)
    a, b = compute_times(m, r, c, replace(p, moe_grouped_group_s=0.0), t), compute_times(m, r, c, p, t)
    e_local = m.num_experts / 8
    assert b.layer_gemm_fwd_s[0] - a.layer_gemm_fwd_s[0] == pytest.approx(2 * e_local * p.moe_grouped_group_s)
    assert b.layer_bwd_s[0] - a.layer_bwd_s[0] == pytest.approx(4 * e_local * p.moe_grouped_group_s)


def test_a_bad_per_group_time_names_the_field(tmp_path):
    c = load_cluster("dgx-h100", nodes=1)
    prof = yaml.safe_load(Path(load_profile(c.gpu.key).path).read_text())
    prof["moe"]["grouped_gemm_group_s"] = "fast"
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(prof))
    from costmodel.errors import InputError
    with pytest.raises(InputError) as e:
        load_profile(str(f))
    assert "moe.grouped_gemm_group_s" in str(e.value)
