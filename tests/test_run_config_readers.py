"""The run-configuration readers on settings real NeMo, Megatron-Bridge, torchtitan and llm-foundry
files carry (a new user's trial with published configs): each is read, or refused by name, never
silently dropped."""
import re

import pytest

from costmodel.errors import InputError
from costmodel.run_config import read_run_config

NEMO = """trainer:
  num_nodes: 2
  devices: 8
  precision: bf16
model:
  micro_batch_size: 1
  global_batch_size: 256
  encoder_seq_length: 4096
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  expert_model_parallel_size: 8
  num_moe_experts: 8
  moe_router_topk: 2
  moe_token_dispatcher_type: alltoall
  moe_expert_capacity_factor: 1.0
  moe_pad_expert_input_to_capacity: true
  moe_grouped_gemm: true
{extra}"""

BRIDGE = """model:
  tensor_model_parallel_size: 2
  seq_length: 4096
train:
  global_batch_size: 64
  micro_batch_size: 1
{extra}"""

TORCHTITAN = """[training]
local_batch_size = 1
seq_len = 8192
{training}
[parallelism]
data_parallel_shard_degree = {shard}
tensor_parallel_degree = {tp}
{parallelism}
[activation_checkpoint]
mode = "selective"
selective_ac_option = {sac}
"""


def _read(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return read_run_config(f)


def test_a_nemo_yaml_gives_its_moe_settings(tmp_path):
    """NeMo-Framework-Launcher's Mixtral file: the all-to-all dispatcher with capacity 1.0, padded, and
    grouped GEMMs (the Megatron-core keys Megatron-Bridge files carry too)."""
    cfg = _read(tmp_path, "mixtral.yaml", NEMO.format(extra=""))
    assert cfg.recipe["moe_dispatcher"] == "alltoall" and cfg.recipe["moe_capacity_factor"] == 1.0
    assert cfg.recipe["moe_pad_to_capacity"] is True and cfg.recipe["moe_grouped_gemm"] is True
    assert cfg.layout["ep"] == 8 and cfg.where["moe_dispatcher"].endswith("model.moe_token_dispatcher_type")


def test_nemo_switches_of_the_wrong_type_and_cuda_graphs(tmp_path):
    with pytest.raises(InputError, match="expected true or false") as e:
        _read(tmp_path, "a.yaml", NEMO.format(extra="  fp8: 'True'\n"))
    assert e.value.field == "model.fp8"
    cfg = _read(tmp_path, "b.yaml", NEMO.format(extra="  enable_cuda_graph: true\n"))
    assert any("CUDA graphs are not priced" in n for n in cfg.notes)


def test_a_composed_hydra_file_and_an_llm_foundry_yaml_are_refused(tmp_path):
    with pytest.raises(InputError, match="'llama/llama3_70b': a Hydra defaults entry composes this file"):
        _read(tmp_path, "a.yaml", "defaults:\n  - llama/llama3_70b\n" + NEMO.format(extra=""))
    ok = _read(tmp_path, "b.yaml", "defaults:\n  - _self_\n  - optional tp_overlap@model.ub_tp_comm_overlap_cfg:\n"
               + NEMO.format(extra=""))
    assert ok.layout["ep"] == 8
    foundry = ("max_seq_len: 2048\nglobal_train_batch_size: 1024\ndevice_train_microbatch_size: 8\n"
               "model:\n  name: mpt_causal_lm\n  d_model: 4096\nfsdp_config:\n  sharding_strategy: FULL_SHARD\n")
    with pytest.raises(InputError, match="an llm-foundry YAML .*--zero 3"):
        _read(tmp_path, "mpt.yaml", foundry)


@pytest.mark.parametrize("extra, zero", [
    ("ddp:\n  grad_reduce_in_fp32: true\noptimizer:\n  use_distributed_optimizer: true\n", 1),
    ("ddp:\n  overlap_grad_reduce: true\n", None),
    ("optimizer:\n  use_distributed_optimizer: false\n", 0),
    ("ddp:\n  use_distributed_optimizer: true\n", 1)])
def test_a_bridge_ddp_block_sets_the_sharding_only_where_it_says_it(tmp_path, extra, zero):
    cfg = _read(tmp_path, "c.yaml", BRIDGE.format(extra=extra))
    assert cfg.layout.get("zero") == zero


@pytest.mark.parametrize("name, ok", [("bf16_mixed", "bf16"), ("bf16_with_fp8_current_scaling_mixed", "fp8"),
                                      ("bf16_with_mxfp8_mixed", "mxfp8"), ("bf16_mixd", None),
                                      ("bf16_with_fp8_current_scalng_mixed", None)])
def test_bridge_mixed_precision_names_are_spelt_exactly(tmp_path, name, ok):
    text = BRIDGE.format(extra=f"mixed_precision: {name}\n")
    if ok is None:
        with pytest.raises(InputError, match="is not a Megatron-Bridge mixed-precision recipe name"):
            _read(tmp_path, "m.yaml", text)
    else:
        assert _read(tmp_path, "m.yaml", text).recipe["precision"] == ok


def _tt(tmp_path, shard=-1, tp=2, sac='"op"', training="", parallelism=""):
    return _read(tmp_path, "t.toml", TORCHTITAN.format(shard=shard, tp=tp, sac=sac, training=training,
                                                       parallelism=parallelism))


def test_torchtitan_settings_that_change_the_step(tmp_path):
    assert _tt(tmp_path, parallelism="enable_async_tensor_parallel = true").recipe["tp_comm_overlap"] is True
    at1 = _tt(tmp_path, tp=1, parallelism="enable_async_tensor_parallel = true")
    assert "tp_comm_overlap" not in at1.recipe and any("nothing to overlap" in n for n in at1.notes)
    assert _tt(tmp_path).layout["recompute"] == "selective"
    assert _tt(tmp_path, sac='"1"').layout["recompute"] == "full"
    with pytest.raises(InputError, match="one block in every 2 is not priced on the torchtitan stack"):
        _tt(tmp_path, sac='"2"')
    with pytest.raises(InputError, match="'OP' is not 'op' or a whole number"):
        _tt(tmp_path, sac='"OP"')
    # no float8 converter: FSDP2's bfloat16 linears, so a --precision fp8 beside the file contradicts it
    bf16 = _tt(tmp_path)
    assert bf16.recipe["precision"] == "bf16" and bf16.where["precision"].endswith("model.converters (no float8 "
                                                                                   "converter)")
    assert _tt(tmp_path, training='\n[model]\nconverters = ["float8"]\n').recipe["precision"] == "fp8"
    assert _tt(tmp_path, shard=3).layout["dp"] == 3          # checked against the GPUs with the world
    assert "dp" not in _tt(tmp_path).layout                  # -1: the ranks left
    with pytest.raises(InputError, match="only bfloat16 parameters"):
        _tt(tmp_path, training='mixed_precision_param = "float32"')
    # the optimizer torchtitan builds by name: Adam or AdamW (another is named, not guessed)
    text = TORCHTITAN.format(shard=-1, tp=2, sac='"op"', training="", parallelism="")
    assert _read(tmp_path, "o.toml", text + '[optimizer]\nname = "AdamW"\n').recipe["optimizer"] == "adamw"
    with pytest.raises(InputError, match="optimizer.name: 'SGD': torchtitan builds Adam or AdamW"):
        _read(tmp_path, "o.toml", text + '[optimizer]\nname = "SGD"\n')


def test_a_nemo_run_trains_on_its_datasets_length(tmp_path):
    """NeMo 1 cuts samples of model.data.seq_length tokens (megatron_gpt_model.py passes cfg.data.seq_length
    to both dataset builders); encoder_seq_length only shapes the pipeline's sends: NVIDIA's launcher file
    with encoder_seq_length 8192 and data.seq_length 4096 trains on 4096 (it had been priced at 8192 and
    declared out of memory); with PP > 1 the two lengths must agree."""
    cfg = _read(tmp_path, "n.yaml", NEMO.format(extra="  data:\n    seq_length: 2048\n"))
    assert cfg.recipe["seq_len"] == 2048 and cfg.where["seq_len"].endswith("model.data.seq_length")
    assert any("model.encoder_seq_length 4096 differs from model.data.seq_length 2048" in n for n in cfg.notes)
    assert _read(tmp_path, "n.yaml", NEMO.format(extra="")).recipe["seq_len"] == 4096
    # NeMo's stock megatron_gpt_config.yaml points the dataset at the model's length: read, not refused
    stock = _read(tmp_path, "n.yaml", NEMO.format(extra="  data:\n    seq_length: ${model.encoder_seq_length}\n"))
    assert stock.recipe["seq_len"] == 4096 and "seq_len" not in stock.unset
    assert "seq_len" in _read(tmp_path, "n.yaml", NEMO.format(extra="  data:\n    seq_length: ${oc.env:SEQ}\n")).unset
    piped = NEMO.replace("pipeline_model_parallel_size: 1", "pipeline_model_parallel_size: 2")
    with pytest.raises(InputError, match="model.encoder_seq_length.*4096 differs from model.data.seq_length 2048"):
        _read(tmp_path, "n.yaml", piped.format(extra="  data:\n    seq_length: 2048\n"))


def test_bridge_mixed_precision_keeps_its_bf16_edge_layers_and_says_what_is_not_priced(tmp_path):
    """Megatron-Bridge's current-scaling recipe keeps the first and the last layer in BF16 (megatron/bridge/
    training/mixed_precision.py: first_last_layers_bf16, 1 and 1): read as --bf16-edge-layers 1; a mapping's
    first_last_layers_bf16 with 3 and 3 layers as 3, with 2 and 4 as 4 (noted); its fp8 parameters read as
    --fp8-param-gather (the fp8 recipe functions set fp8_param_gather=True; a mapping says it or takes
    MixedPrecisionConfig's False), torchtitan's float8 FSDP all-gather noted as priced at 16 bits."""
    cs = _read(tmp_path, "m.yaml", BRIDGE.format(extra="mixed_precision: bf16_with_fp8_current_scaling_mixed\n"))
    assert cs.recipe["bf16_edge_layers"] == 1 and cs.recipe["fp8_param_gather"] is True
    delayed = _read(tmp_path, "d.yaml", BRIDGE.format(extra="mixed_precision: bf16_with_fp8_mixed\n"))
    assert "bf16_edge_layers" not in delayed.recipe and delayed.recipe["fp8_param_gather"] is True
    mx = _read(tmp_path, "x.yaml", BRIDGE.format(extra="mixed_precision: bf16_with_mxfp8_mixed\n"))
    assert "fp8_param_gather" not in mx.recipe and not any("fp8_param_gather" in n for n in mx.notes)
    for start, end, want in ((3, 3, 3), (2, 4, 4)):
        m = _read(tmp_path, "m.yaml", BRIDGE.format(extra=(
            f"mixed_precision:\n  fp8: hybrid\n  fp8_recipe: tensorwise\n  first_last_layers_bf16: true\n"
            f"  num_layers_at_start_in_bf16: {start}\n  num_layers_at_end_in_bf16: {end}\n  fp8_param_gather: true\n")))
        assert m.recipe["bf16_edge_layers"] == want and m.recipe["fp8_param_gather"] is True
        assert any("priced as 4 of each" in n for n in m.notes) == (start != end)
    tt = _tt(tmp_path, training='\n[model]\nconverters = ["float8"]\n[float8]\nenable_fsdp_float8_all_gather = true\n')
    assert any("enable_fsdp_float8_all_gather" in n and "bf16" in n for n in tt.notes)


@pytest.mark.parametrize("extra, field, said", [
    ("trainer: [1, 2]\n", "trainer", "expected a mapping, got [1, 2]"),
    ("  optim: adam\n", "model.optim", "expected a mapping, got 'adam'"),
    ("  activations_checkpoint_granularity: full\n  activations_checkpoint_method: unifrom\n",
     "model.activations_checkpoint_method", "'unifrom' is not null, uniform or block"),
    ("  activations_checkpoint_granularity: full\n  activations_checkpoint_method: block\n",
     "model.activations_checkpoint_num_layers", "missing with full recompute")])
def test_a_nemo_value_or_section_of_the_wrong_kind_is_refused_by_name(tmp_path, extra, field, said):
    text = NEMO.format(extra="") + extra if extra.startswith("trainer") else NEMO.format(extra=extra)
    if extra.startswith("trainer"):
        text = text.replace("trainer:\n  num_nodes: 2\n  devices: 8\n  precision: bf16\n", "")
    with pytest.raises(InputError, match=re.escape(said)) as e:
        _read(tmp_path, "n.yaml", text)
    assert e.value.field == field


def test_nemo_and_bridge_cross_entropy_fusion_and_nemo_s_p2p_default(tmp_path):
    cfg = _read(tmp_path, "n.yaml", NEMO.format(extra="  cross_entropy_loss_fusion: true\n"
                                                      "  virtual_pipeline_model_parallel_size: 2\n"))
    # Megatron-core's native fusion, its default implementation; Transformer Engine's kernel where named
    assert cfg.recipe["cross_entropy"] == "megatron-fused" and cfg.where["cross_entropy"].endswith(
        "cross_entropy_loss_fusion")
    te = _read(tmp_path, "te.yaml", NEMO.format(extra="  cross_entropy_loss_fusion: true\n"
                                                     "  cross_entropy_fusion_impl: te\n"))
    assert te.recipe["cross_entropy"] == "fused"
    # NeMo 1 reads cfg.get('overlap_p2p_comm', False): the interleaved run's p2p stays exposed
    assert cfg.recipe["pp_overlap"] is False and "default" in cfg.where["pp_overlap"]
    bridge = BRIDGE.format(extra="").replace("model:\n", "model:\n  cross_entropy_loss_fusion: false\n")
    assert _read(tmp_path, "b.yaml", bridge).recipe["cross_entropy"] == "megatron"


def test_a_bridge_sharding_strategy_counts_under_megatron_fsdp_only(tmp_path):
    ddp = "ddp:\n  use_distributed_optimizer: true\n  data_parallel_sharding_strategy: optim_grads_params\n"
    cfg = _read(tmp_path, "a.yaml", BRIDGE.format(extra=ddp + "  use_megatron_fsdp: false\n"))
    assert cfg.layout["zero"] == 1 and any("applies under Megatron-FSDP only" in n for n in cfg.notes)
    assert _read(tmp_path, "b.yaml", BRIDGE.format(extra=ddp + "  use_megatron_fsdp: true\n")).layout["zero"] == 3
    with pytest.raises(InputError, match="expected a mapping, got \\[1\\]") as e:
        _read(tmp_path, "c.yaml", BRIDGE.format(extra="ddp: [1]\n"))
    assert e.value.field == "ddp"


def test_a_2024_torchtitan_file_gives_its_degrees_from_training_and_experimental(tmp_path):
    old = ('[training]\nbatch_size = 8\nseq_len = 8192\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n'
           '[experimental]\npipeline_parallel_degree = 2\ncontext_parallel_degree = 1\n'
           '[activation_checkpoint]\nmode = "full"\n')
    cfg = _read(tmp_path, "old.toml", old)
    assert cfg.layout["tp"] == 8 and cfg.layout["pp"] == 2 and cfg.where["tp"].endswith("training.tensor_parallel_degree")
    assert any("torchtitan's 2024 layout" in n for n in cfg.notes)
    with pytest.raises(InputError, match="'big' is not a valid value") as e:
        _read(tmp_path, "g.toml", TORCHTITAN.format(training='global_batch_size = "big"', shard=-1, tp=1, parallelism="",
                                                    sac='"op"'))
    assert e.value.field == "training.global_batch_size"
    sched = _read(tmp_path, "s.toml", TORCHTITAN.format(training="", shard=-1, tp=1, sac='"op"', parallelism=(
        'pipeline_parallel_degree = 4\npipeline_parallel_schedule = "Interleaved1F1B"')))
    # torchtitan's default: 2 virtual stages per rank (torchtitan/distributed/pipeline_parallel.py)
    assert sched.layout["vp"] == 2


def test_a_yaml_alias_bomb_is_refused_before_any_walk(tmp_path):
    rows = ["a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]"] + [f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join(
        [f"*{chr(97 + i)}"] * 9) + "]" for i in range(7)] + ["model:\n  tensor_model_parallel_size: 1"]
    with pytest.raises(InputError, match="aliases expand it to .* values, over 1,000,000"):
        _read(tmp_path, "bomb.yaml", "\n".join(rows) + "\n")


def test_a_torchtitan_file_of_another_model_family_or_its_debug_model_is_refused(tmp_path):
    from costmodel.run_config import check_model_dims
    from costmodel.specs import load_model
    base = TORCHTITAN.format(training="", shard=-1, tp=1, parallelism="", sac='"op"')
    for model_table, said in (('[model]\nname = "deepseek_v3"\n', "'deepseek_v3' is not the family"),
                              ('[model]\nname = "llama3"\nflavor = "debugmodel"\n', "torchtitan's debug model")):
        cfg = _read(tmp_path, "m.toml", model_table + base)
        with pytest.raises(InputError, match=said):
            check_model_dims(cfg, load_model("llama3-70b"))
    ok = _read(tmp_path, "ok.toml", '[model]\nname = "llama3"\nflavor = "8B"\n' + base)
    check_model_dims(ok, load_model("llama3.1-8b"))


def test_a_nemo2_run_configuration_is_named_as_such(tmp_path):
    nemo2 = ("_target_: nemo.collections.llm.api.pretrain\ntrainer:\n  devices: 8\n  num_nodes: 2\n  strategy:\n"
             "    tensor_model_parallel_size: 2\n    context_parallel_size: 2\nmodel:\n  config:\n    num_layers: 32\n")
    with pytest.raises(InputError, match="a NeMo 2 \\(NeMo-Run\\) configuration") as e:
        _read(tmp_path, "n2.yaml", nemo2)
    assert e.value.field == "trainer.strategy"


def test_a_null_parallel_size_is_said_not_read(tmp_path):
    cfg = _read(tmp_path, "n.yaml", NEMO.format(extra="").replace("  tensor_model_parallel_size: 1\n",
                                                                  "  tensor_model_parallel_size: null\n"))
    assert "tp" not in cfg.layout
    assert any("model.tensor_model_parallel_size is null: not read" in n for n in cfg.notes)


def test_a_cp_exchange_other_than_the_p2p_ring_is_refused_and_nemo_1_leaves_tp_overlap_off(tmp_path):
    """model.cp_comm_type a2a (Megatron's --cp-comm-type) had been read silently and priced as the p2p ring:
    with CP > 1 it is refused by name (p2p, null or CP 1 read); NeMo 1 reads ub_tp_comm_overlap with a False
    default (megatron_gpt_model.py), where the NeMo stack's recipes (NeMo 2) turn it on."""
    cp = "  context_parallel_size: 2\n"
    for kind in ("a2a", "allgather", "a2a+p2p"):
        with pytest.raises(InputError, match="is not priced: the model prices context parallelism as the p2p ring") as e:
            _read(tmp_path, "a.yaml", NEMO.format(extra=cp + f"  cp_comm_type: {kind}\n"))
        assert e.value.field == "model.cp_comm_type"
    assert _read(tmp_path, "b.yaml", NEMO.format(extra=cp + "  cp_comm_type: p2p\n")).layout["cp"] == 2
    assert _read(tmp_path, "c.yaml", NEMO.format(extra="  cp_comm_type: a2a\n")).layout.get("cp") is None
    with pytest.raises(InputError, match="model.cp_comm_type"):
        _read(tmp_path, "d.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n" + cp + "  cp_comm_type: a2a\n"))
    cfg = _read(tmp_path, "e.yaml", NEMO.format(extra=""))
    assert cfg.recipe["tp_comm_overlap"] is False and "NeMo 1's default" in cfg.where["tp_comm_overlap"]
    assert _read(tmp_path, "f.yaml", NEMO.format(extra="  ub_tp_comm_overlap: true\n")).recipe["tp_comm_overlap"]


def test_torchtitan_s_cp_rotate_method_is_said_to_be_priced_as_the_ring(tmp_path):
    """context_parallel_rotate_method had been noted as 'no term of the model depends on it': the note says
    what is priced (the ring's exchange) and how allgather differs."""
    cfg = _read(tmp_path, "t.toml", TORCHTITAN.format(shard=-1, tp=1, sac='"op"', training="",
                                                      parallelism='context_parallel_degree = 2\n'
                                                                  'context_parallel_rotate_method = "allgather"'))
    note = next(n for n in cfg.notes if "context_parallel_rotate_method" in n)
    assert "'allgather' is priced as the ring exchange" in note and "no term of the model" not in note


def test_a_bridge_model_s_own_fp8_trains_where_no_mixed_precision_section_is_set(tmp_path):
    """Bridge copies mixed_precision over the model's fields only when the file sets it
    (MixedPrecisionConfig.setup): without one, model.fp8 hybrid trains in fp8 with TransformerConfig's
    'delayed' scaling unless fp8_recipe says; it had been priced as bf16, silently.  A mixed_precision
    mapping without fp8_recipe takes MixedPrecisionConfig's 'tensorwise'; a model fp8 beside a
    mixed_precision section is said to be overwritten."""
    own = _read(tmp_path, "a.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n  fp8: hybrid\n  bf16: true\n"))
    assert own.recipe["precision"] == "fp8" and own.recipe["fp8_recipe"] == "delayed"
    assert "no mixed_precision section" in own.where["precision"]
    tw = _read(tmp_path, "b.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n  fp8: e4m3\n  fp8_recipe: "
                                                                   "tensorwise\n"))
    assert tw.recipe["fp8_recipe"] == "tensorwise"
    mp = _read(tmp_path, "c.yaml", BRIDGE.format(extra="mixed_precision:\n  bf16: true\n  fp8: hybrid\n"))
    assert mp.recipe["fp8_recipe"] == "tensorwise" and "default" in mp.where["fp8_recipe"]
    both = _read(tmp_path, "d.yaml", BRIDGE.format(extra="mixed_precision: bf16_mixed\n").replace(
        "model:\n", "model:\n  fp8: hybrid\n"))
    assert both.recipe["precision"] == "bf16" and any("model.fp8 'hybrid' is overwritten" in n for n in both.notes)


@pytest.mark.parametrize("keys, field", [
    ("  tensor_parallel_size: 4\n  pipeline_parallel_size: 4\n", "model.tensor_parallel_size"),
    ("  data_parallel_size: 8\n", "model.data_parallel_size"),
    ("  tp: 4\n", "model.tp")])
def test_a_parallel_size_under_a_name_megatron_core_lacks_is_refused(tmp_path, keys, field):
    """model.tensor_parallel_size (Bridge's dataclass override refuses a field it lacks) had left TP at 1:
    580 GiB, infeasible, with sp=True said read.  NeMo 1's model section is read by the same code."""
    with pytest.raises(InputError, match="not a Megatron-core parallelism field") as e:
        _read(tmp_path, "b.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n" + keys))
    assert e.value.field == field
    with pytest.raises(InputError, match="not a Megatron-core parallelism field"):
        _read(tmp_path, "n.yaml", NEMO.format(extra=keys))
    ok = _read(tmp_path, "h.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n  context_parallel_size: 2\n"
                                                                   "  hierarchical_context_parallel_sizes: [2, 1]\n"))
    assert ok.layout["cp"] == 2


def test_bridge_memory_switches_are_read_or_said(tmp_path):
    """optimizer.optimizer_cpu_offload, ddp.grad_reduce_in_fp32 false, dist.use_megatron_fsdp and
    dist.use_torch_fsdp2 change the memory: each had been dropped (an offloaded 70B run declared
    infeasible at 84 GiB).  Activation offloading is said not to be priced."""
    off = _read(tmp_path, "a.yaml", BRIDGE.format(extra="optimizer:\n  optimizer_cpu_offload: true\n"
                                                        "  use_distributed_optimizer: true\n"))
    assert off.recipe["optimizer_offload"] is True and off.layout["zero"] == 1
    grad = _read(tmp_path, "b.yaml", BRIDGE.format(extra="ddp:\n  grad_reduce_in_fp32: false\n"
                                                         "  use_distributed_optimizer: true\n"))
    assert grad.recipe["main_grads_dtype"] == "bf16" and grad.where["main_grads_dtype"].endswith("ddp.grad_reduce_in_fp32")
    mpg = _read(tmp_path, "c.yaml", BRIDGE.format(extra="mixed_precision:\n  bf16: true\n  grad_reduce_in_fp32: false\n"
                                                        "ddp:\n  grad_reduce_in_fp32: true\n  use_distributed_optimizer: true\n"))
    assert mpg.recipe["main_grads_dtype"] == "bf16"      # the mixed_precision section overwrites the ddp's
    # a file that sets no ZeRO stage runs the distributed optimizer (the note had said ZeRO 0 of a ZeRO-1 run)
    plain = _read(tmp_path, "d.yaml", BRIDGE.format(extra="ddp:\n  grad_reduce_in_fp32: false\n"))
    assert plain.recipe["main_grads_dtype"] == "bf16"
    ddp0 = _read(tmp_path, "d.yaml", BRIDGE.format(extra="ddp:\n  grad_reduce_in_fp32: false\n"
                                                         "  use_distributed_optimizer: false\n"))
    assert "main_grads_dtype" not in ddp0.recipe and any("(ZeRO 0) is priced reducing fp32" in n for n in ddp0.notes)
    # NVIDIA's own override example keeps ddp.grad_reduce_in_fp32 beside a mixed_precision section, which
    # overwrites it (MixedPrecisionConfig.setup): read, said, not refused as a key in the wrong section
    both = _read(tmp_path, "h.yaml", BRIDGE.format(extra="ddp:\n  grad_reduce_in_fp32: false\n"
                                                         "mixed_precision:\n  fp8: null\n"))
    assert "main_grads_dtype" not in both.recipe
    assert any("ddp.grad_reduce_in_fp32 False is overwritten by the mixed_precision section's grad_reduce_in_fp32 "
               "(True, its default)" in n for n in both.notes)
    for key in ("use_megatron_fsdp", "use_torch_fsdp2"):
        f = _read(tmp_path, "e.yaml", BRIDGE.format(extra=f"dist:\n  {key}: true\n"))
        assert f.layout["zero"] == 3 and f.where["zero"].endswith(f"dist.{key}")
    with pytest.raises(InputError, match="mutually exclusive"):
        _read(tmp_path, "f.yaml", BRIDGE.format(extra="dist:\n  use_megatron_fsdp: true\n  use_torch_fsdp2: true\n"))
    act = _read(tmp_path, "g.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n  cpu_offloading: true\n"))
    assert any("model.cpu_offloading: activation offloading to the host is not priced" in n for n in act.notes)


def test_nemo_2_and_bridge_fuse_the_loss_by_default_and_nemo_1_does_not(tmp_path):
    """NeMo 2's GPTConfig and Megatron-Bridge's GPTModelProvider default cross_entropy_loss_fusion True (NeMo
    PR 10209, 2024-09): the nemo stack's default; a NeMo 1 YAML that leaves the key out trains with
    Megatron-core's default False.  The overrides printed for NeMo had switched the recipe's fusion off."""
    from pathlib import Path
    from costmodel.launch import nemo_overrides
    from costmodel.specs import load_model
    from costmodel.stacks import STACKS, stack_recipe
    r = stack_recipe(STACKS["nemo"], 128, 8192, "bf16")
    assert r.cross_entropy == "megatron-fused"         # Megatron-core's native implementation by default
    launcher = read_run_config(Path(__file__).parent / "data" / "configs" / "nemo_launcher_llama3_8b.yaml")
    assert launcher.recipe["cross_entropy"] == "megatron-fused"          # the launcher's Llama 3 config sets it
    cfg = _read(tmp_path, "n.yaml", NEMO.format(extra=""))
    assert cfg.recipe["cross_entropy"] == "megatron" and "NeMo 1's default" in cfg.where["cross_entropy"]
    out = nemo_overrides(dict(tp=2, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, sp=True, zero=1, recompute="none",
                              recompute_num_layers=0, overlap=True, etp=1), load_model("llama3-8b"), r)
    assert "recipe.model.config.cross_entropy_loss_fusion = True" in out


def test_a_deepspeed_json_and_an_llm_foundry_hybrid_shard_are_named_for_what_they_are(tmp_path):
    """A DeepSpeed JSON had been refused as 'no model: section'; an llm-foundry YAML with HYBRID_SHARD had been
    told to use --zero 3 (FULL_SHARD over every GPU, not within a node): it is told --zero 3 with the
    replicas (FSDP's shard group is one node by default)."""
    ds = tmp_path / "ds_config.json"
    ds.write_text('{"bf16": {"enabled": true}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 2}')
    with pytest.raises(InputError, match="a DeepSpeed configuration .*--stack deepspeed"):
        read_run_config(ds)
    fy = tmp_path / "foundry.yaml"
    fy.write_text("global_train_batch_size: 256\ndevice_train_microbatch_size: 4\nmax_seq_len: 2048\n"
                  "fsdp_config:\n  sharding_strategy: HYBRID_SHARD\n")
    with pytest.raises(InputError, match=r"--zero 3 --dp-replicate <its nodes: FSDP shards within a node> "
                                          r"\(its HYBRID_SHARD\)"):
        read_run_config(fy)
    with pytest.raises(InputError, match="its FULLSHARD is not priced"):
        read_run_config(fy.write_text(fy.read_text().replace("HYBRID_SHARD", "FULLSHARD")) and fy)
    fy.write_text(fy.read_text().replace("FULLSHARD", "HYBRID_SHARD"))
    with pytest.raises(InputError, match=r"--zero 2 \(its SHARD_GRAD_OP\)"):
        read_run_config(fy.write_text(fy.read_text().replace("HYBRID_SHARD", "SHARD_GRAD_OP")) and fy)


def test_bridge_s_comm_overlap_setup_writes_the_ep_and_dp_overlap_over_the_model_s_and_ddp_s(tmp_path):
    """With a comm_overlap section Bridge's CommOverlapConfig.setup starts the MoE EP overlap off and the DP
    overlap on (distributed optimizer), then takes the section's values: the EP overlap printed under model had
    never run, and comm_overlap's own key had been refused as in the wrong section."""
    moe = ("model:\n  tensor_model_parallel_size: 1\n  expert_model_parallel_size: 8\n  num_moe_experts: 128\n"
           "  overlap_moe_expert_parallel_comm: true\ntrain:\n  micro_batch_size: 1\n  global_batch_size: 64\n"
           "ddp:\n  use_distributed_optimizer: true\n  overlap_grad_reduce: false\n")
    off = _read(tmp_path, "a.yaml", moe + "comm_overlap:\n  tp_comm_overlap: false\n")
    assert off.recipe["moe_ep_overlap"] is False and off.recipe["dp_overlap"] is True
    assert any("written over by the comm_overlap section" in n for n in off.notes)
    on = _read(tmp_path, "b.yaml", moe.replace("  overlap_moe_expert_parallel_comm: true\n", "") +
               "comm_overlap:\n  tp_comm_overlap: false\n  overlap_moe_expert_parallel_comm: true\n"
               "  delay_wgrad_compute: true\n  overlap_grad_reduce: false\n")
    assert on.recipe["moe_ep_overlap"] is True and on.recipe["dp_overlap"] is False
    plain = _read(tmp_path, "c.yaml", moe)          # no comm_overlap: the model's and the ddp's train
    assert plain.recipe["moe_ep_overlap"] is True and plain.recipe["dp_overlap"] is False


@pytest.mark.parametrize("extra, field, said", [
    ("mixed_precision:\n  bf16: true\n  fp8: hybrid\n  fp4: e2m1\n", "mixed_precision.fp4", "fp4 and fp8 cannot"),
    ("mixed_precision:\n  bf16: true\n  fp16: true\n", "mixed_precision.fp16", "one precision mode"),
    ("dataset:\n  _target_: megatron.bridge.training.config.GPTDatasetConfig\n  sequence_length: 2048\n",
     "model.seq_length", "asserts they match"),
])
def test_bridge_combinations_bridge_itself_refuses_are_refused(tmp_path, extra, field, said):
    with pytest.raises(InputError, match=said) as e:
        _read(tmp_path, "b.yaml", BRIDGE.format(extra=extra))
    assert e.value.field == field


def test_full_recompute_without_its_method_is_refused_as_megatron_core_does(tmp_path):
    with pytest.raises(InputError, match="recompute_method must be") as e:
        _read(tmp_path, "b.yaml", BRIDGE.format(extra="").replace("model:\n", "model:\n  recompute_granularity: full\n"))
    assert e.value.field == "model.recompute_method"


def test_megatron_fsdp_runs_with_the_distributed_optimizer_and_fsdp2_replaces_it(tmp_path):
    """Bridge turns the distributed optimizer on for Megatron-FSDP (ConfigContainer's FSDP setup): a file with
    both is ZeRO-3, not refused; FSDP2 beside the distributed optimizer is."""
    both = _read(tmp_path, "a.yaml", BRIDGE.format(extra="ddp:\n  use_distributed_optimizer: true\n"
                                                         "dist:\n  use_megatron_fsdp: true\n"))
    assert both.layout["zero"] == 3
    with pytest.raises(InputError, match="which FSDP2 replaces"):
        _read(tmp_path, "b.yaml", BRIDGE.format(extra="ddp:\n  use_distributed_optimizer: true\n"
                                                      "dist:\n  use_torch_fsdp2: true\n"))


def test_a_bridge_dump_cut_before_its_model_section_is_said_to_be_cut(tmp_path):
    with pytest.raises(InputError, match="a Megatron-Bridge ConfigContainer without its model section"):
        _read(tmp_path, "c.yaml", "_target_: megatron.bridge.training.config.ConfigContainer\ncheckpoint:\n  save: null\n")


def test_torchtitan_defaults_and_schedules_the_model_does_not_price_are_refused(tmp_path):
    """torchtitan's ActivationCheckpoint default (selective, every 2nd block) and the GPipe and
    zero-bubble schedules are refused naming the key; HSDP (replicate and shard degrees above 1) is read
    as the layout's dp_replicate, its DP their product."""
    no_ac = TORCHTITAN.split("[activation_checkpoint]")[0].format(training="", shard=-1, tp=1, parallelism="")
    with pytest.raises(InputError, match="torchtitan's default .selective, every 2nd block.") as e:
        _read(tmp_path, "a.toml", no_ac)
    assert e.value.field == "activation_checkpoint"
    for sched, said in (("GPipe", "holds every micro-batch's activations"), ("ZBVZeroBubble", "bubble and memory")):
        with pytest.raises(InputError, match=said) as e:
            _tt(tmp_path, tp=1, parallelism=f'pipeline_parallel_degree = 4\npipeline_parallel_schedule = "{sched}"')
        assert e.value.field == "parallelism.pipeline_parallel_schedule"
    hsdp = _tt(tmp_path, shard=8, parallelism="data_parallel_replicate_degree = 2")
    assert (hsdp.layout["dp"], hsdp.layout["dp_replicate"], hsdp.layout["zero"]) == (16, 2, 3)
    assert hsdp.where["dp_replicate"].endswith("parallelism.data_parallel_replicate_degree")
    with pytest.raises(InputError, match="expected a degree >= 1, got -1"):
        _tt(tmp_path, parallelism="data_parallel_replicate_degree = -1")
    with pytest.raises(InputError, match="'yes' is not true or false") as e:
        _read(tmp_path, "c.toml", TORCHTITAN.format(training="", shard=-1, tp=1, sac='"op"', parallelism="")
              + '[compile]\nenable = "yes"\n')
    assert e.value.field == "compile.enable"
    # the local batch's name before pytorch/torchtitan#1238: read, and refused beside its new name
    with pytest.raises(InputError, match="both given"):
        _tt(tmp_path, tp=1, training="batch_size = 4")
    old = _read(tmp_path, "b.toml", TORCHTITAN.replace("local_batch_size = 1", "batch_size = 4").format(
        training="", shard=-1, tp=1, sac='"op"', parallelism=""))
    assert old.recipe["local_batch_size"] == 4


def test_megatron_recompute_keys_megatron_core_refuses_or_reads_otherwise(tmp_path):
    """TransformerConfig.__post_init__ refuses full recompute without recompute_num_layers and selective
    with it; the block method's 0 checkpoints no layer (transformer_block.py _checkpointed_forward)."""
    def nemo(gran, method, n):
        return NEMO.format(extra=f"  activations_checkpoint_granularity: {gran}\n  activations_checkpoint_method: "
                                 f"{method}\n  activations_checkpoint_num_layers: {n}\n")
    assert _read(tmp_path, "b0.yaml", nemo("full", "block", 0)).layout["recompute"] == "none"
    assert _read(tmp_path, "b2.yaml", nemo("full", "block", 2)).layout["recompute_num_layers"] == 2
    with pytest.raises(InputError, match="missing with full recompute") as e:
        _read(tmp_path, "u.yaml", nemo("full", "uniform", "null"))
    assert e.value.field == "model.activations_checkpoint_num_layers"
    with pytest.raises(InputError, match="with selective recompute: Megatron-core raises"):
        _read(tmp_path, "s.yaml", nemo("selective", "null", 2))


def test_a_table_or_parallelism_key_torchtitan_lacks_is_refused_as_torchtitan_refuses_it(tmp_path):
    """torchtitan's ConfigManager refuses a field its JobConfig lacks; a misspelt table ([experimentl]) had
    been ignored with its keys, an unknown [parallelism] key only noted."""
    base = TORCHTITAN.format(training="", shard=-1, tp=1, sac='"op"', parallelism="")
    with pytest.raises(InputError, match=r"is not a torchtitan section .*did you mean \[experimental\]") as e:
        _read(tmp_path, "s.toml", base + "[experimentl]\ncontext_parallel_degree = 2\n")
    assert e.value.field == "experimentl"
    with pytest.raises(InputError, match="is not a torchtitan parallelism key") as e:
        _tt(tmp_path, tp=1, parallelism="enable_sequence_parallel = false")
    assert e.value.field == "parallelism.enable_sequence_parallel"
    with pytest.raises(InputError, match="did you mean parallelism.fsdp_reshard_after_forward"):
        _tt(tmp_path, tp=1, parallelism='fsdp_reshard_after_forwrd = "always"')
    # a key of one of torchtitan's releases, not read by the model, is noted
    cfg = _tt(tmp_path, tp=1, parallelism='context_parallel_load_balancer = "headtail"')
    assert any("context_parallel_load_balancer not read" in n for n in cfg.notes)


def test_nemo_1_gathers_fp8_parameters_only_with_fp8_params(tmp_path):
    """A NeMo 1 file's model.fp8_params had gone unread: an fp8 run was priced with the nemo stack's fp8
    parameter gather (NeMo 2's default), 34.7 GiB where it keeps 16-bit parameters and needs 38.0 GiB."""
    off = _read(tmp_path, "fp8.yaml", NEMO.format(extra="  fp8: true\n"))
    assert off.recipe["precision"] == "fp8" and off.recipe["fp8_param_gather"] is False
    assert "NeMo 1's default when model.fp8_params is absent" in off.where["fp8_param_gather"]
    on = _read(tmp_path, "fp8p.yaml", NEMO.format(extra="  fp8: true\n  fp8_params: true\n"))
    assert on.recipe["fp8_param_gather"] is True and on.where["fp8_param_gather"].endswith("model.fp8_params")
    assert "fp8_param_gather" not in _read(tmp_path, "bf16.yaml", NEMO.format(extra="")).recipe
    with pytest.raises(InputError, match="model.fp8_params"):
        _read(tmp_path, "bad.yaml", NEMO.format(extra="  fp8: true\n  fp8_params: maybe\n"))


@pytest.mark.parametrize("line, key, needle", [
    ('dtype = "bfloat16"', "training.dtype", "full-bf16 training"),
    ("enable_cpu_offload = true", "training.enable_cpu_offload", "CPU offload of parameters"),
    ('mixed_precision_reduce = "bfloat16"', "training.mixed_precision_reduce", "float32 only"),
])
def test_torchtitan_training_settings_the_model_does_not_price_are_refused(tmp_path, line, key, needle):
    """torchtitan's [training] dtype bfloat16 (no fp32 copy of anything) and enable_cpu_offload (FSDP's
    parameters, gradients and states on the host) had been priced as the default mixed precision in silence;
    mixed_precision_reduce is float32 only in torchtitan (configs.py Literal["float32"])."""
    with pytest.raises(InputError, match=needle) as e:
        _tt(tmp_path, training=line)
    assert e.value.field == key
    assert _tt(tmp_path, training='dtype = "float32"\nenable_cpu_offload = false').layout["tp"] == 2


def test_a_nemo_file_that_accumulates_through_lightning_is_refused(tmp_path):
    """NeMo 1 raises 'trainer.accumulate_grad_batches must equal 1' (megatron_gpt_model.py): the file had been
    priced as if it ran."""
    with pytest.raises(InputError, match="must equal 1") as e:
        _read(tmp_path, "n.yaml", NEMO.replace("  devices: 8\n", "  devices: 8\n  accumulate_grad_batches: 4\n")
              .format(extra=""))
    assert e.value.field == "trainer.accumulate_grad_batches"
    ok = NEMO.replace("  devices: 8\n", "  devices: 8\n  accumulate_grad_batches: 1\n").format(extra="")
    assert _read(tmp_path, "n.yaml", ok).recipe["gbs"] == 256


def test_a_torchtitan_checkpointing_mode_is_told_apart_from_a_wrong_one(tmp_path):
    """torchtitan's memory_budget mode is real (its activation_checkpoint.py): refused as not priced, not as
    a mode that does not exist."""
    text = TORCHTITAN.format(shard=-1, tp=2, sac='"op"', training="", parallelism="")
    with pytest.raises(InputError, match="'memory_budget': torchtitan's memory-budget recomputation is not priced"):
        _read(tmp_path, "m.toml", text.replace('mode = "selective"', 'mode = "memory_budget"'))
    with pytest.raises(InputError, match="'partial': not a torchtitan mode"):
        _read(tmp_path, "m.toml", text.replace('mode = "selective"', 'mode = "partial"'))


def test_bridge_keys_megatron_bridge_would_skip_are_said(tmp_path):
    """A NeMo 1 recompute key or a mixed_precision key that is no MixedPrecisionConfig field is skipped by
    Megatron-Bridge's override merge; the reader had ignored them without a word (recompute priced as
    none where the user meant full)."""
    cfg = _read(tmp_path, "b.yaml", BRIDGE.format(extra="mixed_precision:\n  dtype: bf16\n  bf16: true\n")
                .replace("model:\n", "model:\n  activations_checkpoint_granularity: full\n"))
    assert any("model.activations_checkpoint_granularity is NeMo 1's key" in n and "recompute_granularity" in n
               for n in cfg.notes)
    assert any("mixed_precision.dtype: not a MixedPrecisionConfig field" in n for n in cfg.notes)
    assert not any("mixed_precision.bf16" in n for n in cfg.notes)


def test_a_megatron_launch_script_is_refused_naming_the_flags_for_its_arguments(tmp_path):
    """Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh given as --config had been refused as a
    YAML without a model: section; a launch script is not read, but its argument names say the flags."""
    text = ("#!/bin/bash\nGPT_ARGS=(--num-layers 96 --seq-length 2048)\n"
            "PAR=(--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16)\n"
            "TRAIN=(--micro-batch-size 1 --global-batch-size 1536 --bf16)\n"
            "torchrun $DIST pretrain_gpt.py ${GPT_ARGS[@]} ${PAR[@]} ${TRAIN[@]}\n")
    with pytest.raises(InputError, match=r"a shell launch script, which --config does not read .*"
                       r"\(--tp 8 --pp 16 --mbs 1 --gbs 1536 --seq-len 2048\)"):
        _read(tmp_path, "train.sh", text)
    with pytest.raises(InputError, match="a shell launch script"):     # whatever its name
        _read(tmp_path, "train.yaml", text.replace("#!/bin/bash\n", ""))
    # a NeMo YAML that mentions the trainer script in a comment is still read as YAML
    assert _read(tmp_path, "n.yaml", "# run with pretrain_gpt.py via torchrun\n" + NEMO.format(extra="")).layout["ep"] == 8


def test_a_bridge_file_without_its_train_section_says_so(tmp_path):
    """A Megatron-Bridge ConfigContainer whose train: section was left out had been read as NeMo 1 YAML and
    refused for keys that are Bridge's own (comm_overlap's, mixed_precision's); it is named as Bridge's,
    missing train:."""
    sections = ("model:\n  tensor_model_parallel_size: 2\nddp:\n  use_distributed_optimizer: true\n"
                "comm_overlap:\n  tp_comm_overlap: false\nmixed_precision:\n  fp8: null\n")
    with pytest.raises(InputError, match=r"train: missing: a Megatron-Bridge ConfigContainer \(its ddp, comm_overlap, "
                                         r"mixed_precision section\(s\)\)"):
        _read(tmp_path, "b.yaml", sections)


def test_real_configs_that_had_been_refused_or_misread(tmp_path):
    """torchtitan's [quantize.grouped_mm.float8] (the experts' float8 fqns) had been refused as a
    misplaced [float8]; Llama 4's flavor '17bx16e' read as 17B in all (it is Scout's 17B active); a
    Bridge override's dist.use_megatron_fsdp (Bridge sets ddp.use_megatron_fsdp from it) priced as DDP."""
    from costmodel.run_config import check_model_dims
    from costmodel.specs import load_model
    rest = '[activation_checkpoint]\nmode = "full"\n[training]\nlocal_batch_size = 1\n'
    tt = _read(tmp_path, "dsv3.toml", '[model]\nname = "deepseek_v3"\nflavor = "16B"\n'
               '[quantize.grouped_mm.float8]\nfqns = ["experts"]\n' + rest)
    assert any("quantize.grouped_mm.float8 without its converter" in n for n in tt.notes)
    l4 = _read(tmp_path, "l4.toml", '[model]\nname = "llama4"\nflavor = "17bx16e"\n' + rest)
    check_model_dims(l4, load_model("llama4-scout"))          # Scout: 17B active
    with pytest.raises(InputError, match="'17bx16e' is not llama3-70b"):
        check_model_dims(l4, load_model("llama3-70b"))
    b = _read(tmp_path, "b.yaml", "model:\n  tensor_model_parallel_size: 1\ntrain:\n  micro_batch_size: 1\n"
              "dist:\n  use_megatron_fsdp: true\nddp:\n  data_parallel_sharding_strategy: optim_grads_params\n"
              "  use_distributed_optimizer: true\n")
    assert b.layout["zero"] == 3


def test_nemo_1_s_elementwise_fusions_are_read_with_its_own_defaults(tmp_path):
    """A NeMo 1 YAML setting apply_rope_fusion and bias_activation_fusion False had been priced fused (the
    nemo stack's default, NeMo 2's) and said to be unset; NeMo 1 leaves RoPE unfused unless told
    (megatron_base_model.py: cfg.get('apply_rope_fusion', False))."""
    base = ("trainer:\n  num_nodes: 1\n  devices: 8\nmodel:\n  micro_batch_size: 1\n  global_batch_size: 8\n"
            "  tensor_model_parallel_size: 1\n")
    off = _read(tmp_path, "off.yaml", base + "  bias_activation_fusion: false\n  apply_rope_fusion: false\n")
    assert off.recipe["fused_elementwise"] is False
    default = _read(tmp_path, "default.yaml", base)
    assert default.recipe["fused_elementwise"] is False
    assert any("bias_activation_fusion fused, apply_rope_fusion not" in n for n in default.notes)
    on = _read(tmp_path, "on.yaml", base + "  bias_activation_fusion: true\n  apply_rope_fusion: true\n")
    assert on.recipe["fused_elementwise"] is True and on.where["fused_elementwise"].endswith(
        "model.bias_activation_fusion and model.apply_rope_fusion")
    with pytest.raises(InputError, match="model.apply_rope_fusion: 'yes' is not a valid value"):
        _read(tmp_path, "bad.yaml", base + "  apply_rope_fusion: 'yes'\n")


def test_nemo_1_s_torch_fsdp_shards_and_is_refused_where_nemo_refuses_it(tmp_path):
    """model.fsdp had been ignored (priced as DDP or the distributed optimizer), with fp8 or the
    distributed optimizer beside it, both of which NeMo refuses; cpu_offloading had gone without a word."""
    base = ("trainer:\n  num_nodes: 1\n  devices: 8\nmodel:\n  micro_batch_size: 1\n  global_batch_size: 8\n"
            "  tensor_model_parallel_size: 1\n  fsdp: true\n")
    assert _read(tmp_path, "a.yaml", base).layout["zero"] == 3
    assert _read(tmp_path, "b.yaml", base + "  fsdp_sharding_strategy: grad\n").layout["zero"] == 2
    with pytest.raises(InputError, match="model.fsdp: and the distributed optimizer"):
        _read(tmp_path, "c.yaml", base + "  optim:\n    name: distributed_fused_adam\n")
    with pytest.raises(InputError, match="model.fsdp: with model.fp8: NeMo refuses it"):
        _read(tmp_path, "d.yaml", base + "  fp8: true\n")
    with pytest.raises(InputError, match="model.fsdp_sharding_strategy: 'hybrid'"):
        _read(tmp_path, "e.yaml", base + "  fsdp_sharding_strategy: hybrid\n")
    off = _read(tmp_path, "f.yaml", base + "  cpu_offloading: true\n")
    assert any("model.cpu_offloading: activations offloaded to the host are not priced" in n for n in off.notes)
