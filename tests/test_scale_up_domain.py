"""NVLink domains that span nodes (GB200 NVL72: 18 trays of 4 GPUs on one NVLink fabric): which
groups stay on NVLink, what the cluster file accepts, and the GB200 all-reduce against its capture."""
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from costmodel.collectives_table import predicted_table
from costmodel.comm import group_time_s, microbatch_comm_times
from costmodel.errors import InputError
from costmodel.layouts import LayoutTable, validity
from costmodel.specs import Recipe, load_cluster, load_model, load_profile

MIB64 = 64 * 2**20
NVL72 = Path(__file__).resolve().parent.parent / "hardware" / "clusters" / "gb200-nvl72.yaml"


def _no_nics(c):
    """The cluster with its NICs slowed to 1 byte/s: any time that crosses them explodes."""
    return dataclasses.replace(c, nic_bytes_per_s=1.0 / c.nics_per_node)


def test_an_ep64_all_to_all_never_touches_the_nics_of_an_nvl72_rack():
    """64 consecutive ranks of a 72-GPU NVLink domain exchange over NVLink only: the time does not
    move when the NICs are made useless; the same group over 8 HGX B200 nodes crosses them."""
    nvl, p = load_cluster("gb200-nvl72"), load_profile("gb200-186gb")
    t = float(group_time_s("all_to_all", MIB64, 1, 64, nvl, p))
    assert float(group_time_s("all_to_all", MIB64, 1, 64, _no_nics(nvl), p)) == t
    hgx, pb = load_cluster("dgx-b200", nodes=8), load_profile("b200-sxm-180gb")
    tb = float(group_time_s("all_to_all", MIB64, 1, 64, hgx, pb))
    assert float(group_time_s("all_to_all", MIB64, 1, 64, _no_nics(hgx), pb)) > 1e3 * tb
    assert tb > 3 * t          # 64 MiB over 8 x 400 Gb/s per node vs 900 GB/s NVLink per GPU


def test_deepseek_v3_ep64_dispatch_stays_in_the_rack():
    """DeepSeek-V3 at TP1 EP64 (DeepEP flex and all-to-all dispatchers): the MoE dispatch of one
    rack does not depend on its NICs; on HGX B200 nodes it does."""
    m = load_model("deepseek-v3")
    lay = LayoutTable.from_rows([dict(tp=1, pp=1, dp=64, cp=1, ep=64, etp=1, vp=1, mbs=1, recompute="full",
                                      zero=1, sp=False, overlap=True)])
    for disp in ("flex", "alltoall"):
        r = Recipe(gbs=64, seq_len=4096, moe_dispatcher=disp)
        nvl, p = load_cluster("gb200-nvl72", nodes=16), load_profile("gb200-186gb")
        ep = microbatch_comm_times(m, r, nvl, p, lay).ep_layer_fwd_s[0]
        assert microbatch_comm_times(m, r, _no_nics(nvl), p, lay).ep_layer_fwd_s[0] == ep > 0
        hgx, pb = load_cluster("dgx-b200", nodes=8), load_profile("b200-sxm-180gb")
        ep_b = microbatch_comm_times(m, r, hgx, pb, lay).ep_layer_fwd_s[0]
        assert microbatch_comm_times(m, r, _no_nics(hgx), pb, lay).ep_layer_fwd_s[0] > 100 * ep_b


def test_tp_spans_trays_inside_the_domain_only():
    """TP8 on 4-GPU trays is valid where the NVLink domain holds 72 GPUs, refused where it is the tray."""
    m, r = load_model("llama3-70b"), Recipe(gbs=64, seq_len=8192)
    lay = LayoutTable.from_rows([dict(tp=8, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="full", zero=1,
                                      sp=True, overlap=True)])
    assert validity(lay, m, r, 64, load_cluster("gb200-nvl72").scale_up_gpus)[0][0] == -1
    code, msgs = validity(lay, m, r, 64, 4)
    assert "TP must divide the GPUs of one NVLink domain (4;" in msgs[code[0]]


def test_the_collectives_table_has_a_domain_scope():
    """Two racks: tray, 72-GPU domain and 144-GPU cluster rows; only the cluster row crosses the NICs
    (its time moves when they are slowed, the domain's does not)."""
    c, p = load_cluster("gb200-nvl72", nodes=36), load_profile("gb200-186gb")
    table = {(r.scope, s): r for s, cl in (("nics", c), ("none", _no_nics(c)))
             for r in predicted_table(cl, p, collectives=("all_reduce",), sizes=(2**30,))}
    assert [table[sc, "nics"].ranks for sc in ("intra-node", "nvlink-domain", "cluster")] == [4, 72, 144]
    assert table["nvlink-domain", "none"].time_us == table["nvlink-domain", "nics"].time_us
    assert table["cluster", "none"].time_us > 1e3 * table["cluster", "nics"].time_us
    assert table["cluster", "nics"].time_us >= table["nvlink-domain", "nics"].time_us


def test_the_gb200_all_reduce_reproduces_its_capture_from_64_mib():
    """Azure ND GB200 v6 nccl-tests all-reduce (hardware/profiles/data/azure_nd_gb200_v6_gemm_nvbw_nccl.md,
    4 ranks assumed): predicted busbw within 10% at every size >= 64 MiB (64 MiB: 550.73 GB/s .. 8 GiB: 679.61)."""
    text = (NVL72.parent.parent / "profiles" / "data" / "azure_nd_gb200_v6_gemm_nvbw_nccl.md").read_text()
    units = {"M": 2**20, "G": 2**30}
    rows = [(int(n) * units[u], float(bw)) for n, u, bw in re.findall(r"^\|\s*(\d+)([MG])\s*\|\s*([\d.]+)\s*\|", text, re.M)]
    big = [(n, bw) for n, bw in rows if n >= MIB64 * 0.99]
    assert len(big) == 8
    c, p = load_cluster("gb200-nvl72"), load_profile("gb200-186gb")
    for label_bytes, bw in big:
        n = 2 ** round(np.log2(label_bytes))        # nccl-tests sizes are powers of two ('67M' = 64 MiB)
        t = float(group_time_s("all_reduce", n, 1, 4, c, p))
        assert 2 * 3 / 4 * n / t / 1e9 == pytest.approx(bw, rel=0.10)


@pytest.mark.parametrize("value,why", [(70, "not a whole number of nodes of 4"), (1152, "must be <= 576"),
                                       ("seventy", "expected an integer")])
def test_a_bad_domain_size_names_its_field(tmp_path, value, why):
    text = NVL72.read_text().replace("  domain_gpus: 72", f"  domain_gpus: {value}")
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=why) as e:
        load_cluster(str(f))
    assert "domain_gpus" in str(e.value)


def test_a_domain_size_needs_its_source(tmp_path):
    text = "\n".join(l for l in NVL72.read_text().splitlines() if not l.startswith("  intra_node.domain_gpus:"))
    f = tmp_path / "nosource.yaml"
    f.write_text(text + "\n")
    with pytest.raises(InputError, match="domain_gpus"):
        load_cluster(str(f))


def test_validate_reads_a_gb200_row_by_tray_or_by_rack():
    """A GB200 row runs on the NVL72 rack whether its gpus_per_node counts the tray (4) or the NVLink
    domain (72): the same prediction; any other count is refused naming both."""
    from costmodel.validate import validate_rows
    base = dict(row_id="gb", source_file="x.md", gpu="GB200", num_gpus="144", model="Llama3-70B", num_layers="80",
                hidden="8192", ffn_hidden="28672", num_heads="64", num_kv_heads="8", vocab="128256", seq_len="8192",
                gbs="144", mbs="1", tp="8", pp="1", dp="18", cp="1", sequence_parallel="true", recompute="full",
                fsdp_or_zero="zero-1", precision="bf16", step_time_s="30", stack="megatron")
    res = validate_rows([dict(base, row_id=str(g), gpus_per_node=str(g)) for g in (4, 72, 8)])
    assert res[0].skipped is None and res[0].predicted_s == pytest.approx(res[1].predicted_s, rel=1e-12)
    assert "8 GPUs per node" in res[2].skipped and "72 per NVLink domain" in res[2].skipped


def test_the_search_on_an_nvl72_explores_tp8_and_ep64():
    """DeepSeek-V3 on 32 trays (128 GB200): the layout space holds TP8 groups across two trays and
    EP64 groups inside a rack, which a search bound to the 4-GPU tray cannot offer (TP <= 4)."""
    from costmodel.layouts import enumerate_layouts
    m, r = load_model("deepseek-v3"), Recipe(gbs=256, seq_len=4096)
    c = load_cluster("gb200-nvl72", nodes=32)
    t = enumerate_layouts(m, r, c.num_gpus, c.scale_up_gpus, max_mbs=1)
    assert (t.tp == 8).any() and (t.ep == 64).any()
    assert not (enumerate_layouts(m, r, c.num_gpus, c.gpus_per_node, max_mbs=1).tp > 4).any()


def test_a_group_that_straddles_a_rack_boundary_pays_the_network():
    """20 trays (80 GPUs), TP4 PP2: pipeline stage 1 holds ranks 40-79, so its DP ring of 10 (stride 4)
    crosses the rack boundary at rank 72 and the step waits for it; 64-rank EP groups in two racks
    (144 GPUs) straddle too (ranks 64-127).  Both slow down when the NICs are made useless; the same
    groups in a job that fits one rack do not."""
    from costmodel.comm import group_span
    assert [float(x[0]) for x in group_span(np.array([4.0]), np.array([10.0]), 72, 80)] == [5.0, 2.0]
    assert [float(x[0]) for x in group_span(np.array([4.0]), np.array([10.0]), 72, 72)] == [10.0, 1.0]
    assert [float(x[0]) for x in group_span(np.array([1.0]), np.array([3.0]), 8, 24)] == [2.0, 2.0]   # HGX, DP 3
    p = load_profile("gb200-186gb")
    c = load_cluster("gb200-nvl72", nodes=20)
    t = float(group_time_s("all_reduce", MIB64, 4, 10, c, p))
    assert float(group_time_s("all_reduce", MIB64, 4, 10, _no_nics(c), p)) > 1e3 * t
    two = load_cluster("gb200-nvl72", nodes=36)
    assert float(group_time_s("all_to_all", MIB64, 1, 64, _no_nics(two), p)) > 1e3 * float(
        group_time_s("all_to_all", MIB64, 1, 64, two, p))
