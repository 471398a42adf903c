"""Search: enumerate every valid layout, predict all of them in vectorised chunks, rank them.

The ILP (costmodel.optimize, costmodel.ilp) consumes the ranked survivors; ranking by step time is the default objective.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .layouts import LayoutTable, enumerate_layouts, layers_per_stage, pinned, validity
from .layout_grid import uneven_pp_rule
from .moe import flex_crosses_efa
from .predict import Prediction, predict_table
from .specs import ClusterSpec, ModelSpec, Profile, Recipe
from .stacks import get_stack

CHUNK = 262_144  # layouts per vectorised batch: bounds peak memory, drives the progress bar
#: ranked layouts whose full recompute the search tries to narrow to N layers per chunk by default:
#: recommend's re-ranked shortlist and more (it passes its own --top)
PARTIAL_REACH = 32


@dataclass
class SearchResult:
    """Outcome of a search.

    Attributes:
        ranked: predictions of the feasible layouts, fastest first, with the partial-recompute
            variants (full recompute on fewer layers, :func:`partial_recompute`) added to them: it
            can hold more rows than ``n_feasible``.
        n_valid: layouts passing the divisibility rules (the enumerated ones, variants aside).
        n_feasible: of those, layouts fitting in HBM.
        closest_infeasible: when nothing fits, the prediction with the smallest peak memory (else None).
        faster_infeasible: the fastest layout overall when it does not fit in memory and beats the
            winner (one-row prediction, else None): what memory costs.
    """

    ranked: Prediction
    n_valid: int
    n_feasible: int
    closest_infeasible: Prediction | None
    faster_infeasible: Prediction | None = None


def search(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, *,
           progress=None, pins: dict | None = None, partial_reach: int = PARTIAL_REACH,
           **enum_kwargs) -> SearchResult:
    """Enumerate, predict and rank every layout of ``model`` on ``cluster``; then give the full-recompute
    layouts that could reach the first ``partial_reach`` places their least partial recompute
    (:func:`partial_recompute`).

    Args:
        progress: optional callable(done, total) called after each chunk (the CLI's progress bar).
        pins: layout fields the search holds fixed (:func:`costmodel.layouts.pinned`); a ``recompute``
            pin other than full, or a ``recompute_num_layers`` one, leaves the recompute as pinned (full
            keeps its partial variants: full recompute still, on fewer layers).
        partial_reach: the ranked places partial recompute may enter (0: none).
        enum_kwargs: passed to :func:`costmodel.layouts.enumerate_layouts` (``zero_stages`` defaults to
            the stages the recipe's stack has, costmodel.run_checks.search_zero_stages).
    With the flex MoE dispatcher on an AWS EFA cluster only layouts whose EP groups stay inside a node
    take part (costmodel.moe.flex_crosses_efa: its kernels do not cross EFA upstream).

    Returns:
        :class:`SearchResult`, priced with the recipe the model runs (costmodel.run_checks.model_recipe).
    Raises:
        InputError: a switch the model, GPU or stack cannot run (costmodel.run_checks.model_recipe).
    """
    from .run_checks import model_recipe, search_zero_stages
    recipe = model_recipe(model, recipe, cluster)
    enum_kwargs.setdefault("zero_stages", search_zero_stages(recipe))
    table = enumerate_layouts(model, recipe, cluster.num_gpus, cluster.scale_up_gpus, pins=pins, **enum_kwargs)
    if (pins or {}).get("recompute_num_layers"):
        # the enumeration recomputes every layer it recomputes: a pinned N applies to its full-recompute
        # layouts, kept where the rules allow it (N within a chunk, a stack with the block method)
        n = pins["recompute_num_layers"]
        table = replace(table, recompute_num_layers=np.where(table.recompute == 2, n, 0).astype(np.int64))
        table = table.take(validity(table, model, recipe, cluster.num_gpus, cluster.scale_up_gpus,
                                    uneven_pp=uneven_pp_rule(recipe.stack))[0]
                           == -1)
    if pins:
        table = table.take(pinned(table, pins))
    if model.is_moe and recipe.moe_dispatcher == "flex":
        # flex's kernels do not cross AWS EFA nodes upstream (costmodel.moe.flex_crosses_efa)
        table = table.take(~flex_crosses_efa(cluster, table.etp, table.ep))
    n = len(table)
    parts = []
    for start in range(0, max(n, 1), CHUNK):
        idx = np.arange(start, min(start + CHUNK, n))
        if len(idx):
            parts.append(predict_table(model, recipe, cluster, profile, table.take(idx)))
        if progress is not None:
            progress(min(start + CHUNK, n), n)
    if not parts:
        empty = predict_table(model, recipe, cluster, profile, table)
        return SearchResult(empty, 0, 0, None)
    pred = parts[0] if len(parts) == 1 else _concat(parts)
    feas = np.flatnonzero(pred.feasible)
    if len(feas) == 0:
        best = np.array([int(np.argmin(pred.memory.peak_bytes))])
        return SearchResult(pred.take(feas), n, 0, pred.take(best))
    order = feas[np.argsort(pred.step_time_s[feas], kind="stable")]
    fastest = int(np.argmin(pred.step_time_s))
    faster = pred.take(np.array([fastest])) if not pred.feasible[fastest] else None
    ranked = pred.take(order)
    pinned_rc = (pins or {}).get("recompute")
    if partial_reach > 0 and "recompute_num_layers" not in (pins or {}) and pinned_rc in (None, "full"):
        part = partial_recompute(model, recipe, cluster, profile, ranked, partial_reach)
        if part is not None:
            both = _concat([ranked, part])
            ranked = both.take(np.argsort(both.step_time_s, kind="stable"))
    return SearchResult(ranked, n, len(feas), None, faster)


def partial_recompute(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                      ranked: Prediction, reach: int) -> Prediction | None:
    """The least partial full recompute of the ranked full-recompute layouts that could enter the first
    ``reach`` places: Megatron's ``--recompute-method block --recompute-num-layers N`` recomputes N
    layers of each pipeline chunk and keeps the others' activations, so it runs faster than full
    recompute on every layer where the memory allows it.

    A layout is a candidate when its step less a third of its compute and bubble (the recomputed
    forward: under full recompute compute = forward + recomputed forward + backward, and backward >=
    forward, so the forward is at most a third; the bubble scales with the stage's time) is below the
    step of place ``reach`` (no N can take it further), and it does not fit without recompute (which
would run faster still).  Peak memory falls as N grows, so the least N
    that fits is found by bisection over 1 .. layers per chunk (each pass one vectorised prediction of
    the candidates left).  Only stacks with the block method (``Stack.partial_recompute``) take part.

    Args:
        ranked: the feasible layouts, fastest first (each with N = 0: every layer of a chunk).
        reach: places of ``ranked`` the partial layouts may enter.
    Returns:
        the predictions of the partial layouts that fit (N below the chunk's layers), or None.
    """
    if not get_stack(recipe.stack).partial_recompute or not len(ranked.step_time_s):
        return None
    L = ranked.layouts
    bar = ranked.step_time_s[min(reach, len(L)) - 1]
    saved = (ranked.breakdown["compute_s"] + ranked.breakdown["bubble_s"]) / 3.0
    per_chunk = (layers_per_stage(model, L) // L.vp).astype(np.int64)
    cand = np.flatnonzero((L.recompute == 2) & (L.recompute_num_layers == 0) & (per_chunk > 1)
                          & (ranked.step_time_s - saved < bar))
    if not len(cand):
        return None
    # a layout that fits without recompute runs faster so: no N is worth it
    cand = cand[~predict_table(model, recipe, cluster, profile, replace(L.take(cand), recompute=np.zeros_like(
        cand))).feasible]
    if not len(cand):
        return None
    base = L.take(cand)
    lo, hi = np.ones(len(cand), dtype=np.int64), per_chunk[cand].copy()    # N = layers per chunk fits
    while np.any(lo < hi):
        act = np.flatnonzero(lo < hi)
        mid = (lo[act] + hi[act]) // 2
        trial = replace(base.take(act), recompute_num_layers=mid)
        fits = predict_table(model, recipe, cluster, profile, trial).feasible
        hi[act] = np.where(fits, mid, hi[act])
        lo[act] = np.where(fits, lo[act], mid + 1)
    keep = np.flatnonzero(lo < per_chunk[cand])
    if not len(keep):
        return None
    return predict_table(model, recipe, cluster, profile, replace(base.take(keep), recompute_num_layers=lo[keep]))


def _concat(parts: list[Prediction]) -> Prediction:
    from .memory import MemoryBreakdown
    lay = LayoutTable(**{f: np.concatenate([getattr(p.layouts, f) for p in parts])
                         for f in parts[0].layouts.__dataclass_fields__})
    mem = MemoryBreakdown(**{f: np.concatenate([getattr(p.memory, f) for p in parts])
                             for f in parts[0].memory.__dataclass_fields__})
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])
    return Prediction(lay, cat("step_time_s"), cat("tokens_per_s_per_gpu"), cat("model_tflops_per_gpu"),
                      cat("mfu"), mem, cat("feasible"),
                      {k: np.concatenate([p.breakdown[k] for p in parts]) for k in parts[0].breakdown})
