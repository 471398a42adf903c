"""MoE layouts a framework refuses at start-up, and MoE flags that say nothing: what a user trying the MoE
paths found, each checked against the framework's source (Megatron-LM d98e8a6, torchtitan b5bcd76)."""
import json
import re
import shlex

import pytest

from cli_run import one_line, run

MIXTRAL_TT = ("--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--stack", "torchtitan",
              "--seq-len", "4096", "--recompute", "full")


def test_torchtitan_ep_needs_sharded_data_parallel_ranks_and_runs_experts_whole():
    """torchtitan's ParallelDims: EP divides dp_shard x cp x tp, so DDP (ZeRO-0, dp_shard 1) at TP 1 has no
    rank for EP 8; under EP its experts are not split over TP (ETP 1 by default, ETP 2 refused); recommend
    ranks no DDP layout with EP among its first 100 for Qwen3-30B-A3B (it had recommended one)."""
    one_line(run("predict", *MIXTRAL_TT, "--ep", "8", "--zero", "0"), "torchtitan's EP borrows its ranks",
             "dp_shard x cp x tp")
    r = run("predict", *MIXTRAL_TT, "--tp", "2", "--ep", "4", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["layout"]["etp"] == 1
    one_line(run("predict", *MIXTRAL_TT, "--tp", "2", "--ep", "4", "--etp", "2"), "torchtitan splits no expert over TP")
    r = run("recommend", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2", "--stack", "torchtitan",
            "--top", "100", "--json")
    assert r.returncode == 0, r.stderr
    ranked = [x["layout"] for x in json.loads(r.stdout)["ranked"]]
    assert ranked and not [x for x in ranked if x["ep"] > 1 and (x["zero"] == 0 or x["etp"] > 1)]


def test_megatron_refuses_biased_experts_split_over_tp():
    """gpt-oss's experts have biases (add_bias_linear): Megatron-core asserts ETP 1 ('Bias in Moe is only
    supported when ETP==1'); predict at TP 2 (ETP defaults to TP) says --etp 1, and recommend's first 100
    layouts all run ETP 1 (its winner had been TP2 EP8 ETP2)."""
    gpt = ("--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--seq-len", "4096")
    one_line(run("predict", *gpt, "--nodes", "2", "--tp", "2", "--ep", "8", "--recompute", "full"),
             "Bias in Moe is only supported when ETP==1", "--etp 1")
    ok = run("predict", *gpt, "--nodes", "2", "--tp", "2", "--ep", "8", "--etp", "1", "--recompute", "full")
    assert ok.returncode in (0, 3) and "invalid" not in ok.stderr, ok.stderr       # 3: valid, but over HBM
    r = run("recommend", *gpt, "--nodes", "4", "--top", "100", "--json")
    assert r.returncode == 0, r.stderr
    assert {x["layout"]["etp"] for x in json.loads(r.stdout)["ranked"]} == {1}


def test_a_capacity_factor_runs_under_every_dispatcher():
    """Megatron-core dropped 'moe_expert_capacity_factor only works with alltoall token dispatcher' with its
    DeepEP integration (NVIDIA/Megatron-LM 0d389f5, 2025-02): a factor keeps the stack's dispatcher (Megatron's
    allgather) and is priced: at factor 1.0 without padding the busiest expert's load is capped at the mean
    (random routing's overflow dropped), so the step is a little under the dropless one, never above."""
    base = ("predict", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "4", "--ep", "8", "--tp", "2",
            "--recompute", "full", "--json")
    got = {}
    for extra in ((), ("--moe-capacity-factor", "1.0"), ("--moe-capacity-factor", "1.0", "--moe-dispatcher", "flex")):
        r = run(*base, *extra)
        assert r.returncode == 0, r.stderr
        got[extra] = json.loads(r.stdout)
    cf = got[("--moe-capacity-factor", "1.0")]
    assert cf["recipe"]["moe_dispatcher"] == "allgather" and cf["recipe"]["moe_capacity_factor"] == 1.0
    assert 0.95 < cf["step_time_s"] / got[()]["step_time_s"] < 1.0


def test_etp_on_a_dense_model_is_refused_and_an_etp_the_search_never_pairs_is_named():
    """--etp on Llama 3 8B was read as a TP pin by recommend; one other than the layout's TP is refused.
    The TP itself is taken: predict --json writes a dense layout's etp as its TP, and its layout passed
    back as flags must run.  An ETP the search never pairs with a TP (16 on 8-GPU nodes) names the
    pairs it tries."""
    dense = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2")
    one_line(run("recommend", *dense, "--etp", "4"), "--etp: applies to MoE models")
    one_line(run("predict", *dense, "--tp", "2", "--etp", "4"), "--etp: applies to MoE models")
    rec = json.loads(run("predict", *dense, "--tp", "2", "--json").stdout)
    back = [f"--{k.replace('_', '-')}={v}" for k, v in rec["layout"].items() if not isinstance(v, bool)]
    back += [f"--{'' if v else 'no-'}{k}" for k, v in rec["layout"].items() if isinstance(v, bool)]
    again = run("predict", *dense, *back, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["step_time_s"] == rec["step_time_s"]
    one_line(run("recommend", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--etp", "16"),
             "ETP = TP or 1")


def test_recommends_reasons_quote_the_winner_as_printed():
    """'Why this layout' quotes the winner's breakdown at the pipeline split it runs and the other shapes'
    steps under the power limit, as the tables below and above print them (it had quoted the default
    split's EP time, 2.154 s against the table's 1.795 s, for DeepSeek-V3 on 36 GB200 trays)."""
    r = run("recommend", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--nodes", "36", "--gbs", "1024")
    assert r.returncode == 0, r.stderr
    # (with the flex dispatcher the search now adopts, the largest overhead is another term)
    said = re.search(r"the largest overhead is ([A-Za-z/ ]+): ([\d.]+) s", r.stdout)
    table = re.search(re.escape(said.group(1)) + r"\s*│\s*([\d.]+)", r.stdout) if said else None
    assert said and table and abs(float(said.group(2)) - float(table.group(1))) < 1e-3, r.stdout


QWEN = ("--model", "qwen3-30b-a3b", "--nodes", "2", "--gbs", "256", "--seq-len", "4096", "--recompute", "full")


def test_flex_needs_nvlink_and_the_deepspeed_stacks_dispatch_all_to_all():
    """DeepEP's normal kernels need NVLink inside a node (deepseek-ai/DeepEP issue 216): flex on a PCIe
    node had been priced at the PCIe bandwidth; DeepSpeed-MoE has its all-to-all only, and flex or
    allgather had silently turned its padded capacity-1 default into a dropless run."""
    one_line(run("predict", *QWEN, "--cluster", "h100-nvl-8x", "--ep", "8", "--moe-dispatcher", "flex"),
             "--moe-dispatcher", "need NVLink inside a node", "pcie")
    for d in ("flex", "allgather"):
        one_line(run("predict", "--model", "mixtral-8x22b", "--cluster", "dgx-h100", "--nodes", "8", "--ep", "8",
                     "--stack", "deepspeed", "--moe-dispatcher", d), "--moe-dispatcher", "all-to-all only")


def test_deepep_over_a_fabric_slower_than_infiniband_runs_at_that_fabric_s_rate():
    """flex on AWS EFA had been priced at DeepEP's InfiniBand RDMA rate (the same EP time as on a DGX
    H100): it is capped by what the fabric gives NCCL's all-to-all."""
    from costmodel.comm import _deepep_rdma_efficiency
    from costmodel.moe import DEEPEP_RDMA_EFFICIENCY
    from costmodel.specs import cluster_profile, load_cluster
    ib, efa = load_cluster("dgx-h100", 2), load_cluster("aws-p5", 2)
    assert _deepep_rdma_efficiency(ib, cluster_profile(ib, None)) == DEEPEP_RDMA_EFFICIENCY
    assert _deepep_rdma_efficiency(efa, cluster_profile(efa, None)) == pytest.approx(0.63)     # the p5 capture
    ep = {}
    for c in ("dgx-h100", "aws-p5"):
        r = run("predict", *QWEN, "--cluster", c, "--ep", "16", "--moe-dispatcher", "flex", "--json")
        assert r.returncode in (0, 3), r.stderr
        ep[c] = json.loads(r.stdout)["breakdown"]["ep_comm_s"]
        # upstream DeepEP needs IBGDA on mlx5 NICs, HybridEP traps on EFA: said where EP crosses EFA nodes
        assert ("flex across nodes on EFA" in r.stderr) == (c == "aws-p5"), r.stderr
    assert ep["aws-p5"] > 1.2 * ep["dgx-h100"]
    inside = run("predict", *QWEN, "--cluster", "aws-p5", "--ep", "8", "--moe-dispatcher", "flex")
    assert "flex across nodes on EFA" not in inside.stderr


def test_flex_on_efa_keeps_its_ep_groups_inside_a_node():
    """One predicate (costmodel.moe.flex_crosses_efa) says where flex's EP groups cross AWS EFA nodes:
    predict notes those layouts and recommend leaves them out, but keeps flex inside a node (it had left
    flex out of every multi-node EFA search): Qwen3-30B-A3B on 2 p5 nodes takes flex at EP 8 (16.24 s
    before the power limit against 18.12 s with the all-to-all dispatcher), and its printed predict
    command prices it again without the note."""
    import numpy as np
    from costmodel.moe import flex_crosses_efa
    from costmodel.specs import load_cluster
    efa, ib, one = load_cluster("aws-p5", 2), load_cluster("dgx-h100", 2), load_cluster("aws-p5", 1)
    etp, ep = np.array([1, 1, 2, 1, 4, 2]), np.array([8, 16, 4, 4, 4, 8])
    # the group of ETP x EP consecutive ranks against the 8-GPU node boundary, rank by rank
    brute = np.array([len({r // 8 for r in range(e * t)}) > 1 for t, e in zip(etp, ep)])
    assert (flex_crosses_efa(efa, etp, ep) == brute).all() and brute.tolist() == [False, True, False, False, True, True]
    assert not flex_crosses_efa(ib, etp, ep).any() and not flex_crosses_efa(one, etp, ep).any()
    r = run("recommend", "--model", "qwen3-30b-a3b", "--cluster", "aws-p5", "--nodes", "2", "--gbs", "1024",
            "--seq-len", "4096", "--stack", "nemo", "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    best = out["ranked"][0]
    assert best["recipe"]["moe_dispatcher"] == "flex" and best["layout"]["ep"] * best["layout"]["etp"] <= 8
    assert best["uncapped_step_time_s"] == pytest.approx(16.24, rel=0.01)
    again = run(*shlex.split(out["predict_command"])[1:])
    assert again.returncode == 0 and "flex across nodes on EFA" not in again.stderr, again.stderr
    # an EP pinned across the nodes: the refusal names the rule (it had sent the user to predict, which prices it)
    one_line(run("recommend", "--model", "qwen3-30b-a3b", "--cluster", "aws-p5", "--nodes", "2", "--gbs", "1024",
                 "--seq-len", "4096", "--moe-dispatcher", "flex", "--ep", "16"),
             "has ep=16: the search keeps the flex dispatcher's EP groups inside a node on AWS EFA")


def test_deepseek_v3_interleaves_its_61_layers_as_nvidia_lays_them_out():
    """61 layers admit no equal interleaved chunks at any PP of a power-of-two GPU count, so VP had stayed 1 and
    batch-level EP overlap (which needs VP > 1 with PP > 1) out of reach; Megatron-core's own layout interleaves
    uneven chunks (Megatron-Bridge's DeepSeek-V3 layouts: PP 4-8 x VP 2-4). The search tries VP 2 and 4 there,
    the winner on 128 DGX H100 runs one with EP overlap, its launch names the layout, and predict of the printed
    command gives the same step."""
    from costmodel.layout_grid import vp_candidates
    assert vp_candidates(61, 8, "megatron") == [1, 2, 4] and vp_candidates(61, 16, "megatron") == [1, 2]
    assert vp_candidates(61, 8, "torchtitan") == [1]                   # Megatron-core's layout only
    assert vp_candidates(126, 16, "megatron") == [1, 2, 4, 8]          # 126 + 2 = 128: equal chunks, as before
    assert vp_candidates(40, 16, "megatron") == [1]         # 3 layers on the fullest rank make no equal chunks
    r = run("recommend", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--gbs", "8192",
            "--seq-len", "4096", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    best = d["ranked"][0]
    assert best["layout"]["vp"] > 1 and best["layout"]["pp"] > 1 and "--moe-ep-overlap" in d["predict_command"]
    cmd = shlex.split(d["predict_command"])[2:] + ["--json"]
    again = run("predict", *cmd)
    assert again.returncode == 0, again.stderr
    p = json.loads(again.stdout)
    assert p["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
    assert p["step_time_s"] >= p["uncapped_step_time_s"] * (1 - 1e-9)   # a power limit never speeds a step
    text = run("predict", *cmd[:-1], "--format", "megatron")
    assert '--pipeline-model-parallel-layout "E' in text.stdout and "mL\"" in text.stdout, text.stdout[-800:]
    # at full clocks the step is the time model's: the last rank, one layer lighter, runs the logits
    lay = ("--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--gbs", "8192", "--seq-len", "4096",
           "--tp", "4", "--pp", "4", "--vp", "2", "--ep", "64", "--etp", "1", "--moe-dispatcher", "flex", "--json")
    p = json.loads(run("predict", *lay).stdout)
    assert p["sm_clock_mhz"] == pytest.approx(1980) and p["step_time_s"] == pytest.approx(p["uncapped_step_time_s"], rel=1e-4)


def test_uneven_interleaving_refuses_empty_chunks_says_unequal_ones_and_keeps_an_own_heavier_last_rank():
    """PP 16 x VP 4 leaves 61 layers no layer for some virtual stage: refused unless a layout names them;
    Llama 2 13B's 40 layers at PP 16 x VP 2 put 3 layers on the fullest rank, 2 + 1 in its chunks, which
    the schedule prices as 1.5 + 1.5 and says so; a run's own layout whose last rank holds the most keeps
    its parameters there (the DP reduction and the optimizer step of that rank, not a lighter one's)."""
    ds = ("--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--gbs", "8192", "--seq-len", "4096",
          "--ep", "64", "--etp", "1", "--moe-dispatcher", "flex")
    one_line(run("predict", *ds, "--tp", "4", "--pp", "16", "--vp", "4"), "PP x VP must not exceed num_layers (61)")
    r = run("predict", "--model", "llama2-13b", "--cluster", "jean-zay-a100", "--nodes", "8", "--tp", "2", "--pp", "16",
            "--vp", "2")
    assert r.returncode in (0, 3) and "the fullest rank's 3 layers makes unequal virtual chunks" in r.stderr, r.stderr
    lay = (*ds, "--tp", "4", "--pp", "4", "--vp", "2", "--json")
    default = json.loads(run("predict", *lay).stdout)
    heavy = json.loads(run("predict", *lay, "--pp-layout", "Et*8|t*8|t*8|t*8|t*7|t*7|t*7|t*8mL").stdout)
    assert heavy["pp_layout"]["rank_layers"] == [15, 15, 15, 16]
    assert heavy["breakdown"]["dp_comm_s"] > default["breakdown"]["dp_comm_s"] * 1.02


def test_an_infeasible_json_answer_carries_the_notes_printed_before_it():
    """recommend --json with limits no layout meets exits 3 with its JSON record; the notes stderr printed
    first are in it, as in a feasible answer."""
    r = run("recommend", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2", "--gbs", "1024",
            "--seq-len", "4096", "--objective", "energy", "--node-power-kw", "50", "--max-temp-c", "31", "--json")
    assert r.returncode == 3, r.stderr
    d = json.loads(r.stdout)
    assert d["feasible"] is False and d["notes"] == ["--node-power-kw 50 kW is at or above the 5.6 kW the GPUs draw "
                                                      "at their power limit: it binds nothing"]


def test_a_solver_that_is_not_installed_is_refused_before_any_note():
    """--solver highs without HiGHS: one line naming --solver, exit 2, even where a limit would first have
    printed a note (the node budget that binds nothing)."""
    from costmodel.ilp.solver import check_solver
    from costmodel.errors import InputError
    try:
        check_solver("highs")
    except InputError:
        pass
    else:
        pytest.skip("HiGHS is installed here")
    one_line(run("recommend", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2", "--objective",
                 "energy", "--node-power-kw", "50", "--solver", "highs"), "--solver", "HiGHS is not available")
