"""GEMM roofline with a shape-dependent efficiency, evaluated on numpy arrays.

The time of one (batched) GEMM ``C[b, m, n] = A[b, m, k] @ B[b, k, n]`` is

    t = t_launch + max(F / (P_peak * eta(m, n, k)),  Q / (B_hbm * eta_hbm))

with F = 2*b*m*n*k FLOPs and Q = bytes of A, B and C (Williams et al., "Roofline", CACM 2009).
The efficiency eta is the product of three physically separate losses:

* tile quantisation: the kernel computes whole ``tile_m x tile_n`` output tiles, so a partial tile
  wastes the padded fraction (NVIDIA, "Matrix Multiplication Background User's Guide", section
  "Tile Quantization");
* wave quantisation: tiles are scheduled on ``num_sms`` SMs in waves; the last partial wave leaves
  SMs idle (same guide, "Wave Quantization");
* the K-loop prologue/epilogue: each tile pays a fixed cost equivalent to ``k_half`` reduction steps,
  so the main loop runs at k / (k + k_half) of the sustained rate;

times a sustained ceiling ``eta_max`` (the maximum achievable matmul FLOP/s over the peak,
measured as MAMF by ml-engineering's mamf-finder).  ``eta_max``, ``k_half`` and ``t_launch`` are
fitted per GPU by ``costmodel/fit/`` from measured GEMM tables; ``tile_m``, ``tile_n``
are chosen by the same fit among the CUTLASS/cuBLAS tile sizes; ``num_sms`` is a datasheet value.
"""
from __future__ import annotations

import numpy as np

from .specs.params import GemmParams


def gemm_efficiency(m, n, k, batch, p: GemmParams):
    """Fraction of the dense peak a GEMM of shape (batch, m, n, k) reaches.

    Args:
        m, n, k, batch: array-likes of positive numbers (broadcast together); m x n is the output,
            k the reduction dimension.
        p: fitted :class:`GemmParams`.
    Returns:
        numpy array of efficiencies in (0, eta_max].
    Formula: tile and wave quantisation (NVIDIA Matrix Multiplication Background guide) times
    k/(k+k_half) times eta_max; see the module docstring.
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    batch = np.asarray(batch, dtype=np.float64)
    tiles_m = np.ceil(m / p.tile_m)
    tiles_n = np.ceil(n / p.tile_n)
    q_tile = (m * n) / (tiles_m * p.tile_m * tiles_n * p.tile_n)
    tiles = batch * tiles_m * tiles_n
    waves = np.ceil(tiles / p.num_sms)
    q_wave = tiles / (waves * p.num_sms)
    q_k = k / (k + p.k_half)
    return p.eta_max * q_tile * q_wave * q_k


def gemm_bytes(m, n, k, batch=1.0, bytes_per_element=2.0):
    """HBM bytes a GEMM y[m,n] = x[m,k] w[k,n] moves at least (arrays broadcast): its inputs at
    ``bytes_per_element`` and its output at max(2, ``bytes_per_element``), since training's
    low-precision GEMMs write bf16 (:func:`gemm_time_s`)."""
    return batch * (bytes_per_element * (m * k + k * n) + max(bytes_per_element, 2.0) * m * n)


def gemm_time_s(m, n, k, batch, peak_flops_per_s, hbm_bytes_per_s, hbm_efficiency, p: GemmParams,
                bytes_per_element=2.0):
    """Roofline time in seconds of a batched GEMM, on arrays.

    Args:
        m, n, k, batch: GEMM shape(s), broadcastable arrays.
        peak_flops_per_s: dense peak of the GPU for the GEMM's dtype (datasheet), FLOP/s.
        hbm_bytes_per_s: HBM bandwidth (datasheet), bytes/s.
        hbm_efficiency: fitted achievable fraction of ``hbm_bytes_per_s``.
        p: fitted :class:`GemmParams`.
        bytes_per_element: input operand size, bytes (2 for bf16/fp16, 1 for fp8, 0.5 for fp4).  The
            output C is written in at least 16 bits: the low-precision GEMMs of training write bf16
            (Transformer Engine's fp8 GEMMs, DeepGEMM, ``torch._scaled_mm`` with ``out_dtype=bf16`` as
            the calibration suite runs it), so C costs max(2, bytes_per_element) bytes an element.
    Returns:
        numpy array of seconds.
    Formula: Williams et al. roofline, t = t_launch + max(F/(P*eta), Q/(B*eta_hbm)).
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    batch = np.asarray(batch, dtype=np.float64)
    flops = 2.0 * batch * m * n * k
    t_flops = flops / (peak_flops_per_s * gemm_efficiency(m, n, k, batch, p))
    t_bytes = gemm_bytes(m, n, k, batch, bytes_per_element) / (hbm_bytes_per_s * hbm_efficiency)
    return p.launch_s + np.maximum(t_flops, t_bytes)
