"""The predicted pipeline schedule of one layout as a Chrome / Perfetto trace (trace-event JSON).

``schedule_trace`` lays out one training step of one layout as the time model of
:mod:`costmodel.schedule` sees it, and ``write_trace`` writes it to a file that
https://ui.perfetto.dev or chrome://tracing opens.

What the trace holds (Trace Event Format, "JSON Object Format"; Chrome tracing, "Trace Event
Format", Google doc 1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):

* one process (``pid`` = stage + 1) per pipeline stage, named ``stage k (GPUs a-b, node(s) ...)``
  by ``ph: "M"`` ``process_name`` events.  It stands for any one GPU of the stage: its TP / CP / DP
  peers run the same timeline.  GPUs follow Megatron-core's rank order tp-cp-dp-pp (PP outermost).
* four threads per process (``thread_name`` metadata): ``compute`` (tid 1), ``communication:
  TP/CP/EP`` (2), ``communication: PP p2p`` (3), ``communication: DP`` (4).
* complete events (``ph: "X"``, ``ts``/``dur`` in microseconds):
  ``F mb<i>`` / ``R mb<i>`` (recompute, when the layout recomputes) / ``B mb<i>`` on ``compute``,
  ordered by the real schedule: non-interleaved 1F1B (PP-1-k warm-up forwards on stage k, steady
  one-forward-one-backward, cool-down backwards; Narayanan et al. SC21 sec. 2.2.1, PipeDream-Flush)
  or, when VP > 1, Megatron-LM's interleaved 1F1B (VP model chunks per stage, forwards in groups
  of PP micro-batches per chunk, warm-up 2(PP-1-k) + (VP-1) PP chunk-forwards; SC21 sec. 2.2.2,
  megatron/core/pipeline_parallel/schedules.py ``forward_backward_pipelining_with_interleaving``);
  the exposed TP / CP / EP collectives of each F / R / B on the TP/CP/EP thread; ``send act`` /
  ``send grad`` between stages on the p2p thread (``p2p slot`` at the pipeline's ends, below);
  ``DP all-gather (params)`` at the start, ``DP reduce-scatter`` (or ``DP all-reduce`` without the
  distributed optimizer) at the end and FSDP's per-micro-batch gathers on the DP thread;
  ``optimizer`` (and ``overlap slowdown``, below) on ``compute``; and every idle gap of ``compute``
  as ``bubble`` (args ``phase``: warm-up / steady / cool-down).
* ``args`` carry the micro-batch (``mb``), the model chunk (``chunk``), the virtual stage, and
  durations in **seconds** (``*_s``); the trace's own ``ts``/``dur`` are **microseconds** (the code
  works in seconds and converts once, rounding to the nanosecond).
* top-level ``metadata``: model, cluster, layout, micro-batches, the predicted ``step_time_s`` and
  breakdown, the trace's ``makespan_s``, per-micro-batch terms and the approximations below.

Construction (consistent with :func:`costmodel.schedule.step_times` by design): the last stage
is drawn at the slowest stage's pace (it runs the logits) and the others at the mean of the rest
of the pipeline - each model chunk's forward takes ``fwd_s / VP`` and its backward ``bwd_s / VP``
on the last stage (StepTimes.fwd_s / bwd_s: compute plus exposed TP/CP/EP communication,
recompute inside the backward) and (stages_fwd_s - fwd_s) / (PP - 1) / VP and likewise on the
others, and each is followed by one blocking stage-boundary transfer of ``pp_p2p_s`` (the model
charges 2 VP transfers per micro-batch; where the stack overlaps an interleaved schedule's sends,
of their exposed mean, schedule.stage_sends_s).  A list-scheduling simulation
then starts every op as soon as its stage is free and its input has arrived (forward of virtual
stage v after that of v-1, backward of v after that of v+1).  With these blocking ops and the
slowest stage last, the pipeline part of the step is exactly m T_mb + (sum_s T_s - T_mb) / VP,
the model's critical path, both for 1F1B and for the interleaved schedule, so the makespan
equals the model's step time (exposed DP param all-gather + pipeline + exposed DP gradient
reduction + optimizer) up to the nanosecond rounding.

Approximations (also listed in the trace's metadata):

* stages: the stages before the last are drawn alike, at their mean time (an uneven split's
  extra layer is spread over them; the first stage's embedding is not drawn apart).
* p2p: every op is followed by a blocking transfer, also where the pipeline has no neighbour in
  that direction (the last virtual stage's forward, the first one's backward): those are drawn as
  ``p2p slot`` events, the model's uniform 2 VP transfers per micro-batch.  Megatron's combined
  send/recv calls make the ends pay about one transfer per micro-batch instead.
* exposed TP/CP/EP communication is interleaved layer by layer in reality; the trace draws each
  dimension's exposed total of an op as one block at the end of the op.  Hidden communication is
  not drawn; its size is in the args (``raw_s``, ``hidden_s``).
* the DP gradient reduction is drawn as one block of its full (raw) duration ending where its
  exposed part ends (it starts under the last backward when overlapped); the parameter all-gather
  likewise from the start of the step.  Every stage then waits for the slowest before the
  optimizer (the global gradient-norm all-reduce of the clip synchronises them).
* compute slowed by contention with hidden communication: inside F / B it is part of fwd_s /
  bwd_s, and the interleaved schedule's overlapped stage sends slow each chunk's slot by their share
  (``StepTimes.pp_contention_s`` over the 2 VP chunks of a micro-batch); the per-step part the schedule model adds for the *DP* communication hidden under compute
  (whatever of ``step_time_s`` the pipeline, exposed DP and optimizer terms leave over) is drawn as
  one ``overlap slowdown`` block after each stage's last backward, not spread over the ops it slows.
* power capping and thermal slowdown (``costmodel.energy``) are not applied: this is the
  uncapped time model of ``predict_table``.

Sources: Chrome Trace Event Format (Google doc above; keys other than traceEvents are kept as
trace metadata); Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", SC21, sections 2.2.1-2.2.2 and 4.1; Megatron-LM
``megatron/core/pipeline_parallel/schedules.py``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .comm import CommTimes
from .compute import ComputeTimes
from .errors import InputError
from .layouts import LayoutTable, layers_per_stage, recomputed_fraction
from .predict import Prediction, predict_table
from .schedule import BREAKDOWN_TERMS, LayoutTerms, StepTimes, exposed_layer_comm, pipeline_bubble_s
from .specs import ClusterSpec, ModelSpec, Profile, Recipe
from .stacks import dp_overlap_on

TID_COMPUTE, TID_COLL, TID_P2P, TID_DP = 1, 2, 3, 4
THREADS = {TID_COMPUTE: "compute", TID_COLL: "communication: TP/CP/EP",
           TID_P2P: "communication: PP p2p", TID_DP: "communication: DP"}
_US = 1e6  # microseconds per second
APPROXIMATIONS = (
    "the last stage runs at the slowest stage's pace (the logits), the others alike at their mean (an uneven "
    "split's extra layers spread over them; the first stage's embedding not drawn apart)",
    "every op is followed by one blocking PP transfer (pp_p2p_s), 2 VP per micro-batch, also at the "
    "pipeline's ends ('p2p slot')",
    "exposed TP/CP/EP communication of an op is drawn as one block per dimension at the op's end; "
    "hidden communication is not drawn (raw_s / hidden_s in args)",
    "DP reduction / param all-gather drawn with their raw duration, ending / starting where the "
    "model's exposed part puts them",
    "the per-step slowdown of compute under hidden DP communication is one 'overlap slowdown' block "
    "after each stage's last backward",
    "no power capping or thermal slowdown (uncapped time model)",
)
SOURCES = (
    "Chrome Trace Event Format (Google): JSON object format, ph X / M events, ts and dur in microseconds",
    "Narayanan et al., SC21, sec. 2.2.1 (1F1B) and 2.2.2 (interleaved 1F1B)",
    "Megatron-LM megatron/core/pipeline_parallel/schedules.py (warm-up counts, chunk order)",
)


@dataclass
class _Terms:
    """Per-micro-batch (whole stage, all VP chunks) and per-step terms of one layout, seconds."""

    pp: int
    vp: int
    m: int
    fwd_s: float            # forward incl. exposed TP/CP/EP comm (the slowest stage)
    bwd_s: float            # backward incl. recompute and its exposed comm (the slowest stage)
    rec_s: float            # recompute part of bwd_s (incl. the recomputed forward's exposed comm)
    p2p_s: float            # one stage-boundary transfer
    fsdp_s: float           # exposed FSDP comm per micro-batch
    exp_f: dict             # dim -> exposed comm in the forward
    exp_r: dict             # dim -> exposed comm in the recompute
    exp_b: dict             # dim -> exposed comm in the backward proper
    raw_f: dict             # dim -> raw (before overlap) comm of the forward
    raw_b: dict
    fsdp_raw_s: float
    dp_param_s: float       # exposed param all-gather per step
    dp_param_raw_s: float
    dp_grad_s: float        # exposed gradient reduction per step
    dp_grad_raw_s: float
    opt_s: float
    other_s: float          # step time the terms above do not place (overlap slowdown of hidden DP comm)
    bubble_s: float
    step_time_s: float
    breakdown: dict
    other_fwd_s: float = 0.0  # forward / backward per micro-batch of each stage before the last
    other_bwd_s: float = 0.0
    pp_slow_s: float = 0.0    # per micro-batch: compute slowed by the stage sends hidden under it
    dp_slow_s: float = 0.0    # per step: compute slowed by the DP communication hidden under it

    def stage_fwd_bwd(self, k: int) -> tuple[float, float]:
        """(forward, backward) per micro-batch of stage ``k``, s."""
        if k == self.pp - 1:
            return self.fwd_s, self.bwd_s
        return self.other_fwd_s, self.other_bwd_s

    def slots(self) -> tuple[list, list]:
        """Per stage, the time a forward / backward chunk holds it with its transfer (and FSDP), s."""
        fb = [self.stage_fwd_bwd(k) for k in range(self.pp)]
        # the overlapped sends slow the chunks they run under: spread over the 2 VP chunks of a micro-batch
        slow = self.pp_slow_s / (2 * self.vp)
        return ([f / self.vp + self.p2p_s + slow for f, _ in fb],
                [b / self.vp + self.p2p_s + self.fsdp_s + slow for _, b in fb])


def _terms(model: ModelSpec, recipe: Recipe, t: LayoutTable, ct: ComputeTimes, cm: CommTimes,
           st: StepTimes) -> _Terms:
    """Scalars of the one-row table ``t``; op durations come from StepTimes (authoritative).

    Raises:
        InputError: gbs not divisible by DP x mbs; VP > 1 with micro-batches not a multiple of PP.
    """
    pp, vp, dp, mbs = int(t.pp[0]), int(t.vp[0]), int(t.dp[0]), int(t.mbs[0])
    if recipe.gbs % (dp * mbs):
        raise InputError("layout", "", f"gbs ({recipe.gbs}) must be divisible by DP x mbs ({dp} x {mbs}) "
                         "for a schedule of whole micro-batches")
    m = recipe.gbs // (dp * mbs)
    if vp > 1 and m % pp:
        raise InputError("layout", "", f"the interleaved schedule (VP={vp}) needs the number of "
                         f"micro-batches ({m}) to be a multiple of PP ({pp})")
    L = float(layers_per_stage(model, t)[0])
    frac = recomputed_fraction(model, t)
    e = {k: float(v[0]) for k, v in exposed_layer_comm(recipe, t, ct, cm, frac).items()}
    fwd, bwd = float(st.fwd_s[0]), float(st.bwd_s[0])
    # the exposed part of each transfer: all of it unless the stack overlaps the interleaved sends
    # (schedule.stage_sends_s), where the compute they slow holds the rest of t_mb_s
    p2p = float(st.breakdown["pp_comm_s"][0]) / (m * 2 * vp) if pp > 1 else 0.0
    fsdp = 0.0
    if float(cm.fsdp_mb_s[0]) > 0.0:    # the exposed part: what t_mb_s holds beyond fwd + bwd + p2p
        fsdp = max(0.0, float(st.t_mb_s[0]) - fwd - bwd - 2 * vp * p2p - float(st.pp_contention_s[0]))
    rec_comm = L * (e["rec_tp"] + e["rec_cp"] + e["rec_ep"])
    rec_s = float(ct.layer_recompute_s[0]) * (float(frac[0]) if int(t.recompute[0]) == 2 else 1.0)
    rec = min(bwd, L * rec_s + rec_comm)
    dims = ("tp", "cp", "ep")
    exp_f = {d: L * e[d + "_f"] for d in dims}
    exp_r = {d: L * e["rec_" + d] for d in dims}
    exp_b = {d: L * (e[d + "_b"] - e["rec_" + d]) for d in dims}
    raw_f = {"tp": L * float(cm.tp_layer_fwd_s[0]), "cp": L * float(cm.cp_layer_fwd_s[0]),
             "ep": L * float(cm.ep_layer_fwd_s[0])}
    raw_b = {"tp": L * float(cm.tp_layer_bwd_s[0]), "cp": L * float(cm.cp_layer_bwd_s[0]),
             "ep": L * float(cm.ep_layer_bwd_s[0])}
    bd = {k: float(st.breakdown[k][0]) for k in BREAKDOWN_TERMS}
    overlap = bool(dp_overlap_on(recipe, t.zero[0], t.overlap[0]))
    param_raw = float(cm.dp_param_s[0])
    param = max(0.0, param_raw - fwd) if overlap else param_raw
    grad = max(0.0, bd["dp_comm_s"] - param - m * fsdp)
    step = float(st.step_time_s[0])
    t_mb = float(st.t_mb_s[0])
    # the stages before the last (the slowest), each at the mean of what the pipeline holds besides it
    n_other = max(pp - 1, 1)
    o_f, o_b = (float(st.stages_fwd_s[0]) - fwd) / n_other, (float(st.stages_bwd_s[0]) - bwd) / n_other
    o_t = o_f + o_b + t_mb - fwd - bwd
    drawn = m * t_mb + pipeline_bubble_s(t_mb + (pp - 1) * o_t, t_mb, vp) + param + grad + bd["optimizer_s"]
    other = step - drawn if step - drawn > 1e-12 * step else 0.0
    return _Terms(pp, vp, m, fwd, bwd, rec, p2p, fsdp, exp_f, exp_r, exp_b, raw_f, raw_b,
                  float(cm.fsdp_mb_s[0]), param, param_raw, grad, float(cm.dp_grad_s[0]),
                  bd["optimizer_s"], other, bd["bubble_s"], step, bd, o_f, o_b, float(st.pp_contention_s[0]),
                  float(st.step_contention_s[0]) - m * float(st.pp_contention_s[0]))


def stage_ops(pp: int, vp: int, m: int, stage: int) -> list[tuple[str, int, int]]:
    """The order of ops on one pipeline stage: [("F" or "B", micro-batch, chunk), ...].

    VP = 1: 1F1B (PipeDream-Flush) - min(PP-1-stage, m) warm-up forwards, then alternating
    forward / backward, then the cool-down backwards (SC21 sec. 2.2.1).  VP > 1: Megatron's
    interleaved schedule - forwards walk the chunks in groups of PP micro-batches, backwards the
    chunks in reverse; warm-up 2 (PP-1-stage) + (VP-1) PP chunk-forwards, at most m VP (SC21 sec.
    2.2.2).  Length 2 m VP.
    """
    total = m * vp
    warm = min(pp - 1 - stage, m) if vp == 1 else min(2 * (pp - 1 - stage) + (vp - 1) * pp, total)

    def op(kind: str, j: int) -> tuple[str, int, int]:
        chunk = (j % (pp * vp)) // pp
        return kind, (j // (pp * vp)) * pp + j % pp, (vp - 1 - chunk if kind == "B" else chunk)

    ops = [op("F", j) for j in range(warm)]
    for i in range(total - warm):
        ops += [op("F", warm + i), op("B", i)]
    return ops + [op("B", j) for j in range(total - warm, total)]


def simulate(pp: int, vp: int, m: int, f_slot_s: float, b_slot_s: float,
             t0_s: float = 0.0) -> list[list[tuple[str, int, int, float]]]:
    """Start time of every op: as soon as its stage is free and its input is there.

    An op of stage k occupies it for ``f_slot_s[k]`` (forward chunk) or ``b_slot_s[k]`` (backward
    chunk), its outgoing transfer included (a number: every stage the same).  Forward of virtual stage v = chunk PP + stage waits for the
    forward of v-1 of the same micro-batch, backward of v for the backward of v+1 (the last
    virtual stage's backward for its own forward).

    Returns:
        per stage, [(kind, micro-batch, chunk, start_s), ...] in execution order.
    Raises:
        RuntimeError: the op orders deadlock (not expected for the orders of :func:`stage_ops`).
    """
    V = pp * vp
    f_slot_s = np.broadcast_to(np.asarray(f_slot_s, dtype=np.float64), (pp,))
    b_slot_s = np.broadcast_to(np.asarray(b_slot_s, dtype=np.float64), (pp,))
    orders = [stage_ops(pp, vp, m, k) for k in range(pp)]
    out: list[list[tuple[str, int, int, float]]] = [[] for _ in range(pp)]
    free = [t0_s] * pp
    done: dict[tuple[str, int, int], float] = {}
    pos = [0] * pp
    left = sum(len(o) for o in orders)
    while left:
        progressed = False
        for k in range(pp):
            while pos[k] < len(orders[k]):
                kind, mb, c = orders[k][pos[k]]
                v = c * pp + k
                if kind == "F":
                    dep = ("F", mb, v - 1) if v > 0 else None
                else:
                    dep = ("B", mb, v + 1) if v < V - 1 else ("F", mb, v)
                if dep is not None and dep not in done:
                    break
                start = max(free[k], done[dep] if dep is not None else t0_s)
                end = start + float(f_slot_s[k] if kind == "F" else b_slot_s[k])
                done[(kind, mb, v)] = end
                free[k] = end
                out[k].append((kind, mb, c, start))
                pos[k] += 1
                left -= 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"pipeline schedule deadlocks (PP={pp}, VP={vp}, m={m})")
    return out


def _stage_name(k: int, t: LayoutTable, gpus_per_node: int) -> str:
    """``stage k (GPUs a-b, node(s) ...)`` under Megatron's rank order (PP outermost)."""
    per = int(t.tp[0] * t.cp[0] * t.dp[0])
    a, b = k * per, (k + 1) * per - 1
    gpus = f"GPU {a}" if a == b else f"GPUs {a}-{b}"
    na, nb = a // gpus_per_node, b // gpus_per_node
    nodes = f"node {na}" if na == nb else f"nodes {na}-{nb}"
    return f"stage {k} ({gpus}, {nodes})"


class _Events:
    """Collects trace events; converts seconds to microseconds (rounded to the nanosecond)."""

    def __init__(self):
        self.events: list[dict] = []

    def x(self, name: str, cat: str, pid: int, tid: int, start_s: float, dur_s: float, **args) -> None:
        if dur_s <= 0.0:
            return
        ts = round(start_s * _US, 3)
        end = round((start_s + dur_s) * _US, 3)
        self.events.append({"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": round(end - ts, 3),
                            "pid": pid, "tid": tid, "args": {k: _plain(v) for k, v in args.items()}})

    def meta(self, event: str, pid: int, tid: int, **args) -> None:
        self.events.append({"name": event, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args})


def _plain(v):
    """numpy scalars -> Python scalars for json."""
    return v.item() if isinstance(v, np.generic) else v


_COLL_NAMES = {"cp": "CP ring send/recv", "ep": "EP all-to-all"}


def schedule_trace(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                   layouts: LayoutTable | Prediction | LayoutTerms, index: int = 0) -> dict:
    """The predicted schedule of one training step of layout ``index`` as a trace-event object.

    Args:
        model, recipe, cluster, profile: the specs the layout is predicted with.
        layouts: a :class:`LayoutTable` (its terms are evaluated here), a :class:`Prediction` of
            ``predict_table`` (its ``step_time_s`` is then checked against the recomputed one), or
            the :class:`LayoutTerms` of a prediction (drawn as they are, e.g. ``RunPrediction.terms``).
        index: the row of the table to draw.

    Returns:
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "metadata": {...}}`` (module docstring);
        ``ts``/``dur`` in microseconds, args in seconds.  Serialisable with ``json.dumps``.
        The makespan (max ts + dur) equals the predicted step time (module docstring).
    Raises:
        IndexError: ``index`` outside the table.
        InputError: gbs not divisible by DP x mbs, or VP > 1 with micro-batches not a multiple of PP.
        ValueError: a Prediction whose step time disagrees with these specs (made with others).
        InputError from predict_table: the GPU / profile lack the recipe's precision.
    """
    pred = layouts if isinstance(layouts, Prediction) else None
    given = layouts if isinstance(layouts, LayoutTerms) else None
    table = pred.layouts if pred is not None else (given.layouts if given is not None else layouts)
    n = len(table)
    if not -n <= index < n:
        raise IndexError(f"layout index {index} outside a table of {n} layouts")
    index %= n
    if given is not None:
        one = given.take(np.array([index]))
        t, ct, cm, st = one.layouts, one.compute, one.comm, one.step
    else:
        # predict's own terms (the BF16 edge layers blended as it blends them)
        one = predict_table(model, recipe, cluster, profile, table.take(np.array([index]))).terms
        t, ct, cm, st = one.layouts, one.compute, one.comm, one.step
    T = _terms(model, recipe, t, ct, cm, st)
    if pred is not None:
        given = float(pred.step_time_s[index])
        if abs(given - T.step_time_s) > 1e-9 * max(given, T.step_time_s):
            raise ValueError(f"the prediction's step time ({given:.6g} s) differs from the one these "
                             f"specs give ({T.step_time_s:.6g} s): it was made with other specs")

    row = t.row(0)
    f_slot, b_slot = T.slots()
    sched = simulate(T.pp, T.vp, T.m, f_slot, b_slot, T.dp_param_s)
    ev = _Events()
    ends = [_draw_stage(ev, T, sched[k], k, row, f_slot[k], b_slot[k], _stage_name(k, t, cluster.gpus_per_node))
            for k in range(T.pp)]
    makespan = _draw_step_tail(ev, T, sched, ends, row, f_slot, b_slot)
    meta = _metadata(model, recipe, cluster, T, row, float(st.t_mb_s[0]), makespan)
    if pred is not None:
        meta["feasible"] = bool(pred.feasible[index])
        meta["peak_mem_bytes"] = float(pred.memory.peak_bytes[index])
    return {"traceEvents": ev.events, "displayTimeUnit": "ms", "metadata": meta}


def _draw_stage(ev: "_Events", T: _Terms, ops: list, k: int, row: dict, f_slot: float, b_slot: float,
                name: str) -> float:
    """Events of pipeline stage ``k``: its forward, recompute and backward ops with their exposed
    collectives, P2P sends and FSDP gathers; returns when its last op slot ends, s."""
    pp, vp = T.pp, T.vp
    V = pp * vp
    fwd_k, bwd_k = T.stage_fwd_bwd(k)
    f_c, b_c, r_c = fwd_k / vp, (bwd_k - T.rec_s) / vp, T.rec_s / vp
    coll_names = dict(_COLL_NAMES, tp="TP all-gather/reduce-scatter" if row["sp"] else "TP all-reduce")
    pid = k + 1
    ev.meta("process_name", pid, 0, name=name)
    ev.meta("process_sort_index", pid, 0, sort_index=k)
    chunks = ", ".join(str(c * pp + k) for c in range(vp))
    ev.meta("process_labels", pid, 0, labels=f"virtual stage{'s' if vp > 1 else ''} {chunks}")
    for tid, tname in THREADS.items():
        ev.meta("thread_name", pid, tid, name=tname)
        ev.meta("thread_sort_index", pid, tid, sort_index=tid)

    def colls(start: float, exp: dict, raw: dict | None, phase: str, mb: int, c: int) -> None:
        """Exposed collectives of one op chunk as back-to-back blocks ending at the op's end."""
        tot = sum(exp.values()) / vp
        s = start - tot
        for d in ("tp", "cp", "ep"):
            dur = exp[d] / vp
            a = dict(mb=mb, chunk=c, phase=phase, exposed_s=dur)
            if raw is not None:
                a.update(raw_s=raw[d] / vp, hidden_s=max(0.0, (raw[d] - exp[d]) / vp))
            ev.x(coll_names[d], "comm." + d, pid, TID_COLL, s, dur, **a)
            s += dur

    for kind, mb, c, start in ops:
        v = c * pp + k
        common = dict(mb=mb, chunk=c, virtual_stage=v)
        if kind == "F":
            ev.x(f"F mb{mb}", "forward", pid, TID_COMPUTE, start, f_c, **common, fwd_s=f_c,
                 exposed_comm_s=sum(T.exp_f.values()) / vp)
            colls(start + f_c, T.exp_f, T.raw_f, "forward", mb, c)
            to = (v + 1) % pp if v < V - 1 else None
            ev.x("send act" if to is not None else "p2p slot", "p2p", pid, TID_P2P, start + f_c,
                 T.p2p_s, **common, to_stage=to, p2p_s=T.p2p_s)
        else:
            ev.x(f"R mb{mb}", "recompute", pid, TID_COMPUTE, start, r_c, **common, recompute_s=r_c,
                 exposed_comm_s=sum(T.exp_r.values()) / vp)
            colls(start + r_c, T.exp_r, None, "recompute", mb, c)
            bs = start + r_c
            ev.x(f"B mb{mb}", "backward", pid, TID_COMPUTE, bs, b_c, **common, bwd_s=b_c,
                 exposed_comm_s=sum(T.exp_b.values()) / vp)
            colls(bs + b_c, T.exp_b, T.raw_b, "backward", mb, c)
            to = (v - 1) % pp if v > 0 else None
            ev.x("send grad" if to is not None else "p2p slot", "p2p", pid, TID_P2P, bs + b_c,
                 T.p2p_s, **common, to_stage=to, p2p_s=T.p2p_s)
            ev.x("FSDP all-gather/reduce-scatter", "comm.dp", pid, TID_DP, bs + b_c + T.p2p_s,
                 T.fsdp_s, mb=mb, exposed_s=T.fsdp_s, raw_s=T.fsdp_raw_s)
    last = ops[-1]
    return last[3] + (f_slot if last[0] == "F" else b_slot)


def _draw_step_tail(ev: "_Events", T: _Terms, sched: list, ends: list, row: dict, f_slot: list,
                    b_slot: list) -> float:
    """Per stage: the DP parameter gather, the overlap slowdown, the DP gradient reduction, the
    optimizer and the bubbles (gaps of the compute stream); returns the makespan, s."""
    dp_grad_name = ("DP all-reduce" if row["zero"] == 0 else "DP reduce-scatter"
                    + (f" + all-reduce over {row['dp_replicate']} replicas" if row.get("dp_replicate", 1) > 1 else ""))
    tail = T.other_s + T.dp_grad_s
    opt_start = max(e + tail for e in ends)
    for k in range(T.pp):
        pid = k + 1
        ev.x("DP all-gather (params)", "comm.dp", pid, TID_DP, 0.0, T.dp_param_raw_s,
             exposed_s=T.dp_param_s, raw_s=T.dp_param_raw_s)
        dp_slow = min(max(T.dp_slow_s, 0.0), T.other_s)
        ev.x("overlap slowdown", "compute", pid, TID_COMPUTE, ends[k], T.other_s, slowdown_s=T.other_s,
             dp_slowdown_s=dp_slow, warmup_flush_sends_s=T.other_s - dp_slow,
             note="the step-time the schedule places nowhere else: compute slowed by the DP communication "
                  "hidden under it (profile overlap_slowdown; dp_slowdown_s) and the overlapped stage sends "
                  "that the warm-up and flush still expose (warmup_flush_sends_s)")
        g0 = max(0.0, ends[k] + tail - T.dp_grad_raw_s)
        ev.x(dp_grad_name, "comm.dp", pid, TID_DP, g0, ends[k] + tail - g0,
             exposed_s=T.dp_grad_s, raw_s=T.dp_grad_raw_s)
        ev.x("optimizer", "optimizer", pid, TID_COMPUTE, opt_start, T.opt_s, optimizer_s=T.opt_s)
        # bubbles: gaps of the compute stream not spent in an op slot or in exposed DP comm
        busy = [(0.0, T.dp_param_s)] + [(s, s + (f_slot[k] if kd == "F" else b_slot[k])) for kd, _, _, s in sched[k]]
        busy.append((ends[k], ends[k] + tail))
        first_b = min(s for kd, _, _, s in sched[k] if kd == "B")
        last_f = max(s + f_slot[k] for kd, _, _, s in sched[k] if kd == "F")
        cur = 0.0
        for a, b in sorted(busy) + [(opt_start, opt_start)]:
            if a > cur + 1e-12:
                phase = ("warm-up" if a <= first_b + 1e-12 else
                         "cool-down" if cur >= last_f - 1e-12 else "steady")
                ev.x("bubble", "bubble", k + 1, TID_COMPUTE, cur, a - cur, idle_s=a - cur, phase=phase)
            cur = max(cur, b)
    return opt_start + T.opt_s


def _metadata(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, T: _Terms, row: dict, t_mb_s: float,
              makespan: float) -> dict:
    """The trace's metadata: what was drawn, the step and its parts, units, approximations, sources."""
    pp, vp = T.pp, T.vp
    return {
        "source": "costmodel.trace",
        "model": model.name,
        "cluster": cluster.name,
        "gpu": cluster.gpu.name,
        "recipe": {"gbs": recipe.gbs, "seq_len": recipe.seq_len, "precision": recipe.precision},
        "layout": row,
        "microbatches": T.m,
        "schedule": "interleaved 1F1B" if vp > 1 else ("1F1B" if pp > 1 else "gradient accumulation (PP=1)"),
        "step_time_s": T.step_time_s,
        "makespan_s": makespan,
        "breakdown": T.breakdown,
        "per_microbatch": {"fwd_s": T.fwd_s, "bwd_s": T.bwd_s, "recompute_s": T.rec_s,
                           "pp_p2p_s": T.p2p_s, "fsdp_exposed_s": T.fsdp_s, "t_mb_s": t_mb_s},
        "per_step": {"dp_param_exposed_s": T.dp_param_s, "dp_grad_exposed_s": T.dp_grad_s,
                     "optimizer_s": T.opt_s, "bubble_s": T.bubble_s, "overlap_slowdown_s": T.other_s},
        "units": "ts and dur in microseconds; args and metadata in seconds",
        "approximations": list(APPROXIMATIONS),
        "sources": list(SOURCES),
    }


def write_trace(path: str | Path, model: ModelSpec, recipe: Recipe, cluster: ClusterSpec,
                profile: Profile, layouts: LayoutTable | Prediction | LayoutTerms, index: int = 0) -> dict:
    """Write :func:`schedule_trace` as JSON to ``path`` (parent folders created); return the trace.

    Raises:
        InputError: ``path`` cannot be written (names the path), plus those of schedule_trace.
    """
    trace = schedule_trace(model, recipe, cluster, profile, layouts, index)
    from .files import write_atomically
    write_atomically(path, json.dumps(trace, separators=(",", ":")), "--trace")
    return trace
