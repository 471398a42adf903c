"""Candidate degrees of the layout grid (costmodel.layouts.enumerate_layouts): the divisors it draws TP,
CP, PP and EP from, the virtual-pipeline sizes (VP) it tries at each pipeline size (PP), and which stacks
split interleaved chunks unevenly.

Megatron-core's interleaved 1F1B runs VP model chunks per pipeline rank (Narayanan et al., SC21 sec. 2.2.2):

* equal chunks: PP x VP divides the layers;
* the embedding and the loss counted as pipeline layers: PP x VP divides L + 2
  (--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split, costmodel.layouts
  ``accounts_embedding_loss``);
* any other split, as Megatron-core's --pipeline-model-parallel-layout names it chunk by chunk (the
  Megatron-core stacks: megatron, nemo).  NVIDIA interleaves DeepSeek-V3's 61 layers so: PP 4 x VP 2,
  PP 8 x VP 2 and PP 4 x VP 4 with the embedding on the first chunk and the MTP module and the loss on the
  last (Megatron-Bridge src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py,
  ``_get_deepseek_v3_pipeline_layout``).  The search tries :data:`UNEVEN_VPS` where PP admits no equal
  chunks, each chunk holding one layer at least and the fullest rank's ceil(L / PP) layers dividing into
  VP equal chunks (so the interleaved schedule's equal-chunk bubble and in-flight memory hold on the rank
  that sets the pace, as in NVIDIA's layouts); such a split is priced at that rank
  (costmodel.layouts.layers_per_stage) and launched as the layout
  costmodel.launch_generic.pipeline_split_settings writes.
"""
from __future__ import annotations

import functools
import math

from .stacks import TE_STACKS

#: VP sizes tried for an uneven interleaved split: those of NVIDIA's DeepSeek-V3 layouts (module docstring)
UNEVEN_VPS = (2, 4)


@functools.lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n`` >= 1, ascending: pairs (d, n / d) for d up to sqrt(n), so a layer count
    of 2^31 costs 46,341 trials, not 2^31."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def uneven_pp_rule(stack: str):
    """What costmodel.layouts.validity's ``uneven_pp`` accepts for a layout the search or a user's flags
    give on ``stack`` (a costmodel.stacks name): ``"any"`` (uneven stages, interleaved too) on the
    Megatron-core stacks, whose --pipeline-model-parallel-layout sets any split; True (uneven stages with
    VP 1 only) elsewhere."""
    return "any" if stack in TE_STACKS else True


def fullest_rank_layers(num_layers: int, pp: int) -> int:
    """Transformer layers on the fullest rank of a split spread as evenly as whole layers allow: ceil(L / PP)
    (costmodel.layouts.layers_per_stage), which an uneven interleaved split needs VP to divide for equal
    chunks where the pace is set (module docstring)."""
    return -(-num_layers // pp)


def vp_candidates(num_layers: int, pp: int, stack: str) -> list[int]:
    """The VP sizes the search tries at pipeline size ``pp`` for ``num_layers`` transformer layers on
    ``stack`` (sorted ints, 1 always): VP 1; with PP > 1 the divisors of L / PP (equal chunks) and of
    (L + 2) / PP above 1 (the embedding and the loss counted as layers); where neither gives one above
    1, on the Megatron-core stacks, :data:`UNEVEN_VPS` with PP x VP <= L and VP dividing ceil(L / PP)
    (module docstring)."""
    L = num_layers
    vps = {1}
    if pp > 1:
        vps |= set(divisors(L // pp)) if L % pp == 0 else set()
        vps |= {v for v in divisors((L + 2) // pp) if v > 1} if (L + 2) % pp == 0 else set()
        if len(vps) == 1 and uneven_pp_rule(stack) == "any":
            vps |= {v for v in UNEVEN_VPS if pp * v <= L and fullest_rank_layers(L, pp) % v == 0}
    return sorted(vps)
