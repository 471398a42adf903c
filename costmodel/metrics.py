"""The figures derived from a step time and an energy: throughput, model TFLOP/s, MFU, tokens per joule
and the seed characterization's samples/(s MJ).  The one place these are computed; everything is
vectorised (floats or numpy arrays broadcast).

* tokens/s/GPU = gbs x seq_len / step_time / GPUs.
* model TFLOP/s/GPU = model FLOPs per step (Megatron convention, no recompute: Narayanan et al.
  SC21, :func:`costmodel.compute.model_flops_per_step`) / step_time / GPUs / 1e12.
* MFU = model FLOP/s per GPU / the dense 16-bit peak (:func:`costmodel.compute.dense_peak_flops`;
  DESIGN.md reference points: 989 TFLOP/s on H100/H200 SXM, not the sparsity figure).
* tokens/J = gbs x seq_len / energy per step (J).
* samples/(s MJ) = (gbs / step_time) / (energy per step / 1e6) (the seed MICRO'25 paper's metric).
"""
from __future__ import annotations

from .compute import dense_peak_flops, model_flops_per_step
from .specs import ClusterSpec, ModelSpec, Recipe


def tokens_per_step(recipe: Recipe) -> int:
    """Tokens of one training step: gbs x seq_len."""
    return recipe.gbs * recipe.seq_len


def tokens_per_s_per_gpu(recipe: Recipe, step_time_s, num_gpus):
    """Training throughput per GPU, tokens/s: gbs x seq_len / step_time_s / num_gpus."""
    return recipe.gbs * recipe.seq_len / step_time_s / num_gpus


def model_flops_per_s_per_gpu(model: ModelSpec, recipe: Recipe, step_time_s, num_gpus):
    """Model FLOP/s per GPU (Megatron convention, no recompute)."""
    return model_flops_per_step(model, recipe) / step_time_s / num_gpus


def model_tflops_per_gpu(model: ModelSpec, recipe: Recipe, step_time_s, num_gpus):
    """Model TFLOP/s per GPU (Megatron convention, no recompute)."""
    return model_flops_per_s_per_gpu(model, recipe, step_time_s, num_gpus) / 1e12


def mfu(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, step_time_s, num_gpus):
    """Model FLOPs utilisation: model FLOP/s per GPU over the dense 16-bit peak (fraction)."""
    return model_flops_per_s_per_gpu(model, recipe, step_time_s, num_gpus) / dense_peak_flops(cluster, recipe)


def tokens_per_joule(recipe: Recipe, energy_j_per_step):
    """Tokens trained per joule of GPU energy: gbs x seq_len / energy per step."""
    return tokens_per_step(recipe) / energy_j_per_step


def energy_j_per_token(recipe: Recipe, energy_j_per_step):
    """GPU energy per trained token, J: energy per step / (gbs x seq_len)."""
    return energy_j_per_step / tokens_per_step(recipe)


def samples_per_s_per_mj(recipe: Recipe, step_time_s, energy_j_per_step):
    """Samples per second per MJ of step energy: (gbs / step_time_s) / (energy_j_per_step / 1e6)."""
    return (recipe.gbs / step_time_s) / (energy_j_per_step / 1e6)


def causal_flops_share(model: ModelSpec, recipe: Recipe) -> float:
    """Model FLOPs per step with causal attention (half the s x s score matrix, Megatron-LM's count since
    2025-03) over those with the whole matrix (SC21's, :func:`mfu`'s): the factor from one MFU to the other."""
    return model_flops_per_step(model, recipe, causal=True) / model_flops_per_step(model, recipe)
