"""HSDP: ZeRO's sharded states replicated over ``dp_replicate`` groups (Megatron-core's distributed-optimizer
instances, FSDP2's replicate x shard mesh), in the memory, the DP communication, the layout rules, the search,
the launch formats and the readers of runs."""
import numpy as np
import pytest

from costmodel.comm import data_parallel_comm_times, group_time_s
from costmodel.errors import InputError
from costmodel.launch import launch_settings
from costmodel.layouts import check_layout, enumerate_layouts, shard_dp
from costmodel.memory import memory_bytes
from costmodel.readers.training_logs.dumps import _layout
from costmodel.readers.training_logs.frameworks import _torchtitan_mesh
from costmodel.specs import Recipe, load_cluster, load_model, load_profile
from costmodel.stacks import get_stack, stack_recipe

from conftest import layout


def _states(mem):
    return (mem.weights_bytes + mem.grads_bytes + mem.optimizer_bytes)[0]


def test_distributed_optimizer_instances_shard_the_optimizer_over_their_own_ranks():
    """Megatron's distributed optimizer keeps 6 + 12/d bytes per parameter, d the ranks it shards over:
    DP 16 in 2 instances shards over 8 (6 + 1.5 bytes), not 16 (6 + 0.75)."""
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=4096)
    N = m.params()
    one = _states(memory_bytes(m, r, layout(dp=16, zero=1)))
    two = _states(memory_bytes(m, r, layout(dp=16, zero=1, dp_replicate=2)))
    assert one == pytest.approx((6 + 12 / 16) * N, rel=1e-9)
    assert two == pytest.approx((6 + 12 / 8) * N, rel=1e-9)


def test_hsdp_fsdp_holds_its_shard_groups_states():
    """FSDP over DP 32 in 4 replicas: each GPU holds 1/8 of the 18 bytes per parameter (plus the two
    layers gathered at a time), 4x what full sharding over 32 holds."""
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=4096)
    N, gathered = m.params(), 2 * 2 * m.layer_params()
    full = _states(memory_bytes(m, r, layout(dp=32, zero=3)))
    hsdp = _states(memory_bytes(m, r, layout(dp=32, zero=3, dp_replicate=4)))
    assert full == pytest.approx(18 * N / 32 + gathered, rel=1e-6)
    assert hsdp == pytest.approx(18 * N / 8 + gathered, rel=1e-6)
    assert shard_dp(layout(dp=32, cp=2, zero=3, dp_replicate=4))[0] == 16


def test_instances_reduce_scatter_in_the_node_then_all_reduce_the_shard_across_nodes():
    """TP 1, DP 16 on two 8-GPU nodes, two instances, no overlap (one bucket): the gradient is reduce-scattered
    over the node's 8 ranks (stride 1), then each rank's 1/8 all-reduced with its peer on the other node
    (stride 8, 2 ranks: Megatron-core param_and_grad_buffer.py with num_distributed_optimizer_instances > 1)."""
    m = load_model("llama3-8b")
    c = load_cluster("dgx-h100", nodes=2)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096, dp_overlap=False)
    got = data_parallel_comm_times(m, r, c, p, layout(dp=16, zero=1, overlap=False, dp_replicate=2))
    P = m.params() * 4.0                           # fp32 gradients
    want = group_time_s("reduce_scatter", P, 1, 8, c, p) + group_time_s("all_reduce", P / 8, 8, 2, c, p)
    assert got.dp_grad_s[0] == pytest.approx(want, rel=1e-9)
    flat = data_parallel_comm_times(m, r, c, p, layout(dp=16, zero=1, overlap=False))
    assert flat.dp_grad_s[0] == pytest.approx(group_time_s("reduce_scatter", P, 1, 16, c, p), rel=1e-9)
    # the parameters are gathered in the instance alone
    assert got.dp_param_s[0] == pytest.approx(group_time_s("all_gather", m.params() * 2.0, 1, 8, c, p), rel=1e-9)


@pytest.mark.parametrize("stack, lay, said", [
    ("megatron", dict(dp=16, zero=0, dp_replicate=2), "needs ZeRO >= 1"),
    ("megatron", dict(dp=12, zero=1, dp_replicate=8), "must divide DP"),
    ("llm-foundry", dict(dp=16, zero=0, dp_replicate=2), "needs ZeRO >= 1"),
    ("deepspeed", dict(dp=16, zero=3, dp_replicate=2), "deepspeed stack runs no HSDP .*llm-foundry at ZeRO 2 and 3"),
    ("megatron-legacy", dict(dp=16, zero=1, dp_replicate=2), "megatron-legacy stack runs no HSDP"),
    ("torchtitan", dict(dp=16, cp=2, zero=3, dp_replicate=32), "must divide DP"),
    ("torchtitan", dict(dp=8, zero=3, dp_replicate=8), "one-rank shard group"),
])
def test_hsdp_rules_name_what_is_wrong(stack, lay, said):
    m = load_model("llama3-8b")
    r = stack_recipe(get_stack(stack), 192, 4096, "bf16")
    n = lay["dp"] * lay.get("cp", 1)
    with pytest.raises(InputError, match=said):
        check_layout(layout(**lay), m, r, n, 8)


def test_megatron_instances_split_dp_x_cp():
    """Megatron-core splits DP x CP into instances ((DP x CP) % instances == 0, parallel_state.py): DP 3 x CP 2
    in 2 instances of 3 ranks each is a layout; FSDP2's replicate dim splits DP itself, so not on torchtitan."""
    m = load_model("llama3-8b")
    lay = layout(dp=3, cp=2, zero=1, dp_replicate=2)
    check_layout(lay, m, stack_recipe(get_stack("megatron"), 192, 4096, "bf16"), 6, 8)
    assert shard_dp(lay)[0] == 3
    with pytest.raises(InputError, match="must divide DP:"):
        check_layout(lay, m, stack_recipe(get_stack("torchtitan"), 192, 4096, "bf16"), 6, 8)


def test_replicas_must_divide_the_expert_data_parallel_group():
    """Megatron-core asserts expert_data_parallel_size % num_distributed_optimizer_instances == 0: Mixtral's
    8 experts at EP 8 over DP 16 leave an expert-DP group of 2, which 4 instances cannot split."""
    m = load_model("mixtral-8x7b")
    r = Recipe(gbs=64, seq_len=4096)
    with pytest.raises(InputError, match="expert-data-parallel group"):
        check_layout(layout(dp=16, ep=8, etp=1, zero=1, dp_replicate=4), m, r, 16, 8)
    check_layout(layout(dp=16, ep=8, etp=1, zero=1, dp_replicate=2), m, r, 16, 8)


def test_the_search_tries_node_local_shard_groups_for_fsdp_where_the_stack_runs_hsdp():
    """On torchtitan (and Megatron-FSDP, and llm-foundry's FSDP1 HYBRID_SHARD) each FSDP layout whose DP x CP
    group spans nodes is also tried sharded within a node (8 / TP ranks, two at least) and replicated across;
    DeepSpeed's ZeRO-3 is not."""
    m = load_model("llama3-8b")
    tt = enumerate_layouts(m, stack_recipe(get_stack("torchtitan"), 256, 4096, "bf16"), 32, 8)
    rep = tt.dp_replicate > 1
    assert rep.any() and np.all(tt.zero[rep] == 3)
    assert np.all(tt.dp[rep] * tt.cp[rep] // tt.dp_replicate[rep] == 8 // tt.tp[rep]) and not np.any(tt.tp[rep] == 8)
    # every HSDP row has its flat twin
    flat = {(int(a), int(b), int(c), int(d)) for a, b, c, d in zip(tt.tp[~rep], tt.dp[~rep], tt.cp[~rep], tt.zero[~rep])}
    assert all((int(a), int(b), int(c), 3) in flat for a, b, c in zip(tt.tp[rep], tt.dp[rep], tt.cp[rep]))
    lf = enumerate_layouts(m, stack_recipe(get_stack("llm-foundry"), 256, 4096, "bf16"), 32, 8)
    lrep = lf.dp_replicate > 1
    assert lrep.any() and np.all(lf.zero[lrep] == 3) and np.all(lf.dp[lrep] // lf.dp_replicate[lrep] == 8)
    ds = enumerate_layouts(m, stack_recipe(get_stack("deepspeed"), 256, 4096, "bf16"), 32, 8)
    assert len(ds) and not np.any(ds.dp_replicate > 1)
    pinned = enumerate_layouts(m, stack_recipe(get_stack("megatron"), 256, 4096, "bf16"), 32, 8,
                               pins={"dp_replicate": 2})
    assert len(pinned) and np.all(pinned.dp_replicate == 2) and set(np.unique(pinned.zero)) == {1, 3}


def test_launch_formats_set_the_replicas():
    m = load_model("llama3-70b")
    lay = dict(tp=8, pp=2, dp=4, cp=1, ep=1, etp=8, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=1,
               sp=True, overlap=True, dp_replicate=2)
    r = stack_recipe(get_stack("megatron"), 256, 4096, "bf16")
    assert "--num-distributed-optimizer-instances 2" in launch_settings(lay, m, r, fmt="megatron")[1]
    rn = stack_recipe(get_stack("nemo"), 256, 4096, "bf16")
    # MegatronStrategy writes its own field over its ddp config's (nemo megatron_strategy.py)
    nemo = launch_settings(lay, m, rn, fmt="nemo")[1]
    assert "recipe.trainer.strategy.num_distributed_optimizer_instances = 2" in nemo and ".ddp.num_distributed" not in nemo
    rt = stack_recipe(get_stack("torchtitan"), 256, 4096, "bf16")
    text = launch_settings(dict(lay, pp=1, dp=8, zero=3, dp_replicate=4), m, rt, fmt="torchtitan")[1]
    assert "data_parallel_replicate_degree = 4" in text and "data_parallel_shard_degree = 2" in text
    assert "num-distributed-optimizer-instances" not in launch_settings(dict(lay, dp_replicate=1), m, r,
                                                                        fmt="megatron")[1]


def test_logs_give_their_replicas():
    """A Megatron argument dump's num_distributed_optimizer_instances and a torchtitan device mesh's
    replicate degree (beside a shard degree above 1) are the layout's dp_replicate."""
    args = dict(tensor_model_parallel_size=8, pipeline_model_parallel_size=1, data_parallel_size=16,
                use_distributed_optimizer=True, num_distributed_optimizer_instances=4)
    assert _layout(args)["dp_replicate"] == 4 and _layout(args)["zero"] == 1
    assert _layout({k: v for k, v in args.items() if k != "num_distributed_optimizer_instances"})["dp_replicate"] is None
    mesh = "Building device mesh with parallelism: pp=1, dp_replicate=2, dp_shard=4, cp=1, tp=1, ep=1, etp=1"
    assert _torchtitan_mesh(mesh)["num_distributed_optimizer_instances"] == 2
    # a replicate degree over one-rank shards is DDP: no sharded optimizer, one "instance"
    ddp = _torchtitan_mesh(mesh.replace("dp_shard=4", "dp_shard=1"))
    assert ddp["num_distributed_optimizer_instances"] == 1 and ddp["use_distributed_optimizer"] is False
    assert (_layout(ddp)["zero"], _layout(ddp)["dp_replicate"]) == (0, 1)
    fsdp = _torchtitan_mesh(mesh.replace("dp_replicate=2", "dp_replicate=1"))
    assert fsdp["num_distributed_optimizer_instances"] == 1 and "use_distributed_optimizer" not in fsdp
    old = _torchtitan_mesh("Building 3-D device mesh with ['dp_replicate', 'dp_shard', 'tp'], [2, 4, 2]")
    assert old["num_distributed_optimizer_instances"] == 2 and old["tensor_model_parallel_size"] == 2


def test_recommend_s_predict_command_and_the_megatron_fsdp_launch_carry_the_replicas():
    """recommend prints the predict command of its answer: it had dropped --dp-replicate, so the command
    priced one shard group; at ZeRO-3 Megatron-LM launches HSDP on Megatron-FSDP (torch FSDP2 runs no
    distributed-optimizer instances)."""
    from costmodel.predict_command import predict_command
    m = load_model("llama3-70b")
    r = stack_recipe(get_stack("megatron"), 256, 4096, "bf16")
    lay = dict(tp=8, pp=1, dp=16, cp=1, ep=1, etp=8, vp=1, mbs=1, recompute="full", recompute_num_layers=0, zero=3,
               sp=True, overlap=True, dp_replicate=4)
    assert "--dp-replicate 4" in predict_command("llama3-70b", "dgx-h100", 16, m, r, None, lay)
    assert "--dp-replicate" not in predict_command("llama3-70b", "dgx-h100", 16, m, r, None, dict(lay, dp_replicate=1))
    text = launch_settings(lay, m, r, fmt="megatron")[1]
    assert "--use-megatron-fsdp" in text and "--use-torch-fsdp2" not in text
    assert "--num-distributed-optimizer-instances 4" in text


def test_a_torchtitan_file_s_stated_replicate_degree_holds_against_a_flag(tmp_path):
    """A file that states data_parallel_replicate_degree 1 gives the layout dp_replicate 1, which a
    --dp-replicate 2 then contradicts (it had passed and priced HSDP)."""
    from costmodel.run_config import read_run_config
    src = (__import__("pathlib").Path(__file__).parent / "data" / "configs" / "torchtitan_llama3_8b.toml").read_text()
    for shard, rep, want in ((-1, 1, 1), (8, 1, 1), (4, 2, 2), (1, 8, 1)):     # shard 1: DDP
        f = tmp_path / f"s{shard}r{rep}.toml"
        f.write_text(src.replace("data_parallel_replicate_degree = 1", f"data_parallel_replicate_degree = {rep}")
                     .replace("data_parallel_shard_degree = -1", f"data_parallel_shard_degree = {shard}"))
        cfg = read_run_config(f)
        assert cfg.layout["dp_replicate"] == want, (shard, rep)
        assert cfg.where["dp_replicate"].endswith("data_parallel_replicate_degree")


def test_search_shard_groups_stay_in_a_domain_where_it_does_not_divide_the_group():
    """160 GPUs of NVL72 racks (72-GPU domains): 72 / TP does not divide DP x CP = 160 / TP, so the shard group is
    the largest aligned share of a domain that does (gcd), never a group that spans domains (80 at TP 1)."""
    m = load_model("llama3-8b")
    t = enumerate_layouts(m, stack_recipe(get_stack("torchtitan"), 160, 4096, "bf16"), 160, 72)
    rep = t.dp_replicate > 1
    shard = t.dp[rep] * t.cp[rep] // t.dp_replicate[rep]
    assert rep.any() and np.all((72 // t.tp[rep]) % shard == 0)


def test_nemo_1_yaml_gives_its_optimizer_instances(tmp_path):
    """NeMo 1 builds its mcore distributed optimizer with model.optim.num_distributed_optimizer_instances
    (megatron_gpt_model.py setup_mcore_distributed_parallel)."""
    from costmodel.run_config import read_run_config
    f = tmp_path / "nemo.yaml"
    f.write_text("trainer:\n  devices: 8\n  num_nodes: 4\n  precision: bf16-mixed\nmodel:\n  micro_batch_size: 1\n"
                 "  global_batch_size: 256\n  encoder_seq_length: 4096\n  tensor_model_parallel_size: 2\n"
                 "  pipeline_model_parallel_size: 1\n  optim:\n    name: mcore_distributed_optim\n"
                 "    num_distributed_optimizer_instances: 4\n")
    cfg = read_run_config(f)
    assert (cfg.layout["zero"], cfg.layout["dp_replicate"]) == (1, 4)
    assert cfg.where["dp_replicate"].endswith("model.optim.num_distributed_optimizer_instances")


def test_a_published_run_csv_gives_its_replicas(tmp_path):
    """validate's optional dp_replicate column: Llama 3 8B on 2 x 8 H100, the distributed optimizer in 2
    instances, is priced with the optimizer states over 8 ranks (more memory, the replica all-reduce), not
    16; a value that breaks a rule is said with the row."""
    from costmodel.validate import read_runs_csv, validate_rows
    cols = ("row_id,source_file,gpu,num_gpus,gpus_per_node,interconnect_note,model,num_layers,hidden,num_heads,"
            "seq_len,gbs,mbs,tp,pp,dp,cp,sequence_parallel,recompute,fsdp_or_zero,dp_replicate,precision,stack,"
            "tokens_per_s_per_gpu")
    row = ("r{},mine,H100-SXM-80GB,16,8,DGX-H100,llama3-8b,32,4096,32,8192,512,1,1,1,16,1,false,full,zero-1,{},bf16,"
           "megatron,8000")
    f = tmp_path / "runs.csv"
    f.write_text("\n".join([cols, row.format(1, ""), row.format(2, 2), row.format(3, 3)]) + "\n")
    one, two, bad = validate_rows(read_runs_csv(f), str(f))
    assert one.skipped is None and two.skipped is None
    assert two.predicted_s > one.predicted_s
    assert bad.skipped and "--dp-replicate must divide" in bad.skipped


def test_torchtitan_s_fsdp_shards_over_cp_so_one_rank_dp_shards_with_cp_are_hsdp(tmp_path):
    """FSDP2 shards over torchtitan's dp_shard x cp mesh: data_parallel_shard_degree 1 beside CP 2 and a
    replicate degree is HSDP over CP-rank shard groups (the TOML that --format torchtitan prints for such a
    layout had been read back as DDP and refused), and a device-mesh line likewise."""
    from costmodel.run_config import read_run_config
    src = (__import__("pathlib").Path(__file__).parent / "data" / "configs" / "torchtitan_llama3_8b.toml").read_text()
    f = tmp_path / "cp.toml"
    f.write_text(src.replace("data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 4")
                 .replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 1")
                 .replace("context_parallel_degree = 1", "context_parallel_degree = 2"))
    cfg = read_run_config(f)
    assert (cfg.layout["zero"], cfg.layout["dp"], cfg.layout["cp"], cfg.layout["dp_replicate"]) == (3, 4, 2, 4)
    lay = layout(dp=4, cp=2, zero=3, dp_replicate=4)
    check_layout(lay, load_model("llama3-8b"), stack_recipe(get_stack("torchtitan"), 64, 8192, "bf16"), 8, 8)
    assert shard_dp(lay)[0] == 2
    mesh = _torchtitan_mesh("Building device mesh with parallelism: pp=1, dp_replicate=4, dp_shard=1, cp=2, tp=1")
    assert mesh["num_distributed_optimizer_instances"] == 4 and "use_distributed_optimizer" not in mesh


def test_llm_foundry_hsdp_is_fsdp_s_hybrid_shard(tmp_path):
    """PyTorch FSDP's HYBRID_SHARD (ZeRO 3 in the shard group) and _HYBRID_SHARD_ZERO2 (ZeRO 2) on llm-foundry:
    the settings name the strategy and Composer's two degrees (composer/utils/parallelism.py FSDPConfig); an
    llm-foundry YAML with it is answered with the flags that price it, its replicate degree included; a
    published-run CSV row saying HYBRID_SHARD without its replicas is refused, with them priced as HSDP."""
    from costmodel.run_config import read_run_config
    from costmodel.validate import read_runs_csv, validate_rows
    m = load_model("llama3-8b")
    r = stack_recipe(get_stack("llm-foundry"), 256, 4096, "bf16")
    lay = dict(tp=1, pp=1, dp=32, cp=1, ep=1, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=3,
               sp=False, overlap=True, dp_replicate=4)
    text = launch_settings(lay, m, r, fmt="settings")[1]
    assert ("fsdp_config.sharding_strategy: HYBRID_SHARD, data_parallel_shard_degree: 8, "
            "data_parallel_replicate_degree: 4") in text
    assert "sharding_strategy: _HYBRID_SHARD_ZERO2" in launch_settings(dict(lay, zero=2), m, r, fmt="settings")[1]
    assert "sharding_strategy: FULL_SHARD)" in launch_settings(dict(lay, dp_replicate=1), m, r, fmt="settings")[1]
    y = tmp_path / "mpt.yaml"
    y.write_text("global_train_batch_size: 256\nfsdp_config:\n  sharding_strategy: HYBRID_SHARD\n"
                 "  data_parallel_replicate_degree: 4\n")
    with pytest.raises(InputError, match=r"--zero 3 --dp-replicate 4 \(its HYBRID_SHARD\)"):
        read_run_config(y)
    cols = ("row_id,source_file,gpu,num_gpus,gpus_per_node,interconnect_note,model,num_layers,hidden,num_heads,"
            "seq_len,gbs,mbs,tp,pp,dp,cp,sequence_parallel,recompute,fsdp_or_zero,dp_replicate,precision,stack,"
            "tokens_per_s_per_gpu")
    row = ("r{},mine,H100-SXM-80GB,32,8,DGX-H100,llama3-8b,32,4096,32,4096,256,1,1,1,32,1,false,full,{},{},bf16,"
           "llm-foundry,8000")
    f = tmp_path / "runs.csv"
    f.write_text("\n".join([cols, row.format(1, "HYBRID_SHARD", ""), row.format(2, "HYBRID_SHARD", 4),
                            row.format(3, "FULL_SHARD", ""), row.format(4, "HYBRID_SHARD", 1)]) + "\n")
    bare, hybrid, full, one = validate_rows(read_runs_csv(f), str(f))
    assert bare.skipped and "dp_replicate column" in bare.skipped
    assert hybrid.skipped is None and full.skipped is None and hybrid.predicted_s != full.predicted_s
    # one replica (a node's worth of ranks sharding, as FSDP does on one node) is FULL_SHARD's step
    assert one.skipped is None and one.predicted_s == pytest.approx(full.predicted_s, rel=1e-12)
