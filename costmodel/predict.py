"""Prediction: every cost term for a table of layouts (:func:`predict_table`, the search's hot path),
and the one typed result for one layout (:class:`RunPrediction`, made by :func:`predict_runs` /
:func:`predict_run` for ``predict``, ``compare`` and the ILP's candidates).

Data flow (DESIGN.md): specs -> layouts -> compute / comm / memory / schedule -> prediction ->
power / thermal / energy (costmodel.energy) -> band (costmodel.uncertainty).  A single layout is
the same vectorised code on a table of one; several layouts of one model and cluster are best
predicted as one table (``predict_runs``).
"""
from __future__ import annotations

import math

from dataclasses import dataclass, replace

import numpy as np

from . import metrics
from .comm import blend_edge_comm, data_parallel_comm_times, merge_comm, microbatch_comm_times
from .compute import blend_edge_layers, compute_times, edge_layer_share, edge_recipe16, gemm_dtype
from .energy import EnergyReport, layout_energy, missing_inputs
from .errors import InputError
from .distinct_rows import unique_rows
from .layouts import LayoutTable, layers_per_stage, layout_name, light_last_stage, validity
from .memory import MemoryBreakdown, memory_bytes
from .schedule import BREAKDOWN_TERMS, LayoutTerms, step_times, take_rows
from .specs import ClusterSpec, ModelSpec, Profile, Recipe
from .stage_params import stage_params
from .specs.cooling import INLET_RANGE_C
from .stacks import get_stack
from .model_error import load_model_form, regime
from .uncertainty import Band, step_time_band

GIB = 2.0**30


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
        terms: the time model's terms of every layout (:class:`LayoutTerms`), or None for a subset
            taken without them.
    """

    layouts: LayoutTable
    step_time_s: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    model_tflops_per_gpu: np.ndarray
    mfu: np.ndarray
    memory: MemoryBreakdown
    feasible: np.ndarray
    breakdown: dict
    terms: LayoutTerms | None = None

    def take(self, idx) -> "Prediction":
        """The predictions of a subset (index array or mask), without their terms (the search takes
        large subsets; one row's terms come from :func:`prediction_row`)."""
        return Prediction(self.layouts.take(idx), self.step_time_s[idx], self.tokens_per_s_per_gpu[idx],
                          self.model_tflops_per_gpu[idx], self.mfu[idx], take_rows(self.memory, idx),
                          self.feasible[idx], {k: v[idx] for k, v in self.breakdown.items()},
                          None)


def _gather(obj, inv):
    """Expand every array attribute of a dataclass instance by index ``inv``."""
    return type(obj)(**{k: v[inv] for k, v in vars(obj).items()})


def _distinct(term, layouts: LayoutTable, *args):
    """Evaluate a cost term on the distinct rows of the layout fields it declares, then expand.

    A search space has many layouts per distinct row of, e.g., the compute fields; the term sees a
    :class:`costmodel.layout_fields.LayoutView` of exactly its declared fields, so the dedupe key cannot
    miss a field it reads.
    """
    names = term.layout_fields
    first, inv = unique_rows(*(getattr(layouts, f) for f in names))
    return _gather(term(*args, layouts.view(names, first)), inv)


def predict_table(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                  layouts: LayoutTable) -> Prediction:
    """Predict every layout of a table at once; vectorised over layouts.  The table's layouts must be
    valid (costmodel.layouts.enumerate_layouts gives such tables, check_layout checks one row):
    an invalid row is priced without its rules, and one whose step comes out non-finite is marked
    infeasible.

    Returns:
        :class:`Prediction` with arrays of len(layouts) and its :class:`LayoutTerms`.
    Raises:
        InputError: the recipe's precision is not supported by the GPU or the profile.
    """
    L = layouts
    ct = _distinct(compute_times, L, model, recipe, cluster, profile)
    mb = _distinct(microbatch_comm_times, L, model, recipe, cluster, profile)
    if recipe.bf16_edge_layers:
        # Megatron --first-last-layers-bf16: those layers compute and gather their operands in BF16
        r16, share = edge_recipe16(recipe), edge_layer_share(model, recipe, L)
        ct = blend_edge_layers(ct, _distinct(compute_times, L, model, r16, cluster, profile), share)
        mb = blend_edge_comm(mb, _distinct(microbatch_comm_times, L, model, r16, cluster, profile), share)
    cm = merge_comm(mb, _distinct(data_parallel_comm_times, L, model, recipe, cluster, profile))
    params = stage_params(model, L, light_last_stage(recipe))       # what step_times and memory_bytes share
    st = step_times(model, recipe, cluster, profile, L.view(step_times.layout_fields), ct, cm, params)
    mem = memory_bytes(model, recipe, L.view(memory_bytes.layout_fields), cluster.gpu, params)
    n_gpus = L.tp * L.pp * L.dp * L.cp
    step = st.step_time_s
    # a row the validity rules would refuse (mbs 0, TP 0) can come out NaN: never a feasible answer
    feasible = (mem.peak_bytes <= cluster.gpu.capacity_bytes) & np.isfinite(step)
    bd = {k: st.breakdown[k] for k in BREAKDOWN_TERMS}
    return Prediction(L, step, metrics.tokens_per_s_per_gpu(recipe, step, n_gpus),
                      metrics.model_tflops_per_gpu(model, recipe, step, n_gpus),
                      metrics.mfu(model, recipe, cluster, step, n_gpus), mem, feasible, bd,
                      LayoutTerms(L, ct, cm, st))


@dataclass
class RunPrediction:
    """Everything predicted for one layout of one run: the one typed result ``predict``, ``compare``
    and the ILP's candidates share (reports only format it: costmodel/report.py ``run_record``).

    Attributes:
        model, recipe, cluster, profile: what was predicted.
        layout: the layout as a dict (:meth:`costmodel.layouts.LayoutTable.row`).
        feasible: peak memory fits the GPU's HBM, and no GPU passes its shutdown temperature.
        uncapped_step_time_s: the time model's step at full clocks, s (sum of ``breakdown``).
        breakdown: term -> seconds (costmodel.schedule.BREAKDOWN_TERMS).
        memory: weights/grads/optimizer/activations bytes per GPU; peak_mem_bytes their peak.
        terms: the one-row :class:`LayoutTerms` (what the energy model and the trace build on).
        band: one-sigma band of the step time (:class:`costmodel.uncertainty.Band`), or None.
        energy: power/energy/temperature under caps and throttling (:class:`EnergyReport`), or None
            when not asked for or when ``energy_missing`` lists what the power/thermal model lacks.
    """

    model: ModelSpec
    recipe: Recipe
    cluster: ClusterSpec
    profile: Profile
    layout: dict
    feasible: bool
    uncapped_step_time_s: float
    breakdown: dict
    memory: dict
    peak_mem_bytes: float
    terms: LayoutTerms | None = None
    band: Band | None = None
    energy: EnergyReport | None = None
    energy_missing: tuple = ()

    @property
    def num_gpus(self) -> int:
        """TP x PP x DP x CP of the layout."""
        lay = self.layout
        return lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"]

    @property
    def step_time_s(self) -> float:
        """The predicted step, s: under the power caps and thermal slowdown when ``energy`` is there,
        else the time model's step at full clocks."""
        return self.energy.step_time_s if self.energy is not None else self.uncapped_step_time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Tokens/s per GPU at :attr:`step_time_s`."""
        return float(metrics.tokens_per_s_per_gpu(self.recipe, self.step_time_s, self.num_gpus))

    @property
    def model_tflops_per_gpu(self) -> float:
        """Model TFLOP/s per GPU at :attr:`step_time_s`."""
        return float(metrics.model_tflops_per_gpu(self.model, self.recipe, self.step_time_s, self.num_gpus))

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation at :attr:`step_time_s` (fraction of the dense 16-bit peak)."""
        return float(metrics.mfu(self.model, self.recipe, self.cluster, self.step_time_s, self.num_gpus))

    @property
    def step_time_band_s(self) -> float | None:
        """Half-width of the one-sigma band around :attr:`step_time_s`, s (None without a band)."""
        return None if self.band is None else self.band.rel * self.step_time_s

    @property
    def reason(self) -> str | None:
        """Why the layout is infeasible (peak memory over HBM), None when it fits."""
        if self.feasible:
            return None
        if self.energy is not None and self.energy.shutdown:
            return self.energy.shutdown
        g = self.cluster.gpu
        cap = g.capacity_bytes
        over = self.peak_mem_bytes - cap
        hbm = (f"HBM of {g.name}" if not g.mem_headroom else f"usable of {g.name}'s {g.total_capacity_bytes / GIB:.1f} "
               f"GiB HBM (--mem-headroom {g.mem_headroom:g})")
        return f"peak memory {self.peak_mem_bytes / GIB:.1f} GiB exceeds the {cap / GIB:.1f} GiB {hbm} by {over / GIB:.1f} GiB"

    @property
    def name(self) -> str:
        """Short text of the layout (costmodel.layouts.layout_name)."""
        return layout_name(self.layout)


_MEMORY_PARTS = ("weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "reserved_bytes")


def prediction_row(pred: Prediction, i: int, model: ModelSpec, recipe: Recipe, cluster: ClusterSpec,
                   profile: Profile) -> RunPrediction:
    """Row ``i`` of a table prediction as a :class:`RunPrediction` (its terms when ``pred`` kept them;
    no band, no energy)."""
    return RunPrediction(
        model=model, recipe=recipe, cluster=cluster, profile=profile, layout=pred.layouts.row(i),
        feasible=bool(pred.feasible[i]), uncapped_step_time_s=float(pred.step_time_s[i]),
        breakdown={k: float(pred.breakdown[k][i]) for k in BREAKDOWN_TERMS},
        memory={k: float(getattr(pred.memory, k)[i]) for k in _MEMORY_PARTS},
        peak_mem_bytes=float(pred.memory.peak_bytes[i]),
        terms=pred.terms.take(np.array([i])) if pred.terms is not None else None)


def check_inlet_temp_c(inlet_temp_c: float, cluster: ClusterSpec) -> None:
    """An inlet temperature the cooling can have: finite, within :data:`INLET_RANGE_C` and below the
    GPU's thermal slowdown temperature (a coolant at or above it would throttle an idle GPU).

    Raises:
        InputError: naming --inlet-temp-c and the bound.
    """
    slow = cluster.gpu.slowdown_temp_c
    hi = min(INLET_RANGE_C[1], slow) if slow is not None else INLET_RANGE_C[1]
    if not math.isfinite(inlet_temp_c) or not INLET_RANGE_C[0] <= inlet_temp_c <= hi or inlet_temp_c == slow:
        raise InputError("--inlet-temp-c", "", f"{inlet_temp_c:g} C is not a coolant temperature a data centre "
                         f"runs: it must be between {INLET_RANGE_C[0]:g} and {hi:g} C (air inlets of ASHRAE's "
                         "classes reach 45 C, warm-water loops 60 C)"
                         + (f"; {cluster.gpu.name} slows down at {slow:g} C" if slow is not None and slow < 60 else ""))


def _checked(layouts: LayoutTable, model: ModelSpec, recipe: Recipe, cluster: ClusterSpec) -> LayoutTable:
    """``layouts`` as :func:`predict_runs` prices them: sequence parallelism off at TP 1 (Megatron-LM turns
    it off there), each layout on its own GPUs, at most the cluster's, and otherwise valid.

    Raises:
        InputError: a layout that needs more GPUs than the cluster has, or breaks a rule of
            costmodel.layouts.validity (its pipeline may split the layers its own way: "any", as a
            run's --pipeline-model-parallel-layout does; the commands check theirs first).
    """
    layouts = replace(layouts, sp=layouts.sp & (layouts.tp > 1))
    gpus = layouts.tp * layouts.pp * layouts.dp * layouts.cp
    for n in np.unique(gpus):
        rows = np.flatnonzero(gpus == n)
        sub = layouts.take(rows)
        code, msgs = validity(sub, model, recipe, int(n), cluster.scale_up_gpus, uneven_pp="any")
        bad = [(int(rows[j]), msgs[code[j]]) for j in np.flatnonzero(code >= 0)]
        if n > cluster.num_gpus:
            bad = [(int(rows[0]), f"it needs {int(n)} GPUs, the cluster has {cluster.num_gpus}")] + bad
        if bad:         # a layout no run can have: its numbers would look plausible and mean nothing
            i, why = min(bad)
            raise InputError("layout", "", f"invalid: {why} (got {layout_name(layouts.row(i))}"
                             + (f", row {i} of {len(layouts)}" if len(layouts) > 1 else "") + ")")
    return layouts


def predict_runs(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, layouts: LayoutTable,
                 *, energy: bool = True, caps_w=None, warm_steps: int | None = None,
                 inlet_temp_c: float | None = None, derate: dict | None = None,
                 device_order: dict | None = None, searched: bool = False) -> list[RunPrediction]:
    """Predict each layout of a table (one vectorised pass), with its band and, when ``energy``
    and the power/thermal model can run, its power, energy and temperature.  Each layout runs on its
    own GPUs (TP x PP x DP x CP, at most the cluster's) and must be valid there (costmodel.layouts.validity;
    a pipeline may split its layers unevenly, as a run's own layout does); sequence parallelism at TP 1
    is off, as Megatron-LM turns it off.

    Args:
        caps_w: per-GPU power cap, W: one value for every stage, a sequence of one per pipeline stage
            (an ILP answer's per-stage caps), or None for the TDP.
        warm_steps: also report the hottest GPU after this many steps from a cold start.
        inlet_temp_c: override the cluster's cooling inlet temperature, C.
        derate: (node, slot) -> SM clock, MHz, pinned on those GPUs (costmodel.energy.layout_energy).
        device_order: node (None: every node not named) -> the slot each local rank runs on, as
            recommend's placement exports it (costmodel.energy.check_device_order).
        searched: the layouts are a search's, whose rows without selective recomputation run with the
            recipe's recompute modules ignored (costmodel.run_checks.check_layout_switches).
    Returns:
        one :class:`RunPrediction` per row, in order.
    Raises:
        InputError: precision unsupported, a cap outside the GPU's range, per-stage caps not one per
            stage, or power flags given when the power/thermal model lacks inputs (their list names
            what is missing); a switch the model, GPU, stack or layout cannot run
            (costmodel.run_checks).  A model whose attention the stack cannot fuse (Gemma 2's soft-capped
            scores on the Megatron family) is priced unfused (costmodel.run_checks.model_recipe).
    """
    from .run_checks import check_layout_switches, model_recipe
    recipe = model_recipe(model, recipe, cluster)
    layouts = _checked(layouts, model, recipe, cluster)
    for i in range(len(layouts)):
        check_layout_switches(recipe, layouts.row(i), model.is_moe, model.num_layers, searched=searched)
    pred = predict_table(model, recipe, cluster, profile, layouts)
    missing = tuple(missing_inputs(cluster, profile)) if energy else ()
    given = [flag for flag, v in (("--power-cap-w", caps_w), ("--inlet-temp-c", inlet_temp_c),
                                  ("--warm-steps", warm_steps), ("--derate", derate or None),
                                  ("--device-order", device_order or None)) if v is not None]
    if missing and given:
        raise InputError("/".join(given), "", f"needs a power and thermal model; missing: {', '.join(missing)}")
    if warm_steps is not None and warm_steps < 1:
        raise InputError("--warm-steps", "", f"must be >= 1 (the steps run from a cold start), got {warm_steps}")
    if inlet_temp_c is not None:
        check_inlet_temp_c(inlet_temp_c, cluster)
    dtype = gemm_dtype(recipe)
    mf = load_model_form().sigma(regime(recipe.stack, cluster.gpu, model.params(), model.is_moe))
    out = []
    for i in range(len(layouts)):
        run = prediction_row(pred, i, model, recipe, cluster, profile)
        run.band = step_time_band(run.breakdown, run.layout, cluster.gpus_per_node, profile, dtype, mf)
        run.energy_missing = missing
        if energy and not missing:
            caps = (None if caps_w is None else [float(x) for x in caps_w] if np.ndim(caps_w)
                    else [caps_w] * run.layout["pp"])
            run.energy = layout_energy(model, recipe, cluster, profile, run.terms, caps_w=caps,
                                       warm_steps=warm_steps, inlet_temp_c=inlet_temp_c, derate=derate,
                                       device_order=device_order)
            if run.energy.shutdown:
                run.feasible = False
        out.append(run)
    return out


def recompute_options(model: ModelSpec, layout: dict, recipe: Recipe) -> list[tuple[str, int]]:
    """(recompute, recompute_num_layers) choices from the least to the most recomputation: none;
    selective (unfused attention only: with flash attention it stores and recomputes nothing more
    than none; always on torchtitan, whose op-level SAC saves less); full on 1, 2, ... layers of
    each pipeline chunk (Megatron's block method, on the stacks that have it); full on every layer.
    Batch-level EP overlap (``moe_ep_overlap`` with EP > 1) runs no full recompute (Megatron-core
    asserts it): none and selective only."""
    stack = get_stack(recipe.stack)
    per_chunk = int(layers_per_stage(model, LayoutTable.from_rows([dict(layout, recompute="none")]))[0]
                    // layout["vp"]) if stack.partial_recompute else 1
    sac = not recipe.flash_attention or stack.selective_recompute == "op-sac"
    no_full = recipe.moe_ep_overlap and model.is_moe and layout.get("ep", 1) > 1
    return ([("none", 0)] + ([("selective", 0)] if sac else [])
            + ([] if no_full else [("full", n) for n in range(1, per_chunk)] + [("full", 0)]))


#: selective module sets ``--recompute auto`` tries beside :func:`recompute_options` on the stacks that take
#: ``--recompute-modules`` (Megatron-core's light, output-discarding modules first, then whole submodules;
#: Megatron-Bridge's DeepSeek-V3 recipe runs mla_up_proj with mlp, its Qwen3 MoE ones layernorm with moe_act)
AUTO_MODULE_SETS = (("layernorm", "moe_act"), ("mla_up_proj",), ("mla_up_proj", "layernorm", "moe_act"),
                    ("mlp",), ("mla_up_proj", "mlp"), ("layernorm", "moe_act", "mlp"),
                    ("mla_up_proj", "layernorm", "moe_act", "mlp"), ("shared_experts", "layernorm", "moe_act"),
                    ("moe",), ("mla_up_proj", "moe"))


def _module_recipes(model: ModelSpec, recipe: Recipe, layout: dict) -> list:
    """The recipes of :data:`AUTO_MODULE_SETS` whose modules ``model`` has and Megatron-LM runs with
    ``recipe`` and ``layout`` (costmodel.stack_rules.check_megatron_rules), on the Megatron-family stacks."""
    from .specs.recipe import recompute_modules_problem
    from .stack_rules import check_megatron_rules
    if not get_stack(recipe.stack).partial_recompute:
        return []
    out = []
    for mods in AUTO_MODULE_SETS:
        if recompute_modules_problem(model, mods):
            continue
        r = replace(recipe, recompute_modules=",".join(mods))
        try:
            check_megatron_rules(r, dict(layout, recompute="selective"), model.is_moe, model.num_layers)
        except InputError:
            continue
        out.append(r)
    return out


def least_recompute(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                    layout: dict) -> tuple[str, int, Recipe]:
    """The recomputation ``--recompute auto`` picks, as (``--recompute-granularity``,
    ``--recompute-num-layers``, the recipe, whose ``recompute_modules`` a selective choice sets): of
    :func:`recompute_options` and, on the stacks that take ``--recompute-modules``, selective
    recomputation of the :data:`AUTO_MODULE_SETS` the model has, the fastest step that fits in HBM
    (the least recomputation that fits, where recomputing more only costs time; a module set is
    not ordered against full recomputation of some layers by the amount it recomputes); the option
    of the least peak memory when nothing fits (full on every layer, where the recipe allows it; the
    prediction then says by how much it does not fit)."""
    order = recompute_options(model, layout, recipe)
    rows = [dict(layout, recompute=rc, recompute_num_layers=n) for rc, n in order]
    pred = predict_table(model, recipe, cluster, profile, LayoutTable.from_rows(rows))
    cands = [(float(t), (rc, n, recipe)) for (rc, n), t, fits in zip(order, pred.step_time_s, pred.feasible) if fits]
    least = min(zip(pred.memory.peak_bytes, range(len(order))))
    least = (float(least[0]), (*order[least[1]], recipe))
    for r in _module_recipes(model, recipe, layout):
        try:            # a module set the layout's rules refuse (the MoE layer under EP overlap) is no option
            t = _checked(LayoutTable.from_rows([dict(layout, recompute="selective", recompute_num_layers=0)]), model,
                         r, cluster)
        except InputError:
            continue
        one = predict_table(model, r, cluster, profile, t)
        if one.feasible[0]:
            cands.append((float(one.step_time_s[0]), ("selective", 0, r)))
        least = min(least, (float(one.memory.peak_bytes[0]), ("selective", 0, r)), key=lambda c: c[0])
    return min(cands, key=lambda c: c[0])[1] if cands else least[1]


def predict_run(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, layout: dict,
                **kw) -> RunPrediction:
    """Predict one layout (a dict with the keys of costmodel.layouts.FIELDS): :func:`predict_runs`
    on a table of one, with its keyword arguments.

    Returns:
        :class:`RunPrediction`: ``step_time_s`` (s, under the power limit), ``uncapped_step_time_s`` (s, at
        full clocks), ``peak_mem_bytes`` (bytes per GPU), ``breakdown`` (term -> s at full clocks,
        costmodel.schedule.BREAKDOWN_TERMS), ``memory`` (part -> bytes), the band and the energy terms.
    Raises:
        InputError: a field missing or of the wrong kind (costmodel.layouts.LayoutTable.from_rows), a
            layout no run can have (the rule it breaks), or what :func:`predict_runs` raises.
    """
    return predict_runs(model, recipe, cluster, profile, LayoutTable.from_rows([layout]), **kw)[0]
