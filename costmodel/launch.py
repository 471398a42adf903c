"""What to set to run a layout on a training stack: Megatron-LM arguments, NeMo 2 recipe
overrides, a torchtitan configuration, the settings as JSON, or the layout in the field's terms (those
two, and the pipeline split every format states, in costmodel.launch_generic).

* Megatron-LM: ``megatron/training/arguments.py`` names of today's Megatron-core
  (``--attention-backend``; the legacy and DeepSpeed forks keep ``--use-flash-attn``).
* NeMo 2: ``recipe.<path> = value`` assignments on an ``nemo.collections.llm`` recipe, the form
  NVIDIA's performance scripts use (the same paths work as ``nemo llm pretrain --factory ...
  key=value`` overrides without the ``recipe.`` prefix).
* torchtitan: a full configuration in Python, the form torchtitan's main branch uses
  (torchtitan/config/README.md, commit b5bcd76c6: TOML files were replaced by configuration
  functions; ``ParallelismConfig``, ``TrainingConfig``, ``activation_checkpoint`` field names).
"""
from __future__ import annotations

import json

from .errors import InputError
from .comm import fp8_params_on
from .schedule import pp_sends_overlapped
from .megatron_structure import pre_core_note, router_notes, stack_structure_args
from .moe import flex_backend
from .layouts import LayoutTable, accounts_embedding_loss, light_last_stage, pipeline_split
from .torchtitan_split import torchtitan_split
from .launch_generic import generic_settings, pipeline_split_settings, settings_dict
from .specs import MEGATRON_CROSS_ENTROPIES, ModelSpec, Recipe
from .recipe_switches import MOE_FLAG_SWITCHES, MOE_SWITCHES
from .stacks import PRE_TE_MEGATRON_STACKS, dp_overlap_on, get_stack

#: the formats ``--format`` takes
FORMATS = ("megatron", "nemo", "bridge", "torchtitan", "json", "settings")


def megatron_attention_backend(recipe) -> str:
    """Megatron-core's ``--attention-backend`` for ``recipe``'s attention (costmodel.specs.Recipe):
    ``fused`` (Transformer Engine's cuDNN FusedAttention) for the ``cudnn`` kernel, ``flash`` (TE's
    FlashAttention) for the FlashAttention kernels, ``unfused`` without fused attention
    (megatron/core/transformer/enums.py AttnBackend)."""
    if not recipe.flash_attention:
        return "unfused"
    return "fused" if recipe.attention_kernel == "cudnn" else "flash"


def kv_repeat_note(model: ModelSpec, recipe: Recipe) -> str:
    """The comment a format prints where the prediction repeated GQA's K/V heads before attention ('' when
    it did not, or the model has no heads to repeat): no framework flag sets it, its code version does."""
    if not (recipe.kv_repeat and model.kv_repeat_factor > 1):
        return ""
    return (f"the prediction assumed K and V repeated {model.kv_repeat_factor:g}x to the query heads before attention "
            "(repeat_kv, as torchtitan ran before pytorch/torchtitan#2259 of 2026-01-27): a kernel given the "
            "unrepeated heads (enable_gqa, Transformer Engine) runs faster")


def packed_note(recipe: Recipe) -> str:
    """The comment a format that cannot set packed-sequence attention prints for it ('' when the recipe
    has none)."""
    return (f"the prediction assumed packed sequences: documents of {recipe.doc_tokens} tokens, each attending to "
            "itself only (variable-length fused attention): give the data loader's document boundaries to the "
            "attention" if recipe.doc_tokens else "")


def optimizer_config(recipe: Recipe) -> list[tuple]:
    """Megatron-core OptimizerConfig fields the recipe sets, as (name, value): the CPU offload
    (HybridDeviceOptimizer, all of it on the host) and the precision-aware optimizer, which
    Megatron-LM asserts the offload runs with (arguments.py), with its bf16 grads and states.  Each
    format renders them: ``--name-with-dashes value`` (Megatron-LM), ``recipe.optim.config.name``
    (NeMo 2)."""
    out = []
    if recipe.optimizer_offload:
        out += [("optimizer_cpu_offload", True), ("optimizer_offload_fraction", 1.0)]
    if recipe.precision_aware or recipe.optimizer_offload:
        out.append(("use_precision_aware_optimizer", True))
        if recipe.main_grads_dtype == "bf16":
            out.append(("main_grads_dtype", "bf16"))
        if recipe.optimizer_states_dtype == "bf16":
            out += [("exp_avg_dtype", "bf16"), ("exp_avg_sq_dtype", "bf16")]
    return out


def _megatron_deepspeed_args(layout: dict, model: ModelSpec, recipe: Recipe) -> str:
    """BigScience Megatron-DeepSpeed arguments (bigscience-workshop/Megatron-DeepSpeed megatron/arguments.py and
    the BLOOM tr11 launch script): ZeRO from the DeepSpeed config (``--deepspeed --zero-stage N``), full
    recompute as ``--checkpoint-activations`` with DeepSpeed's activation checkpointing, the pipeline split
    left to DeepSpeed's PipelineModule; no sequence parallelism, no interleaving, no distributed optimizer."""
    a = [f"--tensor-model-parallel-size {layout['tp']}", f"--pipeline-model-parallel-size {layout['pp']}",
         f"--micro-batch-size {layout['mbs']}", f"--global-batch-size {recipe.gbs}", f"--seq-length {recipe.seq_len}"]
    notes = []
    if layout["recompute"] == "full":
        a.append("--checkpoint-activations")
    elif layout["recompute"] == "selective":
        notes.append("this fork has no selective recompute: the prediction assumed it")
    a.append(f"--deepspeed --deepspeed_config ds_config.json --zero-stage {layout['zero']}"
             + (" --deepspeed-activation-checkpointing" if layout["recompute"] == "full" else ""))
    if model.is_moe:
        # bigscience-workshop/Megatron-DeepSpeed's arguments.py has no MoE flags (microsoft's fork adds
        # --num-experts and --ep-world-size)
        notes.append(f"this fork has no MoE layers (microsoft/Megatron-DeepSpeed's --num-experts {model.num_experts} "
                     f"--ep-world-size {layout['ep']}): the prediction assumed them")
    a += [f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in optimizer_config(recipe)]
    a.append({"bf16": "--bf16", "fp16": "--fp16"}[recipe.precision])    # stack_recipe refuses the rest
    if recipe.optimizer == "sgd":            # its arguments.py: --optimizer adam (default) or sgd
        a.append("--optimizer sgd")
    elif recipe.optimizer not in ("adam", "adamw"):
        notes.append(f"no {recipe.optimizer} optimizer here: the prediction assumed it")
    if kv := kv_repeat_note(model, recipe):
        notes.append(kv)
    if notes:           # last, so the comment ends the pasted command
        a.append("# " + "; ".join(notes))
    # the DeepSpeed config the arguments name: its ZeRO stage, precision and batch are what DeepSpeed runs
    # (the fork's --zero-stage only turns on zero.Init at stage 3: pretrain_gpt.py)
    ds = {"train_batch_size": recipe.gbs, "train_micro_batch_size_per_gpu": layout["mbs"],
          "gradient_accumulation_steps": recipe.gbs // (layout["dp"] * layout["mbs"]),
          "zero_optimization": {"stage": layout["zero"]}, recipe.precision: {"enabled": True}}
    return " \\\n  ".join(a) + "\n# ds_config.json: " + json.dumps(ds)


def _attention_launch_notes(model: ModelSpec, recipe: Recipe) -> list:
    """What a Megatron-LM launch cannot set of the attention priced: sliding-window layers whose places a
    hand-built model does not give (costmodel.megatron_structure prints no window then), Llama 4's
    L2 Q/K norm, which Megatron-LM applies on its NoPE layers too, and its chunked local attention, which
    Megatron-LM lacks (its run attends over the whole sequence)."""
    out = []
    if model.sliding_window and 0 < model.sliding_layers < model.num_layers and not model.sliding_layer_indices:
        out.append(f"the prediction priced {model.sliding_layers} sliding-window layers whose places the model "
                   "does not say: set --window-size and --window-attn-skip-freq for them, or the run attends fully")
    if model.qk_l2_norm and model.nope_layer_indices:
        out.append(f"Megatron-LM's --qk-l2-norm normalises Q and K on every layer, {model.name} on its RoPE "
                   "layers only")
    if model.chunked_layers and model.attention_chunk and recipe.seq_len > model.attention_chunk:
        out.append(f"Megatron-LM has no chunked local attention: its {model.chunked_layers} chunked layers attend over "
                   f"the whole sequence, where the prediction priced {model.attention_chunk}-token chunks")
    return out


def megatron_args(layout: dict, model: ModelSpec, recipe: Recipe, layers=None, gpu=None) -> str:
    """Megatron-LM command-line arguments (megatron/training/arguments.py names) for a layout.

    ``layers`` (per pipeline stage) adds the uneven-stage options: --decoder-first/last-pipeline-
    num-layers when the middle stages are even, else Megatron-core's --pipeline-model-parallel-layout
    ('E' embedding, 't' a transformer layer, 'L' the loss, '|' between stages).
    """
    if recipe.stack == "megatron-deepspeed":
        return _megatron_deepspeed_args(layout, model, recipe)
    a = [f"--tensor-model-parallel-size {layout['tp']}", f"--pipeline-model-parallel-size {layout['pp']}"]
    pv = layout["pp"] * layout["vp"]
    split, how = pipeline_split_settings(layout, model, recipe, layers)
    accounted = split == "accounted"
    if accounted:
        a += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    elif split == "first_last":
        a += [f"--decoder-first-pipeline-num-layers {how[0]}", f"--decoder-last-pipeline-num-layers {how[1]}"]
    elif split == "layout":
        a.append(f"--pipeline-model-parallel-layout \"{how}\"")
    if layout["cp"] > 1:
        a.append(f"--context-parallel-size {layout['cp']}")
    if layout["ep"] > 1:
        a.append(f"--expert-model-parallel-size {layout['ep']}")
    if model.is_moe:
        # the MoE switches the costs modelled, each printed (Megatron's defaults: allgather,
        # per-expert GEMMs, dropless)
        a.append(f"--moe-token-dispatcher-type {recipe.moe_dispatcher}")
        if recipe.moe_dispatcher == "flex":     # DeepEP's kernels, priced (--moe-enable-deepep is deprecated)
            a.append(f"--moe-flex-dispatcher-backend {flex_backend(gpu)}")
        if recipe.moe_capacity_factor > 0:
            a.append(f"--moe-expert-capacity-factor {recipe.moe_capacity_factor!r}")
        a += ["--" + s.megatron_key.replace("_", "-") for s in MOE_FLAG_SWITCHES if getattr(recipe, s.name)]
        if recipe.moe_ep_overlap:       # the weight gradients fill the backward's window (Megatron MoE README)
            a.append("--delay-wgrad-compute")
    a += stack_structure_args(model, recipe.stack)
    etp = layout.get("etp") or layout["tp"]
    if model.is_moe and etp != layout["tp"]:
        a.append(f"--expert-tensor-parallel-size {etp}")
    if model.mtp_layers:                # priced on the last stage: the run must build them
        a.append(f"--mtp-num-layers {model.mtp_layers}")
    if layout["vp"] > 1:
        if split != "layout":           # a layout string already gives every virtual stage's layers
            per_chunk = (model.num_layers + (2 if accounted else 0)) // pv
            a.append(f"--num-layers-per-virtual-pipeline-stage {per_chunk}")
        # the flag turns off what Megatron-core does by default (the older stacks have neither)
        if (get_stack(recipe.stack).defaults["pp_overlap"]
                and not pp_sends_overlapped(recipe, layout["overlap"], layout["vp"])):
            a.append("--no-overlap-p2p-communication")
    if layout["sp"]:
        a.append("--sequence-parallel")
    a += [f"--micro-batch-size {layout['mbs']}", f"--global-batch-size {recipe.gbs}",
          f"--seq-length {recipe.seq_len}"]
    if layout["recompute"] == "full" and layout.get("recompute_num_layers"):
        a += ["--recompute-granularity full", "--recompute-method block",
              f"--recompute-num-layers {layout['recompute_num_layers']}"]
    elif layout["recompute"] == "full":
        a += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    elif layout["recompute"] == "selective":
        a.append("--recompute-granularity selective")
        if recipe.recomputed != ("core_attn",):
            a.append("--recompute-modules " + " ".join(recipe.recomputed))
    fp8_params = bool(fp8_params_on(recipe, layout["zero"], layout["dp"] * layout["cp"]))
    if layout["zero"] in (1, 2) or fp8_params:
        a.append("--use-distributed-optimizer")
    if layout.get("dp_replicate", 1) > 1:   # HSDP: the sharded states replicated (costmodel.layouts.shard_dp)
        a.append(f"--num-distributed-optimizer-instances {layout['dp_replicate']}")
    a += [f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in optimizer_config(recipe)]
    if recipe.optimizer in ("sgd", "lionw"):  # Megatron-LM's --optimizer: adam (AdamW), sgd, lion, ...
        a.append("--optimizer " + {"sgd": "sgd", "lionw": "lion"}[recipe.optimizer])

    if layout["zero"] == 3 and (layout.get("ep", 1) > 1 or layout.get("dp_replicate", 1) > 1):
        # torch FSDP2 refuses expert parallelism (validate_args: "--use-torch-fsdp2 is not supported with
        # expert parallelism") and runs no instances; Megatron-FSDP shards the experts too (HSDP over the
        # distributed-optimizer instances: distributed/fsdp/mcore_fsdp_adapter.py), fully sharded with
        # optim_grads_params, on the distributed optimizer, with its own checkpoint format
        # (docs/user-guide/features/megatron_fsdp.md, examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh)
        a += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params", "--use-distributed-optimizer",
              "--no-gradient-accumulation-fusion", "--ckpt-format fsdp_dtensor"]
    elif layout["zero"] == 3:
        # validate_args: "--use-torch-fsdp2 is not supported with gradient accumulation fusion", which is on
        # unless --no-gradient-accumulation-fusion (megatron/training/arguments.py)
        a += ["--use-torch-fsdp2", "--no-gradient-accumulation-fusion"]
    notes = _megatron_optimizer_notes(layout, recipe) + list(filter(None, [pre_core_note(model, recipe.stack)]))
    notes += _attention_launch_notes(model, recipe) + router_notes(model)
    if 0 < model.max_positions < recipe.seq_len:
        # validate_args asserts max_position_embeddings >= seq_length (RoPE: the table is the run's to extend)
        a.append(f"--max-position-embeddings {recipe.seq_len}")
        notes.append(f"seq_len {recipe.seq_len} is past {model.name}'s {model.max_positions} positions: "
                     + ("its learned position table grows to seq_len rows (priced with its own rows)" if model.learned_positions
                        else "its RoPE scaling for the longer context is the run's to set"))
    # FSDP2 overlaps its own gathers (costmodel.stacks.Stack.zero3_overlap): the flag only where asked for
    fsdp2_own = layout["zero"] == 3 and not recipe.dp_overlap
    if dp_overlap_on(recipe, layout["zero"], layout["overlap"]) and not fsdp2_own:
        if recipe.stack == "megatron-legacy":
            # before --overlap-grad-reduce (2023), PyTorch's DDP was the one that overlapped (ZeRO 0 only:
            # dp_overlap_on)
            a.append("--DDP-impl torch")
        else:
            a.append("--overlap-grad-reduce")
            if layout["zero"] in (1, 2):
                a.append("--overlap-param-gather")
    if recipe.tp_comm_overlap and layout["sp"] and layout["overlap"]:      # as compute prices it
        a.append("--tp-comm-overlap")
    fp8 = "--bf16 --fp8-format hybrid" + (" --fp8-recipe tensorwise" if recipe.fp8_recipe == "tensorwise" else "") + (
        " --fp8-param-gather" if fp8_params else "")
    a.append({"bf16": "--bf16", "fp16": "--fp16", "fp8": fp8,
              "mxfp8": "--bf16 --fp8-format e4m3 --fp8-recipe mxfp8",
              "nvfp4": "--bf16 --fp4-format e2m1"}[recipe.precision])
    if recipe.bf16_edge_layers:
        n = int(recipe.bf16_edge_layers)
        a.append(f"--first-last-layers-bf16 --num-layers-at-start-in-bf16 {n} --num-layers-at-end-in-bf16 {n}")
    a += _megatron_kernel_args(model, recipe, notes)
    if recipe.doc_tokens:
        notes.append(packed_note(recipe))
    if kv := kv_repeat_note(model, recipe):
        notes.append(kv)
    if notes:           # last, so the comment ends the pasted command instead of swallowing arguments
        a.append("# " + "; ".join(notes))
    return _device_connections_env(layout, recipe, gpu) + " \\\n  ".join(a)


def _megatron_optimizer_notes(layout: dict, recipe: Recipe) -> list:
    """What Megatron-LM's optimizer arguments cannot run of what was priced: ZeRO-2 (its distributed
    optimizer shards the optimizer states only, every rank keeping the whole gradient buffer:
    megatron/core/distributed/param_and_grad_buffer.py) and an optimizer it lacks."""
    notes = []
    if layout["zero"] == 2:
        notes.append("Megatron-LM has no ZeRO-2: --use-distributed-optimizer shards the optimizer states, not the "
                     "gradients, which every rank keeps whole (the prediction priced ZeRO-2)")
    if recipe.optimizer not in ("adam", "adamw", "sgd", "lionw"):
        notes.append(f"Megatron-LM has no {recipe.optimizer} optimizer (adam, sgd, lion): the prediction assumed "
                     f"{recipe.optimizer}, these arguments train with Adam")
    return notes


def _device_connections_env(layout: dict, recipe: Recipe, gpu=None) -> str:
    """The environment line Megatron-core's arguments need before them: with TP or CP > 1 on Hopper and
    earlier it asserts CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue keeps the TP collectives in
    launch order under the GEMMs), unless FSDP shards the model, which wants it unset at any TP (several
    queues overlap its gathers; Megatron-FSDP and torch FSDP2 assert it is not 1), or the MoE dispatch
    overlaps (32, where validate_args only warns) (megatron/training/arguments.py validate_args); on Blackwell (``gpu``, compute capability 10) the
    requirement is gone and one queue would only serialise the overlaps, so nothing is set there."""
    if recipe.stack == "megatron-legacy":
        # 2022 Megatron-LM raises unless it is 1: its async TP all-reduce (on by default) and sequence
        # parallelism both need it (e1c334b megatron/arguments.py validate_args), at any TP
        return ("export CUDA_DEVICE_MAX_CONNECTIONS=1   # Megatron-LM 2022 asserts it (its async TP all-reduce, "
                "sequence parallelism)\n")
    if recipe.stack in PRE_TE_MEGATRON_STACKS:
        return ""
    if recipe.moe_ep_overlap:
        # validate_args only warns here: one queue keeps the TP collectives in order, several let the
        # dispatch overlap; NVIDIA's MoE recipes run the overlap with 32 (Megatron-MoE-ModelZoo
        # sbatch_benchmarking.sh, A2A_OVERLAP=1), as the overlap is priced
        return "export CUDA_DEVICE_MAX_CONNECTIONS=32   # EP overlap: the dispatch overlaps on several queues\n"
    if layout["zero"] == 3:
        # asserted at any TP: 'FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset' (validate_args)
        return "unset CUDA_DEVICE_MAX_CONNECTIONS   # FSDP's gathers overlap on several queues\n"
    if layout["tp"] == 1 and layout["cp"] == 1:
        return ""
    if gpu is not None and gpu.architecture == "blackwell":
        return ""
    return ("export CUDA_DEVICE_MAX_CONNECTIONS=1   # TP or CP > 1: Megatron asserts it below compute capability 10 "
            "(Hopper and earlier; ROCm's MI300X reports 9.4)\n")


def _megatron_kernel_args(model: ModelSpec, recipe: Recipe, notes: list) -> list[str]:
    """The attention, loss and elementwise-fusion arguments of :func:`megatron_args` (appending to
    ``notes`` what the arguments cannot say)."""
    a = []
    if recipe.stack in PRE_TE_MEGATRON_STACKS:
        if recipe.flash_attention:               # these predate --attention-backend
            a.append("--use-flash-attn")
    else:                                        # Megatron-core: flash, fused (cuDNN via TE), unfused, local, auto
        a.append(f"--attention-backend {megatron_attention_backend(recipe)}")
    fusion, impl = MEGATRON_CROSS_ENTROPIES.get(recipe.cross_entropy, (False, None))
    if fusion:
        a.append("--cross-entropy-loss-fusion" + (f" --cross-entropy-fusion-impl {impl}" if impl != "native" else ""))
    if impl == "te" and recipe.stack == "megatron":
        notes.append("Megatron-LM refuses --cross-entropy-fusion-impl te since 168cb15d (2026-06-03: 'disabled due to "
                     "stability issues'); earlier Megatron-LM, NeMo and Megatron-Bridge run it: for today's Megatron-LM "
                     "price --cross-entropy megatron-fused (its native fusion) and print again")
    if recipe.cross_entropy not in MEGATRON_CROSS_ENTROPIES:
        notes.append(_CE_NOTE.format(ce=recipe.cross_entropy))
    if not recipe.fused_elementwise and recipe.stack not in PRE_TE_MEGATRON_STACKS:
        # --no-fused-elementwise: Megatron-core's switches for its activation and rotary fusions
        # (megatron/training/arguments.py); Transformer Engine fuses the norms into its linear layers
        a.append("--no-bias-swiglu-fusion" if model.gated else "--no-bias-gelu-fusion")
        if not model.learned_positions:
            a.append("--no-rope-fusion")
        notes.append("the prediction priced the norms unfused too (--no-fused-elementwise); Transformer Engine "
                     "fuses them into its linear layers whatever the flags")
    return a


#: the note for a cross-entropy Megatron-core cannot run: it has its vocab-parallel loss and the fused
#: ones (``--cross-entropy-loss-fusion``, native or Transformer Engine's), no eager fp32 or chunked
#: linear + loss
_CE_NOTE = ("Megatron-core has no {ce} cross-entropy (its vocab-parallel loss, or --cross-entropy-loss-fusion): "
            "the prediction assumed {ce}, these arguments run the vocab-parallel one")


def _nemo_split(t: dict, model: ModelSpec, recipe: Recipe, layers=None) -> list[str]:
    """The split of :func:`pipeline_split_settings` as NeMo 2 overrides of the strategy's ParallelismConfig."""
    split, how = pipeline_split_settings(t, model, recipe, layers)
    # ParallelismConfig fields: MegatronStrategy copies its own values over model.config at setup
    # (nemo/lightning/pytorch/strategies/megatron_strategy.py, _strategy_lib.set_model_parallel_attributes)
    # every split field, set or cleared: a recipe may preset another (NeMo's DeepSeek-V3: first 3, last 2),
    # which Megatron-core refuses beside a layout and which would move an even split
    vals = dict(pipeline_model_parallel_layout=how if split == "layout" else None,
                num_layers_in_first_pipeline_stage=how[0] if split == "first_last" else None,
                num_layers_in_last_pipeline_stage=how[1] if split == "first_last" else None,
                account_for_embedding_in_pipeline_split=split == "accounted",
                account_for_loss_in_pipeline_split=split == "accounted")
    return [f"recipe.trainer.strategy.{k} = {v!r}" for k, v in vals.items()]


def nemo_overrides(layout: dict, model: ModelSpec, recipe: Recipe, layers=None, gpu=None) -> str:
    """NeMo 2 recipe overrides (module docstring) for ``layout`` (``layers``: per pipeline stage, as
    :func:`megatron_args`)."""
    t = layout
    sends_hidden = bool(pp_sends_overlapped(recipe, t["overlap"], t["vp"]))
    a = [f"recipe.trainer.strategy.tensor_model_parallel_size = {t['tp']}",
         f"recipe.trainer.strategy.pipeline_model_parallel_size = {t['pp']}",
         f"recipe.trainer.strategy.virtual_pipeline_model_parallel_size = {t['vp'] if t['vp'] > 1 else None}",
         *([f"recipe.model.config.overlap_p2p_comm = {sends_hidden}",
            f"recipe.model.config.batch_p2p_comm = {not sends_hidden}"] if t["vp"] > 1 else []),
         *_nemo_split(t, model, recipe, layers),
         f"recipe.trainer.strategy.context_parallel_size = {t['cp']}",
         f"recipe.trainer.strategy.sequence_parallel = {bool(t['sp'])}"]
    if model.is_moe:
        a += _nemo_moe(t, model, recipe, gpu)
    if model.mtp_layers:
        a.append(f"recipe.model.config.mtp_num_layers = {model.mtp_layers}")
    a += [f"recipe.data.micro_batch_size = {t['mbs']}", f"recipe.data.global_batch_size = {recipe.gbs}",
          f"recipe.data.seq_length = {recipe.seq_len}"]
    rc = t["recompute"]
    if rc == "full":
        n = t.get("recompute_num_layers") or 1
        a += ["recipe.model.config.recompute_granularity = 'full'",
              f"recipe.model.config.recompute_method = {'block' if t.get('recompute_num_layers') else 'uniform'!r}",
              f"recipe.model.config.recompute_num_layers = {n}"]
    elif rc == "selective":
        a.append("recipe.model.config.recompute_granularity = 'selective'")
        # set either way: a recipe may name others (NeMo's DeepSeek-V3: mla_up_proj, layernorm)
        a.append(f"recipe.model.config.recompute_modules = {list(recipe.recomputed)!r}")
    else:
        a.append("recipe.model.config.recompute_granularity = None")
    a.append(f"recipe.optim.config.use_distributed_optimizer = "
             f"{t['zero'] in (1, 2, 3) or bool(fp8_params_on(recipe, t['zero'], t['dp'] * t['cp']))}")
    if t.get("dp_replicate", 1) > 1:
        # HSDP: the strategy's own field, which MegatronStrategy writes over its ddp config's and builds the
        # parallel groups from (nemo/lightning/pytorch/strategies/megatron_strategy.py)
        a.append(f"recipe.trainer.strategy.num_distributed_optimizer_instances = {t['dp_replicate']}")
    # Megatron-core OptimizerConfig ('adam' by default) and its precisions, each set: a recipe may preset
    # others (NeMo's DeepSeek-V3: the precision-aware optimizer with bf16 grads and states)
    a.append(f"recipe.optim.config.optimizer = {({'sgd': 'sgd', 'lionw': 'lion'}.get(recipe.optimizer, 'adam'))!r}")
    opt = dict(use_precision_aware_optimizer=False, main_grads_dtype="fp32", exp_avg_dtype="fp32",
               exp_avg_sq_dtype="fp32")
    opt.update(optimizer_config(recipe))
    a += [f"recipe.optim.config.{k} = " + (f"torch.{'bfloat16' if v == 'bf16' else 'float32'}" if k.endswith("dtype")
                                           else str(v)) for k, v in opt.items()]
    if t["zero"] == 3:
        # Megatron-FSDP shards by ddp.data_parallel_sharding_strategy, 'no_shard' unless set
        # (megatron/core/distributed/distributed_data_parallel_config.py), with the distributed optimizer
        a += ["recipe.trainer.strategy.fsdp = 'megatron'",
              "recipe.trainer.strategy.ddp.data_parallel_sharding_strategy = 'optim_grads_params'"]
    # the prediction hides ZeRO-3's gathers and reduce-scatters (FSDP overlaps its own,
    # costmodel.stacks.Stack.zero3_overlap); Megatron-FSDP does so only with both switches on, which
    # NeMo passes to it as given
    fsdp = t["zero"] == 3
    dp = dict(overlap_grad_reduce=bool(t["overlap"] and (recipe.dp_overlap or fsdp)),
              overlap_param_gather=bool(t["overlap"] and ((recipe.dp_overlap and t["zero"] in (1, 2)) or fsdp)))
    if t["overlap"]:
        a += [f"recipe.trainer.strategy.ddp.{k} = {v}" for k, v in dp.items()]
    # TransformerConfig.attention_backend is an AttnBackend enum (megatron/core/transformer/enums.py),
    # compared by identity: a string would leave Megatron-core's automatic choice in force
    a.append(f"recipe.model.config.attention_backend = AttnBackend.{megatron_attention_backend(recipe)}")
    fusion, impl = MEGATRON_CROSS_ENTROPIES.get(recipe.cross_entropy, (False, None))
    a.append(f"recipe.model.config.cross_entropy_loss_fusion = {fusion}")
    if fusion:          # set either way: a recipe may name the other (Bridge's and NeMo's DeepSeek-V3: 'te')
        a.append(f"recipe.model.config.cross_entropy_fusion_impl = '{impl}'")
    if not recipe.fused_elementwise:
        # TransformerConfig's activation and rotary fusions (the norms stay fused in TE's linear layers)
        a.append("recipe.model.config.bias_activation_fusion = False")
        if not model.learned_positions:
            a.append("recipe.model.config.apply_rope_fusion = False")
    if recipe.cross_entropy not in MEGATRON_CROSS_ENTROPIES:
        a.append("# " + _CE_NOTE.format(ce=recipe.cross_entropy))
    current = recipe.precision == "fp8" and recipe.fp8_recipe == "tensorwise"
    plugin = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_current_scaling_mixed" if current
              else "bf16_with_fp8_mixed", "mxfp8": "bf16_with_mxfp8_mixed", "nvfp4": "bf16_mixed"}[recipe.precision]
    a.append(f"recipe.trainer.plugins = {plugin}()")
    if recipe.precision == "mxfp8" or (recipe.precision == "fp8" and not fp8_params_on(recipe, t["zero"],
                                                                                      t["dp"] * t["cp"])):
        # NeMo's delayed, current-scaling and MXFP8 plugins gather and keep the parameters in fp8
        # (fp8_param_gather=True; MXFP8 also gathers into the gradient buffer,
        # reuse_grad_buf_for_mxfp8_param_ag: nemo/collections/llm/recipes/precision/mixed_precision.py);
        # the prediction prices 16-bit ones here (fp8 parameters are priced under per-tensor fp8 only)
        a.append("recipe.trainer.plugins.fp8_param_gather = False")
        if recipe.precision == "mxfp8":
            a.append("recipe.trainer.plugins.reuse_grad_buf_for_mxfp8_param_ag = False")
    if recipe.precision == "nvfp4":
        # NeMo 2 has no NVFP4 recipe function: MegatronMixedPrecision's fp4 / fp4_recipe arguments
        # (nemo/lightning/pytorch/plugins/mixed_precision.py)
        a += ["recipe.trainer.plugins.fp4 = 'e2m1'", "recipe.trainer.plugins.fp4_recipe = 'nvfp4'"]
    n = int(recipe.bf16_edge_layers)
    if n and recipe.precision in ("fp8", "mxfp8", "nvfp4"):
        a += ["recipe.trainer.plugins.first_last_layers_bf16 = True",
              f"recipe.trainer.plugins.num_layers_at_start_in_bf16 = {n}",
              f"recipe.trainer.plugins.num_layers_at_end_in_bf16 = {n}"]
    elif current:
        # NeMo's current-scaling plugin keeps its first and last layer in BF16 (mixed_precision.py)
        a.append("recipe.trainer.plugins.first_last_layers_bf16 = False")
    a += (cb_lines := _nemo_overlap_callback(recipe, t, sends_hidden, dp))
    if recipe.doc_tokens:
        a.append("# " + packed_note(recipe))
    if kv := kv_repeat_note(model, recipe):
        a.append("# " + kv)
    imports = ["from megatron.core.transformer.enums import AttnBackend",
               f"from nemo.collections.llm.recipes.precision.mixed_precision import {plugin}"]
    if cb_lines:
        imports = ["import nemo_run as run", *imports,
                   "from nemo.lightning.pytorch.callbacks.megatron_comm_overlap import MegatronCommOverlapCallback"]
    if any("DeepEPCallback" in line for line in a):
        imports.append("from nemo.lightning.pytorch.callbacks.deepep import DeepEPCallback")
    if any("torch." in line for line in a):
        imports.insert(0, "import torch")
    return "\n".join(imports + a)


def _nemo_moe(t: dict, model: ModelSpec, recipe: Recipe, gpu=None) -> list[str]:
    """The MoE lines of :func:`nemo_overrides`: EP and ETP, the dispatcher (DeepEPCallback dropped where
    another is priced, for the DeepSeek models whose recipes add it: a NeMo without the callback has
    none to import), capacity, the MoE switches and the shared-expert overlap."""
    return [f"recipe.trainer.strategy.expert_model_parallel_size = {t['ep']}",
            f"recipe.trainer.strategy.expert_tensor_parallel_size = {t.get('etp') or t['tp']}",
            f"recipe.model.config.moe_token_dispatcher_type = {recipe.moe_dispatcher!r}",
            *(_nemo_flex_backend(gpu) if recipe.moe_dispatcher == "flex" else
              # NeMo's DeepSeek recipes (V2, V2-Lite, V3: MLA) append DeepEPCallback, whose setup() turns the
              # flex dispatcher on over these lines (nemo/lightning/pytorch/callbacks/deepep.py): it goes
              ["recipe.trainer.callbacks = [cb for cb in (recipe.trainer.callbacks or []) "
               "if cb.__fn_or_cls__ is not DeepEPCallback]"] if model.is_mla else []),
            "recipe.model.config.moe_expert_capacity_factor = "
            + (f"{recipe.moe_capacity_factor!r}" if recipe.moe_capacity_factor > 0 else "None"),
            *(f"recipe.model.config.{s.megatron_key} = {bool(getattr(recipe, s.name))}" for s in MOE_FLAG_SWITCHES),
            *(["recipe.model.config.delay_wgrad_compute = True"] if recipe.moe_ep_overlap else []),
            # the shared-expert overlap, which NeMo's DeepSeek and Llama 4 configs turn on
            # (nemo/collections/llm/gpt/model/deepseek.py, llama.py), off where Megatron-core refuses it:
            # beside the EP overlap, and with DeepEP in its containers' Megatron-core (_nemo_flex_backend)
            *(["recipe.model.config.moe_shared_expert_overlap = False"]
              if recipe.moe_ep_overlap or (recipe.moe_dispatcher == "flex" and flex_backend(gpu) == "deepep")
              else [])]


def _nemo_overlap_callback(recipe: Recipe, t: dict, sends_hidden: bool, dp: dict) -> list:
    """NeMo 2 lines for TE TP-comm overlap (MegatronCommOverlapCallback): the recipe's own callback goes
    (performance recipes append one: never doubled, never left on where priced off), then ours where
    priced, with the p2p and DP overlaps the prediction priced (``sends_hidden``, ``dp``), which its
    setup() would overwrite (nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py); [] if none."""
    callback = recipe.tp_comm_overlap and t["sp"] and t["overlap"]
    if not (callback or (get_stack(recipe.stack).defaults.get("tp_comm_overlap") and t["sp"] and t["tp"] > 1)):
        return []
    out = ["recipe.trainer.callbacks = [cb for cb in (recipe.trainer.callbacks or []) "
           "if cb.__fn_or_cls__ is not MegatronCommOverlapCallback]"]
    if callback:
        p2p = dict(overlap_p2p_comm=sends_hidden, batch_p2p_comm=not sends_hidden) if t["vp"] > 1 else {}
        kw = ", ".join(f"{k}={v}" for k, v in dict(tp_comm_overlap=True, **p2p, **dp).items())
        out.append(f"recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, {kw}))")
    return out


def _nemo_flex_backend(gpu) -> list[str]:
    """The NeMo 2 line that selects the flex dispatcher's backend: DeepEP as NeMo's own DeepEPCallback does
    (``moe_enable_deepep``, which the Megatron-core of NeMo's containers knows and today's still honours,
    deprecated: transformer_config.py; the callback also turns the shared-expert overlap off, which that
    Megatron-core ran with the all-to-all dispatcher only: nemo_overrides says so once), HybridEP by
    ``moe_flex_dispatcher_backend`` (a newer Megatron-core's)."""
    backend = flex_backend(gpu)
    if backend == "deepep":
        return ["recipe.model.config.moe_enable_deepep = True"]
    return [f"recipe.model.config.moe_flex_dispatcher_backend = {backend!r}    # Megatron-core with HybridEP"]


def _torchtitan_stages(t: dict, model: ModelSpec, recipe: Recipe, layers=None) -> list[str]:
    """The torchtitan lines that give a pipeline the split priced (per virtual stage, in model order):
    ``pipeline_parallel_layers_per_stage`` where torchtitan's own split of that many stages is it, else every
    stage's modules (``module_fqns_per_model_part``, its module names: tok_embeddings, layers.N, norm,
    lm_head, as its own partitioner writes them); nothing where its default split is it.  ``layers``: the
    split priced where it is the run's own (a costmodel.pipeline_layout.PipelineLayout, or transformer layers
    per rank), else the model's (:func:`costmodel.layouts.pipeline_split`)."""
    pv, L = t["pp"] * t["vp"], model.num_layers
    default = torchtitan_split(L, pv)
    if hasattr(layers, "stages"):        # the run's own layout (costmodel.pipeline_layout), per virtual stage
        priced = [st.count("t") for st in layers.stages]
    elif layers is not None and t["vp"] == 1:
        priced = [int(x) for x in layers]
    elif t["vp"] == 1:
        priced = [int(x) for x in pipeline_split(model, t, light_last_stage(recipe))]
    elif bool(accounts_embedding_loss(model, LayoutTable.from_rows([t]))[0]):
        priced = default                        # the embedding and the loss as pipeline layers
    else:
        priced = [L // pv] * pv
    if t["vp"] == 1 and priced == default:
        return []
    # torchtitan makes ceil((L + 2) / layers_per_stage) virtual stages of its default split
    lps = -(-(L + 2) // pv)
    if t["vp"] > 1 and priced == default and -(-(L + 2) // lps) == pv:
        return [f"    config.parallelism.pipeline_parallel_layers_per_stage = {lps}"]
    return [f"    split = {priced}    # transformer layers per (virtual) pipeline stage, as priced",
            "    config.parallelism.module_fqns_per_model_part = [",
            "        ([\"tok_embeddings\"] if s == 0 else []) + [f\"layers.{i}\" for i in range(sum(split[:s]), sum(split[:s + 1]))]",
            "        + ([\"norm\", \"lm_head\"] if s == len(split) - 1 else []) for s in range(len(split))]"]


def torchtitan_config(layout: dict, model: ModelSpec, recipe: Recipe, layers=None) -> str:
    """A torchtitan full configuration (module docstring) for ``layout``: FSDP shards over DP when
    ZeRO-3, or ZeRO-1 with a pipeline (FSDP2 keeping its parameters gathered, costmodel.stacks), over
    DP / dp_replicate under HSDP (replicated dp_replicate times), else DP replicates."""
    t = layout
    rep = t.get("dp_replicate", 1)
    dp_shard, dp_rep = (t["dp"] // rep, rep) if t["zero"] in (1, 3) else (1, t["dp"])
    ac = {"full": "FullAC.Config()", "selective": "SelectiveAC.Config()", "none": "None"}[t["recompute"]]
    mb = recipe.gbs // (t["dp"] * t["mbs"])
    a = ["def costmodel_layout() -> Trainer.Config:",
         "    config = base_config()          # the recipe this layout is for (torchtitan_recipes)",
         f"    config.parallelism.data_parallel_replicate_degree = {dp_rep}",
         f"    config.parallelism.data_parallel_shard_degree = {dp_shard}",
         f"    config.parallelism.tensor_parallel_degree = {t['tp']}",
         f"    config.parallelism.pipeline_parallel_degree = {t['pp']}",
         f"    config.parallelism.context_parallel_degree = {t['cp']}"]
    if model.is_moe:
        a.append(f"    config.parallelism.expert_parallel_degree = {t['ep']}")
        etp = t.get("etp") or t["tp"]
        if etp != 1:
            # ParallelismConfig has no expert TP: EP borrows ranks from FSDP and TP, the experts unsplit
            a.append(f"    # torchtitan has no expert tensor parallelism (its experts run whole on each EP rank): "
                     f"the prediction assumed ETP {etp}")
    if t["pp"] > 1:
        a.append(f"    config.parallelism.num_pp_microbatches = {mb}")
        a.append(f"    config.parallelism.pipeline_parallel_schedule = {'Interleaved1F1B' if t['vp'] > 1 else '1F1B'!r}")
        a += _torchtitan_stages(t, model, recipe, layers)
    # the switches priced, set either way (a recipe's base_config() may turn them on): async TP (under
    # torch.compile), compiled elementwise kernels, eager launches (torchtitan's CUDA graphs, on by
    # default since 2026, also refuse PP and CPU-synchronising EP dispatchers: trainer.py)
    async_tp = bool(recipe.tp_comm_overlap and t["tp"] > 1 and t["overlap"])     # as compute prices it
    a += [f"    config.compile.enable = {bool(recipe.fused_elementwise or async_tp)}",
          f"    config.compile.enable_async_tensor_parallel = {async_tp}",
          "    config.training.disable_cuda_graphs = True   # priced as eager launches, one per kernel"]
    if kv := kv_repeat_note(model, recipe):
        # the torchtitan that repeated them read a TOML ([parallelism] with these degrees); one that reads
        # this config format passes enable_gqa
        a.append("    # " + kv + "; that torchtitan takes these degrees in its TOML "
                 "[parallelism] section")
    a += [f"    config.training.num_tokens_per_microbatch_per_dp_rank = {t['mbs'] * recipe.seq_len}",
          f"    config.training.num_tokens_per_train_step = {recipe.gbs * recipe.seq_len}",
          f"    config.training.max_context_length = {recipe.seq_len}",
          f"    config.activation_checkpoint = {ac}",
          "    return config"]
    if model.is_moe:
        # torchtitan's MoE is fixed (all-to-all, grouped GEMM, dropless, its own permutation): a
        # switch priced otherwise is said, never dropped
        own = get_stack("torchtitan").defaults
        other = [k for k in MOE_SWITCHES if k != "moe_expert_load_cv" and getattr(recipe, k) != own[k]]
        if other:
            a.append(f"# the prediction assumed {', '.join(f'{k} = {getattr(recipe, k)!r}' for k in other)}; "
                     f"torchtitan's MoE runs {', '.join(f'{k} = {own[k]!r}' for k in other)}: this configuration "
                     "cannot set them")
    if t["zero"] == 2 or (t["zero"] == 1 and t["pp"] == 1 and t["dp"] > 1):
        a.append(f"# torchtitan has no ZeRO-{t['zero']} without a pipeline: this configuration shards "
                 f"{'with FSDP (ZeRO-3)' if t['zero'] == 1 else 'nothing (DDP)'}, which the prediction did not price")
    if t["recompute"] == "full" and t.get("recompute_num_layers"):
        a.append(f"# torchtitan checkpoints every layer: the prediction recomputed {t['recompute_num_layers']} per "
                 "pipeline chunk (Megatron's --recompute-num-layers), which this configuration cannot express")
    if recipe.doc_tokens:
        a.append("# " + packed_note(recipe))
    if recipe.optimizer != "adamw":
        # torchtitan's factories: Adam, AdamW (components/optimizer/optimizer.py); its recipes' groups run AdamW
        a.append("# priced with Adam: set optimizer_name = \"Adam\" in each of config.optimizer.param_groups"
                 if recipe.optimizer == "adam" else f"# the prediction assumed {recipe.optimizer}, which torchtitan "
                 "has no factory for (Adam, AdamW): this configuration trains with its recipe's AdamW")
    if recipe.optimizer_offload:
        a.append("# the prediction assumed the optimizer offloaded to the host CPU: torchtitan has no optimizer-only "
                 "offload (training.enable_cpu_offload is FSDP2's parameter offload, not priced here)")
    if recipe.precision != "bf16" and recipe.precision != "fp16" and recipe.fp8_recipe == "tensorwise":
        # torchtitan's float8 converter takes rowwise recipes only since 6348d93d1 (2026-04-27): the torchtitan
        # that reads this configuration (its keys are of 73aed7f6c, 2026-08-20) has no tensorwise
        a.insert(2, f"    # {recipe.precision_label}: torchtitan dropped its tensorwise float8 recipe (6348d93d1, "
                    "2026-04-27; components/quantization/float8.py takes rowwise, rowwise_with_gw_hp) before these "
                    "keys (73aed7f6c, 2026-08-20): price --fp8-recipe rowwise for it, or use a torchtitan of before "
                    "2026-04-28 with its TOML")
    elif recipe.precision != "bf16" and recipe.precision != "fp16":
        rec = f' (recipe_name = "{recipe.fp8_recipe}")' if recipe.fp8_recipe == "rowwise" else ""
        a.insert(2, f"    # {recipe.precision_label}: add the float8 model converter of your torchtitan version{rec}")
    else:
        a.insert(2, f"    # priced in {recipe.precision} with the {recipe.cross_entropy} cross-entropy: a "
                    "base_config() whose model_spec carries a float8 converter, or whose loss is a "
                    "ChunkedLossWrapper (the 405B recipe's), runs otherwise: build it without them")
    return "\n".join(a)


def default_format(recipe: Recipe) -> str:
    """The format of the recipe's stack: megatron for the Megatron family, nemo, torchtitan, else the
    settings in the field's terms."""
    if recipe.stack in ("nemo", "torchtitan"):
        return recipe.stack
    return "megatron" if get_stack(recipe.stack).megatron_family else "settings"


def launch_settings(layout: dict, model: ModelSpec, recipe: Recipe, layers=None,
                    fmt: str | None = None, gpu=None) -> tuple[str, str]:
    """(title, text) of what to set to run ``layout``: ``fmt`` one of :data:`FORMATS` (None: the
    stack's own, :func:`default_format`); ``gpu`` (a GpuSpec) the GPU it runs on, where the text depends on
    it (Megatron-LM's CUDA_DEVICE_MAX_CONNECTIONS, the flex dispatcher's backend: costmodel.moe.flex_backend).

    Raises:
        InputError: an unknown format (names ``--format``).
    """
    fmt = fmt or default_format(recipe)
    if fmt not in FORMATS:
        raise InputError("--format", "", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "megatron":
        title = {"megatron-deepspeed": "Megatron-DeepSpeed (BigScience) arguments",
                 "megatron-legacy": "Megatron-LM (2021-22) arguments"}.get(recipe.stack, "Megatron-LM arguments")
        return title, megatron_args(layout, model, recipe, layers, gpu)
    if fmt == "nemo":
        return "NeMo 2 recipe overrides", nemo_overrides(layout, model, recipe, layers, gpu)
    if fmt == "bridge":
        from .launch_bridge import bridge_overrides
        return "Megatron-Bridge configuration overrides (YAML)", bridge_overrides(layout, model, recipe, layers, gpu)
    if fmt == "torchtitan":
        return "torchtitan configuration", torchtitan_config(layout, model, recipe, layers)
    if fmt == "json":
        return "Settings (JSON)", json.dumps(settings_dict(layout, model, recipe, layers), indent=2)
    return f"Settings for {recipe.stack}", generic_settings(layout, model, recipe, layers)
