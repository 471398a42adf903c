"""Parameters one GPU holds: per pipeline stage (the embedding on the first, the output layer, final norm
and MTP modules on the last), per rank of a run's own split and per layer, dense and expert apart
(layers over TP, experts over ETP x EP), and the bytes of a reduced gradient element."""
from __future__ import annotations

import numpy as np

from .distinct_rows import on_distinct_rows
from .layout_fields import uses_layout_fields
from .layouts import LayoutTable, accounts_embedding_loss, layers_per_stage, stage_moe_layers
from .specs import ModelSpec, Recipe
from .stacks import get_stack


def grad_bytes(recipe: Recipe) -> float:
    """Bytes per gradient element reduced over DP: 4 (fp32 main grads) for bf16/fp8, 2 for fp16, with
    ``main_grads_dtype`` bf16, or on a stack that keeps them in the model's dtype (DeepSpeed:
    costmodel.stacks.Stack.grads_in_model_dtype).

    Megatron-LM sets accumulate_allreduce_grads_in_fp32 for bf16 (megatron/training/arguments.py);
    its precision-aware optimizer may keep them in bf16 (``--main-grads-dtype bf16``).
    """
    return 2.0 if recipe.precision == "fp16" or recipe.main_grads_dtype == "bf16" or \
        get_stack(recipe.stack).grads_in_model_dtype else 4.0


def stage_params(model: ModelSpec, t: LayoutTable, light_last: bool = False):
    """(dense, expert) parameters held by one GPU of the pipeline stage that holds the most, arrays.

    The candidates: the first stage (its layers and the vocab-parallel embedding), the last (its
    layers, the final norm, the output layer (untied, or tied with PP > 1, where Megatron keeps a copy
    of the embedding on the last stage) and the multi-token-prediction modules, whose experts split
    over ETP x EP like the layers'), a middle stage (the fullest count of layers) and, with PP 1, one
    stage holding everything.  Layers split over TP, experts over ETP x EP; each stage holds as many
    MoE layers as its place in the model gives it, so memory is checked where it binds.  The first and last stages hold one layer
    fewer than the fullest where the split counts the embedding and the loss as layers
    (:func:`costmodel.layouts.accounts_embedding_loss`), the last one also where an uneven split (interleaved
    or not) lightens it (``light_last``, costmodel.layouts.light_last_stage).  A stage holds at most
    :func:`costmodel.layouts.stage_moe_layers` MoE layers (all of its layers where the dense ones
    come first, as DeepSeek's do; its share where the model interleaves them).  Evaluated once per
    distinct (TP, PP, VP, EP, ETP), what it reads of ``t``.
    """
    return on_distinct_rows(_stage_params_rows, t, model, light_last)


@uses_layout_fields("tp", "pp", "vp", "ep", "etp")
def _stage_params_rows(model: ModelSpec, light_last: bool, t):
    """:func:`stage_params` on rows ``t`` (a costmodel.layout_fields.LayoutView of the declared fields)."""
    per_stage = layers_per_stage(model, t)
    acc = accounts_embedding_loss(model, t)
    # a run's own interleaved layout says itself what its last rank holds (rank_params)
    own = (np.asarray(t.pp) == len(model.pipeline_rank_layers)) & (np.asarray(t.vp) > 1)
    lighter_last = acc | (light_last & (model.num_layers % t.pp != 0) & ~own)
    stage, emb, last_extra, mtp_exp = _stage_param_parts(model, t)
    cands = [stage(per_stage - acc, np.where(t.pp == 1, 0.0, emb), 0.0),
             stage(per_stage - lighter_last, last_extra, mtp_exp),
             stage(per_stage, 0.0, 0.0)]
    pick = np.argmax(np.stack([d + e for d, e in cands]), axis=0)
    return (np.choose(pick, [np.broadcast_to(d, pick.shape) for d, _ in cands]),
            np.choose(pick, [np.broadcast_to(e, pick.shape) for _, e in cands]))


def _stage_param_parts(model: ModelSpec, t: LayoutTable):
    """(stage(n_layers, extra_dense, extra_expert) -> (dense, expert) per GPU, the embedding, the last
    stage's extra dense and expert parameters) of :func:`stage_params` (its docstring)."""
    moe_dense_part = model.moe_layer_params() - model.expert_params() if model.is_moe else 0
    emb = model.embedding_params()
    has_out_copy = (~np.asarray(model.tie_embeddings)) | (t.pp > 1)
    final_norm = 2 * model.hidden if model.bias else model.hidden
    mtp_exp = model.mtp_layers * model.expert_params()
    last_extra = (np.where(has_out_copy, model.vocab * model.hidden, 0.0) + np.where(t.pp == 1, emb, 0.0)
                  + final_norm + model.mtp_params() - mtp_exp)
    most_moe = stage_moe_layers(model, t)

    def stage(n_layers, extra_dense, extra_exp):
        n_moe = np.minimum(n_layers, most_moe)
        dense = (n_moe * moe_dense_part + (n_layers - n_moe) * model.dense_layer_params() + extra_dense) / t.tp
        return dense, (n_moe * model.expert_params() + extra_exp) / (t.etp * t.ep)
    return stage, emb, last_extra, mtp_exp


def rank_params(model: ModelSpec, t: LayoutTable, rank_layers) -> tuple[np.ndarray, np.ndarray]:
    """(dense, expert) parameters per GPU of each pipeline rank of a run's own split, arrays
    (layouts x ranks): rank r holds ``rank_layers[r]`` layers, the first also the embedding, the last
    the output layer, the final norm and the MTP modules (as :func:`stage_params` counts them)."""
    stage, emb, last_extra, mtp_exp = _stage_param_parts(model, t)
    pp, dense, exp = len(rank_layers), [], []
    for r, n in enumerate(rank_layers):
        extra_d = (emb if r == 0 and pp > 1 else 0.0) + (last_extra if r == pp - 1 else 0.0)
        d, e = stage(float(n), extra_d, mtp_exp if r == pp - 1 else 0.0)
        dense.append(np.broadcast_to(d, (len(t),)))
        exp.append(np.broadcast_to(e, (len(t),)))
    return np.stack(dense, axis=1), np.stack(exp, axis=1)


def layer_params_per_gpu(model: ModelSpec, t: LayoutTable):
    """Parameters of one transformer layer held by one GPU: dense / TP + experts / (ETP x EP)."""
    expert = model.mean_expert_params()
    return (model.layer_params() - expert) / t.tp + expert / (t.etp * t.ep)
