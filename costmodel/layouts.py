"""Parallel layouts as a table of numpy arrays (one entry per layout), their validity, enumeration.

Megatron-core semantics: world = TP x CP x DP x PP, rank order tp-cp-dp-pp (TP fastest, so TP
groups are consecutive ranks and PP is outermost); EP is carved from DP x CP with stride TP
(Megatron-core ``RankGenerator`` expert order tp-ep-dp-pp); VP = virtual pipeline chunks per rank
(interleaved 1F1B, Narayanan et al. SC21 section 2.2.2); recompute none/selective/full
(Korthikanti et al. 2022); ZeRO 0-3 (Rajbhandari et al. SC20): 1 = Megatron distributed optimizer,
3 = FSDP; ``overlap`` = communication may overlap compute at all (the recipe's ``dp_overlap`` and
``tp_comm_overlap`` say which overlaps the stack runs).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

import numpy as np

from .errors import InputError
from .specs import ModelSpec, Recipe
from .context_parallel_rules import cp_rules
from .layout_grid import candidate_grid, uneven_pp_rule
from .layout_fields import _BOOL_FIELDS, _CHOICE_FIELDS, FIELD_SPECS, FIELDS, LayoutView
from .recipe_switches import EP_OVERLAP_DISPATCHERS
from .stacks import STACKS, TE_STACKS, get_stack


@dataclass
class LayoutTable:
    """Arrays of equal length n, one entry per layout.

    Attributes (numpy int64 unless noted): tp, pp, dp, cp, ep, etp (the experts' TP), vp, mbs, recompute (index into
    :data:`RECOMPUTE`), recompute_num_layers (layers per chunk recomputed under full recompute, 0 =
    all), zero (ZeRO stage 0-3), sp (bool, sequence parallelism), overlap (bool), dp_replicate (HSDP
    replicas of the sharded states; 1 when not given: :func:`shard_dp`).
    """

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    vp: np.ndarray
    mbs: np.ndarray
    recompute: np.ndarray
    recompute_num_layers: np.ndarray
    zero: np.ndarray
    sp: np.ndarray
    overlap: np.ndarray
    dp_replicate: np.ndarray = None

    def __post_init__(self):
        if self.dp_replicate is None:       # one shard group, as before HSDP was a field
            self.dp_replicate = np.ones(len(self.tp), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.tp)

    def take(self, idx) -> "LayoutTable":
        """The sub-table at index array or boolean mask ``idx``."""
        return LayoutTable(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def view(self, names, idx=None) -> LayoutView:
        """The fields ``names`` (all rows, or rows ``idx``) as a :class:`LayoutView`."""
        if idx is None:
            return LayoutView({f: getattr(self, f) for f in names}, len(self))
        return LayoutView({f: getattr(self, f)[idx] for f in names}, len(idx))

    def row(self, i: int) -> dict:
        """Layout i as a plain dict (choices by name, flags as bools)."""
        d = {f: int(getattr(self, f)[i]) for f in FIELDS}
        for f, names in _CHOICE_FIELDS.items():
            d[f] = names[d[f]]
        for f in _BOOL_FIELDS:
            d[f] = bool(d[f])
        return d

    @staticmethod
    def from_rows(rows: list[dict]) -> "LayoutTable":
        """Build a table from dicts with the keys of :data:`FIELDS` (choices by name or index); a row
        without ``recompute_num_layers`` recomputes every layer it recomputes (0), one without
        ``etp`` (or with None) runs its experts at its TP (Megatron's default), one without
        ``dp_replicate`` shards its states over the whole DP x CP group (1).

        Raises:
            InputError: a row without a field or with a key that is none, a choice not among its names
                (or an index beyond them), a switch that is not a bool, a degree (or micro-batch) that is
                not a whole number >= 1, or a negative ZeRO stage or recomputed-layer count.
        """
        cols = {f: [] for f in FIELDS}
        for r in rows:
            for k in r:
                if k not in FIELDS:     # a misspelt field would leave its value to the default
                    import difflib
                    near = difflib.get_close_matches(str(k), FIELDS, n=1)
                    raise InputError("layout", str(k), "not a layout field" + (f"; did you mean {near[0]}?" if near
                                                                               else f" ({', '.join(FIELDS)})"))
            for f in FIELDS:
                if f not in ("recompute_num_layers", "etp", "dp_replicate") and f not in r:
                    raise InputError("layout", f, f"missing (a layout gives {', '.join(FIELDS)})")
                v = (r.get(f, 0) if f == "recompute_num_layers" else (r.get("etp") or r["tp"]) if f == "etp"
                     else r.get(f, 1) if f == "dp_replicate" else r[f])
                if f in _CHOICE_FIELDS and isinstance(v, str):
                    if v not in _CHOICE_FIELDS[f]:
                        raise InputError("layout", f, f"{v!r} is not one of {', '.join(_CHOICE_FIELDS[f])}"
                                         + (" (predict's 'auto' is a CLI choice: it tries each)" if v == "auto" else ""))
                    v = _CHOICE_FIELDS[f].index(v)
                elif f in _BOOL_FIELDS and not isinstance(v, (bool, np.bool_)):
                    raise InputError("layout", f, f"must be True or False, got {v!r}")
                elif f not in _BOOL_FIELDS and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                    raise InputError("layout", f, f"must be a whole number, got {v!r}")
                elif f not in _BOOL_FIELDS and f not in _CHOICE_FIELDS and f not in ("recompute_num_layers", "zero") and v < 1:
                    raise InputError("layout", f, f"must be >= 1, got {v}")
                elif v < 0 or (f in _CHOICE_FIELDS and v >= len(_CHOICE_FIELDS[f])):
                    raise InputError("layout", f, f"{v} is out of range" + (f" (an index of {', '.join(_CHOICE_FIELDS[f])})"
                                                                            if f in _CHOICE_FIELDS else ""))
                cols[f].append(v)
        arr = {f: np.asarray(v, dtype=bool if f in _BOOL_FIELDS else np.int64) for f, v in cols.items()}
        return LayoutTable(**arr)


def pinned(t: LayoutTable, pins: dict) -> np.ndarray:
    """Boolean mask of the layouts of ``t`` whose fields equal ``pins`` (field -> value, choices by
    name: ``{"tp": 8, "recompute": "full"}``); all True for no pins.

    Raises:
        InputError: a pin that is not a layout field, a choice that is none of its names, or a value of
            the wrong kind (a string for a degree).
    """
    keep = np.ones(len(t), dtype=bool)
    for f, v in pins.items():
        if f not in FIELD_SPECS or (f in _CHOICE_FIELDS and isinstance(v, str) and v not in _CHOICE_FIELDS[f]):
            raise InputError("pins", str(f), f"{v!r} pins no layout field's value ({', '.join(FIELDS)})")
        # a number of the wrong kind ('8' for a degree) would match no layout, silently
        boolean = FIELD_SPECS[f].kind == "bool"
        if not (isinstance(v, (bool, np.bool_)) if boolean else f in _CHOICE_FIELDS and isinstance(v, str)
                or isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))):
            raise InputError("pins", str(f), f"{v!r}: expected {'true or false' if boolean else 'a whole number'}"
                             + (" or a name" if f in _CHOICE_FIELDS else ""))
        v = _CHOICE_FIELDS[f].index(v) if f in _CHOICE_FIELDS and isinstance(v, str) else v
        keep &= getattr(t, f) == v
    return keep


def layout_name(lay: dict) -> str:
    """Short text of a layout dict: 'TP8 PP4 DP1 CP1 EP1 VP1 mbs1 none-recompute ZeRO1' (+ ' no-SP',
    ' no-overlap' where TP > 1 runs without SP, or overlap is off; 'EP8 ETP1' where the experts' TP
    is not the layout's; ' HSDP x16' for 16 replicas of the sharded states)."""
    rc = lay["recompute"] + (f"({lay['recompute_num_layers']})" if lay.get("recompute_num_layers") else "")
    etp = lay.get("etp") or lay["tp"]
    ep = f"EP{lay['ep']}" + (f" ETP{etp}" if etp != lay["tp"] else "")
    s = (f"TP{lay['tp']} PP{lay['pp']} DP{lay['dp']} CP{lay['cp']} {ep} VP{lay['vp']} "
         f"mbs{lay['mbs']} {rc}-recompute ZeRO{lay['zero']}")
    if lay.get("dp_replicate", 1) > 1:
        s += f" HSDP x{lay['dp_replicate']}"
    if lay["tp"] > 1 and not lay["sp"]:
        s += " no-SP"
    if not lay["overlap"]:
        s += " no-overlap"
    return s


def accounts_embedding_loss(model: ModelSpec, t) -> np.ndarray:
    """Layouts split with the embedding and the loss counted as one pipeline layer each (bool array;
    reads ``t.pp`` and ``t.vp``): Megatron's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split, used for interleaved schedules (VP > 1, which need equal
    chunks) when PP x VP divides L + 2 but not L (Llama 3.1 405B's 126 layers + 2 = 128 = PP 8 x VP 8
    x 2, NVIDIA's recipe).  Each virtual stage then holds (L + 2) / (PP VP) layers, the first chunk
    one fewer transformer layer (the embedding), the last chunk one fewer (the loss).  With VP = 1
    an uneven L is split as :func:`uneven_split` (DeepSpeed's PipelineModule, BLOOM's 70 layers).
    """
    return _split_terms(model, t)[0]


#: the latest (pp, vp, L, accounts_embedding_loss, layers_per_stage) evaluations, most recent first
_SPLIT_CACHE: list = []


def _split_terms(model: ModelSpec, t) -> tuple:
    """(:func:`accounts_embedding_loss`, :func:`layers_per_stage`) of ``t``: the time, memory and
    communication terms of one table ask for them many times, so the last few are kept, keyed on the
    identity of the table's pp and vp arrays (held here, so no other array can take their identity),
    checked against a copy of their values (a table edited in place is evaluated again), and L; the
    arrays handed out are read-only."""
    pp, vp, L = t.pp, t.vp, model.num_layers
    key = (L, model.pipeline_rank_layers)
    for e in _SPLIT_CACHE:
        # the same arrays with the same values: a caller may have edited a table in place
        if e[0] is pp and e[1] is vp and e[2] == key and np.array_equal(e[5], pp) and np.array_equal(e[6], vp):
            return e[3], e[4]
    pv = pp * vp
    acc = np.asarray((vp > 1) & (L % pv != 0) & ((L + 2) % pv == 0))
    # PP 2 has no middle stage: both hold (L + 2)/2 - 1 layers, the embedding's or the loss's place taken
    per = np.asarray(np.where(acc, (L + 2) / pp - (pp == 2), np.ceil(L / pp)))
    if model.pipeline_rank_layers:
        # the run's own layout prices its fullest rank, with the embedding and the loss where it put them
        own = np.asarray(pp) == len(model.pipeline_rank_layers)
        acc = np.asarray(acc & ~own)
        per = np.asarray(np.where(own, float(max(model.pipeline_rank_layers)), per))
    for a in (acc, per):
        a.flags.writeable = False
    _SPLIT_CACHE.insert(0, (pp, vp, key, acc, per, np.array(pp, copy=True), np.array(vp, copy=True)))
    del _SPLIT_CACHE[4:]
    return acc, per


def layers_per_stage(model: ModelSpec, t) -> np.ndarray:
    """Transformer layers on the fullest pipeline stage (float array; reads ``t.pp`` and ``t.vp``): the
    fullest rank of the run's own layout where the model carries one (ModelSpec.pipeline_rank_layers);
    else L/PP when PP divides L (a valid layout with VP > 1 has PP x VP dividing L, so its VP chunks
    hold L/(PP VP) layers each); (L + 2)/PP on the middle stages of a split that counts the
    embedding and the loss (:func:`accounts_embedding_loss`; the first and last stages hold one
    fewer, so at PP 2, with no middle stage, L/2); otherwise ceil(L/PP): uneven stages (VP = 1:
    Megatron-LM --decoder-first/last-pipeline-num-layers, DeepSpeed PipelineModule partitioning), the
    fullest stage setting the pace.
    """
    return _split_terms(model, t)[1]


@functools.lru_cache(maxsize=64)
def _stage_moe_table(num_layers: int, dense_at: tuple, rank_layers: tuple) -> np.ndarray:
    """MoE layers of the fullest stage for every PP x VP that fits ``num_layers``: table[pp, vp]."""
    L = num_layers
    moe_before = np.concatenate([[0], np.cumsum(~np.isin(np.arange(L), dense_at))])
    table = np.zeros((L + 1, L + 1))
    for pp in range(1, L + 1):
        for vp in range(1, L // pp + 1):
            if vp == 1 and len(rank_layers) == pp:
                ends = np.cumsum(rank_layers).astype(int)
                starts = ends - np.asarray(rank_layers, dtype=int)
            else:            # PP x VP chunks in order, the larger ones first (as even as whole layers allow)
                n, c = pp * vp, np.arange(pp * vp)
                starts = c * (L // n) + np.minimum(c, L % n)
                ends = starts + L // n + (c < L % n)
            per_chunk = moe_before[ends] - moe_before[starts]
            table[pp, vp] = per_chunk.reshape(vp, pp).sum(axis=0).max()
    return table


def stage_moe_layers(model: ModelSpec, t) -> np.ndarray:
    """The most MoE layers one pipeline stage holds (float array over layouts; reads ``t.pp`` and
    ``t.vp``), counted where the model places its dense layers (the first ``num_dense_layers``, as
    DeepSeek's first_k_dense_replace does, or ModelSpec.dense_layer_indices: Llama 4 Maverick's every
    second layer): the L layers cut in order into PP x VP chunks, stage s holding chunks s, s + PP, ...
    (Megatron-core's interleaved assignment; VP 1: one chunk a stage), or the run's own split per
    rank; at most the stage's layers (:func:`layers_per_stage`).  0 for a dense model."""
    per = layers_per_stage(model, t)
    if not model.is_moe:
        return np.zeros_like(per)
    if not model.num_dense_layers:
        return per
    dense_at = model.dense_layer_indices or tuple(range(model.num_dense_layers))
    table = _stage_moe_table(model.num_layers, dense_at, tuple(int(x) for x in model.pipeline_rank_layers))
    pp, vp = np.asarray(t.pp, dtype=np.int64), np.asarray(t.vp, dtype=np.int64)
    ok = pp * vp <= model.num_layers
    most = np.where(ok, table[np.where(ok, pp, 1), np.where(ok, vp, 1)], float(model.moe_layers))
    return np.minimum(per, most)


def pipeline_split(model: ModelSpec, layout: dict, light_last: bool = False) -> np.ndarray:
    """Transformer layers of each pipeline stage of one layout (length PP, summing to L): the split
    of :func:`accounts_embedding_loss` where it applies, else :func:`uneven_split`."""
    pp, L = layout["pp"], model.num_layers
    if len(model.pipeline_rank_layers) == pp:
        return np.asarray(model.pipeline_rank_layers, dtype=np.float64)
    one = LayoutTable.from_rows([layout]) if not isinstance(layout, LayoutTable) else layout
    if bool(accounts_embedding_loss(model, one)[0]):
        per = (L + 2) // pp
        out = np.full(pp, float(per))
        out[0] -= 1
        out[-1] -= 1
        return out
    return uneven_split(L, pp, light_last)


def recomputed_fraction(model: ModelSpec, t) -> np.ndarray:
    """Fraction of the layers whose forward is recomputed in full (float array; reads ``recompute``,
    ``recompute_num_layers``, ``pp`` and ``vp``): 0 without full recompute; N / (layers per chunk)
    with Megatron's block method, N layers of each chunk (capped at 1); 1 for every layer.
    """
    per_chunk = layers_per_stage(model, t) / t.vp
    part = np.where(t.recompute_num_layers > 0, np.minimum(t.recompute_num_layers / per_chunk, 1.0), 1.0)
    return np.where(t.recompute == 2, part, 0.0)


def microbatches(recipe: Recipe, dp, mbs):
    """Micro-batches each data-parallel replica runs per step: gbs / (DP x mbs) (arrays broadcast;
    a valid layout divides evenly)."""
    return recipe.gbs / (dp * mbs)


def uneven_split(L: int, pp: int, light_last: bool = False) -> np.ndarray:
    """Even split L/PP, or ceil(L/PP) layers on the last stages when PP does not divide L (on the
    first stages with ``light_last``: the stack's :attr:`costmodel.stacks.Stack.light_last_stage`).

    Without ``light_last`` the last stage, which also runs the logits, holds ceil(L/PP) layers: the
    pace costmodel.schedule assumes (the fullest stage carries the logits); with it the last stage
    holds floor(L/PP) and the pace is the slower of a full stage and the last with its logits, so
    the energy model's step time agrees with the time model's.  The ILP chooses its own split.
    """
    base, extra = divmod(L, pp)
    return np.array([base + (1 if (s < extra if light_last else s >= pp - extra) else 0) for s in range(pp)],
                    dtype=np.float64)


def light_last_stage(recipe: Recipe) -> bool:
    """The recipe's stack puts an uneven split's extra layers on the first stages (costmodel.stacks)."""
    return bool(get_stack(recipe.stack).light_last_stage)


def _ep_overlap_rules(t: LayoutTable, model: ModelSpec, recipe: Recipe) -> list:
    """(message, mask) rules of Megatron-core's batch-level EP overlap (``--moe-ep-overlap``): its
    TransformerConfig.__post_init__ asserts, for :func:`validity`."""
    ep_ov = np.full(len(t.tp), bool(recipe.moe_ep_overlap and model.num_experts > 1))
    return [
        ("--moe-ep-overlap needs EP > 1 ('overlap_moe_expert_parallel_comm is only supported with expert model "
         "parallelism')", ep_ov & (t.ep < 2)),
        ("--moe-ep-overlap is Megatron-core's (the megatron and nemo stacks), not the {stack} stack's",
         ep_ov & (recipe.stack not in TE_STACKS)),
        (f"--moe-ep-overlap runs with the alltoall or flex dispatcher, not {recipe.moe_dispatcher} (give "
         "--moe-dispatcher alltoall or flex; allgather is Megatron-core's default)",
         ep_ov & (recipe.moe_dispatcher not in EP_OVERLAP_DISPATCHERS)),
        ("--moe-ep-overlap cannot run under full recompute ('disable full recomputation when enabling "
         "overlap_moe_expert_parallel_comm')", ep_ov & (t.recompute == 2)),
        ("--moe-ep-overlap cannot recompute the MoE layer (--recompute-modules moe)",
         ep_ov & (t.recompute == 1) & ("moe" in recipe.recomputed)),
        ("--moe-ep-overlap with PP > 1 needs VP > 1 ('virtual_pipeline_model_parallel_size must be specified "
         "when pipeline_model_parallel_size > 1')", ep_ov & (t.pp > 1) & (t.vp < 2)),
        (f"--moe-ep-overlap runs at most one MTP layer ({model.mtp_layers} here: 'MTP supports at most one layer "
         "when enabling overlap_moe_expert_parallel_comm')", ep_ov & (model.mtp_layers > 1)),
    ]


def _hsdp_rules(t: LayoutTable, model: ModelSpec, st) -> list:
    """The rules of HSDP (``dp_replicate`` > 1: replicas of the sharded states, :func:`shard_dp`) as
    validity's (message, bad) pairs; ``st`` the recipe's Stack."""
    r = np.maximum(t.dp_replicate, 1)
    rep = r > 1
    on = "; ".join(f"{k} at ZeRO {' and '.join(map(str, sorted(v.hsdp_zero_stages)))}"
                   for k, v in STACKS.items() if v.hsdp_zero_stages)
    # Megatron-core splits the DP x CP group into instances (parallel_state.py asserts (DP x CP) % instances
    # == 0); FSDP2's mesh is dp_replicate x dp_shard over DP, CP folded into the shard dim
    dpcp_rule = st.name in ("megatron", "nemo")
    return [
        ("--dp-replicate needs ZeRO >= 1: without sharding every DP rank holds the whole state already",
         rep & (t.zero == 0)),
        ("--dp-replicate must divide " + ("DP x CP (Megatron-core's distributed-optimizer instances split that group)"
                                          if dpcp_rule else "DP: the replicas are whole DP slices of the shard groups"),
         ((t.dp * t.cp if dpcp_rule else t.dp) % r) != 0),
        ("--dp-replicate leaves a one-rank shard group (DP x CP / R = 1): nothing is sharded, which is DDP (--zero 0)",
         rep & ((t.dp * t.cp) // r < 2)),
        ("--dp-replicate must divide the expert-data-parallel group, TP x DP x CP / (EP x ETP): each replica shards "
         "the experts' states over its share of it (Megatron-core asserts expert_data_parallel_size % "
         "num_distributed_optimizer_instances == 0)",
         rep & (model.num_experts > 1) & (expert_dp(t) % r != 0)),
        ((f"the {{stack}} stack runs no HSDP at this ZeRO stage (--dp-replicate > 1 runs on {on})" if st.hsdp_zero_stages
          else f"the {{stack}} stack runs no HSDP (--dp-replicate > 1 runs on {on})"),
         rep & ~np.isin(t.zero, st.hsdp_zero_stages)),
    ]


def shard_dp(t) -> np.ndarray:
    """Size of the group ZeRO shards the dense states over (array; reads dp, cp, dp_replicate): DP x CP,
    over ``dp_replicate`` HSDP replicas (Megatron-core's intra-instance DP x CP group, FSDP2's shard
    dim with CP folded in)."""
    return (t.dp * t.cp) // np.maximum(t.dp_replicate, 1)


def expert_shard_dp(t) -> np.ndarray:
    """Size of the group ZeRO shards the expert states over (array; reads tp, dp, cp, ep, etp,
    dp_replicate): the expert-data-parallel group (:func:`expert_dp`) over the HSDP replicas."""
    return expert_dp(t) // np.maximum(t.dp_replicate, 1)


def job_domain_gpus(scale_up_gpus: int, num_gpus: int) -> int:
    """The job's GPUs in one NVLink domain: the domain's (``ClusterSpec.scale_up_gpus``), or all the
    job's GPUs when it takes part of one domain (64 GPUs of a GB200 NVL72 rack: TP 16 stays inside)."""
    return min(scale_up_gpus, num_gpus) if num_gpus > 0 else scale_up_gpus


def _interleaved_microbatch_rules(recipe, t) -> tuple:
    """The interleaved schedule's rule on the micro-batch count m = gbs / (DP x mbs) (VP > 1):
    Megatron-LM's, m a multiple of PP (schedules.py forward_backward_pipelining_with_interleaving);
    PyTorch's pipelining (torchtitan), m a multiple of its rounds max(1, m // PP)
    (torch/distributed/pipelining/schedules.py ScheduleInterleaved1F1B)."""
    m = recipe.gbs // np.maximum(t.dp * t.mbs, 1)
    if recipe.stack == "torchtitan":
        rounds = np.maximum(1, m // np.maximum(t.pp, 1))
        return (("with VP > 1 the number of micro-batches gbs/(DP x mbs) must be a multiple of its rounds, "
                 "max(1, micro-batches // PP) (PyTorch's ScheduleInterleaved1F1B)", (t.vp > 1) & (m % rounds != 0)),)
    return (("with VP > 1 the number of micro-batches gbs/(DP x mbs) must be a multiple of PP",
             (t.vp > 1) & (m % t.pp != 0)),)


def validity(t: LayoutTable, model: ModelSpec, recipe: Recipe, num_gpus: int,
             scale_up_gpus: int, uneven_pp: bool = False) -> tuple[np.ndarray, list[str]]:
    """Check every Megatron-core divisibility rule on every layout (``scale_up_gpus``: the GPUs of one
    NVLink domain, ``ClusterSpec.scale_up_gpus``, which TP must divide).

    ``uneven_pp`` accepts PP stages of unequal layer counts when VP = 1 (DeepSpeed pipelines and
    Megatron's --decoder-first/last-pipeline-num-layers), split as :func:`uneven_split`; ``"any"``
    also with VP > 1 (a run that sets its own split, Megatron-core --pipeline-model-parallel-layout:
    the fullest stage still holds ceil(L/PP) layers, :func:`layers_per_stage`).

    Returns:
        (code, messages): code[i] = -1 for a valid layout, else the index into ``messages`` of the
        first rule layout i breaks.
    """
    st = get_stack(recipe.stack)
    partial, dims, stages, has_sp = st.partial_recompute, st.model_parallel, st.zero_stages, st.sequence_parallel
    scale_up_gpus = job_domain_gpus(scale_up_gpus, num_gpus)
    rules = [
        ("the {stack} stack runs no tensor parallelism the model prices (TP must be 1)" + (
            ": llm-foundry's tp_config shards only the FFN, its inputs split by batch (llmfoundry/tp/"
            "ffn_tp_strategy.py), not Megatron's TP" if st.name == "llm-foundry" else ""),
         ("tp" not in dims) & (t.tp > 1)),
        ("the {stack} stack runs no pipeline parallelism (PP must be 1)", ("pp" not in dims) & (t.pp > 1)),
        ("the {stack} stack runs no context parallelism (CP must be 1)", ("cp" not in dims) & (t.cp > 1)),
        ("TP x PP x DP x CP must equal the number of GPUs ({n})",
         t.tp * t.pp * t.dp * t.cp != num_gpus),
        ("TP must divide the GPUs of one NVLink domain ({g}; the GPUs per node unless the cluster's "
         "domain_gpus joins nodes; the job's GPUs when fewer): TP stays within a domain",
         scale_up_gpus % t.tp != 0),
        ("num_attention_heads ({a}) must be divisible by TP", model.num_heads % t.tp != 0),
        ("the KV heads ({kv}; num_query_groups in Megatron, num_key_value_heads in Hugging Face) must be divisible "
         "by TP", model.num_kv_heads % t.tp != 0),
        ("num_layers ({L}) must be divisible by PP x VP (or num_layers + 2, the embedding and the loss "
         "counted as pipeline layers)",
         (model.num_layers % (t.pp * t.vp) != 0) & ~accounts_embedding_loss(model, t)
         & ~((uneven_pp == "any") | (bool(uneven_pp) & (t.vp == 1)))),
        ("PP must not exceed num_layers ({L})", t.pp > model.num_layers),
        ("PP x VP must not exceed num_layers ({L}) where the split is spread evenly: a virtual stage would hold no "
         "layer (--pp-layout names the stages)", (t.vp > 1) & (t.pp * t.vp > model.num_layers)
         & ~accounts_embedding_loss(model, t) & (np.asarray(t.pp) != len(model.pipeline_rank_layers))),
        ("Megatron-LM 2021-22 splits the layers evenly over the pipeline (num_layers ({L}) divisible by PP x VP; "
         "uneven stages came with Megatron-core)",
         (recipe.stack == "megatron-legacy") & (model.num_layers % (t.pp * t.vp) != 0)),
        ("the {stack} stack's pipeline (DeepSpeed's PipelineEngine, 1F1B) has no interleaved schedule: VP must be 1",
         (recipe.stack == "megatron-deepspeed") & (t.vp > 1)),
        ("VP > 1 needs PP > 1", (t.vp > 1) & (t.pp < 2)),
        # Megatron-LM's training loop only: NeMo builds Megatron-core's schedules without its validate_args
        ("--no-pp-overlap: Megatron-LM runs the interleaved schedule (VP > 1) without P2P overlap only at PP > 2 "
         "(validate_args): drop --no-pp-overlap or raise PP",
         (recipe.stack == "megatron") & (not recipe.pp_overlap) & (t.vp > 1) & (t.pp <= 2)),
        ("gbs ({gbs}) must be divisible by DP x mbs", recipe.gbs % (t.dp * t.mbs) != 0),
        *_interleaved_microbatch_rules(recipe, t),
        ("seq_len ({s}) must be divisible by 2 x CP (load-balanced context parallelism)",
         (t.cp > 1) & (recipe.seq_len % (2 * t.cp) != 0)),
        *cp_rules(t, model, recipe),
        ("with sequence parallelism seq_len / CP must be divisible by TP (Megatron-core splits the sequence evenly "
         "over the TP group: tensor_parallel/mappings.py _split_along_first_dim asserts it; --no-sp runs it without)",
         t.sp & ((recipe.seq_len // t.cp) % t.tp != 0) & st.megatron_family),
        ("EP > 1 needs an MoE model ({name} is dense)", (model.num_experts == 1) & (t.ep > 1)),
        ("EP must divide the number of experts ({E})", model.num_experts % t.ep != 0),
        ("ETP applies to MoE models (a dense model's ETP is its TP)", (model.num_experts == 1) & (t.etp != t.tp)),
        *_expert_grid_rules(t, model, recipe),
        ("MoE with TP > 1 needs sequence parallelism on a Megatron-family stack (Megatron-core's MoELayer.forward "
         "raises in training: 'performance may degrade if MoE and tensor parallelism are enabled without also "
         "enabling sequence parallelism'; validate_args asserted it before)",
         (model.num_experts > 1) & (t.tp > 1) & ~t.sp & partial),
        ("the flex (DeepEP) dispatcher needs ETP x EP > 1 (Megatron-core: 'DeepEP dispatcher requires TPxEP > 1', "
         "its TP the experts' own)", (model.num_experts > 1) & (recipe.moe_dispatcher == "flex") & (t.etp * t.ep < 2)),
        *_ep_overlap_rules(t, model, recipe),
        *_hsdp_rules(t, model, st),
        ("sequence parallelism needs TP > 1", t.sp & (t.tp < 2)),
        ("the {stack} stack has no sequence parallelism (BigScience's Megatron-DeepSpeed predates it): drop --sp",
         t.sp & (not has_sp)),
        ("--bf16-edge-layers " + (bf16_edge_layers_problem(recipe, model.num_layers) or ""),
         np.full(len(t.tp), bf16_edge_layers_problem(recipe, model.num_layers) is not None)),
        ("torchtitan runs sequence parallelism whenever TP > 1 (its TP plan shards the norms on the sequence: "
         "SequenceParallel, torchtitan/models/llama3/infra/parallelize.py): drop --no-sp",
         (recipe.stack == "torchtitan") & (t.tp > 1) & ~t.sp),
        ("ZeRO-3/FSDP is modelled without pipeline parallelism (PP = 1)"
         + ("; with a pipeline torchtitan's FSDP2 keeps its parameters gathered: --zero 1"
            if recipe.stack == "torchtitan" else ""), (t.zero == 3) & (t.pp > 1)),
        ("ZeRO stage must be 0-3", (t.zero < 0) | (t.zero > 3)),
        # DeepSpeed's engine asserts these (deepspeed/runtime/engine.py, deepspeed/runtime/pipe/engine.py)
        ("the {stack} stack's DeepSpeed engine refuses MoE under ZeRO-3 ('MoE not supported with Stage 3')",
         (st.fsdp_copies == "deepspeed") & (model.num_experts > 1) & (t.zero == 3)),
        ("the {stack} stack's DeepSpeed pipeline refuses ZeRO-2 and ZeRO-3 ('ZeRO-2 and ZeRO-3 are incompatible with "
         "pipeline parallelism')", (st.fsdp_copies == "deepspeed") & (t.pp > 1) & (t.zero >= 2)),
        ("Megatron-LM 2021-22 (the {stack} stack) has no MoE layers: price {name} with --stack megatron",
         np.full(len(t), recipe.stack == "megatron-legacy" and model.num_experts > 1)),
        ("the {stack} stack's data parallelism has ZeRO stages {zs} only (Megatron-core: DDP, the distributed "
         "optimizer, which shards the optimizer states but keeps the whole gradient buffer (ZeRO-1), or FSDP; "
         "torchtitan: FSDP2 or DDP; llm-foundry: FULL_SHARD, SHARD_GRAD_OP or NO_SHARD)", ~np.isin(t.zero, stages)),
        ("torchtitan runs ZeRO-1 only with a pipeline: it stands for FSDP2 keeping its parameters gathered "
         "through the step (reshard_after_forward False, torchtitan's default with PP); without one, --zero 3",
         (recipe.stack == "torchtitan") & (t.zero == 1) & (t.pp == 1)),
        ("the {stack} stack's checkpointing (Hugging Face gradient_checkpointing) re-runs whole layers: --recompute "
         "full or none", np.full(len(t), recipe.stack == "deepspeed") & (t.recompute == 1)),
        ("llm-foundry's activation checkpointing (fsdp_config.activation_checkpointing) re-runs whole blocks; its "
         "activation_checkpointing_target picks modules, not priced here: --recompute full or none",
         np.full(len(t), recipe.stack == "llm-foundry") & (t.recompute == 1)),
        ("--recompute-num-layers applies to full recompute", (t.recompute_num_layers > 0) & (t.recompute != 2)),
        ("--recompute-num-layers must not exceed the layers of one pipeline chunk (num_layers / (PP x VP))",
         t.recompute_num_layers > np.ceil(layers_per_stage(model, t) / t.vp)),
        ("--recompute-num-layers needs a Megatron-family stack (megatron, megatron-legacy, "
         "megatron-deepspeed, nemo): the stack ({stack}) recomputes every layer it checkpoints",
         (t.recompute_num_layers > 0) & ~partial),
        ("every parallel degree and mbs must be >= 1",
         (t.tp < 1) | (t.pp < 1) | (t.dp < 1) | (t.cp < 1) | (t.ep < 1) | (t.vp < 1) | (t.mbs < 1)
         | (t.dp_replicate < 1)),
    ]
    fmt = dict(n=num_gpus, g=scale_up_gpus, a=model.num_heads, kv=model.num_kv_heads,
               L=model.num_layers, gbs=recipe.gbs, s=recipe.seq_len, E=model.num_experts, stack=recipe.stack,
               name=model.name, zs=", ".join(str(z) for z in sorted(stages)))
    code = np.full(len(t), -1, dtype=np.int64)
    for i, (_, bad) in reversed(list(enumerate(rules))):
        code = np.where(bad, i, code)
    return code, [msg.format(**fmt) for msg, _ in rules]


def bf16_edge_layers_problem(recipe: Recipe, num_layers: int) -> str | None:
    """Why no layout holds ``recipe.bf16_edge_layers`` BF16 first and last layers of a ``num_layers`` model
    (twice the count exceeds the layers), or of any (it reaches them: no layer would run the low-precision
    format, whose kernels the power model would still price), or None; the message of ``--bf16-edge-layers``."""
    n = recipe.bf16_edge_layers
    if 2 * n < num_layers:
        return None
    if 2 * n == num_layers:
        return (f"{n} keeps the first and the last {n} layers in BF16, which is every layer of {num_layers}: "
                f"give --precision bf16 instead")
    return f"{n} keeps the first and the last {n} layers in BF16: twice it must stay below num_layers ({num_layers})"


def stack_default_etp(stack: str, tp: int, ep: int) -> int:
    """The experts' TP a run of ``stack`` has where it sets none: torchtitan runs each expert whole under EP
    (pytorch/torchtitan#3167 removed expert_tensor_parallel_degree), Megatron-core splits them over the
    layout's TP (expert_tensor_parallel_size defaults to tensor_model_parallel_size)."""
    return 1 if stack == "torchtitan" and ep > 1 else tp


def _expert_grid_rules(t: LayoutTable, model: ModelSpec, recipe: Recipe) -> list:
    """(message, bad) rules of :func:`validity` for the experts' grid as the frameworks build it: EP x ETP
    within the GPUs and dividing TP x DP x CP (Megatron-core's MoE parallel folding); Megatron-core
    refuses biased experts split over TP (TransformerConfig: 'Bias in Moe is only supported when ETP==1');
    torchtitan's EP takes its ranks from the sharded DP, CP and TP dimensions (ParallelDims) and runs each
    expert whole (pytorch/torchtitan#3167 removed expert_tensor_parallel_degree)."""
    megatron = get_stack(recipe.stack).megatron_family
    titan = recipe.stack == "torchtitan"
    return [
        ("EP x ETP must not exceed the GPUs ({n}): the experts' grid spans TP x DP x CP of them",
         t.ep * t.etp > t.tp * t.pp * t.dp * t.cp),
        ("EP x ETP must divide TP x DP x CP (the experts' own grid, Megatron-core's MoE parallel folding; "
         "ETP defaults to TP, --etp 1 runs the experts unsplit)",
         (t.tp * t.dp * t.cp) % (t.ep * t.etp) != 0),
        ("Megatron-core refuses biased expert layers ({name}: add_bias_linear) with ETP > 1 ('Bias in Moe is only "
         "supported when ETP==1', TransformerConfig): --etp 1",
         (model.num_experts > 1) & model.bias & (t.etp > 1) & megatron),
        ("torchtitan's EP borrows its ranks from the sharded data-parallel, CP and TP dimensions (ParallelDims: "
         "expert_parallel_degree must divide dp_shard x cp x tp; DDP, --zero 0, shards no data-parallel rank)",
         titan & (t.ep > 1) & ((np.where(t.zero == 0, 1, t.dp) * t.cp * t.tp) % t.ep != 0)),
        ("torchtitan splits no expert over TP under EP (its experts run whole on each EP rank; "
         "expert_tensor_parallel_degree is gone, pytorch/torchtitan#3167): --etp 1",
         titan & (t.ep > 1) & (t.etp > 1)),
    ]


def check_layout(t: LayoutTable, model: ModelSpec, recipe: Recipe, num_gpus: int,
                 scale_up_gpus: int, uneven_pp: bool = False) -> None:
    """Raise :class:`InputError` naming the first rule a one-row table breaks (``uneven_pp``: layers
    need not divide evenly over the pipeline stages, as in Megatron-DeepSpeed's partitioning)."""
    code, msgs = validity(t, model, recipe, num_gpus, scale_up_gpus, uneven_pp=uneven_pp)
    if code[0] >= 0:
        lay = t.row(0)
        got = layout_name(lay)
        if "ETP" in msgs[code[0]] and "ETP" not in got:      # the rule is about the ETP the name leaves out
            got += f" ETP{lay.get('etp') or lay['tp']}"
        raise InputError("layout", "", f"invalid: {msgs[code[0]]} (got {got})")


def expert_dp(t) -> np.ndarray:
    """Size of the expert-data-parallel group (array; reads tp, dp, cp, ep, etp): the ranks that
    hold the same experts, TP x DP x CP / (EP x ETP) (Megatron-core's expert grid)."""
    return (t.tp * t.dp * t.cp) // (t.ep * t.etp)


def enumerate_layouts(model: ModelSpec, recipe: Recipe, num_gpus: int, scale_up_gpus: int, *,
                      max_mbs: int = 16, sp_choices=(True,),
                      zero_stages=(0, 1, 3), overlaps=(True,), pins: dict | None = None) -> LayoutTable:
    """Every valid layout for this model, recipe and GPU count, as one vectorised table.

    The candidate grid is the outer product of TP (divisors of the NVLink domain's GPUs), CP (divisors of the GPU
    count), PP (divisors of layers), VP (costmodel.layout_grid.vp_candidates: equal chunks, or on the
    Megatron-core stacks an uneven interleaved layout where PP admits none), EP (divisors of experts) with ETP
    (the layout's TP, or 1), mbs
    (powers of two up to ``max_mbs``), recompute, ZeRO stage and overlap; DP is derived; then
    :func:`validity` filters.  ``sp_choices`` (True: SP on whenever TP > 1; False: off) and
    ``overlaps`` list the options tried; on is the default alone (off: nothing hides; TE TP-comm overlap,
    which can cost more than it hides, is a switch recommend tries both ways).  Layouts whose cost equals another's are dropped (ZeRO > 0 at
    DP x CP = 1; selective recompute under flash attention).  Stage 2 is omitted by default because Megatron-LM has no ZeRO-2 (its
    communication equals stage 1's); pass ``zero_stages`` to include it.  ``pins`` (field -> value, as
    :func:`pinned` takes them) are values the caller holds fixed: a pinned mbs or ZeRO stage is
    enumerated whether or not the defaults list it, and a pinned value is never dropped as dominated;
    the table is not filtered by them (costmodel.search.search does that), but each is checked.

    The last four tables are kept by the model, these arguments and the recipe fields the rules read
    (:data:`RULE_RECIPE_FIELDS`): recommend's switch search enumerates once per rule-relevant variant.

    Returns:
        :class:`LayoutTable` of the valid layouts (possibly empty; a copy of the kept one).
    Raises:
        InputError: num_gpus not a whole number >= 1; a pin of no layout field or of the wrong kind.
    """
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, (int, np.integer)) or num_gpus < 1:
        raise InputError("--nodes", "", f"the cluster has {num_gpus!r} GPUs; need a whole number, at least 1")
    pins = pins or {}
    pinned(LayoutTable.from_rows([]), pins)      # a pin of no field, or of the wrong kind, is refused here
    mbss = (int(pins["mbs"]),) if "mbs" in pins else tuple(m for m in (1, 2, 4, 8, 16, 32) if m <= max_mbs)
    if "zero" in pins:
        zero_stages = (int(pins["zero"]),)
    key = (model, tuple(getattr(recipe, f) for f in RULE_RECIPE_FIELDS), num_gpus, scale_up_gpus, mbss,
           tuple(zero_stages), tuple(sp_choices), tuple(overlaps), tuple(sorted(pins.items())))
    t = _ENUMERATED.pop(key, None)
    if t is None:
        t = _enumerate(model, recipe, num_gpus, scale_up_gpus, mbss, tuple(zero_stages), tuple(sp_choices),
                       tuple(overlaps), pins)
    _ENUMERATED[key] = t                    # the latest last; the oldest goes past four (a table is a few MB)
    while len(_ENUMERATED) > 4:
        del _ENUMERATED[next(iter(_ENUMERATED))]
    return t.take(np.arange(len(t)))        # a copy: callers never hold the kept arrays


#: the recipe fields :func:`enumerate_layouts` and :func:`validity` read (tests/test_layouts.py records
#: them): recipes apart only in other switches (recommend's switch search) share one enumeration
RULE_RECIPE_FIELDS = ("stack", "gbs", "seq_len", "flash_attention", "recomputed", "pp_overlap", "moe_dispatcher",
                      "moe_ep_overlap", "bf16_edge_layers", "doc_tokens")
_ENUMERATED: dict = {}


def _enumerate(model: ModelSpec, recipe: Recipe, num_gpus: int, scale_up_gpus: int, mbss: tuple,
               zero_stages: tuple, sp_choices: tuple, overlaps: tuple, pins: dict) -> LayoutTable:
    """:func:`enumerate_layouts`' table (its arguments, ``mbss`` the micro-batch sizes tried)."""
    grid = candidate_grid(model.num_layers, model.num_experts, model.num_heads, model.num_kv_heads, recipe.seq_len,
                          recipe.gbs, recipe.stack, num_gpus, job_domain_gpus(scale_up_gpus, num_gpus), mbss,
                          zero_stages, sp_choices, overlaps, get_stack(recipe.stack).sequence_parallel)
    if grid is None:
        return LayoutTable.from_rows([])
    t = LayoutTable(**grid)
    code, _ = validity(t, model, recipe, num_gpus, scale_up_gpus, uneven_pp=uneven_pp_rule(recipe.stack))
    # Drop layouts no better than another in the table: ZeRO stages differ only when DP x CP > 1
    # (the lowest stage asked for stays); with flash attention, Megatron's default selective
    # recompute (the attention core alone) keeps almost nothing less and re-runs the kernel, so
    # 'none' dominates it, unless the recipe recomputes more modules or the stack's selective
    # checkpointing is its own (torchtitan's op-level SAC)
    stack = get_stack(recipe.stack)
    own_sac = stack.selective_recompute == "op-sac"
    dominated = (recipe.flash_attention and recipe.recomputed == ("core_attn",) and not own_sac
                 and pins.get("recompute") != "selective")
    dup = ((t.dp * t.cp == 1) & (t.zero > min(zero_stages))) | ((t.recompute == 1) & dominated)
    return _with_hsdp(t.take((code < 0) & ~dup), model, recipe, num_gpus, scale_up_gpus, pins)


def _with_hsdp(t: LayoutTable, model: ModelSpec, recipe: Recipe, num_gpus: int, scale_up_gpus: int,
               pins: dict) -> LayoutTable:
    """``t`` (one shard group each) and, for its FSDP layouts (ZeRO-3) on a stack that runs them as HSDP,
    the same layouts sharded within one NVLink domain and replicated across domains: the shard group
    the DP x CP ranks of a domain (domain GPUs / TP), ``dp_replicate`` = DP x CP over it, where that
    spans domains (the per-layer gathers then stay on NVLink: torchtitan's HSDP; PyTorch FSDP's
    HYBRID_SHARD, whose default shard group is one node).  A pinned
    ``dp_replicate`` replaces these choices with its own, for any ZeRO stage; validity filters."""
    check = lambda u: u.take(validity(u, model, recipe, num_gpus, scale_up_gpus,  # noqa: E731
                                      uneven_pp=uneven_pp_rule(recipe.stack))[0] < 0)
    if "dp_replicate" in pins:
        return check(replace(t, dp_replicate=np.full(len(t), int(pins["dp_replicate"]), dtype=np.int64)))
    # the DP x CP ranks of one domain, or the largest share of them that divides the group (aligned blocks)
    shard = np.gcd(job_domain_gpus(scale_up_gpus, num_gpus) // t.tp, t.dp * t.cp)
    fsdp = (t.zero == 3) & np.isin(t.zero, get_stack(recipe.stack).hsdp_zero_stages) & (shard > 1)
    rep = np.where(fsdp, (t.dp * t.cp) // np.maximum(shard, 1), 1)
    cand = np.flatnonzero(rep > 1)
    if not len(cand):
        return t
    hsdp = check(replace(t.take(cand), dp_replicate=rep[cand]))
    return LayoutTable(**{f: np.concatenate([getattr(t, f), getattr(hsdp, f)]) for f in FIELDS})
