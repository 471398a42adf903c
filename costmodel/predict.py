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


def predict_table(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                  layouts: LayoutTable) -> Prediction:
    """Predict every layout of a (valid) table at once; vectorised over layouts.

    Raises:
        InputError: the recipe's precision is not supported by the GPU or the profile.
    """
    ct = compute_times(model, recipe, cluster, profile, layouts)
    cm = comm_times(model, recipe, cluster, profile, layouts)
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
