"""The ``costmodel predict`` command that prices an answer of ``recommend``: the layout, the recipe
switches that differ from the stack's defaults, the pipeline's own split, under an energy answer the
per-stage caps and the device order, and the conditions recommend was given (cluster what-ifs, memory
headroom, profile, cooling inlet), so that pasting it reproduces the number recommend printed."""
from __future__ import annotations

import shlex

from .layout_fields import FIELD_SPECS
from .pipeline_layout import layout_text
from .recipe_switches import RECIPE_SWITCHES
from .stacks import get_stack, stack_recipe


def _switch_args(recipe, layout: dict, model, gpu) -> list:
    """The flags of the recipe switches whose value differs from what ``--stack`` alone gives on ``gpu``,
    leaving out the ones the layout or precision leaves idle (predict refuses them there)."""
    from .report import idle_switches
    base = stack_recipe(get_stack(recipe.stack), recipe.gbs, recipe.seq_len, recipe.precision, gpu=gpu)
    idle = idle_switches(layout, "")
    out = []
    for sw in RECIPE_SWITCHES:
        v, d = getattr(recipe, sw.name), getattr(base, sw.name)
        if v == d or (sw.moe and not model.is_moe) or sw.name in idle:
            continue
        if sw.name in ("fp8_recipe", "fp8_param_gather") and recipe.precision != "fp8":
            continue
        if sw.name == "attention_kernel" and not recipe.flash_attention:
            continue
        if sw.kind == "bool":
            out.append(sw.flag_for(bool(v)))
        elif sw.kind == "modules":
            out.append(f"{sw.cli_flag} {','.join(recipe.recomputed)}")
        else:
            out.append(f"{sw.cli_flag} {v:g}" if isinstance(v, float) else f"{sw.cli_flag} {v}")
    return out


def condition_args(fabric_flags: dict | None = None, profile_arg: str | None = None,
                   inlet_temp_c: float | None = None) -> list:
    """The flags of the conditions a prediction was made under, as ``predict`` takes them: the cluster
    what-ifs and memory headroom (costmodel.cli.common.with_fabric_flags: --scale-out-gbps,
    --oversubscription, --sharp/--no-sharp, --domain-gpus, --mem-headroom), the profile file and the
    cooling inlet."""
    out = []
    for k, v in (fabric_flags or {}).items():
        if v is None:
            continue
        flag = "--" + k.replace("_", "-")
        out.append((flag if v else "--no-" + flag[2:]) if isinstance(v, bool) else f"{flag} {v:g}")
    if profile_arg:
        out.append(f"--profile {shlex.quote(str(profile_arg))}")
    if inlet_temp_c is not None:
        out.append(f"--inlet-temp-c {inlet_temp_c:g}")
    return out


def predict_command(model_arg: str, cluster_arg: str, nodes, model, recipe, gpu, layout: dict, layers=None,
                    caps_w=None, device_order: str = "", conditions=()) -> str:
    """The ``costmodel predict`` command line (one string, shell-quoted) for ``layout`` of ``model`` under
    ``recipe`` on the cluster ``cluster_arg`` (``nodes`` given or None), with the pipeline's own split
    ``layers`` (transformer layers per rank, or None for the even split), per-stage ``caps_w`` (W),
    ``device_order`` (``predict --device-order`` arguments, costmodel.report.device_order_flags) and the
    ``conditions`` it was priced under (:func:`condition_args`)."""
    a = ["costmodel predict", f"--model {shlex.quote(str(model_arg))}", f"--cluster {shlex.quote(str(cluster_arg))}"]
    if nodes is not None:
        a.append(f"--nodes {nodes}")
    a += [f"--gbs {recipe.gbs}", f"--seq-len {recipe.seq_len}", f"--precision {recipe.precision}",
          f"--stack {recipe.stack}"]
    for k in ("tp", "pp", "dp", "cp", "ep", "vp", "mbs", "recompute", "zero"):
        if k != "ep" or model.is_moe:
            a.append(f"{FIELD_SPECS[k].cli_flag} {layout[k]}")
    if model.is_moe and (layout.get("etp") or layout["tp"]) != layout["tp"]:
        a.append(f"--etp {layout['etp']}")
    if layout.get("recompute_num_layers"):
        a.append(f"--recompute-num-layers {layout['recompute_num_layers']}")
    if layout.get("dp_replicate", 1) > 1:
        a.append(f"--dp-replicate {layout['dp_replicate']}")
    if layout["tp"] > 1:
        a.append(FIELD_SPECS["sp"].flag_for(bool(layout["sp"])))
    if not layout.get("overlap", True):
        a.append("--no-overlap")
    if layers and layout["pp"] > 1:
        a.append(f"--pp-layout {shlex.quote(layout_text(layers, layout['pp'], layout['vp'], model.mtp_layers))}")
    a += _switch_args(recipe, layout, model, gpu)
    if caps_w is not None:
        a.append("--power-cap-w " + ",".join(f"{x:g}" for x in caps_w))
    if device_order:
        a.append(device_order)
    return " ".join(a + list(conditions))
