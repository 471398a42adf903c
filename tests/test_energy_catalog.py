"""Energy per step against the power cap on every catalog GPU with a power model: U-shaped, with
the least energy between 50 % and 90 % of the power the cap acts on."""
from dataclasses import replace

import numpy as np
import pytest
import yaml

from costmodel.energy import missing_inputs
from costmodel.predict import predict_run
from costmodel.specs import Recipe, hardware_dir, load_cluster, load_gpu, load_model, load_profile
from costmodel.specs.hardware import list_clusters, list_gpus

R = Recipe(gbs=128, seq_len=8192)
V100_R = Recipe(gbs=64, seq_len=2048, precision="fp16")
BASE = dict(cp=1, ep=1, vp=1, mbs=1, zero=1, sp=True, overlap=True, recompute="full")
#: a GPU with no catalog cluster of its own runs in a DGX H100's topology (NVSwitch, InfiniBand)
STAND_IN = "dgx-h100"


def _cluster_of(gpu: str):
    """A catalog cluster of ``gpu`` (4 nodes), else the stand-in cluster with ``gpu`` in it."""
    own = [c for c in list_clusters() if load_cluster(c).gpu.key == gpu]
    c = load_cluster(own[0] if own else STAND_IN, nodes=4)
    return c if own else replace(c, gpu=load_gpu(gpu))


def _with_power_model():
    out = []
    for g in list_gpus():
        c = _cluster_of(g)
        if not missing_inputs(c, load_profile(g)):
            out.append(g)
    return out


def test_every_catalog_gpu_has_a_power_and_thermal_model():
    assert set(_with_power_model()) == set(list_gpus())


def _floor_bound(gpu: str) -> bool:
    """Whether ``gpu``'s profile measured its GEMMs below the voltage floor at its own limit
    (``power.fit.flop_w.per_shape`` clock ratios, costmodel/fit/builtin/capped_gemm.py; the B200's
    sustained GEMMs, ``power.fit.b200.clock_ratio_range``, costmodel/fit/builtin/b200.py), or derives
    its power from a GPU that did (``power.derived_from``: GB200 from B200)."""
    p = load_profile(gpu)
    sec = yaml.safe_load((hardware_dir() / "profiles" / f"{gpu}.yaml").read_text())["power"]
    fit = sec.get("fit", {})
    ratios = [x["clock_ratio"] for x in fit.get("flop_w", {}).get("per_shape", [])]
    ratios += list(fit.get("b200", {}).get("clock_ratio_range", []))
    if ratios:
        return max(ratios) < p.power.v_floor_clock_ratio
    src = str(sec.get("derived_from", "")).split(":")[0]
    return src != gpu and (hardware_dir() / "profiles" / f"{src}.yaml").is_file() and _floor_bound(src)


@pytest.mark.parametrize("gpu", _with_power_model())
def test_energy_against_the_power_cap_is_least_where_the_clock_meets_the_voltage_floor(gpu):
    """Large dense training (Llama 3 70B, TP over a node, PP 4, full recomputation; Llama 2 13B in
    FP16 on V100) under a uniform cap from the GPU's minimum to its maximum limit: energy per step
    falls as the cap cuts the voltage, then rises once the clock is below the voltage floor and the
    step grows faster than the power falls.  So the least energy lies at the lowest of the 12 caps
    that keeps the SM clock at the floor, give or take one level: mid-range on A100 and H100, at or
    next to the TDP on Blackwell, whose GEMMs its 1000-1400 W limits already hold near the floor (the
    B200 note's sustained GEMMs run at 0.55-0.62 of the maximum clock at 1000 W); at the limit itself
    on the 500 W Grand Teton H100, whose limit holds its GEMMs below the floor.  A step that is mostly
    exposed communication has its least energy at or below the floor."""
    c = _cluster_of(gpu)
    p = load_profile(gpu)
    v100 = "bf16" not in c.gpu.peak_flops
    m = load_model("llama2-13b" if v100 else "llama3-70b")
    lay = dict(BASE, tp=c.gpus_per_node, pp=4, dp=c.num_gpus // (4 * c.gpus_per_node))
    lo, hi = c.gpu.power_limit_min_w, c.power_limit_w         # the site's limit where its cluster states one
    caps = np.linspace(lo, hi, 12)
    runs = [predict_run(m, V100_R if v100 else R, c, p, lay, caps_w=float(x)) for x in caps]
    e = [r.energy.energy_j_per_step for r in runs]
    i = int(np.argmin(e))
    clock = np.array([r.energy.sm_clock_mhz for r in runs]) / c.gpu.full_clock_mhz
    at_floor = clock >= p.power.v_floor_clock_ratio - 1e-3
    if not at_floor[-1]:
        # a limit that holds the clock below the floor even at its top (the 500 W Grand Teton H100:
        # FBGEMM's GEMMs ran at 0.70-0.75 of the clock there): every cap stretches the step more than
        # it saves power, so energy falls all the way to the top cap
        assert _floor_bound(gpu) and i == len(caps) - 1 and np.all(np.diff(e) < 0), (caps, e, clock)
        return
    j = int(np.argmax(at_floor))
    bd = runs[-1].breakdown
    if float(bd["compute_s"]) < 0.5 * sum(float(v) for v in bd.values()):
        # a step mostly spent in exposed communication (Llama 3 70B over the L40S's PCIe): those phases
        # keep their time at a lower clock while their power above the static floor falls with it, so
        # energy goes on falling through the floor, down to the lowest cap
        assert i <= j + 1 and e[i] < e[-1] / 1.02, (caps, e, clock)
        return
    assert abs(i - j) <= 1, (caps, e, clock)
    assert e[0] > e[i] * 1.02, (caps, e)
    if j < len(caps) - 1:
        assert e[-1] > e[i] * 1.01, (caps, e)


@pytest.mark.parametrize("change,field,needle", [
    ({"hbm_bandwidth": 3.35}, "hbm_bandwidth", "give a unit"),                # a bare number reads as bytes/s
    ({"tdp": "70kW"}, "tdp", "outside"),
    ({"peak_tflops": {"bf16": 989400}}, "peak_tflops.bf16", "TFLOP/s"),
    ({"min_clock_mhz": 5000}, "min_clock_mhz", "boost_clock_mhz"),
    ({"max_clock_mhz": 1500}, "max_clock_mhz", "below boost_clock_mhz"),     # the peaks' 1830 MHz is reached
    ({"idle_power": "900W"}, "idle_power", "TDP"),
    ({"shutdown_tmp": "95C"}, "shutdown_tmp", "unknown key"),
])
def test_a_gpu_file_out_of_range_or_misspelt_names_its_field(tmp_path, change, field, needle):
    """A copied GPU file with one field broken: the loader names it instead of pricing the run with it
    (the H100's own file loads)."""
    import yaml
    from costmodel.errors import InputError
    from costmodel.specs import load_gpu
    from costmodel.specs.loading import hardware_dir
    src = yaml.safe_load((hardware_dir() / "gpus" / "h100-sxm-80gb.yaml").read_text())
    f = tmp_path / "mygpu.yaml"
    f.write_text(yaml.safe_dump(dict(src, **change)))
    with pytest.raises(InputError) as e:
        load_gpu(str(f))
    assert field in str(e.value) and needle in str(e.value)
    f.write_text(yaml.safe_dump(src))
    assert load_gpu(str(f)).tdp_w == 700.0


def test_dgx_a100_non_gpu_power_is_flagperfs_measured_median():
    """The DGX A100's non-GPU power is the median, over FlagPerf's steady 8-GPU runs (node power varying by
    under 100 W), of the node's average power minus its 8 GPUs' average: 1361 W (it had been the 6.5 kW
    rating minus 8 x 400 W, 3.3 kW, more than the GPUs' own energy of a training step)."""
    import re
    text = (hardware_dir() / "profiles" / "data" / "flagperf_a100_base_gemm_membw_nccl_with_power_temp.md").read_text()
    excess = []
    for part in text.split("## FILE: ")[1:]:
        n = re.search(r"单服务器内使用卡数：(\d+)", part)
        m = re.search(r"\| 监控结果 \| ([\d.]+)W\s*\| [\d.]+W\s*\| ([\d.]+)W\s*\| [^|]*\| ([\d.]+)W", part)
        if n and m and int(n.group(1)) == 8 and float(m.group(2)) < 100:
            excess.append(float(m.group(1)) - 8 * float(m.group(3)))
    assert len(excess) == 10
    assert float(np.median(excess)) == pytest.approx(1361, abs=1)
    for name in ("dgx-a100", "dgx-a100-40gb", "hgx-a800"):
        assert load_cluster(name).node_other_power_w == pytest.approx(1361)
