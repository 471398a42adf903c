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
  reads and writes the token's hidden vector.  The expert-side copies (sort, unsort) touch what the
  rank received: its load, times ETP when the experts' TP group gathers the tokens.  The
  allgather dispatcher (MoEAllGatherTokenDispatcher) instead gathers every token of the EP x ETP
  group, picks its experts' rows (one copy of the local rows each way) and scatter-adds the
  expert output into a zeroed buffer of all gathered tokens, reduce-scattered after.  DeepEP
  (flex) writes the received tokens in place; Megatron's flex dispatcher then permutes them by
  local expert and back (one copy each way).
* Router imbalance.  A trained router does not pick experts uniformly: with per-expert loads of
  coefficient of variation c (a measurement, e.g. Megatron's logged ``load_balancing_loss`` L = E
  sum_i P_i f_i, whose excess L - 1 = Cov(E P, E f) is at most c^2 when the mean probabilities P
  are no more spread than the loads f, so sqrt(L - 1) is a lower bound on c), a rank of E/EP
  experts carries c / sqrt(E/EP) and the busiest of EP ranks about 1 + z_EP c / sqrt(E/EP) the
  mean load, z_n the expected maximum of n standard normals (Blom 1958: Phi^-1((n - 0.375) /
  (n + 0.25))).  The larger of this and the balls-into-bins bound sets the pace, never more than
  a rank can receive: all of a token's experts that it holds, EP min(k, E/EP) / k the mean.
* Atomic permutation.  Megatron-core's unfused permutation (its default, ``moe_permute_fusion``
  off) unpermutes with ``Tensor.scatter_add_`` and permutes with ``index_select``, whose backward is
  ``index_add_`` (megatron/core/transformer/moe/moe_utils.py): one pass each way over the rows this
  rank permutes (its own tokens x top-k for the all-to-all dispatcher, the rows of its experts for
  the allgather and flex ones), an atomic add per element.  PyTorch's scatter-add unpermute of 2 x
  512 and 2 x 2048 rows of 4096 on an H200 took 0.06 and 0.20 ms (TileOPs PR 608, its baseline named
  by PR 733; hardware/profiles/data/tileops_moe_unpermute_scatter_add_h200.md): 8.99e10 elements/s,
  11.3x slower than reading and writing the same bf16 elements at the H200's fitted copy bandwidth.
  That ratio prices the pass on every GPU (the atomics run at the L2, whose rate is not measured
  elsewhere).  Transformer Engine's fused kernels (``--moe-permute-fusion``) copy without atomics.
* Router kernels.  Megatron-core's router is dozens of small elementwise, top-k, scatter and
  reduction kernels (score function, routing map, aux loss and its statistics), each at least a
  kernel launch on the GPU and a framework call on the CPU.  Nsight Systems counts 72 kernels in a
  DeepSeek-V3 layer's router forward, 31 with Transformer Engine's fused router
  (``--moe-router-fusion``), and 17 for router and EP preprocess together under DeepEP's fused
  preprocess ("Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72", NVIDIA/Megatron-LM
  docs/discussions/deepseek-v3-gb200-optimization, commit 79e8592b, sec. 2.1.4 and 2.2.1; DeepSeek-V3's
  sigmoid router with group-limited top-k, so a softmax router's count is somewhat lower).  The other
  dispatchers' preprocess, counted in megatron/core/transformer/moe/token_dispatcher.py (commit
  d98e8a64): alltoall sums the routing map and the splits (7 kernels) and copies 4 of them to the
  host; allgather slices its local map and probabilities, sums and masks them (8) with 2 host copies.
  The router's backward, counted in router.py and moe_utils.py at the same commit (about 18
  kernels unfused, 9 fused: the score function's, top-k scatter's and aux-loss terms' gradients, the
  aux-loss scaler, dtype casts; +-30 %).  The all-gather of token counts and the host
  synchronisation before the all-to-all are not priced.
* Capacity.  With a capacity factor c each expert keeps at most c x its mean token count and
  drops the rest (Lepikhin et al. 2021, GShard sec. 2.2; Megatron ``--moe-expert-capacity-factor``),
  so the busiest rank's load is at most c x the mean; padded to capacity, every expert computes
  and sends exactly c x the mean (``--moe-pad-expert-input-to-capacity``; DeepSpeed-MoE's
  einsum dispatch into [experts, capacity] buffers).
* DeepEP.  The normal (training) kernels reach 153 / 158 GB/s dispatch / combine over NVLink on
  H800 (datasheet 200 GB/s per direction) and 43 GB/s per 400 Gb/s CX7 NIC at EP16 over RDMA
  (deepseek-ai/DeepEP docs/legacy.md, "Normal kernels with NVLink and RDMA forwarding";
  hardware/profiles/data/deepep_normal_kernels_h800_b200.md); V2 reaches 726 / 740 GB/s on B200's
  900 GB/s NVLink (DeepEP README).  A token goes once to each remote node holding one of its
  experts, then over NVLink once to each GPU holding one of them, however many of its experts that
  GPU holds (DeepSeek-V3 sec. 3.2.2, node-limited routing; DeepEP's ``is_token_in_rank`` layout).
  Measured against NVIDIA's HybridEP, which routes the same way, on H100 (Megatron-Core MoE report,
  arXiv:2603.07685, Table 7; hardware/profiles/data/megatron_moe_report_ep_dispatch_latency.md).
"""
from __future__ import annotations

import numpy as np
from scipy.special import ndtri      # Phi^-1, the standard normal quantile

from .errors import InputError
from .recipe_switches import EP_OVERLAP_DISPATCHERS, MOE_SWITCHES, SWITCHES_BY_NAME
from .stacks import TE_STACKS

#: token copies per direction of Megatron-core's all-to-all dispatcher (module docstring)
DISPATCH_COPIES = 4
#: kernels of Megatron-core's router in one MoE layer's forward, unfused / with --moe-router-fusion,
#: measured (module docstring, "Router kernels")
ROUTER_FWD_KERNELS = {False: 72, True: 31}
#: router and EP preprocess together under DeepEP's (flex) fused preprocess, router fusion on, measured
FLEX_ROUTER_PREPROCESS_FWD_KERNELS = 17
#: the dispatchers' preprocess beyond the router and the permutation copies, counted in the source
#: (module docstring): alltoall 7 reductions and copies + 4 device-to-host copies; allgather 8 + 2
PREPROCESS_FWD_KERNELS = {"alltoall": 11, "allgather": 10}
#: the router's backward kernels, unfused / fused, counted in the source (module docstring)
ROUTER_BWD_KERNELS = {False: 18, True: 9}
#: PyTorch's atomic scatter-add on an H200: the 12,582,912 more elements of TileOPs PR 608's 2048-token
#: row than its 512-token one (top-2, hidden 4096) in 0.20 - 0.06 ms more (module docstring)
ATOMIC_SCATTER_ELEMS_PER_S_H200 = (2048 - 512) * 2 * 4096 / ((0.20 - 0.06) * 1e-3)
#: the H200's copy bandwidth in the model: 4.8 TB/s datasheet x the fitted hbm.efficiency 0.85
#: (hardware/profiles/h200-sxm-141gb.yaml)
H200_COPY_BYTES_PER_S = 4.8e12 * 0.85
#: how much longer an atomic scatter-add of a bf16 element takes than its read + write (4 bytes) at
#: the copy bandwidth, about 11.3: the factor on the bytes of an atomic permutation pass
ATOMIC_SCATTER_SLOWDOWN = H200_COPY_BYTES_PER_S / (2 * 2 * ATOMIC_SCATTER_ELEMS_PER_S_H200)
#: DeepEP normal kernels' bottleneck bandwidth over the link's datasheet bandwidth: NVLink, the
#: lower of dispatch 153 and combine 158 GB/s on H800's 200 GB/s; RDMA, 43 GB/s at EP16 (the lowest
#: internode row) on a 50 GB/s NIC (module docstring)
DEEPEP_NVLINK_EFFICIENCY = 153.0 / 200.0
DEEPEP_RDMA_EFFICIENCY = 43.0 / 50.0


#: SMs DeepEP's normal kernels run on as Megatron-core sets them (TransformerConfig.moe_deepep_num_sms,
#: "historical default 20"; DeepEP's own Buffer.num_sms = 20, deep_ep/buffers/legacy.py)
DEEPEP_NUM_SMS = 20
#: DeepEP's recommended configs per EP size (deep_ep/buffers/legacy.py get_dispatch_config and
#: get_combine_config at deepseek-ai/DeepEP dd758caf): the larger NVLink receive-chunk token count of the
#: two, and the larger RDMA receive-chunk count after DeepEP's Config aligns 128 up to the send chunk
_DEEPEP_RECV_TOKENS = {2: (256, 0), 4: (256, 0), 8: (256, 0), 16: (288, 140), 24: (288, 128), 32: (288, 128),
                       48: (288, 128), 64: (288, 128), 96: (480, 132), 128: (560, 132), 144: (720, 132),
                       160: (720, 132)}


def deepep_buffer_bytes(hidden: int, ranks) -> np.ndarray:
    """Bytes of the NVLink and RDMA buffers DeepEP's normal kernels allocate per GPU for an EP x ETP
    group of ``ranks`` (array; 0 for one rank): csrc/legacy/config.hpp get_nvl_buffer_size_hint and
    get_rdma_buffer_size_hint at DeepEP's recommended config for that size (the next listed size up
    where it lists none), :data:`DEEPEP_NUM_SMS` / 2 channels, each receive slot sized for a 16-bit
    hidden vector (Megatron's get_hidden_bytes: at least 2 bytes an element), its 8-byte source
    metadata, 128 top-k indices (int64) and weights (fp32) and 128 fp32 scales; the RDMA buffer,
    used past 8 ranks, holds a send and a receive side of each slot."""
    r = np.asarray(ranks, dtype=np.int64)
    sizes = np.array(sorted(_DEEPEP_RECV_TOKENS))
    key = sizes[np.minimum(np.searchsorted(sizes, r), len(sizes) - 1)]
    nvl_recv = np.array([_DEEPEP_RECV_TOKENS[k][0] for k in np.atleast_1d(key)]).reshape(key.shape)
    rdma_recv = np.array([_DEEPEP_RECV_TOKENS[k][1] for k in np.atleast_1d(key)]).reshape(key.shape)
    channels, hb = DEEPEP_NUM_SMS // 2, 2 * hidden
    rdma_ranks, nvl_ranks = np.maximum(r // 8, 1), np.minimum(r, 8)
    nvl = channels * nvl_ranks * ((2 * rdma_ranks + 3) * 4 + nvl_recv * (hb + 8 + 128 * 8 + 128 * 4 + 128 * 4))
    rdma = channels * rdma_ranks * ((8 * 2 + 2) * 2 * 4 + rdma_recv * (hb + 8 + 128 * 8 + 128 * 4 + 128 * 4 + 16) * 2)
    return np.where(r > 1, nvl + np.where(r > 8, rdma, 0), 0).astype(np.float64)


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


def expert_load_factor(kappa, capacity_factor: float, pad: bool):
    """The busiest EP rank's expert load over the mean load: ``kappa`` dropless, capped at the
    capacity factor when tokens beyond it drop, exactly the capacity factor when padded
    (module docstring).  Arrays broadcast."""
    kappa = np.asarray(kappa, dtype=np.float64)
    if capacity_factor <= 0:
        return kappa
    return np.full_like(kappa, capacity_factor) if pad else np.minimum(kappa, capacity_factor)


def _received_rows(tokens, topk: int, etp, load):
    """Expert-side rows on one GPU after the gather over ETP, at the busiest rank's ``load``."""
    return tokens * topk * etp * load


def router_kernels(recipe) -> tuple:
    """Small kernels of one MoE layer's router and dispatch preprocess (forward, backward) on a
    Megatron-core stack (:data:`ROUTER_FWD_KERNELS` and its neighbours; module docstring); (0, 0)
    elsewhere, whose routers were not counted.  The permutation copies are priced apart."""
    if recipe.stack not in TE_STACKS:
        return 0, 0
    fused = bool(recipe.moe_router_fusion)
    if recipe.moe_dispatcher == "flex":      # unfused, the router's kernels that fusion removes come back
        fwd = FLEX_ROUTER_PREPROCESS_FWD_KERNELS + ROUTER_FWD_KERNELS[fused] - ROUTER_FWD_KERNELS[True]
    else:
        fwd = ROUTER_FWD_KERNELS[fused] + PREPROCESS_FWD_KERNELS[recipe.moe_dispatcher]
    return fwd, ROUTER_BWD_KERNELS[fused]


def max_load_cv(num_experts: int, topk: int) -> float:
    """The largest coefficient of variation of per-expert loads top-k routing allows: every token on the
    same k of E experts, sqrt(E/k - 1)."""
    return float(np.sqrt(num_experts / topk - 1.0))


def permute_rows(dispatcher: str, tokens, topk: int, etp, ep, load):
    """Token rows one direction of dispatch + combine copies on one GPU (forward; backward copies
    the gradients the same way), each copy reading and writing a hidden vector.

    Args:
        dispatcher: 'alltoall', 'allgather' or 'flex' (costmodel.specs.MOE_DISPATCHERS).
        tokens: tokens of this rank entering the MoE layer (sequence-parallel shard), array.
        topk: experts per token.
        etp, ep: the experts' TP and EP degrees, arrays.
        load: the rank's expert load over the mean (:func:`expert_load_factor`).
    Returns:
        array of rows (module docstring for the copies each dispatcher makes).
    Raises:
        KeyError: an unknown dispatcher.
    """
    received = _received_rows(tokens, topk, etp, load)
    return {"alltoall": lambda: DISPATCH_COPIES / 2 * (tokens * topk + received),
            "allgather": lambda: 2 * received + tokens * etp * ep,
            "flex": lambda: 2 * received}[dispatcher]()


def dispatch_transient_rows(dispatcher: str, tokens, topk: int, etp, ep, load):
    """Token rows of the largest buffer one MoE layer's dispatch holds beside the activations it saves,
    on one GPU, while the layer runs (freed before the next layer): the allgather dispatcher's hidden
    states gathered over the EP x ETP group, every token of the group whatever its experts (Megatron-core
    token_dispatcher.py MoEAllGatherTokenDispatcher: ``gather_from_sequence_parallel_region`` over
    the tp_ep group, then the local permutation, whose backward keeps only the indices); the
    all-to-all and flex dispatchers' received rows before the permutation that feeds the experts
    (MoEAlltoAllTokenDispatcher's all-to-all output and ETP gather ahead of ``sort_chunks_by_idxs``;
    the flex dispatcher's DeepEP output ahead of its permute).  Arrays broadcast like
    :func:`permute_rows`.

    Raises:
        KeyError: an unknown dispatcher.
    """
    received = _received_rows(tokens, topk, etp, load)
    return {"alltoall": lambda: received, "allgather": lambda: tokens * etp * ep,
            "flex": lambda: received}[dispatcher]()


def atomic_permute_rows(dispatcher: str, tokens, topk: int, etp, load):
    """Rows of the one atomic scatter-add pass each direction of Megatron-core's unfused permutation
    makes on one GPU (module docstring): the rank's own token copies for the all-to-all dispatcher
    (its unpermute restores them after the combine), the rows of its experts for the allgather and
    flex ones.  Arrays broadcast like :func:`permute_rows`, of whose rows these are a part.

    Raises:
        KeyError: an unknown dispatcher.
    """
    received = _received_rows(tokens, topk, etp, load)
    return {"alltoall": lambda: tokens * topk, "allgather": lambda: received, "flex": lambda: received}[dispatcher]()


def remote_nodes_per_token(nodes, topk: int, node_limit=None):
    """Expected remote nodes a token's ``topk`` experts land on, experts spread uniformly over the
    ``nodes`` nodes (or over ``node_limit`` of them under group-limited routing): the k picks hit
    D = n (1 - (1 - 1/n)^k) distinct nodes of the n allowed (each missed by all k independent picks
    with probability (1 - 1/n)^k), of which (N - 1)/N are remote.  Unlimited: (N - 1)(1 - (1 - 1/N)^k).
    Arrays broadcast; 0 for one node."""
    n_all = np.asarray(nodes, dtype=np.float64)
    return destinations_per_token(n_all, topk, node_limit) * (n_all - 1.0) / n_all


def destinations_per_token(dests, topk: int, dest_limit=None):
    """Expected destinations (EP ranks or nodes, the token's own included) that a token's ``topk``
    experts land on, experts spread uniformly over ``dests`` (or over ``dest_limit`` of them under
    group-limited routing): n (1 - (1 - 1/n)^k), the n allowed each missed by all k independent picks
    with probability (1 - 1/n)^k.  DeepEP sends a token once to each such rank over NVLink (its
    dispatch layout is ``is_token_in_rank``, [num_tokens, num_ranks]; deep_ep/buffer.py
    get_dispatch_layout) and counts the received rows, its own included, in its NVLink bandwidth
    (tests/test_intranode.py: ``dispatch_bf16_nvl_recv_bytes = recv_x.numel() * 2``).  Arrays
    broadcast."""
    n_all = np.asarray(dests, dtype=np.float64)
    n = n_all if dest_limit is None else np.clip(np.asarray(dest_limit, dtype=np.float64), 1.0, n_all)
    return n * (1.0 - (1.0 - 1.0 / n) ** topk)


def expected_max_normal(n):
    """Expected maximum of ``n`` independent standard normals, Blom's (1958) approximation
    Phi^-1((n - 0.375) / (n + 0.25)); 0 for n = 1.  Arrays broadcast."""
    n = np.asarray(n, dtype=np.float64)
    return np.where(n > 1, ndtri((n - 0.375) / (n + 0.25)), 0.0)


def busiest_rank_load(topk: int, capacity_factor: float, pad: bool, tokens, tp, etp, ep, num_experts: int = 0,
                      expert_load_cv: float = 0.0):
    """The busiest EP rank's expert load over the mean, for ``tokens`` per micro-batch on the rank
    (after CP): the larger of the balls-into-bins bound over its tokens x top-k x ETP / TP
    assignments and the measured router imbalance ``expert_load_cv`` spread over the rank's
    ``num_experts`` / EP experts (module docstring), then the capacity (:func:`expert_load_factor`).
    Arrays broadcast."""
    kappa = max_load_factor(tokens * topk * etp / tp, ep)
    ep_ = np.asarray(ep, dtype=np.float64)
    if expert_load_cv > 0 and num_experts > 1:
        kappa = np.maximum(kappa, 1.0 + expert_load_cv / np.sqrt(num_experts / ep_) * expected_max_normal(ep_))
    if num_experts > 1:
        kappa = np.minimum(kappa, max_rank_load(num_experts, topk, ep_))
    return expert_load_factor(kappa, capacity_factor, pad)


def max_rank_load(num_experts: int, topk: int, ep):
    """The most a rank can carry over the mean: every token sends it min(k, E/EP) of its k distinct
    experts, against the mean k / EP: EP min(k, E/EP) / k.  Arrays broadcast."""
    ep = np.asarray(ep, dtype=np.float64)
    return ep * np.minimum(topk, num_experts / ep) / topk


def run_rank_load(model, recipe, tokens, tp, etp, ep):
    """:func:`busiest_rank_load` with the counts of ``model`` (a costmodel.specs.ModelSpec) and the
    capacity and measured imbalance of ``recipe`` (a costmodel.specs.Recipe)."""
    return busiest_rank_load(model.topk, recipe.moe_capacity_factor, recipe.moe_pad_to_capacity, tokens, tp, etp, ep,
                             model.num_experts, recipe.moe_expert_load_cv)


def check_flex_fabric(model, recipe, cluster) -> None:
    """Refuse the flex dispatcher (DeepEP) on a node whose GPUs no NVLink joins: its normal (training)
    kernels forward tokens over NVLink inside a node (deepseek-ai/DeepEP issue 216, a maintainer: 'For
    normal mode, NVLink is a must').

    Raises:
        InputError: naming --moe-dispatcher and the cluster's intra-node fabric.
    """
    from .specs.links import NVLINK_FABRICS
    if model.is_moe and recipe.moe_dispatcher == "flex" and cluster.intra_fabric not in NVLINK_FABRICS:
        raise InputError("--moe-dispatcher", "", f"flex runs DeepEP's kernels, which need NVLink inside a node "
                         f"(deepseek-ai/DeepEP issue 216); {cluster.key}'s GPUs are joined by {cluster.intra_fabric}: "
                         "give alltoall or allgather")


def flex_backend(gpu) -> str:
    """The flex dispatcher's backend a launch names for ``gpu`` (a GpuSpec, or None): DeepEP ('deepep'),
    except on Grace-Blackwell (GB200, GB300) NVIDIA's HybridEP ('hybridep'): Megatron-Bridge's
    validate_flex_dispatcher_backend refuses DeepEP on a device of compute capability 10 not named B200
    or B300 (src/megatron/bridge/training/flex_dispatcher_backend.py), and its GB200 recipes take
    hybridep (recipes/deepseek/gb200/deepseek_v4.py).  Both are priced alike: DeepEP's measured
    bandwidths, checked against HybridEP's EP scaling table (module docstring)."""
    name = str(getattr(gpu, "name", "")).upper()
    return "hybridep" if name.startswith(("GB200", "GB300")) else "deepep"


def flex_crosses_efa(cluster, etp, ep) -> np.ndarray:
    """Whether the flex dispatcher's EP x ETP group (ranks ``etp`` apart, ``ep`` of them; arrays) spans
    more than one node of an AWS EFA cluster (bool array; all False elsewhere): upstream DeepEP's
    internode kernels issue RDMA from the GPU through NVSHMEM IBGDA on mlx5 NICs (deepseek-ai/DeepEP
    issues 369 and 759), NVIDIA's HybridEP traps on EFA (NVIDIA-NeMo/Megatron-Bridge issue 3343,
    2026-04), and only DeepEP V2 over NCCL's GIN plugin reaches EFA (awslabs/awsome-distributed-ai PR
    1234, 2026-08).  Inside a node the kernels move tokens over NVLink alone, and run there.  Ranks
    fill nodes in order (costmodel.comm.group_span)."""
    from .comm import group_span
    etp, ep = np.asarray(etp), np.asarray(ep)
    if cluster.inter_fabric != "efa" or cluster.num_gpus <= cluster.gpus_per_node:
        return np.zeros(np.broadcast(etp, ep).shape, dtype=bool)
    return group_span(etp, ep, cluster.gpus_per_node, cluster.num_gpus)[1] > 1


def check_moe_recipe(model, recipe, gpu, given=()) -> None:
    """Refuse MoE switches ``given`` (the names the user set, or a mapping of them to their values) for
    a dense model, a router imbalance above the largest top-k routing allows (sqrt(E/k - 1), every
    token on the same k experts), the fused router or batch-level EP overlap off Megatron-core, EP
    overlap with the allgather dispatcher (Megatron-core asserts alltoall or flex), a dispatcher other
    than all-to-all on the DeepSpeed stacks, and the flex dispatcher on a GPU DeepEP does not run on (its requirements:
    Hopper SM90 kernels, Blackwell in V2; deepseek-ai/DeepEP README).

    Raises:
        InputError: naming the flag.
    """
    from .model_error import generation
    if not model.is_moe:
        for k in MOE_SWITCHES:
            if k in given:      # named as typed: --no-moe-grouped-gemm where ``given`` maps it to False
                flag = SWITCHES_BY_NAME[k].flag_for(given[k] if isinstance(given, dict) else None)
                raise InputError(flag, "", f"{model.name} is dense (no experts): the MoE switches apply to MoE "
                                 "models")
        return
    cv_max = max_load_cv(model.num_experts, model.topk)
    if recipe.moe_expert_load_cv > cv_max * (1 + 1e-9):
        # all tokens on k experts, none on the rest: the most spread loads top-k routing allows
        raise InputError("--moe-expert-load-cv", "", f"{recipe.moe_expert_load_cv:g} exceeds sqrt(E/k - 1) = "
                         f"{cv_max:.3g}, the coefficient of variation of {model.name}'s {model.num_experts} expert "
                         f"loads when every token picks the same {model.topk}")
    if recipe.moe_ep_overlap and recipe.stack not in TE_STACKS:
        raise InputError("--moe-ep-overlap", "", f"batch-level EP overlap is Megatron-core's (the megatron and nemo "
                         f"stacks), not the {recipe.stack} stack's")
    if recipe.moe_router_fusion and recipe.stack not in TE_STACKS:
        raise InputError("--moe-router-fusion", "", f"the fused router is Megatron-core's (the megatron and nemo "
                         f"stacks, Transformer Engine's kernels), not the {recipe.stack} stack's")
    if recipe.moe_ep_overlap and recipe.moe_dispatcher not in EP_OVERLAP_DISPATCHERS:
        raise InputError("--moe-ep-overlap", "", f"runs with the alltoall or flex dispatcher, not "
                         f"{recipe.moe_dispatcher}: give --moe-dispatcher alltoall or flex (Megatron-core's default "
                         "is allgather)")
    if recipe.moe_dispatcher != "alltoall" and recipe.stack in ("deepspeed", "megatron-deepspeed"):
        # DeepSpeed-MoE sends the tokens with its all-to-all (deepspeed/moe/sharded_moe.py, _AllToAll)
        raise InputError("--moe-dispatcher", "", f"{recipe.moe_dispatcher}: the {recipe.stack} stack's MoE "
                         "(DeepSpeed-MoE) dispatches with its all-to-all only")
    if recipe.moe_dispatcher == "flex" and generation(gpu) not in ("hopper", "blackwell"):
        raise InputError("--moe-dispatcher", "", f"flex runs DeepEP's kernels, which need a Hopper or Blackwell "
                         f"GPU (deepseek-ai/DeepEP requirements); {gpu.name} is {generation(gpu)}")
