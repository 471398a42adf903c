"""Prediction: every cost term for a table of layouts, and the derived throughput metrics.

Data flow (DESIGN.md): specs -> layouts -> compute / comm / memory / schedule -> this record.
The scalar ``predict`` of the CLI is this same code on a table of one layout.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm import comm_times
from .compute import compute_times, dense_peak_flops, model_flops_per_step
from .layouts import LayoutTable
from .memory import MemoryBreakdown, memory_bytes
from .schedule import BREAKDOWN_TERMS, step_times
from .specs import ClusterSpec, ModelSpec, Profile, Recipe


@dataclass
class Prediction:
    """Predicted metrics for every layout of ``layouts`` (arrays of len(layouts)).

    Attributes:
        layouts: the :class:`LayoutTable` predicted.
        step_time_s: seconds per training step.
        tokens_per_s_per_gpu: gbs x seq_len / step_time / GPUs.
        model_tflops_per_gpu: model FLOPs (Megatron convention, no recompute) / step / GPUs / 1e12.
        mfu: model FLOP/s per GPU / dense 16-bit peak (DESIGN.md reference points).
        memory: :class:`costmodel.memory.MemoryBreakdown` (peak bytes per GPU).
        feasible: peak memory fits the GPU's HBM capacity.
        breakdown: term -> seconds, the terms of costmodel.schedule.BREAKDOWN_TERMS.
    """

    layouts: LayoutTable
    step_time_s: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    model_tflops_per_gpu: np.ndarray
    mfu: np.ndarray
    memory: MemoryBreakdown
    feasible: np.ndarray
    breakdown: dict

    def take(self, idx) -> "Prediction":
        """The predictions of a subset (index array or mask)."""
        return Prediction(self.layouts.take(idx), self.step_time_s[idx], self.tokens_per_s_per_gpu[idx],
                          self.model_tflops_per_gpu[idx], self.mfu[idx],
                          MemoryBreakdown(*(getattr(self.memory, f)[idx] for f in
                                            ("weights_bytes", "grads_bytes", "optimizer_bytes",
                                             "activations_bytes", "peak_bytes"))),
                          self.feasible[idx], {k: v[idx] for k, v in self.breakdown.items()})


def unique_rows(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of small non-negative integer columns without sorting.

    Each column is mapped to dense indices through a lookup table over its value range, the
    indices are combined into one mixed-radix key, and a presence table over the key range yields
    the distinct rows.  O(n + value ranges), which beats np.unique's sort on the hot path.

    Returns:
        (first, inverse): ``first`` indexes one representative row per distinct row, and
        ``rows[first][inverse]`` reproduces every row.
    """
    n = len(cols[0])
    key = np.zeros(n, dtype=np.int64)
    radix = 1
    for c in cols:
        c = c.astype(np.int64)
        present = np.zeros(int(c.max()) + 1 if n else 1, dtype=bool)
        present[c] = True
        dense = np.cumsum(present) - 1
        key += dense[c] * radix
        radix *= int(present.sum())
        if radix > 50_000_000:  # key range too large for a presence table: fall back to sorting
            _, first, inv = np.unique(np.stack([x.astype(np.int64) for x in cols]), axis=1,
                                      return_index=True, return_inverse=True)
            return first, inv.ravel()
    first_of = np.full(radix, -1, dtype=np.int64)
    first_of[key[::-1]] = np.arange(n - 1, -1, -1)       # first occurrence of each key
    used = np.flatnonzero(first_of >= 0)
    slot = np.zeros(radix, dtype=np.int64)
    slot[used] = np.arange(len(used))
    return first_of[used], slot[key]


def _gather(obj, inv):
    """Expand every array attribute of a dataclass instance by index ``inv``."""
    return type(obj)(**{k: v[inv] for k, v in vars(obj).items()})


def predict_table(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                  layouts: LayoutTable) -> Prediction:
    """Predict every layout of a (valid) table at once; vectorised over layouts.

    Raises:
        InputError: the recipe's precision is not supported by the GPU or the profile.
    """
    L = layouts
    # Compute depends on a few fields only; communication on all but VP and recompute.  Evaluate
    # each on its distinct rows and gather (a search space has many layouts per distinct row).
    first, inv = unique_rows(L.tp, L.cp, L.mbs, L.ep, L.sp, L.recompute)
    ct = _gather(compute_times(model, recipe, cluster, profile, L.take(first)), inv)
    first, inv = unique_rows(L.tp, L.pp, L.dp, L.cp, L.ep, L.mbs, L.sp, L.zero, L.overlap)
    cm = _gather(comm_times(model, recipe, cluster, profile, L.take(first)), inv)
    st = step_times(model, recipe, cluster, profile, layouts, ct, cm)
    mem = memory_bytes(model, recipe, layouts)
    n_gpus = layouts.tp * layouts.pp * layouts.dp * layouts.cp
    step = st.step_time_s
    tok_s = recipe.gbs * recipe.seq_len / step / n_gpus
    mflops = model_flops_per_step(model, recipe) / step / n_gpus
    mfu = mflops / dense_peak_flops(cluster, recipe)
    feasible = mem.peak_bytes <= cluster.gpu.hbm_bytes
    bd = {k: st.breakdown[k] for k in BREAKDOWN_TERMS}
    return Prediction(layouts, step, tok_s, mflops / 1e12, mfu, mem, feasible, bd)
