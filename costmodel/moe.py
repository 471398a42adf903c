"""MoE token routing costs that are not GEMMs: the load of the busiest expert-parallel rank and the
memory traffic of moving tokens to and from their experts.

* Load imbalance.  A synchronous all-to-all and the expert GEMMs after it wait for the rank that
  received the most tokens.  With m token-expert assignments spread over n ranks at random, the
  expected maximum load is m/n + sqrt(2 (m/n) ln n) for m >= n ln n (Raab & Steger, "Balls into
  Bins - A Simple and Tight Analysis", RANDOM 1998, Theorem 1).  Auxiliary-loss routing aims at a
  uniform expected load, so this is the floor of the imbalance a trained router shows, not its
  measured value.
* Permutation.  Megatron-core's all-to-all token dispatcher copies every routed token four times
  per direction: permute into expert order before the dispatch all-to-all, sort the received
  chunks by local expert, and the reverse two after the experts (unsort, then unpermute with the
  routing probabilities) (megatron/core/transformer/moe/token_dispatcher.py,
  MoEAlltoAllTokenDispatcher; moe_utils.permute / sort_chunks_by_idxs / unpermute).  Each copy
  reads and writes the token's hidden vector.
"""
from __future__ import annotations

import numpy as np

#: token copies per direction of Megatron-core's all-to-all dispatcher (module docstring)
DISPATCH_COPIES = 4


def max_load_factor(assignments_per_rank, ranks) -> np.ndarray:
    """Expected maximum load over the mean load of ``ranks`` bins receiving
    ``assignments_per_rank`` x ``ranks`` random assignments: 1 + sqrt(2 ln n / (m/n)) (Raab & Steger
    1998), 1 for a single rank.  Arrays broadcast; the mean load is floored at ln n, the bound's
    range.

    Raises:
        ValueError: a non-positive load or rank count.
    """
    mu = np.asarray(assignments_per_rank, dtype=np.float64)
    n = np.asarray(ranks, dtype=np.float64)
    if np.any(mu <= 0) or np.any(n < 1):
        raise ValueError("loads must be positive and ranks >= 1")
    ln = np.log(n)
    return np.where(n > 1, 1.0 + np.sqrt(2.0 * ln / np.maximum(mu, ln)), 1.0)


def dispatch_bytes(tokens, topk: int, hidden: int, elem_bytes: float):
    """HBM bytes one direction of token dispatch and combine moves (forward; backward moves the
    same gradients): DISPATCH_COPIES copies, each reading and writing ``tokens`` x ``topk`` rows
    of ``hidden`` elements."""
    return DISPATCH_COPIES * 2.0 * tokens * topk * hidden * elem_bytes
