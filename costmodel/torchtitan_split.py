"""torchtitan's own split of a model's layers over its pipeline stages, as a run that names no stages gets it.

Since April 2025 (pytorch/torchtitan PR 1103, "refactor PP auto-split algorithm"; today
torchtitan/distributed/pipeline_parallel.py ``_generate_llm_fqn_per_model_part``) torchtitan counts the
embedding as ``pipeline_parallel_first_stage_less_layers`` layers and the output as
``pipeline_parallel_last_stage_less_layers`` (1 each by default), spreads the L + both evenly over the
PP x VP virtual stages (one stage per rank for a single-stage schedule, two for a multi-stage one unless
``pipeline_parallel_layers_per_stage`` says), gives the remainder to the first stages, and takes the
embedding's and the output's weights off the first and the last stage.  Before it, torchtitan split the
L layers alone, the remainder to the middle stages.
"""
from __future__ import annotations

from .errors import InputError


def torchtitan_split(num_layers: int, stages: int, first_less: int = 1, last_less: int = 1) -> list[int]:
    """Transformer layers of each virtual stage in model order (length ``stages``, summing to
    ``num_layers``) as torchtitan splits them (module docstring).

    Raises:
        ValueError: where torchtitan refuses the split: more stages than weighted layers, or a weight
            above the layers of a stage (its own checks).
    """
    if stages == 1:
        return [num_layers]
    eff = num_layers + first_less + last_less
    per, extra = divmod(eff, stages)
    if per == 0 or first_less > per or last_less > per:
        raise ValueError(f"torchtitan refuses {stages} stages of {num_layers} layers with the embedding weighed "
                         f"{first_less} and the output {last_less} layers ({eff} effective layers)")
    out = [per + (s < extra) for s in range(stages)]
    out[0] -= first_less
    out[-1] -= last_less
    return out


def torchtitan_layout_text(num_layers: int, pp: int, vp: int, mtp_layers: int, first_less: int, last_less: int,
                           where: str) -> str:
    """torchtitan's split of ``num_layers`` over PP x VP virtual stages as a pipeline layout
    (costmodel.pipeline_layout: one '|' segment per virtual stage in model order, 'E' the embedding on the
    first, the MTP modules and 'L' the loss on the last), which prices it as the run's own split.

    Raises:
        InputError: a split torchtitan refuses (names ``where``, the file's keys).
    """
    try:
        split = torchtitan_split(num_layers, pp * vp, first_less, last_less)
    except ValueError as e:
        raise InputError(where, "", str(e)) from None
    segs = ["t" * n for n in split]
    segs[0], segs[-1] = "E" + segs[0], segs[-1] + "m" * mtp_layers + "L"
    return "|".join(segs)
