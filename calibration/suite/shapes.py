"""GEMM shapes to measure: the weight GEMMs of catalog models at each TP degree, and a grid.

A GEMM is ``y[b, m, n] = x[b, m, k] @ w[b, k, n]`` (b = 1: a plain matmul; b > 1: a batched
matmul, the experts of an MoE layer), ``2 b m n k`` FLOPs.  Per transformer layer and TP degree t,
with M = tokens (micro-batch x sequence length), h hidden, q = heads x head_dim, kv = kv_heads x
head_dim, f the MLP width, V the vocabulary, sharded Megatron-style (Shoeybi et al. 2019:
column-parallel QKV / FC1, row-parallel output / FC2), exactly as :mod:`costmodel.compute` counts
them:

=========  =====================  ===============  ==========================================
GEMM       M                      N                K
=========  =====================  ===============  ==========================================
qkv        M                      (q + 2 kv) / t   h          (GQA, Ainslie et al. 2023)
proj       M                      h                q / t
fc1        M (x topk/E, b=E MoE)  mats x f / t     h          (mats = 2 for SwiGLU's fused up+gate)
fc2        M (x topk/E, b=E MoE)  h                f / t
router     M                      E                h          (MoE only)
logits     M                      V / t            h
=========  =====================  ===============  ==========================================

Backward runs dgrad ``(m, k, n)`` and wgrad ``(k, n, m)`` of every forward ``(m, n, k)``
(Narayanan et al. SC21: backward = 2x forward FLOPs); ``costmodel.compute.compute_times`` times the
same three shapes.  Widths that TP does not divide are rounded up (Megatron pads the vocabulary).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

PASSES = ("fwd", "bwd")


@dataclass
class GemmShape:
    """One GEMM shape and every (model, TP, tokens, GEMM, pass) that has it.

    Attributes:
        b, m, n, k: batch and matrix dimensions (ints >= 1).
        source: ``"model"`` or ``"grid"``.
        labels: e.g. ``["llama3-8b/tp2/tok4096/qkv/fwd"]``.
    """

    b: int
    m: int
    n: int
    k: int
    source: str
    labels: list = field(default_factory=list)

    @property
    def flops(self) -> int:
        """2 b m n k (one multiply-add = 2 FLOPs)."""
        return 2 * self.b * self.m * self.n * self.k

    @property
    def key(self) -> tuple:
        """(b, m, n, k)."""
        return (self.b, self.m, self.n, self.k)


def _cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def layer_gemms(model, tokens: int, tp: int) -> list[tuple[str, int, int, int, int]]:
    """Forward weight GEMMs ``(name, b, m, n, k)`` of one layer plus the logits, on one TP rank.

    Args:
        model: :class:`costmodel.specs.ModelSpec`.
        tokens: M, tokens per micro-batch on this rank (mbs x seq_len).
        tp: tensor-parallel degree (>= 1).
    Returns:
        list of (name, b, m, n, k); the table in the module docstring.
    """
    h, q, kv, f, V = model.hidden, model.q_dim, model.kv_dim, model.ffn_hidden, model.vocab
    mats = 2 if model.gated else 1
    out = [("qkv", 1, tokens, _cdiv(q + 2 * kv, tp), h),
           ("proj", 1, tokens, h, _cdiv(q, tp))]
    if model.is_moe:
        E = model.num_experts
        m_exp = max(1, _cdiv(tokens * model.topk, E))
        out += [("router", 1, tokens, E, h),
                ("fc1", E, m_exp, _cdiv(mats * f, tp), h),
                ("fc2", E, m_exp, h, _cdiv(f, tp))]
    else:
        out += [("fc1", 1, tokens, _cdiv(mats * f, tp), h),
                ("fc2", 1, tokens, h, _cdiv(f, tp))]
    out.append(("logits", 1, tokens, _cdiv(V, tp), h))
    return out


def model_shapes(models, tokens_list, tps, passes=PASSES) -> list[GemmShape]:
    """Distinct GEMM shapes of ``models`` x ``tokens_list`` x ``tps`` x ``passes``, first-seen order.

    Args:
        models: ModelSpec list.
        tokens_list: M values (tokens per micro-batch).
        tps: TP degrees.
        passes: subset of ``("fwd", "bwd")``; bwd adds dgrad (m, k, n) and wgrad (k, n, m).
    Returns:
        list of :class:`GemmShape` (source ``"model"``), duplicates merged into ``labels``.
    """
    seen: dict[tuple, GemmShape] = {}
    for model, tokens, tp in itertools.product(models, tokens_list, tps):
        for name, b, m, n, k in layer_gemms(model, tokens, tp):
            tag = f"{model.name}/tp{tp}/tok{tokens}/{name}"
            shapes = []
            if "fwd" in passes:
                shapes.append(("fwd", (b, m, n, k)))
            if "bwd" in passes:
                shapes += [("dgrad", (b, m, k, n)), ("wgrad", (b, k, n, m))]
            for p, key in shapes:
                s = seen.get(key)
                if s is None:
                    s = seen[key] = GemmShape(*key, source="model")
                s.labels.append(f"{tag}/{p}")
    return list(seen.values())


def grid_shapes(sizes) -> list[GemmShape]:
    """Every (m, n, k) in ``sizes`` x ``sizes`` x ``sizes`` with b = 1 (source ``"grid"``)."""
    return [GemmShape(1, m, n, k, source="grid", labels=["grid"]) for m, n, k in itertools.product(sizes, repeat=3)]
