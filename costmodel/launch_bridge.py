"""A layout as Megatron-Bridge ``ConfigContainer`` overrides: the YAML sections (``model``, ``train``,
``dataset``, ``optimizer``, ``ddp``, ``comm_overlap``, ``mixed_precision``) with the field names of
Megatron-Bridge's dataclasses (megatron/bridge/training/config.py, comm_overlap.py, mixed_precision.py
and Megatron-core's TransformerConfig / OptimizerConfig / DistributedDataParallelConfig, at Megatron-Bridge
067f987), the form a recipe's YAML override file or its dumped configuration takes.  What
:func:`costmodel.run_config.read_run_config` reads back from it is the layout and recipe it came from.
"""
from __future__ import annotations

import yaml

from .launch import _CE_NOTE, kv_repeat_note, megatron_attention_backend, optimizer_config, packed_note, \
    pipeline_split_settings
from .comm import fp8_params_on
from .megatron_structure import ATTN_BACKENDS
from .moe import flex_backend
from .schedule import pp_sends_overlapped
from .specs import MEGATRON_CROSS_ENTROPIES, ModelSpec, Recipe
from .recipe_switches import MOE_FLAG_SWITCHES
from .stacks import dp_overlap_on


def _model_section(t: dict, model: ModelSpec, recipe: Recipe, layers, gpu=None) -> dict:
    """The ``model`` section: parallel sizes, the pipeline split, MoE, recomputation and fusions."""
    m = dict(tensor_model_parallel_size=t["tp"], pipeline_model_parallel_size=t["pp"],
             virtual_pipeline_model_parallel_size=t["vp"] if t["vp"] > 1 else None,
             context_parallel_size=t["cp"], sequence_parallel=bool(t["sp"]), seq_length=recipe.seq_len)
    split, how = pipeline_split_settings(t, model, recipe, layers)
    if split == "accounted":          # both default False (TransformerConfig): Megatron-core asserts the split
        m.update(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)
    elif split == "first_last":
        m.update(num_layers_in_first_pipeline_stage=how[0], num_layers_in_last_pipeline_stage=how[1])
    elif split == "layout":
        m["pipeline_model_parallel_layout"] = how
    if model.is_moe:
        m.update(expert_model_parallel_size=t["ep"], expert_tensor_parallel_size=t.get("etp") or t["tp"],
                 moe_token_dispatcher_type=recipe.moe_dispatcher,
                 moe_expert_capacity_factor=recipe.moe_capacity_factor if recipe.moe_capacity_factor > 0 else None)
        if recipe.moe_dispatcher == "flex":
            m["moe_flex_dispatcher_backend"] = flex_backend(gpu)
        # the EP overlap is the comm_overlap section's (its setup writes it over the model's): not here
        m.update({s.megatron_key: bool(getattr(recipe, s.name)) for s in MOE_FLAG_SWITCHES
                  if s.name != "moe_ep_overlap"})
        if recipe.moe_ep_overlap:
            # Megatron-core: 'disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm'
            # (TransformerConfig); the DeepSeek, GLM and Llama 4 bridges turn it on
            m["moe_shared_expert_overlap"] = False
    if model.mtp_layers:
        m["mtp_num_layers"] = model.mtp_layers
    rc = t["recompute"]
    if rc == "full":
        m.update(recompute_granularity="full", recompute_method="block" if t.get("recompute_num_layers") else "uniform",
                 recompute_num_layers=t.get("recompute_num_layers") or 1)
    else:
        m["recompute_granularity"] = rc if rc == "selective" else None
        if rc == "selective" and recipe.recomputed != ("core_attn",):
            m["recompute_modules"] = list(recipe.recomputed)
    # an AttnBackend enum, as Bridge's YAML writes one (megatron/training/config/yaml_utils.py
    # _enum_representer): a plain string stays a string, which Megatron-core's backend choice never matches
    backend = megatron_attention_backend(recipe)
    m["attention_backend"] = {"_target_": "megatron.core.transformer.enums.AttnBackend", "_call_": True,
                              "_args_": [ATTN_BACKENDS[backend]], "_name_": backend}
    fusion, impl = MEGATRON_CROSS_ENTROPIES.get(recipe.cross_entropy, (False, None))
    m["cross_entropy_loss_fusion"] = fusion
    if fusion:          # set either way: a recipe may name the other (Bridge's DeepSeek-V3 recipes: 'te')
        m["cross_entropy_fusion_impl"] = impl
    if not recipe.fused_elementwise:
        m["bias_activation_fusion"] = False
        if not model.learned_positions:
            m["apply_rope_fusion"] = False
    return m


def _mixed_precision(recipe: Recipe, zero: int, dp_cp: int) -> dict:
    """``mixed_precision`` as a MixedPrecisionConfig mapping: its recipe functions turn on fp8 parameter
    gathers (fp8_param_gather), which the prediction prices where costmodel.comm.fp8_params_on says
    (ZeRO ``zero``, DP x CP ``dp_cp``), 16-bit ones elsewhere: every field is set, the parameter and
    pipeline dtypes as Megatron-Bridge's bf16_mixed / fp16_mixed (training/mixed_precision.py) set them."""
    p = recipe.precision
    # the section is instantiated anew (omegaconf_utils._apply_overrides: a mapping with _target_), and its
    # setup copies every field over the model's (update_config_with_precision_overrides): each is set,
    # the dtypes as bf16_mixed / fp16_mixed set them, written as Bridge's YAML writes a torch dtype
    dtype = {"_target_": "torch.float16" if p == "fp16" else "torch.bfloat16", "_call_": False}
    mp = {"_target_": "megatron.bridge.training.mixed_precision.MixedPrecisionConfig",
          "bf16": p != "fp16", "fp16": p == "fp16", "params_dtype": dtype, "pipeline_dtype": dict(dtype),
          "autocast_enabled": False, "grad_reduce_in_fp32": recipe.main_grads_dtype != "bf16",
          "fp8": None, "fp8_param_gather": False, "fp4": None, "fp4_param_gather": False}
    if p in ("fp8", "mxfp8"):
        mp.update(fp8="hybrid" if p == "fp8" else "e4m3", fp8_recipe=recipe.fp8_recipe if p == "fp8" else "mxfp8")
        if p == "fp8" and recipe.fp8_recipe == "delayed":
            # bf16_with_fp8_delayed_scaling_mixed's amax history (the class defaults are 1 and most_recent)
            mp.update(fp8_margin=0, fp8_amax_history_len=1024, fp8_amax_compute_algo="max")
        mp["fp8_param_gather"] = bool(fp8_params_on(recipe, zero, dp_cp))
    if p == "nvfp4":
        mp.update(fp4="e2m1", fp4_recipe="nvfp4")
    n = int(recipe.bf16_edge_layers)
    if p in ("fp8", "mxfp8", "nvfp4"):
        mp["first_last_layers_bf16"] = bool(n)
        if n:
            mp.update(num_layers_at_start_in_bf16=n, num_layers_at_end_in_bf16=n)
    return mp


def bridge_overrides(layout: dict, model: ModelSpec, recipe: Recipe, layers=None, gpu=None) -> str:
    """Megatron-Bridge ConfigContainer overrides (module docstring) for ``layout`` as YAML text
    (``layers``: per pipeline stage, as :func:`costmodel.launch.megatron_args`), the notes the
    prediction priced that no field says as YAML comments."""
    t = layout
    sends_hidden = bool(pp_sends_overlapped(recipe, t["overlap"], t["vp"]))
    fsdp = t["zero"] == 3
    dp = dict(overlap_grad_reduce=bool(t["overlap"] and (dp_overlap_on(recipe, t["zero"], True) or fsdp)),
              overlap_param_gather=bool(t["overlap"] and ((recipe.dp_overlap and t["zero"] in (1, 2)) or fsdp)))
    dist_opt = t["zero"] in (1, 2, 3) or bool(fp8_params_on(recipe, t["zero"], t["dp"] * t["cp"]))
    ddp = dict(use_distributed_optimizer=dist_opt, **dp)
    if fsdp:
        ddp.update(use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads_params")
    if t.get("dp_replicate", 1) > 1:        # HSDP: DistributedDataParallelConfig's optimizer instances
        ddp["num_distributed_optimizer_instances"] = int(t["dp_replicate"])
    # a dtype as the dumped ConfigContainer writes one (a torch attribute, not called)
    dtype = lambda v: {"_call_": False, "_target_": f"torch.{'bfloat16' if v == 'bf16' else 'float32'}"}  # noqa: E731
    optimizer = dict(optimizer={"sgd": "sgd", "lionw": "lion"}.get(recipe.optimizer, "adam"),
                     use_distributed_optimizer=dist_opt, use_precision_aware_optimizer=False,
                     main_grads_dtype=dtype("fp32"), exp_avg_dtype=dtype("fp32"), exp_avg_sq_dtype=dtype("fp32"))
    for k, v in optimizer_config(recipe):
        optimizer[k] = dtype(v) if k.endswith("dtype") else v
    # a fresh CommOverlapConfig (a mapping with _target_ is instantiated, omegaconf_utils._apply_overrides):
    # a plain mapping would be set as a dict where the recipe leaves comm_overlap None (recipes/common.py),
    # which ConfigContainer then reads as a config; TE's default userbuffers (tp_comm_overlap_cfg None), as priced
    comm = {"_target_": "megatron.bridge.training.comm_overlap.CommOverlapConfig",
            "tp_comm_overlap": bool(recipe.tp_comm_overlap and t["sp"] and t["tp"] > 1 and t["overlap"]), **dp}
    if t["vp"] > 1:
        comm.update(overlap_p2p_comm=sends_hidden, batch_p2p_comm=not sends_hidden)
    if model.is_moe:
        # Bridge's CommOverlapConfig writes both over the model's, from this section (comm_overlap.py)
        comm.update(overlap_moe_expert_parallel_comm=bool(recipe.moe_ep_overlap),
                    delay_wgrad_compute=bool(recipe.moe_ep_overlap))
    doc = dict(model=_model_section(t, model, recipe, layers, gpu),
               train=dict(micro_batch_size=t["mbs"], global_batch_size=recipe.gbs),
               # GPTDatasetConfig.seq_length: finalize() copies it over Megatron-core's sequence_length
               dataset=dict(seq_length=recipe.seq_len), optimizer=optimizer, ddp=ddp, comm_overlap=comm,
               mixed_precision=_mixed_precision(recipe, t["zero"], t["dp"] * t["cp"]))
    notes = [n for n in (_CE_NOTE.format(ce=recipe.cross_entropy)
                         if recipe.cross_entropy not in MEGATRON_CROSS_ENTROPIES else "",
                         packed_note(recipe) if recipe.doc_tokens else "", kv_repeat_note(model, recipe)) if n]
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).rstrip() + "".join(f"\n# {n}" for n in notes)
