"""Search: enumerate every valid layout, predict all of them in vectorised chunks, rank them.

The ILP (costmodel.optimize, costmodel.ilp) consumes the ranked survivors; ranking by step time is the default objective.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layouts import LayoutTable, enumerate_layouts, pinned
from .predict import Prediction, predict_table
from .specs import ClusterSpec, ModelSpec, Profile, Recipe

CHUNK = 262_144  # layouts per vectorised batch: bounds peak memory, drives the progress bar


@dataclass
class SearchResult:
    """Outcome of a search.

    Attributes:
        ranked: predictions of the feasible layouts, fastest first.
        n_valid: layouts passing the divisibility rules.
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
           progress=None, pins: dict | None = None, **enum_kwargs) -> SearchResult:
    """Enumerate, predict and rank every layout of ``model`` on ``cluster``.

    Args:
        progress: optional callable(done, total) called after each chunk (the CLI's progress bar).
        pins: layout fields the search holds fixed (:func:`costmodel.layouts.pinned`).
        enum_kwargs: passed to :func:`costmodel.layouts.enumerate_layouts`.
    Returns:
        :class:`SearchResult`.
    """
    table = enumerate_layouts(model, recipe, cluster.num_gpus, cluster.scale_up_gpus, pins=pins, **enum_kwargs)
    if pins:
        table = table.take(pinned(table, pins))
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
    return SearchResult(pred.take(order), n, len(feas), None, faster)


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
