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

import numpy as np

from .stacks import TE_STACKS, get_stack

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


def pinned_vp_refusal(num_layers: int, num_gpus: int, pins: dict, stack: str) -> str | None:
    """Why a search pinned to ``pins['vp']`` (and ``pins['pp']`` where given) finds no layout when that VP is
    none of :func:`vp_candidates` at the pinned PP, or at any PP dividing ``num_gpus``; None otherwise.
    ``predict`` prices such a VP (its chunks spread evenly, or as --pp-layout names them)."""
    vp = pins.get("vp", 1)
    pps = [pins["pp"]] if "pp" in pins else [d for d in divisors(num_gpus) if 1 < d <= num_layers]
    if vp < 2 or any(vp in vp_candidates(num_layers, pp, stack) for pp in pps):
        return None
    at = f"PP {pps[0]}" if "pp" in pins else "any PP"
    return (f"VP {vp} splits the {num_layers} layers into unequal virtual chunks at {at}; the search tries the VP "
            f"sizes that split them evenly ({', '.join(map(str, vp_candidates(num_layers, pps[0], stack)))} at PP "
            f"{pps[0]}): predict prices VP {vp} (--pp-layout names its chunks)" if pps else None)


@functools.lru_cache(maxsize=2)
def candidate_grid(L: int, E: int, heads: int, kv_heads: int, seq_len: int, gbs: int, stack: str, num_gpus: int,
                   domain_gpus: int, mbss: tuple, zero_stages: tuple, sps: tuple, overlaps: tuple,
                   stack_sp: bool) -> dict | None:
    """The candidate layouts costmodel.layouts.enumerate_layouts filters with its validity rules, as
    field -> array (costmodel.layout_fields.FIELDS but ``dp_replicate``), or None when there are none:
    TP dividing the job's NVLink domain (``domain_gpus``) and the heads, CP whose 2 x CP divides
    ``seq_len``, PP up to the L layers, DP derived, VP from :func:`vp_candidates`, EP dividing the E
    experts with ETP the layout's TP or 1, each micro-batch size of ``mbss`` whose DP x mbs divides
    ``gbs``, then every recompute (0-2), ZeRO stage, SP choice (on where TP > 1, ``stack_sp`` and, on
    the Megatron family, TP divides seq_len / CP)
    and overlap choice.  Cached (two entries: a large cluster's grid holds tens of MB); callers copy
    what they keep."""
    tps = [d for d in divisors(domain_gpus) if heads % d == 0 and kv_heads % d == 0]
    cps = [d for d in divisors(num_gpus) if d == 1 or seq_len % (2 * d) == 0]
    # PP need not divide the layers (Megatron's first/last-stage options, VP = 1 then): Llama-3.1
    # 405B's 126 layers over PP 16 is how Meta trained it (Llama 3 paper, sec. 3.3.2)
    pps = [d for d in divisors(num_gpus) if d <= L]
    rows = []
    for tp in tps:
        for cp in cps:
            for pp in pps:
                rest = num_gpus // pp
                if rest % (tp * cp):
                    continue
                dp = rest // (tp * cp)
                vps = vp_candidates(L, pp, stack)     # equal chunks, or a layout
                # experts at the layout's TP (Megatron's default) or unsplit (ETP 1, DeepSeek-style)
                eps = [(e, et) for e in divisors(E) for et in sorted({tp, 1} if E > 1 else {tp})
                       if (tp * dp * cp) % (e * et) == 0]
                rows += [(tp, pp, dp, cp, ep, etp, vp) for vp in vps for ep, etp in eps]
    base = np.asarray(rows, dtype=np.int64).reshape(-1, 7)
    # the (row, mbs) pairs whose DP x mbs divides gbs (a validity rule), kept before the outer product
    # with the other choices: most pairs of a large cluster fail it
    pair_row, pair_mbs = np.meshgrid(np.arange(len(base)), np.asarray(mbss, dtype=np.int64), indexing="ij")
    fits = gbs % (base[pair_row, 2] * pair_mbs) == 0
    pair_row, pair_mbs = pair_row[fits], pair_mbs[fits]
    if not len(pair_row):
        return None
    grid = np.array(np.meshgrid(np.arange(len(pair_row)), range(3), zero_stages, sps, overlaps,
                                indexing="ij")).reshape(5, -1)
    b = base[pair_row[grid[0]]]
    tp, sp_on = b[:, 0], grid[3].astype(bool)
    sp_able = (tp > 1) & stack_sp
    if get_stack(stack).megatron_family:
        # Megatron-core splits the sequence evenly over TP under SP: where seq_len / CP does not divide,
        # the layout runs without SP rather than not at all (costmodel.layouts.validity's rule)
        sp_able &= (seq_len // b[:, 3]) % tp == 0
    # SP off is a distinct layout only where SP could be on: drop the duplicate rows it makes elsewhere
    keep = (sp_on | sp_able) if len(sps) > 1 else np.ones(len(tp), bool)
    out = dict(tp=tp, pp=b[:, 1], dp=b[:, 2], cp=b[:, 3], ep=b[:, 4], etp=b[:, 5], vp=b[:, 6],
               mbs=pair_mbs[grid[0]], recompute=grid[1].astype(np.int64),
               recompute_num_layers=np.zeros(len(tp), dtype=np.int64), zero=grid[2].astype(np.int64),
               sp=sp_on & sp_able, overlap=grid[4].astype(bool))
    return {k: v[keep] for k, v in out.items()}
