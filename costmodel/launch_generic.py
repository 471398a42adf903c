"""The stack-neutral launch formats: the layout in the field's terms (``settings``), the layout and
recipe as JSON (``json``), and how Megatron-core is told an uneven pipeline split, which every format
states (costmodel.launch)."""
from __future__ import annotations

from .layout_fields import FIELDS
from .layouts import LayoutTable, accounts_embedding_loss, light_last_stage, pipeline_split, uneven_split
from .pipeline_layout import layout_text
from .specs import ModelSpec, Recipe
from .recipe_switches import MOE_SWITCHES, RECIPE_SWITCHES
from .stacks import dp_overlap_on, get_stack


def pipeline_split_settings(layout: dict, model: ModelSpec, recipe: Recipe, layers=None):
    """How Megatron-core is told the pipeline split of ``layout`` (``layers``: transformer layers per
    stage, default :func:`costmodel.layouts.uneven_split`; or the run's own
    :class:`costmodel.pipeline_layout.PipelineLayout`, given back as written):

    * ``("accounted", None)``: VP > 1 and PP x VP divides the layers plus the embedding and the loss
      (--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split);
    * ``("first_last", (first, last))``: VP 1, uneven first and last stages around even middle ones
      (--decoder-first/last-pipeline-num-layers);
    * ``("layout", text)``: any other uneven split, as --pipeline-model-parallel-layout: one '|'
      segment per virtual stage in model order (virtual stage v of pipeline rank s is segment
      v x PP + s), each stage's layers spread over its VP chunks, 'E' and 'L' the embedding and
      the loss, 'm' a multi-token-prediction module, on the last stage (Megatron-core
      PipelineParallelLayerLayout);
    * ``(None, None)``: even stages.
    """
    pp, vp = layout["pp"], layout["vp"]
    if hasattr(layers, "stages"):
        return "layout", layers.text
    if layers is None:
        if bool(accounts_embedding_loss(model, LayoutTable.from_rows([layout]))[0]):
            return "accounted", None
        if model.num_layers % pp == 0 and (vp == 1 or model.num_layers % (pp * vp) == 0):
            return None, None
        layers = [int(x) for x in uneven_split(model.num_layers, pp, light_last_stage(recipe))]
    if len(set(layers)) <= 1 and (vp == 1 or layers[0] % vp == 0):
        return None, None
    if vp == 1 and len(set(layers[1:-1])) <= 1:
        return "first_last", (layers[0], layers[-1])
    # the multi-token-prediction modules run on the last stage, before the loss ('m')
    return "layout", layout_text(layers, pp, vp, model.mtp_layers)


def generic_settings(layout: dict, model: ModelSpec, recipe: Recipe, layers=None) -> str:
    """The layout in the field's terms, one setting per line (a stack without a format of its own), with
    an uneven pipeline split (``layers`` as :func:`pipeline_split_settings` takes them) as Megatron-core is given it."""
    stack = get_stack(recipe.stack)
    rc = layout["recompute"]
    ckpt = {"none": "off", "selective": "selective (op-level SAC)" if stack.selective_recompute == "op-sac"
            else "selective", "full": "full (every transformer block)"}[rc]
    n = layout.get("recompute_num_layers") or 0
    if rc == "full" and n:
        ckpt = f"full on {n} transformer block{'s' if n > 1 else ''} of each pipeline chunk (the others keep their activations)"
    dp = {0: "DP (replicated, DDP)", 1: "DP with ZeRO-1 (optimizer states sharded)",
          2: "DP with ZeRO-2 (gradients and optimizer states sharded)",
          3: "DP with FSDP / ZeRO-3 (parameters, gradients and optimizer states sharded)"}[layout["zero"]]
    # the stack's own key for it: llm-foundry's fsdp_config.sharding_strategy (PyTorch FSDP's
    # ShardingStrategy), DeepSpeed's zero_optimization.stage
    rep = layout.get("dp_replicate", 1)
    shard = layout["dp"] * layout["cp"] // rep
    # PyTorch FSDP's hybrid strategies shard within a group and replicate across (ZeRO 3 and 2)
    own = ({3: "HYBRID_SHARD", 2: "_HYBRID_SHARD_ZERO2"}.get(layout["zero"]) if rep > 1 else
           {3: "FULL_SHARD", 2: "SHARD_GRAD_OP", 0: "NO_SHARD"}.get(layout["zero"])) \
        if recipe.stack == "llm-foundry" else str(layout["zero"]) if recipe.stack == "deepspeed" else None
    if own is not None:
        dp += (f" (fsdp_config.sharding_strategy: {own}" + (f", data_parallel_shard_degree: {shard}, "
                                                             f"data_parallel_replicate_degree: {rep}" if rep > 1 else "")
               + ")" if recipe.stack == "llm-foundry" else f" (zero_optimization.stage: {own})")
    if rep > 1:
        dp += f", HSDP: sharded over {shard} ranks (DP x CP / {rep}) and replicated {rep} times"
    lines = [f"tensor parallel (TP): {layout['tp']}" + (" with sequence parallelism" if layout["sp"] else ""),
             f"pipeline parallel (PP): {layout['pp']}" + (f", {layout['vp']} virtual stages" if layout["vp"] > 1 else ""),
             f"{dp}: {layout['dp']}", f"context parallel (CP): {layout['cp']}",
             f"expert parallel (EP): {layout['ep']}"
             + (f", experts' TP (ETP) {layout['etp']}" if model.is_moe and layout.get("etp") not in (None, layout["tp"])
                else ""), f"micro-batch per GPU: {layout['mbs']}",
             f"global batch: {recipe.gbs} sequences of {recipe.seq_len} tokens",
             f"activation checkpointing: {ckpt}"
             + (f" of {', '.join(recipe.recomputed)}" if rc == "selective" and recipe.recomputed != ("core_attn",)
                else ""),
             f"precision: {recipe.precision_label}, optimizer: {recipe.optimizer}"
             + (f" (main grads {recipe.main_grads_dtype}, states {recipe.optimizer_states_dtype})"
                if recipe.precision_aware else "")
             + ((", offloaded to the host CPU (" + ("DeepSpeed zero_optimization.offload_optimizer.device cpu"
                                                     if recipe.stack == "deepspeed" else "--optimizer-cpu-offload") + ")")
                if recipe.optimizer_offload else ""),
             f"communication overlap: {'on' if layout['overlap'] else 'off'}"
             + (f", DP gradient reduce under the backward: "
                f"{'on' if dp_overlap_on(recipe, layout['zero'], True) else 'off'}"
                + (f" (zero_optimization.overlap_comm: {str(bool(dp_overlap_on(recipe, layout['zero'], True))).lower()})"
                   if recipe.stack == "deepspeed" else "")
                if layout["overlap"] else "")
             + (f", pipeline sends under the next virtual stage: {'on' if recipe.pp_overlap else 'off'}"
                if layout["vp"] > 1 and layout["overlap"] else "")]
    split = _split_line(layout, model, recipe, layers)
    if split:
        lines.insert(2, split)
    if recipe.doc_tokens:
        lines.append(f"packed sequences: documents of {recipe.doc_tokens} tokens, each attending to itself only "
                     "(variable-length fused attention)")
    if recipe.kv_repeat and model.kv_repeat_factor > 1:
        lines.append(f"GQA: K and V repeated {model.kv_repeat_factor:g}x to the query heads before attention "
                     "(repeat_kv; a kernel given enable_gqa reads them unrepeated)")
    if model.is_moe:
        cap = (f"capacity factor {recipe.moe_capacity_factor:g}" + (", padded" if recipe.moe_pad_to_capacity else "")
               if recipe.moe_capacity_factor > 0 else "dropless")
        lines.append(f"MoE: {recipe.moe_dispatcher} token dispatch, "
                     f"{'grouped GEMM' if recipe.moe_grouped_gemm else 'one GEMM per expert'}, {cap}, "
                     f"{'fused' if recipe.moe_permute_fusion else 'unfused (atomic scatter-add)'} token permutation"
                     + (", fused router kernels" if recipe.moe_router_fusion else "")
                     + (", the EP all-to-all under the other micro-batch's compute (batch-level EP overlap)"
                        if recipe.moe_ep_overlap else ""))
    return "\n".join(lines)


def _split_line(layout: dict, model: ModelSpec, recipe: Recipe, layers=None) -> str | None:
    """The ``settings`` line of an uneven pipeline split: the transformer layers of each stage (and, where
    the split is a layout, Megatron-core's text of it, :func:`pipeline_split_settings`), or None."""
    kind, value = pipeline_split_settings(layout, model, recipe, layers)
    if kind is None:
        return None
    per = (layers.rank_layers() if hasattr(layers, "stages") else layers if layers is not None
           else pipeline_split(model, layout, light_last_stage(recipe)))
    out = f"pipeline split: {'|'.join(f'{float(x):g}' for x in per)} transformer layers per stage"
    if kind == "accounted":
        return out + " (the embedding and the loss counted as pipeline layers)"
    return out + (f" (Megatron-core pipeline layout {value})" if kind == "layout" else "")


def settings_dict(layout: dict, model: ModelSpec, recipe: Recipe, layers=None) -> dict:
    """The layout and recipe as one JSON-ready mapping (the ``json`` format); ``pipeline_split`` says how
    Megatron-core is given an uneven split (:func:`pipeline_split_settings`: kind and value), else None."""
    out = {k: (layout[k].item() if hasattr(layout.get(k), "item") else layout.get(k)) for k in FIELDS if k in layout}
    out.update(gbs=recipe.gbs, seq_len=recipe.seq_len, precision=recipe.precision,
               fp8_recipe=recipe.fp8_recipe if recipe.precision == "fp8" else None, stack=recipe.stack,
               flash_attention=recipe.flash_attention, optimizer=recipe.optimizer, model=model.name,
               recompute_modules=list(recipe.recomputed), fused_elementwise=recipe.fused_elementwise,
               main_grads_dtype=recipe.main_grads_dtype, optimizer_states_dtype=recipe.optimizer_states_dtype,
               optimizer_offload=recipe.optimizer_offload, pp_overlap=recipe.pp_overlap,
               doc_tokens=recipe.doc_tokens, kv_repeat=recipe.kv_repeat)
    if "pp" in layout and "vp" in layout:
        kind, value = pipeline_split_settings(layout, model, recipe, layers)
        out["pipeline_split"] = dict(kind=kind, value=list(value) if kind == "first_last" else value) if kind else None
    # every other switch the prediction priced (dp_overlap, tp_comm_overlap, cross_entropy, ...), so the
    # record reproduces it; the MoE ones for MoE models
    out.update({sw.name: getattr(recipe, sw.name) for sw in RECIPE_SWITCHES
                if sw.name not in out and not sw.moe and hasattr(recipe, sw.name)})
    if model.is_moe:
        out.update({k: getattr(recipe, k) for k in MOE_SWITCHES})
    from .report import idle_switches
    out.update(idle_switches(layout, []))
    if "zero" in layout and "overlap" in layout:
        # the switch is the recipe's; a stack whose ZeRO-3 overlaps regardless (DeepSpeed, FSDP) runs it on
        out["dp_overlap_priced"] = bool(dp_overlap_on(recipe, layout["zero"], layout["overlap"]))
    return out
