"""recommend's search of the recipe switches a user leaves open: each one the stack can turn on is
searched beside the winner so far (the winner may need it, and the printed flags set it)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InputError
from ..predict import predict_run
from ..search import search
from ..recipe_switches import EP_OVERLAP_DISPATCHERS, SWITCHES_BY_NAME
from ..stacks import TE_STACKS, get_stack


#: the layout the switch notes time: the search's, at its stack's own pipeline split (the printed winner
#: may run a split of its own, costmodel.pipeline_balance)
_FASTEST = "the time model's fastest layout (at its stack's own pipeline split)"


def search_open_switches(m, r, c, p, res, kw: dict, recipe_flags: dict, no_overlap: bool):
    """Search the switches the user left open that the stack can turn on (the winner may need them, and
    the printed flags set them), one at a time and, where none helps alone, the rest together; hand back
    to the stack any that helped an earlier winner but not the final one.  Returns (search result,
    recipe, notes naming each kept switch with the fastest layout's full-clock step with and without it)."""
    r0, won = r, []
    # a switch that did not help one winner may help the next (DP overlap on the layout TP-comm overlap
    # made the winner): the ones left are tried again until a pass adopts none; then the rest together
    # (the flex dispatcher's EP 16 wants the DP overlap, which an all-gather winner has no use for), and
    # after that the single ones again
    left = list(_open_switch_variants(m, r, recipe_flags, no_overlap, c))
    while left and res.n_feasible:
        res, r, left, won = _single_passes(m, r, c, p, res, kw, recipe_flags, left, won)
        if not (left and res.n_feasible):
            break
        r_alt = dataclasses.replace(r, **{k: v for changes, _ in left for k, v in changes.items()})
        if r_alt.moe_ep_overlap and r_alt.moe_dispatcher not in EP_OVERLAP_DISPATCHERS:
            # the EP overlap with a dispatcher that runs it: the all-to-all one, unless one is given
            r_alt = dataclasses.replace(r_alt, **(dict(moe_ep_overlap=r.moe_ep_overlap)
                                                  if recipe_flags.get("moe_dispatcher") is not None
                                                  else _with_dispatcher({"moe_ep_overlap": True}, r_alt, recipe_flags)))
        try:
            res_alt = search(m, r_alt, c, p, **kw)
        except InputError:          # a combination the stack refuses (each checked alone above)
            break
        if not (res_alt.n_feasible and float(res_alt.ranked.step_time_s[0])
                < float(res.ranked.step_time_s[0]) * (1 - 1e-9)):
            break
        # every setting the joint step changed, for the notes (and their hand-back) below
        won.append(({f.name: getattr(r_alt, f.name) for f in dataclasses.fields(r_alt)
                     if getattr(r_alt, f.name) != getattr(r, f.name)}, "together"))
        res, r = res_alt, r_alt
        left = [(ch, w) for ch, w in left if any(getattr(r, k) != v for k, v in ch.items())]
    kept = []
    # one switch at a time (a variant may set two: the dispatcher and grouped GEMMs), so each note
    # names a setting the final recipe has
    for key in dict.fromkeys(k for changes, _ in won for k in changes):
        if getattr(r, key) == getattr(r0, key):
            continue
        r_rev = dataclasses.replace(r, **{key: getattr(r0, key)})
        best = float(res.ranked.step_time_s[0])
        # the EP overlap cannot go back to a dispatcher it does not run with: that one stays
        alone = not (r_rev.moe_ep_overlap and r_rev.moe_dispatcher not in EP_OVERLAP_DISPATCHERS)
        t_without = (predict_run(m, r_rev, c, p, res.ranked.layouts.row(0), searched=True).uncapped_step_time_s
                     if alone else np.inf)
        if t_without <= best * (1 + 1e-9):
            r = r_rev
            res = search(m, r, c, p, **kw)
        elif not alone:
            kept.append(f"costmodel: note: {_switch_text(key, getattr(r, key), r0)}: kept, as the EP overlap the search "
                        f"keeps needs it (the overlap does not run with {r0.stack}'s default {r0.moe_dispatcher} "
                        "dispatcher)")
        elif getattr(r, key) is False:
            kept.append(f"costmodel: note: {_switch_text(key, False, r0)}: {_FASTEST} takes {best:.3f} s per step "
                        f"before the power limit without it, {t_without:.3f} s with it: the search turns it off "
                        "(the printed settings do)")
        else:
            kept.append(f"costmodel: note: {_switch_text(key, getattr(r, key), r0)}: {_FASTEST} takes {best:.3f} s "
                        f"per step before the power limit with it, {t_without:.3f} s without it: the search keeps it "
                        "on (the printed settings set it where the chosen layout uses it)")
    return res, r, kept


def _with_dispatcher(changes: dict, r, recipe_flags: dict) -> dict:
    """``changes`` as tried on recipe ``r``: the EP overlap runs with the all-to-all or flex dispatcher
    only, so on another it comes with the all-to-all one (and grouped GEMMs where left open)."""
    if changes.get("moe_ep_overlap") and r.moe_dispatcher not in EP_OVERLAP_DISPATCHERS \
            and "moe_dispatcher" not in changes:
        return dict(changes, moe_dispatcher="alltoall", **(
            {"moe_grouped_gemm": True} if recipe_flags.get("moe_grouped_gemm") is None else {}))
    return changes


def _single_passes(m, r, c, p, res, kw: dict, recipe_flags: dict, left: list, won: list):
    """Try each of ``left`` alone on the winner so far, adopting any that speeds it, until a pass adopts
    none.  Returns (search result, recipe, the variants left, the variants adopted)."""
    adopted = True
    while left and res.n_feasible and adopted:
        tried, left, adopted = left, [], False
        for changes, what in tried:
            if not res.n_feasible:
                break
            if changes.get("moe_ep_overlap") and r.moe_dispatcher not in EP_OVERLAP_DISPATCHERS \
                    and recipe_flags.get("moe_dispatcher") is not None:
                continue        # the given dispatcher does not run it
            applied = _with_dispatcher(changes, r, recipe_flags)
            r_alt = dataclasses.replace(r, **applied)
            res_alt = search(m, r_alt, c, p, **kw) if r_alt != r else res
            t_now = float(res.ranked.step_time_s[0])
            t_alt = float(res_alt.ranked.step_time_s[0]) if res_alt.n_feasible else float("inf")
            if t_alt < t_now * (1 - 1e-9):
                won.append((applied, what))
                res, r, adopted = res_alt, r_alt, True
            elif r_alt != r:
                left.append((changes, what))
    return res, r, left, won


def _dp_overlap_words(stack: str) -> str:
    """The setting that turns the DP overlap on in ``stack``: DeepSpeed's ZeRO ``overlap_comm``,
    else Megatron's flags."""
    return ("DeepSpeed's zero_optimization.overlap_comm" if stack == "deepspeed" else
            "Megatron's --overlap-grad-reduce --overlap-param-gather")


def _switch_text(key: str, value, r0) -> str:
    """What setting ``key`` to ``value`` means, beside the stack's default in ``r0``."""
    sw = SWITCHES_BY_NAME.get(key)
    if key == "moe_dispatcher":
        return f"the {value} MoE dispatcher (--moe-dispatcher {value}; {r0.stack} defaults to {r0.moe_dispatcher})"
    if key == "dp_overlap":
        return f"the DP gradient/parameter overlap (--dp-overlap: {_dp_overlap_words(r0.stack)}, off by default in {r0.stack})"
    if sw is not None and sw.summary and value is True:
        return f"{sw.summary} ({sw.cli_flag}; off by default in {r0.stack})"
    if sw is not None and sw.summary and value is False:
        return f"{sw.summary} (--no-{sw.cli_flag.removeprefix('--')}; on by default in {r0.stack})"
    return f"--{key.replace('_', '-')} {value}"


def _open_switch_variants(m, r, flags: dict, no_overlap: bool, c=None) -> list:
    """(recipe changes, description) pairs worth searching beside ``r``: the DP overlap where the stack
    can run it and leaves it off (Megatron-LM), Transformer Engine TP-comm overlap
    when ``--tp-comm-overlap`` is left open (on where the stack leaves it off, off where it sets it on:
    its chunked GEMMs can cost more than it hides), and for an MoE
    model on a Megatron-family stack grouped expert GEMMs (unless ``--moe-grouped-gemm`` is given), the
    fused token permutation (unless ``--moe-permute-fusion`` is given) and
    the all-to-all dispatcher with one grouped GEMM (Megatron's defaults are allgather and per-expert
    GEMMs; its documentation recommends alltoall with EP) when neither MoE switch is given, then
    the fused router (unless ``--moe-router-fusion`` is given, Megatron-core stacks), the flex
    dispatcher (DeepEP) where the cluster ``c`` runs its kernels (Hopper or Blackwell GPUs joined
    by NVLink, no padding to capacity; EP groups inside a node on AWS EFA; costmodel.moe.check_moe_recipe) and no
    dispatcher is given, then
    Megatron-core's batch-level EP overlap (unless ``--moe-ep-overlap`` is given; it needs EP > 1 and no
    full recompute, which the search then leaves out).  The caller applies each to the recipe that won so far."""
    out = []
    if flags.get("dp_overlap") is None and not r.dp_overlap and get_stack(r.stack).dp_overlap and not no_overlap:
        out.append((dict(dp_overlap=True), f"the DP gradient/parameter overlap (--dp-overlap: "
                                           f"{_dp_overlap_words(r.stack)}, off by default in {r.stack})"))
    if flags.get("tp_comm_overlap") is None and not r.tp_comm_overlap and r.stack in TE_STACKS and not no_overlap:
        out.append((dict(tp_comm_overlap=True),
                    f"Transformer Engine TP-comm overlap (--tp-comm-overlap, off by default in {r.stack})"))
    if flags.get("tp_comm_overlap") is None and r.tp_comm_overlap and not no_overlap:
        # on by the stack's default, it can cost more than it hides: its GEMMs run in TP chunks, each
        # with a partial wave, beside kernels that hold SMs (costmodel.tp_overlap), at a small TP degree
        # or a short sequence per rank
        out.append((dict(tp_comm_overlap=False),
                    f"no TP-comm overlap (--no-tp-comm-overlap, on by default in {r.stack}: its chunked GEMMs "
                    f"cost more than the TP communication it hides here)"))
    if m.is_moe and flags.get("moe_grouped_gemm") is None and not r.moe_grouped_gemm and get_stack(r.stack).megatron_family:
        out.append((dict(moe_grouped_gemm=True), f"grouped expert GEMMs with the {r.moe_dispatcher} dispatcher "
                                                  f"(--moe-grouped-gemm; off by default in {r.stack})"))
    if m.is_moe and flags.get("moe_permute_fusion") is None and not r.moe_permute_fusion \
            and get_stack(r.stack).megatron_family:
        out.append((dict(moe_permute_fusion=True), f"fused token permutation (--moe-permute-fusion; off by default "
                                                    f"in {r.stack}: PyTorch's atomic scatter-add each way)"))
    if (m.is_moe and flags.get("moe_dispatcher") is None and flags.get("moe_grouped_gemm") is None
            and get_stack(r.stack).megatron_family and (r.moe_dispatcher, r.moe_grouped_gemm) != ("alltoall", True)):
        out.append((dict(moe_dispatcher="alltoall", moe_grouped_gemm=True),
                    f"the all-to-all MoE dispatcher with grouped GEMM (--moe-dispatcher alltoall "
                    f"--moe-grouped-gemm; {r.stack} defaults to allgather and per-expert GEMMs)"))
    if m.is_moe and flags.get("moe_dispatcher") is None and r.stack in TE_STACKS and _runs_deepep(r, c):
        out.append((dict(moe_dispatcher="flex", **({} if flags.get("moe_grouped_gemm") is not None
                                                   else {"moe_grouped_gemm": True})),
                    "the flex MoE dispatcher (--moe-dispatcher flex: DeepEP's kernels, each token sent once to "
                    "each node and GPU holding its experts)"))
    if m.is_moe and flags.get("moe_router_fusion") is None and not r.moe_router_fusion and r.stack in TE_STACKS:
        out.append((dict(moe_router_fusion=True), f"fused router kernels (--moe-router-fusion; off by default in "
                                                   f"{r.stack})"))
    if m.is_moe and flags.get("moe_ep_overlap") is None and not r.moe_ep_overlap and r.stack in TE_STACKS \
            and not no_overlap:
        out.append((dict(moe_ep_overlap=True), f"batch-level EP overlap (--moe-ep-overlap: the all-to-all under the "
                                                f"other micro-batch's compute; off by default in {r.stack})"))
    return out


def _runs_deepep(r, c) -> bool:
    """Whether the flex dispatcher runs on cluster ``c`` with recipe ``r``: DeepEP's kernels need a Hopper
    or Blackwell GPU and NVLink inside a node (costmodel.moe), and a padded capacity is refused with it;
    on AWS EFA the search keeps its EP groups inside a node (costmodel.search, costmodel.moe.flex_crosses_efa)."""
    from ..model_error import generation
    from ..specs.links import NVLINK_FABRICS
    return (c is not None and generation(c.gpu) in ("hopper", "blackwell") and c.intra_fabric in NVLINK_FABRICS
            and not r.moe_pad_to_capacity)
