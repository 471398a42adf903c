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
    if per == 0:
        raise ValueError(f"torchtitan refuses {stages} stages of {num_layers} layers with the embedding weighed "
                         f"{first_less} and the output {last_less} layers: {eff} effective layers leave a stage none")
    for name, w in (("input_weight", first_less), ("output_weight", last_less)):
        if w > per:         # torchtitan's own check and words (distributed/pipeline_parallel.py)
            raise ValueError(f"{name} ({w}) exceeds minimum layers per stage ({per})")
    out = [per + (s < extra) for s in range(stages)]
    out[0] -= first_less
    out[-1] -= last_less
    return out


def checked_stages_per_rank(stages: int, pp: int, multi: bool, path: str, key: str, what: str = "") -> int:
    """Virtual stages per rank of ``stages`` on PP ``pp`` as torchtitan accepts them: one a rank under a
    single-stage schedule (1F1B), two or more under a multi-stage one (Interleaved1F1B, ``multi``), PP
    dividing them (distributed/pipeline_parallel.py).  ``what``: the stages' size, for the message.

    Raises:
        InputError: a count torchtitan refuses (names ``path`` and ``key``).
    """
    per, bad = divmod(stages, pp)
    if bad or (not multi and per != 1) or (multi and per < 2):
        raise InputError(path, key, f"{stages} stages{what} on PP {pp} under {'Interleaved1F1B' if multi else '1F1B'}: "
                         "torchtitan runs " + ("two or more stages a rank, PP dividing them" if multi
                                               else "one stage a rank"))
    return per


def stages_per_rank(spec: dict, num_layers: int, pp: int) -> int | None:
    """Virtual stages per rank of a torchtitan file's split (``spec``: costmodel.run_config.RunConfig.stage_split)
    where its ``pipeline_parallel_layers_per_stage`` sets them: ceil((L + weights) / layers per stage) stages,
    which PP must divide (one a rank under 1F1B, two or more under Interleaved1F1B); None where the file
    gives the stages otherwise.

    Raises:
        InputError: a count torchtitan refuses (names the key, as torchtitan's own checks say it).
    """
    lps = spec.get("layers_per_stage")
    if spec["kind"] != "weights" or not lps:
        return None
    stages = -(-(num_layers + spec["first"] + spec["last"]) // lps)
    return checked_stages_per_rank(stages, pp, spec["multi"], spec["where"].split(": ", 1)[0], spec["lps_key"],
                                   f" of {lps}")


def stage_layout_text(spec: dict, num_layers: int, pp: int, vp: int, mtp_layers: int = 0) -> str:
    """A torchtitan file's split (``spec``: costmodel.run_config.RunConfig.stage_split) of ``num_layers`` over
    PP x VP virtual stages as a pipeline layout (costmodel.pipeline_layout: one '|' segment per virtual stage in
    model order, 'E' the embedding on the first, the MTP modules and 'L' the loss on the last), which prices it
    as the run's own split: the stages it names, or torchtitan's own split (:func:`torchtitan_split`).

    Raises:
        InputError: a split torchtitan refuses, or split points past the layers (naming the file's key).
    """
    path, key = spec["where"].split(": ", 1)
    if spec["kind"] == "counts":
        split = list(spec["counts"])
    elif spec["kind"] == "points":
        ends = [*spec["points"], num_layers]
        if ends[-2] >= num_layers:
            raise InputError(path, key, f"splits at layers.{ends[-2]}, past the model's {num_layers} layers")
        split = [b - a for a, b in zip([0, *spec["points"]], ends)]
    else:
        try:
            split = torchtitan_split(num_layers, pp * vp, spec["first"], spec["last"])
        except ValueError as e:
            raise InputError(path, spec["weight_keys"], str(e)) from None
    segs = ["t" * n for n in split]
    segs[0], segs[-1] = "E" + segs[0], segs[-1] + "m" * mtp_layers + "L"
    return "|".join(segs)
