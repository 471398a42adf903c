"""The ``costmodel: note:`` lines a command prints on stderr, kept in the order said, so that a ``--json``
record carries every one of them (a script reading stdout alone sees what a person reading the terminal
sees)."""
from __future__ import annotations

import math
import sys

_PREFIX = "costmodel: note: "
_SAID: list[str] = []


def start() -> None:
    """Forget the notes of an earlier command run in this process (a command begins)."""
    _SAID.clear()


def note(text: str) -> None:
    """Print ``text`` on stderr as a note (one line) and keep it; an empty text says nothing."""
    if not text:
        return
    text = text[len(_PREFIX):] if text.startswith(_PREFIX) else text
    print(_PREFIX + text, file=sys.stderr)
    _SAID.append(text)


def said() -> list[str]:
    """The notes printed since :func:`start`, in order, without their prefix."""
    return list(_SAID)


def uniform_routing_note(m, r) -> str | None:
    """A note where a dropless MoE run (model ``m``, recipe ``r``) is priced with routing as even as random
    top-k (no measured ``--moe-expert-load-cv``): a trained router's busiest expert carries more, and
    NVIDIA's own measurement of the gap is quoted so the user can judge it (it is not in the model).
    ``predict`` and ``recommend`` both say it; None where it does not apply."""
    if not m.is_moe or r.moe_expert_load_cv > 0 or r.moe_capacity_factor > 0:
        return None
    return ("MoE routing is priced as random top-k (a balls-into-bins bound on the busiest rank); a trained router "
            "is less even: Qwen3-235B on 256 H100 ran 9-25% slower dropless than with forced balance at the same "
            "layout (Megatron-MoE-ModelZoo best_practice/qwen3/readme.md, long-context table; "
            "benchmarks/data/moe_modelzoo_qwen3_235b_h100_long_context.csv). Pass --moe-expert-load-cv (a Megatron "
            "log's sqrt(load_balancing_loss - 1) bounds it from below) or a capacity factor to price your router")


def note_plain_decoder(model_arg: str, model) -> None:
    """Say that ``model`` (a ModelSpec read from ``model_arg``) is of a family the config reader does not
    know, so its count and shapes come from the generic keys alone (nothing when it knows the family)."""
    from ..specs.model_config import known_family
    if known_family(model):
        return
    what = "no model_type" if model.family == "?" else f"model_type {model.family!r}, not a family this reader knows"
    note(f"{model_arg}: {what} (costmodel/specs/model_config.py _KNOWN_TYPES): read as a plain decoder from its "
         "generic keys (biases only with attention_bias, no Q/K norms, a gated MLP where its activation is SiLU, "
         "full attention in every layer whatever its sliding_window says)")


def domain_fill_note(c) -> list[str]:
    """[the note] where the job's GPUs fill part of a multi-node NVLink domain of cluster ``c`` (80 GB200
    GPUs: one NVL72 domain and 8 GPUs of another, whose groups' traffic then crosses the NICs), else []."""
    d, n = c.scale_up_gpus, c.num_gpus
    if d <= c.gpus_per_node or n <= d or not n % d:
        return []
    return [f"the job's {n} GPUs fill {n // d} NVLink domain(s) of {d} and {n % d} GPUs of another"]


def fit_count(res, capacity_bytes: float) -> str:
    """'N valid layouts, M fit in X GiB' of a search (costmodel.search.SearchResult), with the variants
    recomputing fewer layers ranked beside them (the ranking holds both)."""
    extra = len(res.ranked.step_time_s) - res.n_feasible
    return (f"{res.n_valid:,} valid layouts, {res.n_feasible:,} fit in {capacity_bytes / 2**30:.1f} GiB"
            + (f" (ranked with {extra:,} variants recomputing fewer layers)" if extra > 0 else ""))


def sp_off_note(recipe, ranked, no_sp: bool = False) -> list[str]:
    """[the note] where sequence parallelism, asked for, is off in some ranked layouts of ``ranked``
    (costmodel.predict.Prediction) because TP does not divide seq_len / CP on a Megatron-family stack
    (costmodel.layout_grid.candidate_grid keeps them, without SP), else [] (also under ``no_sp``)."""
    from ..stacks import get_stack
    t, stack = ranked.layouts, get_stack(recipe.stack)
    off = (t.tp > 1) & ~t.sp
    if no_sp or not (stack.megatron_family and stack.sequence_parallel) or not off.any():
        return []
    tps = ", ".join(str(v) for v in sorted(set(t.tp[off].tolist())))
    return [f"seq_len {recipe.seq_len} / CP is not divisible by TP {tps}: those layouts run without sequence "
            "parallelism (Megatron-core splits the sequence evenly over the TP group under it)"]


#: share of the HBM above which a predicted peak may not fit as run: the memory model leaves out the
#: caching allocator's fragmentation (the Mixtral log in tests/data/logs: 54.3 GB allocated, 61.5 GB
#: reserved, 13 % more; README "Memory")
TIGHT_HBM_SHARE = 0.9


def tight_hbm_note(peak_bytes: float, gpu) -> str | None:
    """The note where a layout's predicted peak (bytes per GPU) lies above :data:`TIGHT_HBM_SHARE` of
    ``gpu``'s HBM (costmodel.specs.GPUSpec) and no --mem-headroom was given, else None."""
    cap = gpu.capacity_bytes
    if peak_bytes <= TIGHT_HBM_SHARE * cap or peak_bytes > cap or gpu.mem_headroom:
        return None
    return (f"the predicted peak is {peak_bytes / 2**30:.1f} of {cap / 2**30:.1f} GiB ({100 * peak_bytes / cap:.1f}%): "
            "fragmentation the model leaves out may not fit it (--mem-headroom keeps room; --recompute auto then "
            "recomputes more)")


def dp_limit_note(recipe, num_gpus: int) -> list[str]:
    """[the note] where ``recipe.gbs`` shares no factor with the job's ``num_gpus``: every DP x mbs must
    divide gbs (whole micro-batches on every DP rank), so the search runs DP 1 only; else []."""
    if num_gpus < 2 or math.gcd(recipe.gbs, num_gpus) > 1:
        return []
    return [f"gbs {recipe.gbs} shares no factor with the {num_gpus} GPUs: DP x mbs must divide it, so every layout "
            "searched runs DP 1 (a gbs sharing a factor with the GPU count opens the data-parallel layouts)"]


def search_notes(c, recipe, ranked, no_sp: bool) -> list[str]:
    """The notes on what the cluster and the recipe leave the search of ``ranked`` (costmodel.predict.
    Prediction): :func:`domain_fill_note`, :func:`dp_limit_note`, :func:`sp_off_note`."""
    return domain_fill_note(c) + dp_limit_note(recipe, c.num_gpus) + sp_off_note(recipe, ranked, no_sp)


def inlet_rating_note(c, inlet_temp_c: float | None) -> str | None:
    """A note when the cooling inlet (``inlet_temp_c``, C, or the cluster's) lies outside what its cooling
    type's equipment is rated for (costmodel.specs.cooling.RATED_INLET_C): the thermal model extrapolates
    there."""
    from ..specs.cooling import RATED_INLET_C
    t = c.cooling.inlet_temp_c if inlet_temp_c is None else inlet_temp_c
    lo, hi = RATED_INLET_C.get(c.cooling.type, (-math.inf, math.inf))
    if lo <= t <= hi:
        return None
    return (f"a {t:g} C inlet is outside the {lo:g}-{hi:g} C {c.cooling.type}-cooled equipment is rated for "
            f"(ASHRAE TC 9.9's {'classes A1-A4' if c.cooling.type == 'air' else 'water classes W17-W+'}): a scenario "
            "no data hall runs, the thermal model extrapolated to it")


def positions_note(model, recipe) -> str | None:
    """A note when ``recipe.seq_len`` passes the model's position limit (max_position_embeddings): a
    context extension, priced at that length; the run's own RoPE scaling, or the rows a learned position
    table adds (left out of the parameter count), are not the model's."""
    if not 0 < model.max_positions < recipe.seq_len:
        return None
    return (f"seq_len {recipe.seq_len:,} is past {model.display_name}'s {model.max_positions:,} positions "
            "(max_position_embeddings): a context extension, priced at that length; "
            + ("the rows its learned position table gains are left out of the parameter count" if model.learned_positions
               else "the RoPE scaling that extends it is the run's to set"))


def window_cp_note(model, recipe) -> str | None:
    """A note when the model's sliding-window layers keep the search at CP 1 (a long sequence answered
    without context parallelism: costmodel.context_parallel_rules.window_blocks_cp)."""
    from ..context_parallel_rules import window_blocks_cp
    if not window_blocks_cp(model, recipe):
        return None
    return (f"every layout runs at CP 1: {model.display_name}'s sliding-window layers ({model.sliding_window:,} tokens) "
            f"run under Transformer Engine's context parallelism only with --cp-comm-type a2a or all_gather, not "
            "the p2p ring the model prices")


def torchtitan_fp8_note(recipe, recipe_flags: dict | None) -> str | None:
    """A note when a torchtitan fp8 run is priced with the stack's tensorwise default without the user
    asking: torchtitan's float8 converter takes rowwise recipes only since 6348d93d1 (2026-04-27,
    components/quantization/float8.py), so today's torchtitan runs another recipe than the one priced."""
    if (recipe.stack != "torchtitan" or recipe.precision != "fp8" or recipe.fp8_recipe != "tensorwise"
            or (recipe_flags or {}).get("fp8_recipe") is not None):
        return None
    return ("fp8 priced with torchtitan's tensorwise float8, its recipe until 6348d93d1 (2026-04-27); today's "
            "torchtitan runs rowwise only (components/quantization/float8.py): --fp8-recipe rowwise prices that")
