"""The layers per pipeline stage that make the slowest stage fastest.

A 1F1B pipeline runs at the pace of its slowest stage (Narayanan et al. SC21, sec. 2.2: the steady
state issues one micro-batch per slowest-stage time).  With L like transformer layers of time t per
micro-batch, stage s holding n_s of them and the extra work e_s only it runs (the embedding on the
first stage; the logits, the loss and any multi-token-prediction module on the last), its time is
n_s t + e_s.  The split minimising max_s (n_s t + e_s) subject to sum n_s = L, 1 <= n_s <= N_s (the
layers its memory holds) is found exactly: the least pace tau at which floor((tau - e_s) / t) layers
per stage, capped at N_s, add up to L is one of the L x PP values k t + e_s, searched in order.
Megatron-core runs any such split (--pipeline-model-parallel-layout, or
--decoder-first/last-pipeline-num-layers), which costmodel.launch prints.
"""
from __future__ import annotations

import numpy as np


def balanced_split(num_layers: int, t_layer_s: float, extra_s, max_layers=None) -> np.ndarray | None:
    """Layers per stage (int array of length PP, summing to ``num_layers``) minimising the slowest
    stage's time n_s t + e_s (module docstring).

    Args:
        num_layers: transformer layers L >= PP.  t_layer_s: one layer's time per micro-batch, s (> 0).
        extra_s: per stage, the extra time per micro-batch only that stage runs, s (length PP).
        max_layers: per stage, the most layers its memory holds (None: no bound).
    Returns:
        The split, or None when no split fits (a stage's memory holds no layer, or all together
        hold fewer than L).  Ties keep the extra layers on the earliest stages.
    """
    e = np.asarray(extra_s, dtype=np.float64)
    pp = len(e)
    cap = (np.full(pp, num_layers, dtype=np.int64) if max_layers is None
           else np.minimum(np.floor(np.asarray(max_layers, dtype=np.float64)), num_layers).astype(np.int64))
    if pp < 1 or num_layers < pp or (cap < 1).any() or cap.sum() < num_layers or not t_layer_s > 0:
        return None
    k = np.arange(1, num_layers + 1, dtype=np.float64)
    for tau in np.unique((k[:, None] * t_layer_s + e[None, :]).ravel()):
        n = np.minimum(np.floor((tau - e) / t_layer_s * (1 + 1e-12)), cap).astype(np.int64)
        if (n >= 1).all() and n.sum() >= num_layers:
            # the pace holds: drop the surplus from the latest stages first (each stays >= 1)
            over = int(n.sum()) - num_layers
            for s in range(pp - 1, -1, -1):
                take = min(over, int(n[s]) - 1)
                n[s] -= take
                over -= take
            return n
    return None


def balanced_pace_ratio(num_layers: int, pp, extra_layers, light_last) -> np.ndarray:
    """A lower bound of the pace a balanced split reaches over the pace of the default one (arrays
    broadcast, <= 1): the default split's fullest stage runs ceil(L/PP) layers and the last stage's
    extra ``extra_layers`` E, in layers of its per-layer time (costmodel.layouts.uneven_split; with
    ``light_last`` the slower of ceil(L/PP) and floor(L/PP) + E), and no split runs faster than the
    mean, (L + E)/PP.  With E over-estimated the bound stays below the true ratio (the ratio falls as E
    grows).  1 at PP 1."""
    pp = np.asarray(pp, dtype=np.float64)
    L, e = float(num_layers), np.asarray(extra_layers, dtype=np.float64)
    full = np.ceil(L / pp)
    default = np.where(light_last, np.maximum(full, np.floor(L / pp) + e), full + e)
    return np.where(pp > 1, np.minimum((L + e) / pp / default, 1.0), 1.0)
