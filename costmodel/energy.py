"""Energy, power and temperature of a layout: per pipeline stage, per GPU slot, with caps and throttling.

Composes the time model (compute / comm / schedule) with costmodel.power and costmodel.thermal:

1. Per stage s (n_s layers; the first stage also embeds, the last computes logits + loss) and per
   micro-batch: compute time split into kernel classes (GEMMs, attention, memory-bound kernels,
   waits for the CPU), each with its utilisation (a class's FLOPs over the peak and its time, the
   fitted HBM efficiency for memory-bound kernels), exposed communication and communication hidden
   under compute.
2. Power cap c_s of the stage, on each kernel class apart (costmodel.power.compute_under_cap): a
   class drawing P above the cap drops the SM clock to s = ((c_s - P_idle)/(P - P_idle))^(1/gamma),
   and GEMM and attention time stretches by 1/s.
3. Step time T = m max_s t_s + (sum_s t_s - max_s t_s)/VP + exposed DP + optimizer
   (costmodel.schedule.pipeline_bubble_s: 1F1B over unequal stages); a GPU of
   stage s is busy m t_s and waits the rest, spinning in NCCL (idle + spin power,
   costmodel.power.wait_power_w); average power = energy / T.
4. Slots: rank r = s S + i (Megatron order, PP outermost) sits in node r // G, slot r % G, unless a
   device order on that node (``CUDA_VISIBLE_DEVICES``, as recommend prints it) puts local rank
   r % G on another slot.  Steady
   temperatures follow costmodel.thermal; a slot above the GPU's slowdown temperature lowers its own
   clock until it holds (every kernel's clock on that GPU, down to the HW-slowdown clock); each stage
   runs at its slowest GPU's clock, and faster stage-mates wait for it at the waiting power (slowdown
   is per device, as a derate is); the slowest stage sets the step.  The fixed point of (clocks ->
   times -> powers -> temperatures -> clocks) is iterated to convergence (costmodel.thermal_throttle).

Units: seconds, W, J, C.  Reporting metrics: tokens per joule, and the seed characterization's
samples/(s MJ) = (samples per second) / (energy per step in MJ).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import metrics
from .compute import dense_peak_flops, edge_layer_share, gemm_dtype, layer_matmul_flops_per_token
from .errors import InputError
from .layouts import layers_per_stage, light_last_stage, microbatches, pipeline_split, recomputed_fraction
from .power import PowerParams, compute_under_cap, held_power_w, phase_power_w, wait_power_w
from .schedule import LayoutTerms, bubble_periods, pipeline_bubble_s
from .specs import ClusterSpec, ModelSpec, Profile, Recipe
from .thermal import steady_temp_c, temp_after_c
from .thermal_throttle import stage_pace, thermal_clocks


def missing_inputs(cluster: ClusterSpec, profile: Profile) -> list:
    """What the power/thermal model lacks for this cluster and profile (empty when it can run)."""
    return [what for what, v in ((f"{profile.path}: power", profile.power), (f"{profile.path}: thermal", profile.thermal),
                                 (f"{cluster.gpu.key} slowdown_temp", cluster.gpu.slowdown_temp_c),
                                 (f"{cluster.gpu.key} power_limit_min", cluster.gpu.power_limit_min_w)) if v is None]


def power_params(cluster: ClusterSpec, profile: Profile) -> PowerParams:
    """The profile's PowerParams with the GPU's settable cap range (datasheet min limit .. the
    cluster's per-GPU power limit, :attr:`ClusterSpec.power_limit_w`: TDP unless the site holds it lower) and
    its lowest clock (min_clock_mhz over its full clock, GpuSpec.full_clock_mhz, where the GPU file gives them).

    Raises:
        InputError: the profile has no ``power:`` section, the GPU no ``power_limit_min``, or the
            profile's ``kernel_limit_w`` lies outside the GPU's minimum limit .. twice its TDP.
    """
    p = profile.power
    if p is None:
        raise InputError(profile.path, "power", "missing: this profile has no fitted power model "
                         "(regenerate it with python -m costmodel.fit.builtin)")
    gpu = cluster.gpu
    lo = gpu.power_limit_min_w
    if lo is None:
        raise InputError(gpu.path or gpu.key, "power_limit_min", "missing: needed for power caps")
    floor = gpu.min_clock_mhz / gpu.full_clock_mhz if gpu.min_clock_mhz and gpu.full_clock_mhz else 1e-3
    limit = p.kernel_limit_w if math.isfinite(p.kernel_limit_w) else gpu.tdp_w
    if not lo <= limit <= 2.0 * gpu.tdp_w:
        raise InputError(profile.path, "power.kernel_limit_w", f"{limit:g} W is outside {gpu.name}'s settable "
                         f"minimum {lo:g} W .. twice its {gpu.tdp_w:g} W TDP (the limit its kernels were measured under)")
    return replace(p, min_cap_w=lo, max_cap_w=cluster.power_limit_w, min_clock_ratio=floor, kernel_limit_w=limit)


def require_energy_inputs(cluster: ClusterSpec, profile: Profile) -> PowerParams:
    """:func:`power_params`, after checking every input the power, thermal and energy search needs.

    Raises:
        InputError: naming the first missing one: the profile's ``power:`` or ``thermal:`` section,
            the GPU file's ``power_limit_min`` or ``slowdown_temp``.
    """
    pw = power_params(cluster, profile)
    if profile.thermal is None:
        raise InputError(profile.path, "thermal", "missing: this profile has no thermal model, which power caps, "
                         "temperature limits and the energy objective need (regenerate the profile with python -m "
                         "costmodel.fit.builtin, or calibrate one with costmodel calibrate)")
    if cluster.gpu.slowdown_temp_c is None:
        raise InputError(cluster.gpu.path or cluster.gpu.key, "slowdown_temp", "missing: the thermal model throttles "
                         "a GPU above it (nvidia-smi -q 'GPU Slowdown Temp')")
    return pw


def check_cap(cluster: ClusterSpec, pp: PowerParams, cap_w: float, flag: str = "--power-cap-w") -> None:
    """Raise InputError (on ``flag``) unless ``cap_w`` (W) is finite and min limit <= cap <= the
    cluster's power limit (``pp.min_cap_w``, ``pp.max_cap_w``, W): nvidia-smi refuses a limit outside
    the GPU's range, and a site's limit (the cluster file's ``power.gpu_power_limit``) holds above it."""
    if not math.isfinite(cap_w):
        raise InputError(flag, "", f"must be a finite number, got {cap_w}")
    if not pp.min_cap_w <= cap_w <= pp.max_cap_w:
        site = (f" ({cluster.path} power.gpu_power_limit, the site's limit below the {cluster.gpu.tdp_w:g} W TDP)"
                if cluster.gpu_power_limit_w is not None else "")
        raise InputError(flag, "", f"{cap_w} W is outside {cluster.gpu.name}'s power-limit range "
                         f"{pp.min_cap_w:g}-{pp.max_cap_w:g} W{site}")


@dataclass
class StageTerms:
    """Per-stage, per-micro-batch terms of one layout (arrays of length PP), uncapped.

    compute_s, compute_bound_s (the part that stretches with the SM clock: GEMMs and attention),
    exposed_comm_s, hidden_comm_s, classes (:data:`KERNEL_CLASSES` name -> (time_s, util): each
    kernel class's time per stage and its utilisations, ``link`` for the communication hidden under
    compute, costmodel.power.compute_under_cap); comm_util (utilisations
    while only communicating); plus the layout's scalars m (micro-batches), const_s (exposed DP +
    optimizer per step), bubble_factor (m + (PP-1)/VP, the equal-stage schedule), stage_gpus, layers,
    vp; and the building blocks
    ``layer`` and ``logits`` (dicts of compute_s, bound_s, exposed_s, hidden_s and classes for one
    layer / the output layer per micro-batch) and pp_mb_s (stage-boundary sends per micro-batch);
    pp_fill_s: what the warm-up and flush add to the bubble of per-stage periods for sends hidden
    in the steady state (they are exposed there, costmodel.schedule.step_times; 0 where sends block);
    burst: the classes whose efficiencies were measured unthrottled (:func:`burst_classes`);
    dp_s: the exposed DP reduction of const_s, and dp_util its utilisations (:func:`dp_comm_util`;
    None: comm_util's).
    """

    compute_s: np.ndarray
    compute_bound_s: np.ndarray
    exposed_comm_s: np.ndarray
    hidden_comm_s: np.ndarray
    classes: dict
    comm_util: dict
    m: float
    const_s: float
    bubble_factor: float
    stage_gpus: int
    layers: np.ndarray
    layer: dict
    logits: dict
    pp_mb_s: float
    vp: int = 1
    burst: tuple = ()
    pp_fill_s: float = 0.0
    dp_s: float = 0.0
    dp_util: dict | None = None


#: the compute phase's kernel classes, each capped on its own (costmodel.power.compute_under_cap), and
#: whether its time stretches with the SM clock: GEMMs and fused attention do, HBM-bound kernels and
#: the GPU's wait for a CPU that issues kernels slower than they run do not
KERNEL_CLASSES = {"gemm": True, "attention": True, "memory": False, "cpu_wait": False}


def kernel_classes(compute_s, attn_s, ew_s, cpu_wait_s, u_gemm, u_attn, hidden_s, hbm_efficiency, u_link) -> dict:
    """The kernel classes (:data:`KERNEL_CLASSES`) of a compute phase of ``compute_s`` (arrays
    broadcast): name -> (time_s, util); the GEMMs take what attention (``attn_s``), memory-bound
    kernels (``ew_s``) and CPU waits leave, at the GEMM kernels' tensor utilisation ``u_gemm``
    (achieved / dense 16-bit peak); every class carries the link utilisation of the communication
    hidden under the phase (``hidden_s``, spread over it)."""
    c = np.asarray(compute_s, dtype=np.float64)
    link = u_link * np.clip(np.where(c > 0, hidden_s / np.where(c > 0, c, 1.0), 0.0), 0.0, 1.0)
    gemm = np.maximum(c - attn_s - ew_s - cpu_wait_s, 0.0)
    return {"gemm": (gemm, {"flop": np.clip(u_gemm, 0.0, 1.0), "link": link}),
            "attention": (np.broadcast_to(attn_s, c.shape), {"flop": np.clip(u_attn, 0.0, 1.0), "link": link}),
            "memory": (np.broadcast_to(ew_s, c.shape),
                       {"hbm": np.full(c.shape, min(hbm_efficiency, 1.0)), "link": link}),
            "cpu_wait": (np.broadcast_to(cpu_wait_s, c.shape), {"link": link})}


def burst_classes(profile: Profile, recipe: Recipe) -> tuple:
    """The kernel classes whose efficiencies the profile measured in bursts at the maximum clock: the
    GEMMs where the recipe's GEMM entry says ``power_limited: false`` (costmodel.specs.GemmParams)."""
    g = profile.gemm.get(gemm_dtype(recipe))
    return ("gemm",) if g is not None and not g.power_limited else ()


def capped_classes(classes: dict, burst: tuple = ()) -> dict:
    """``classes`` (name -> (time_s, util)) as :func:`costmodel.power.compute_under_cap` takes them;
    the ``burst`` classes were measured unthrottled (limit inf), the others under the profile's limit."""
    return {k: (t, KERNEL_CLASSES[k], u) + ((math.inf,) if k in burst else ()) for k, (t, u) in classes.items()}


def layer_blocks(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, terms: LayoutTerms) -> dict:
    """Per micro-batch terms of one transformer layer and of the output layer for every layout of
    ``terms`` (arrays over layouts, uncapped; one vectorised pass).

    Returns dict: ``layer`` and ``logits``, each a dict of compute_s (fwd + bwd + recompute, with
    the slowdown of collectives hidden under it), bound_s (the part that stretches with the SM
    clock: compute minus memory-bound kernels), exposed_s / hidden_s (TP, CP, EP communication
    per layer left exposed / hidden), ew_s (memory-bound time), and classes (:func:`kernel_classes`:
    each kernel class's time and utilisations); and per layout ``m``
    (micro-batches), ``const_s`` (exposed DP + optimizer + contention per step), ``bubble_factor``
    (m + (PP-1)/VP), ``stage_gpus`` (TP x DP x CP), ``pp_mb_s`` (stage-boundary sends per
    micro-batch), ``layers_even`` (layers on the fullest stage of the default split), ``u_link``
    and ``peak_flops`` (the dense peak the FLOP utilisation is measured against).
    """
    t, ct, cm, st = terms.layouts, terms.compute, terms.comm, terms.step
    bd = st.breakdown
    L_even = layers_per_stage(model, t)
    m = microbatches(recipe, t.dp, t.mbs)
    per_layer_exposed = st.layer_exposed_comm_s
    raw_layer = (cm.tp_layer_fwd_s + cm.tp_layer_bwd_s + cm.cp_layer_fwd_s + cm.cp_layer_bwd_s
                 + cm.ep_layer_fwd_s + cm.ep_layer_bwd_s)
    full = recomputed_fraction(model, t)                 # share of layers recomputing their forward
    rec = ct.layer_recompute_s * np.where(t.recompute == 2, full, 1.0)
    # compute slowed by the collectives hidden under it (schedule.step_times) stays compute time
    layer_comp = ct.layer_fwd_s + ct.layer_bwd_s + rec + st.layer_contention_s
    # FSDP's copies and an unfused gradient accumulation are HBM passes too (in the contention term)
    layer_ew = ct.layer_ew_fwd_s * (1 + full) + ct.layer_ew_bwd_s + st.layer_memory_pass_s
    peak = dense_peak_flops(cluster, recipe)             # the 16-bit peak: utilisation in 16-bit FLOPs
    # a low-precision GEMM FLOP holds the tensor cores for peak16 / peak_fmt of a 16-bit one: an fp8
    # GEMM at 75% of the fp8 peak draws what a bf16 GEMM at 75% of its peak draws (the B200's FP8 power
    # point, profiles/b200-sxm-180gb.yaml fit.fp8_check: 902 W measured, 830 W predicted this way)
    fmt_peak = cluster.gpu.peak_flops.get(gemm_dtype(recipe), peak)
    if recipe.bf16_edge_layers:
        # the BF16 edge layers' GEMM FLOPs hold the tensor cores at the 16-bit rate: the harmonic blend
        share = edge_layer_share(model, recipe, t)
        fmt_peak = 1.0 / ((1.0 - share) / fmt_peak + share / peak)
    tok = t.mbs * recipe.seq_len / t.cp
    gemm_share = np.clip(tok * layer_matmul_flops_per_token(model) / t.tp
                         / np.maximum(ct.layer_flops_fwd, 1.0), 0.0, 1.0)
    u_link = _u_link(profile)

    # each class at its kernels' own rate: GEMMs at their FLOPs over their time (16-bit equivalent),
    # the attention core likewise; recomputation re-runs them at the same rate
    u_gemm = ct.layer_flops_fwd * gemm_share / (fmt_peak * np.maximum(ct.layer_gemm_fwd_s, 1e-30))
    u_attn = ct.layer_flops_fwd * (1 - gemm_share) / (peak * np.maximum(ct.layer_attn_fwd_s, 1e-30))
    attn_s = ct.layer_attn_fwd_s + ct.layer_attn_bwd_s + ct.layer_attn_recompute_s * np.where(t.recompute == 2, full, 1.0)

    def block(e, c, exposed_s, hidden_s, classes):
        bound = sum(tc for k, (tc, _) in classes.items() if KERNEL_CLASSES[k])
        return dict(compute_s=c, bound_s=bound, exposed_s=exposed_s, hidden_s=hidden_s, ew_s=c - bound,
                    classes=classes)
    hidden = np.maximum(raw_layer - per_layer_exposed, 0.0)
    zero = np.zeros(len(t))
    mtp = float(model.mtp_layers)
    hbm_eff = profile.hbm_efficiency
    lg_comp = ct.logits_fwd_s + ct.logits_bwd_s
    ce = ct.logits_ce_s.astype(np.float64)                # cross-entropy: memory-bound
    u_logits = 3 * ct.logits_flops_fwd / (peak * np.maximum(lg_comp - ce, 1e-30))
    return dict(layer=block(layer_ew, layer_comp, per_layer_exposed, hidden,
                            kernel_classes(layer_comp, attn_s, layer_ew, ct.layer_cpu_wait_s, u_gemm, u_attn,
                                           hidden, hbm_eff, u_link)),
                # the MTP modules' transformer layers run their collectives with the logits (schedule.step_times)
                logits=block(ce, lg_comp, mtp * per_layer_exposed, mtp * hidden,
                             kernel_classes(lg_comp, zero, ce, zero, u_logits, zero, mtp * hidden, hbm_eff, u_link)),
                m=m, const_s=bd["dp_comm_s"] + bd["optimizer_s"] + st.step_contention_s, dp_s=bd["dp_comm_s"],
                dp_util=dp_comm_util(cluster, cm.dp_scale_out_share, u_link),
                bubble_factor=m + bubble_periods(t.pp, t.vp), stage_gpus=t.tp * t.dp * t.cp,
                pp_mb_s=bd["pp_comm_s"] / m, layers_even=L_even, u_link=u_link, peak_flops=peak,
                # every stage's hidden sends are exposed in the warm-up and flush; the steady period's
                # contention is in const_s (schedule.step_times' bubble over raw sends)
                pp_fill_s=(t.pp * st.pp_hidden_s - st.pp_contention_s) / t.vp)


def stage_terms(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, terms: LayoutTerms,
                layers: np.ndarray | None = None) -> StageTerms:
    """Per-stage terms of one layout from its time-model terms (a one-row :class:`LayoutTerms`, as
    :func:`costmodel.predict.predict_runs` gives); ``layers`` overrides the default split (length PP,
    summing to the model's layers).  Built from :func:`layer_blocks`.

    Raises:
        InputError: ``layers`` of the wrong length, sum or sign.
    """
    layout = terms.layouts.row(0)
    pp = layout["pp"]
    if layers is None:
        layers = pipeline_split(model, layout, light_last_stage(recipe))
    layers = np.asarray(layers, dtype=np.float64)
    # a stage may hold no transformer layer (a run's own layout can give the embedding a stage of its own)
    if len(layers) != pp or layers.min() < 0 or abs(layers.sum() - model.num_layers) > 1e-9:
        raise InputError("layers per stage", "", f"need {pp} counts >= 0 summing to {model.num_layers}, "
                         f"got {[float(x) for x in layers]}")
    b = layer_blocks(model, recipe, cluster, profile, terms)
    row = lambda v: float(np.asarray(v).reshape(-1)[0])
    one = lambda blk: dict(compute_s=row(blk["compute_s"]), bound_s=row(blk["bound_s"]),
                           exposed_s=row(blk["exposed_s"]), hidden_s=row(blk["hidden_s"]),
                           classes={k: (row(tc), {n: row(v) for n, v in u.items()})
                                    for k, (tc, u) in blk["classes"].items()})
    ly, lg = one(b["layer"]), one(b["logits"])
    last = np.zeros(pp)
    last[-1] = 1.0
    comp = layers * ly["compute_s"] + last * lg["compute_s"]
    bound = layers * ly["bound_s"] + last * lg["bound_s"]
    classes = {}
    for k, (t_ly, u_ly) in ly["classes"].items():
        t_lg, u_lg = lg["classes"][k]
        tc = layers * t_ly + last * t_lg
        # each term's utilisation, time-weighted over the stage's layers and its output layer
        classes[k] = (tc, {n: np.where(tc > 0, (layers * t_ly * u_ly.get(n, 0.0) + last * t_lg * u_lg.get(n, 0.0))
                                       / np.where(tc > 0, tc, 1.0), 0.0) for n in set(u_ly) | set(u_lg)})
    pp_mb = float(b["pp_mb_s"][0])
    exposed = layers * ly["exposed_s"] + last * lg["exposed_s"] + pp_mb
    hidden = layers * ly["hidden_s"] + last * lg["hidden_s"]
    return StageTerms(comp, bound, exposed, hidden, classes, {"link": b["u_link"]}, float(b["m"][0]),
                      float(b["const_s"][0]), float(b["bubble_factor"][0]), int(b["stage_gpus"][0]), layers,
                      ly, lg, pp_mb, int(layout["vp"]), burst_classes(profile, recipe), float(b["pp_fill_s"][0]),
                      float(b["dp_s"][0]), {k: row(v) for k, v in b["dp_util"].items()})


@dataclass
class StageState:
    """Stage-level outcome under given caps: time per micro-batch t_s, busy (compute-phase) power
    averaged over the phase, its busiest kernel class's power (what the cap acts on), the tensor-core
    clock ratio, average power of a GPU of the stage, and the step time (s, W)."""

    t_mb_s: np.ndarray
    busy_power_w: np.ndarray
    class_power_w: np.ndarray
    clock: np.ndarray
    avg_power_w: np.ndarray
    peak_power_w: np.ndarray
    step_time_s: float


def stage_state(st: StageTerms, pw: PowerParams, caps_w: np.ndarray, clock_max=None,
                step_time_s: float | None = None, rows=None) -> StageState:
    """Times and powers of every stage with compute phases capped at ``caps_w`` (W, length PP) and
    clocks at most ``clock_max`` (ratio of the maximum, length PP: a stage holding a derated GPU).
    ``step_time_s``: the job's step when a slower rank than these clocks give sets it (a derated
    GPU's stage-mates, which run at their own clock and wait for it at the waiting power).
    ``rows``: one GPU per entry instead, the stage index of each (caps_w and clock_max per entry), in
    the step ``step_time_s`` (required then), or its own stage period where that is longer: GPUs that
    run at clocks of their own and wait for the pace (costmodel.thermal_throttle)."""
    caps_w = np.asarray(caps_w, dtype=np.float64)
    classes, exposed = st.classes, st.exposed_comm_s
    if rows is not None:
        classes = {k: (tc[rows], {n: np.broadcast_to(u, tc.shape)[rows] for n, u in us.items()})
                   for k, (tc, us) in classes.items()}
        exposed = exposed[rows]
    # each kernel class at the clock it reaches under the cap (above it only where the GPU's lowest
    # clock cannot meet it)
    comp, e_comp, s, w_class = compute_under_cap(pw, capped_classes(classes, st.burst), caps_w, clock_max)
    p_busy = e_comp / np.where(comp > 0, comp, 1.0)
    p_comm = held_power_w(pw, phase_power_w(pw, st.comm_util), caps_w)
    p_dp = held_power_w(pw, phase_power_w(pw, st.dp_util or st.comm_util), caps_w)
    t_mb = comp + exposed
    busy = st.m * comp
    comm = st.m * exposed + st.const_s
    if rows is None:
        # 1F1B over unequal stages: the slowest stage's m periods and the fill and drain through the others
        T = st.m * t_mb.max() + pipeline_bubble_s(t_mb.sum(), t_mb.max(), st.vp) + st.pp_fill_s + st.const_s
        T = T if step_time_s is None else max(T, float(step_time_s))
        t_own = T
    else:
        # a GPU's trial clock may run its own stage period past the step the pace set
        T = float(step_time_s)
        t_own = np.maximum(T, busy + comm)
    wait = np.maximum(t_own - busy - comm, 0.0)   # bubbles and waiting for the slowest stage
    # the cap binds a waiting GPU too, though a spinning kernel rarely reaches it
    energy = (p_busy * busy + p_comm * (comm - st.dp_s) + p_dp * st.dp_s
              + held_power_w(pw, wait_power_w(pw), caps_w) * wait)
    avg = energy / t_own
    # the densest window a meter sees is the steady 1F1B period; never below the step's average
    # (a stage whose step-level terms, e.g. the optimizer or the DP reduction, draw more than its
    # micro-batch period does)
    peak = np.maximum((p_busy * comp + p_comm * exposed) / t_mb, avg)
    return StageState(t_mb, p_busy, w_class, s, avg, peak, T)


@dataclass
class EnergyReport:
    """Power, energy and temperature of one layout (module docstring); per_gpu rows carry rank, node,
    slot, stage, power_w (average), peak_power_w, temp_c, sm_clock_mhz, throttled, hw_slowdown,
    derated_mhz, one per GPU, except that a stage filling whole nodes is given by its first node
    (its other nodes run alike).  compute_power_w: the power of the busiest kernel class of the compute phases
    (tensor-core kernels, costmodel.power.compute_under_cap) at the clock reached, the busiest
    stage's (uncapped: the level above which a cap stops binding; it can exceed peak_power_w, a
    window average over compute and communication).  cap_unmet: a stage's compute draws more than
    its cap because the GPU's lowest clock cannot go lower.  nodes, node_other_power_w (per node, the
    cluster's non-GPU power, costmodel.specs.ClusterSpec) and node_energy_j_per_step = nodes x
    node_other_power_w x step time: reported apart from the GPUs' energy_j_per_step.
    node_gpu_peak_w: the largest sum of one node's GPUs' peak powers, against node_gpu_budget_w (the
    node rating less its non-GPU power, ClusterSpec.gpu_power_budget_w): above it the node's own
    power capping would slow the GPUs, which the per-GPU caps here do not model."""

    step_time_s: float
    avg_power_w: float
    peak_power_w: float
    energy_j_per_step: float
    tokens_per_joule: float
    samples_per_s_per_mj: float
    max_temp_c: float
    throttled: bool
    sm_clock_mhz: float
    warm_max_temp_c: float | None
    caps_w: list
    layers: list
    per_gpu: list
    hw_slowdown: bool = False
    compute_power_w: float = 0.0
    cap_unmet: bool = False
    nodes: int = 0
    node_other_power_w: float = 0.0
    node_energy_j_per_step: float = 0.0
    shutdown: str | None = None
    node_gpu_peak_w: float = 0.0
    node_gpu_budget_w: float = 0.0

    @property
    def total_energy_j_per_step(self) -> float:
        """GPU energy plus the nodes' non-GPU energy per step, J (race-to-idle: a slower step costs the
        CPUs, NICs, switches and fans their baseline for longer)."""
        return self.energy_j_per_step + self.node_energy_j_per_step


def dp_comm_util(cluster: ClusterSpec, scale_out_share, u_link: float) -> dict:
    """Utilisations while only the DP reduction runs (arrays over layouts): for the share of its time in
    groups inside an NVLink domain, NVLink at the fitted all-reduce efficiency ``u_link``; for the
    ``scale_out_share`` in groups that span domains (costmodel.comm.DataParallelComm: the DP group, or
    under HSDP the shard group's and the replica all-reduce's time) the NICs pace it, so the GPU's links
    carry the NIC rate (the node's NIC bandwidth per GPU over its scale-up bandwidth, times ``u_link``)
    while NCCL's kernels run on every GPU between the transfers (the ``spin`` term: an 8x H100 DDP
    trace's waiting level, costmodel/fit/builtin/power.py).  A slow scale-out fabric then costs the GPU
    about idle + spin, not NVLink's full-rate power.  Power is linear in the utilisations, so the
    time-weighted mix of the two phases gives their average power exactly."""
    f = np.clip(np.asarray(scale_out_share, dtype=np.float64), 0.0, 1.0)
    nic = cluster.node_nic_bytes_per_s / cluster.gpus_per_node
    share = min(1.0, nic / cluster.intra_bytes_per_s) if cluster.intra_bytes_per_s > 0 else 1.0
    return {"link": u_link * ((1.0 - f) + f * share), "spin": f}


def _u_link(profile: Profile) -> float:
    """Link utilisation while NCCL moves data: the best fitted busbw efficiency of intra all-reduce."""
    return float(min(1.0, max(e for _, e in profile.comm["intra_node"]["all_reduce"].protocols)))


def check_derate(derate: dict, cluster: ClusterSpec, num_gpus: int) -> None:
    """``derate``: (node, slot) -> SM clock in MHz pinned on that GPU (HW slowdown, power brake, a
    what-if straggler).

    Raises:
        InputError: a GPU outside the layout's nodes and slots, or a clock outside the GPU's lowest to
            maximum clock.
    """
    G, boost, lo = cluster.gpus_per_node, cluster.gpu.full_clock_mhz, cluster.gpu.min_clock_mhz or 0.0
    if derate and not boost:
        raise InputError("--derate", "", f"{cluster.gpu.name} has no max_clock_mhz or boost_clock_mhz to derate from")
    for (node, slot), mhz in derate.items():
        if not (0 <= node < -(-num_gpus // G) and 0 <= slot < G and node * G + slot < num_gpus):
            raise InputError("--derate", "", f"GPU {node}:{slot} is not in the layout ({num_gpus} GPUs, "
                             f"{G} per node; nodes and slots count from 0)")
        if not (math.isfinite(mhz) and lo <= mhz <= boost and mhz > 0):
            raise InputError("--derate", "", f"{node}:{slot}={mhz!r} MHz is outside {cluster.gpu.name}'s clocks "
                             f"{lo:g}-{boost:g} MHz" + ("" if lo else " (its GPU file gives no min_clock_mhz: any "
                                                        "positive clock up to the maximum)"))


#: clusters up to this many nodes list every GPU when stages straddle nodes; larger ones evaluate
#: representative nodes (layout_energy), so a 25M-GPU layout costs O(PP) rows, not 25M
EVERY_NODE_UP_TO = 64


def check_device_order(device_order: dict, cluster: ClusterSpec, num_gpus: int) -> None:
    """``device_order``: node -> the slot each local rank runs on (``CUDA_VISIBLE_DEVICES`` of that node
    under PCI bus order), the key None standing for every node not named.

    Raises:
        InputError: a node outside the layout, or an order that is not each of the node's G slots once.
    """
    G = cluster.gpus_per_node
    for node, order in device_order.items():
        where = "every node" if node is None else f"node {node}"
        if node is not None and not 0 <= node < -(-num_gpus // G):
            raise InputError("--device-order", "", f"node {node} is not in the layout ({num_gpus} GPUs, {G} per "
                             "node; nodes count from 0)")
        if sorted(order) != list(range(G)):
            raise InputError("--device-order", "", f"{where}: {','.join(map(str, order))} is not each of the "
                             f"{G} slots 0-{G - 1} once (local rank r runs on the r-th slot listed)")


def _slots_of(ranks: np.ndarray, G: int, device_order: dict) -> np.ndarray:
    """The physical slot of each rank under ``device_order`` (:func:`check_device_order`)."""
    default = device_order.get(None, tuple(range(G)))
    return np.array([device_order.get(r // G, default)[r % G] for r in ranks.tolist()], dtype=np.int64)


def _derated_ranks(derate: dict, G: int, device_order: dict, num_gpus: int) -> dict:
    """``derate`` keyed by rank instead of (node, physical slot), through the node's device order.

    Raises:
        InputError: a derated slot that no rank of the layout runs on.
    """
    out = {}
    for (node, slot), mhz in derate.items():
        order = device_order.get(node, device_order.get(None, tuple(range(G))))
        r = node * G + list(order).index(slot)
        if r >= num_gpus:
            raise InputError("--derate", "", f"GPU {node}:{slot} runs no rank of the layout ({num_gpus} GPUs; "
                             "--device-order puts the node's last ranks elsewhere)")
        out[r] = mhz
    return out


def _listed_ranks(pp: int, S: int, G: int, n: int, extra_nodes: set) -> np.ndarray:
    """The ranks whose GPUs the energy model evaluates, whole nodes in order: a stage that fills whole
    nodes runs them alike (same power in the same slots, no heat between nodes), so its first node
    stands for the others and the thermal model and the per-GPU rows cost O(PP x G), not O(GPUs);
    stages that straddle nodes on a large cluster, each stage's first, second and last nodes (the
    ones between repeat the second: a node's powers depend only on which stages its slots hold);
    else every rank; and every rank of ``extra_nodes``."""
    if S >= G and S % G == 0:
        ranks = (np.arange(pp)[:, None] * S + np.arange(G)[None, :]).reshape(-1)
    elif -(-n // G) > EVERY_NODE_UP_TO:
        first, last = np.arange(pp) * S // G, ((np.arange(pp) + 1) * S - 1) // G
        rep = np.unique(np.concatenate([first, np.minimum(first + 1, last), last]))
        ranks = (rep[:, None] * G + np.arange(G)[None, :]).reshape(-1)
        ranks = ranks[ranks < n]
    else:
        ranks = np.arange(n)
    extra = sorted(set(extra_nodes) - set((ranks // G).tolist()))
    if extra:
        whole = (np.asarray(extra)[:, None] * G + np.arange(G)[None, :]).reshape(-1)
        ranks = np.unique(np.concatenate([ranks, whole[whole < n]]))
    return ranks


def layout_energy(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, terms: LayoutTerms,
                  caps_w=None, layers=None, warm_steps: int | None = None,
                  inlet_temp_c: float | None = None, derate: dict | None = None,
                  device_order: dict | None = None) -> EnergyReport:
    """Energy report of one layout (its one-row :class:`LayoutTerms`) with per-stage caps (default: the
    cluster's power limit, the TDP unless its file sets power.gpu_power_limit), thermal slowdown
    included.  ``device_order`` puts each node's local ranks on other slots
    (:func:`check_device_order`; the heat a slot receives follows its stage).  ``derate`` pins GPUs'
    clocks ((node, physical slot) -> MHz): a
    synchronous step waits for its slowest rank, so a derated GPU sets its whole stage's pace and the
    pipeline follows the slowest stage; its TP, CP and DP peers run their kernels at their own clock
    and wait in their collectives for it, drawing the waiting power (idle + spin) meanwhile.

    Raises:
        InputError: missing power/thermal data, a cap outside the GPU's range, a bad derate
            (:func:`check_derate`) or device order (:func:`check_device_order`).
    """
    pw = require_energy_inputs(cluster, profile)
    th, slow = profile.thermal, cluster.gpu.slowdown_temp_c
    cool = cluster.cooling
    if inlet_temp_c is not None:
        cool = replace(cool, inlet_temp_c=inlet_temp_c)
    st = stage_terms(model, recipe, cluster, profile, terms, layers)
    pp, S, G = int(terms.layouts.pp[0]), st.stage_gpus, cluster.gpus_per_node
    caps = np.full(pp, pw.max_cap_w) if caps_w is None else np.asarray(caps_w, dtype=np.float64)
    if len(caps) != pp:
        raise InputError("--power-cap-w", "", f"need one cap per pipeline stage ({pp}), got {len(caps)}")
    for c in caps:
        check_cap(cluster, pw, float(c))
    n = pp * S
    nodes = -(-n // G)
    derate, device_order = derate or {}, device_order or {}
    check_derate(derate, cluster, n)
    check_device_order(device_order, cluster, n)
    slow_ranks = _derated_ranks(derate, G, device_order, n)
    # a node with its own device order or a derated GPU is listed whatever node stands for its stage
    ranks = _listed_ranks(pp, S, G, n, {node for node, _ in derate} | (set(device_order) - {None}))
    stage_of, slots = ranks // S, _slots_of(ranks, G, device_order)
    rep_nodes = -(-len(ranks) // G)
    at = np.arange(len(ranks)) // G * G + slots     # the listed ranks are whole nodes: (node row, slot)

    def by_node(p_rank):
        """Per-rank power laid out as (nodes, G) by physical slot, empty slots at 0 W."""
        p_gpu = np.zeros(rep_nodes * G)
        p_gpu[at] = p_rank
        return p_gpu.reshape(rep_nodes, G)

    slow_rank = np.isin(ranks, list(slow_ranks))
    top = np.array([slow_ranks[r] / cluster.gpu.full_clock_mhz if r in slow_ranks else 1.0 for r in ranks.tolist()])
    caps_g = caps[stage_of]

    def gpu_state(clock, T):
        """Each listed GPU at its own clock in a step of T s (it waits for the pace the rest of it)."""
        return stage_state(st, pw, caps_g, clock, step_time_s=T, rows=stage_of)

    def temps_of(p_rank):
        return steady_temp_c(cool, th.r_th_c_per_w, by_node(p_rank)).reshape(-1)[at]

    r_own = th.r_th_c_per_w * np.asarray(cool.r_th_scale, dtype=np.float64)[slots]
    # each GPU's own clock (a derate's pin, or where its heat holds it at the slowdown temperature); each
    # stage runs at its slowest GPU's, the slowest stage sets the step (costmodel.thermal_throttle)
    clock, T = thermal_clocks(top, r_own, slow, lambda c, t: gpu_state(c, t).avg_power_w, temps_of,
                              lambda c: stage_state(st, pw, caps, stage_pace(c, stage_of, pp)).step_time_s)
    state = stage_state(st, pw, caps, stage_pace(clock, stage_of, pp))
    gs = gpu_state(clock, T)
    throttled = bool(np.any(clock < top - 1e-6))
    p_nodes = by_node(gs.avg_power_w)
    temps = steady_temp_c(cool, th.r_th_c_per_w, p_nodes).reshape(-1)[at]
    warm = None
    if warm_steps is not None:
        idle = np.full((rep_nodes, G), pw.idle_w)
        warm = float(temp_after_c(cool, th.r_th_c_per_w, th.tau_s, p_nodes, idle,
                                  warm_steps * T).reshape(-1)[at].max())
    n_slow = np.bincount([r // S for r in slow_ranks], minlength=pp).astype(np.float64)
    # a stage's GPUs that are not derated draw as its listed ones do on average, as if each listed node
    # stood for the others alike (_listed_ranks; nodes listed for a derate or order of their own make it
    # an estimate); a stage listing only derated GPUs has the rest at full clock, waiting
    free = ~slow_rank
    n_free = np.bincount(stage_of[free], minlength=pp)
    p_free = np.bincount(stage_of[free], weights=gs.avg_power_w[free], minlength=pp) / np.maximum(n_free, 1)
    if np.any(n_free == 0):
        p_free = np.where(n_free > 0, p_free, stage_state(st, pw, caps, np.ones(pp), step_time_s=T).avg_power_w)
    p_slow = np.bincount(stage_of[slow_rank], weights=gs.avg_power_w[slow_rank], minlength=pp)
    energy = float(((S - n_slow) * p_free + p_slow).sum() * T)
    boost = _boost_mhz(cluster)
    rows = []
    for i, r in enumerate(int(x) for x in ranks):
        rows.append(dict(rank=r, node=r // G, slot=int(slots[i]), stage=int(stage_of[i]),
                         power_w=float(gs.avg_power_w[i]), peak_power_w=float(gs.peak_power_w[i]),
                         temp_c=float(temps[i]), sm_clock_mhz=float(boost * gs.clock[i]) if boost else None,
                         # thermally throttled: this GPU holds at its slowdown temperature below its
                         # own top clock (stage-mates faster than it wait for it)
                         throttled=bool(clock[i] < top[i] - 1e-6 and temps[i] >= slow - 0.05),
                         # at the HW-slowdown clock and still above the slowdown temperature
                         hw_slowdown=bool(temps[i] > slow + 0.05),
                         derated_mhz=slow_ranks.get(r)))
    slowest = int(np.argmax(state.t_mb_s))
    return EnergyReport(
        step_time_s=T, avg_power_w=energy / (n * T),
        peak_power_w=float(max(state.peak_power_w.max(), gs.peak_power_w.max())), energy_j_per_step=energy,
        tokens_per_joule=metrics.tokens_per_joule(recipe, energy),
        samples_per_s_per_mj=metrics.samples_per_s_per_mj(recipe, T, energy),
        max_temp_c=float(temps.max()), throttled=throttled, hw_slowdown=bool(temps.max() > slow + 0.05),
        compute_power_w=float(state.class_power_w.max()),
        cap_unmet=bool(np.any(state.class_power_w > caps + 0.01)),
        sm_clock_mhz=float(boost * state.clock[slowest]) if boost else None, warm_max_temp_c=warm,
        caps_w=[float(c) for c in caps], layers=[int(x) for x in st.layers], per_gpu=rows,
        nodes=nodes, node_other_power_w=cluster.node_other_power_w,
        node_energy_j_per_step=nodes * cluster.node_other_power_w * T, shutdown=_shutdown(cluster, temps, ranks, slots, G),
        node_gpu_peak_w=_node_gpu_peak_w(rows), node_gpu_budget_w=cluster.gpu_power_budget_w)


def _node_gpu_peak_w(rows: list) -> float:
    """The largest sum of the listed GPUs' peak powers over one node, W (each listed node is whole)."""
    per: dict = {}
    for r in rows:
        per[r["node"]] = per.get(r["node"], 0.0) + r["peak_power_w"]
    return max(per.values(), default=0.0)


def _shutdown(cluster: ClusterSpec, temps, ranks, slots, G: int) -> str | None:
    """Why the hottest GPU (of ``ranks`` on ``slots``, with ``temps``) powers off (steady temperature past the GPU's
    shutdown temperature), or None (also when the GPU file gives no shutdown temperature)."""
    stop = cluster.gpu.shutdown_temp_c
    if stop is None or float(temps.max()) <= stop:
        return None
    i = int(np.argmax(temps))
    r = int(ranks[i])
    return (f"GPU {r // G}:{int(slots[i])} reaches {float(temps[i]):.1f} C steady even at the HW-slowdown clock, past "
            f"{cluster.gpu.name}'s shutdown temperature {stop:g} C: it would power off (cool the inlet or cap "
            "the power)")


def _boost_mhz(cluster: ClusterSpec):
    """The clock the power model's ratio 1 stands for, MHz (GpuSpec.full_clock_mhz)."""
    return cluster.gpu.full_clock_mhz
