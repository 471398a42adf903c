"""The elementwise fusions a Megatron-core run configuration sets (NeMo 1 YAML, Megatron-Bridge YAML), as
the one switch the model prices them by (``fused_elementwise``: the bias + activation kernel and the
rotary-embedding kernel, each fused or eager)."""
from __future__ import annotations

from .errors import InputError

#: the configuration keys of the fusions ``fused_elementwise`` prices (Megatron-core TransformerConfig names)
FUSION_KEYS = ("bias_activation_fusion", "apply_rope_fusion")
#: NeMo 1's defaults where its model section leaves a key out (megatron_base_model.py:
#: cfg.get('bias_activation_fusion', True), cfg.get('apply_rope_fusion', False); NeMo at 8cfedd7)
NEMO1_FUSION_DEFAULTS = {"bias_activation_fusion": True, "apply_rope_fusion": False}


def read_fusions(cfg, path: str, m: dict, defaults: dict | None = None) -> None:
    """Set ``cfg.recipe['fused_elementwise']`` from the model section ``m``'s fusion keys (:data:`FUSION_KEYS`,
    a key it leaves out taken from ``defaults``, else left to the stack): fused where every one is, else
    unfused, with a note where they differ (the switch prices both alike); nothing when no key is given
    and no default.  ``cfg`` is a costmodel.run_config.RunConfig.

    Raises:
        InputError: a fusion key that is not true or false, naming the file and ``model.<key>``.
    """
    given, vals = [], {}
    for k in FUSION_KEYS:
        v = m.get(k)
        if isinstance(v, str) and (v.startswith("${") or v.strip() == "???"):
            v = None                        # an unresolved interpolation: the file does not say
        if v is None:
            if defaults is None or k not in defaults:
                continue
            v = defaults[k]
        elif not isinstance(v, bool):
            raise InputError(path, f"model.{k}", f"{v!r} is not a valid value: expected true or false")
        else:
            given.append(k)
        vals[k] = v
    if not given and not vals:           # nothing said and no defaults: the stack's stands
        return
    cfg.recipe["fused_elementwise"] = all(vals.values())
    said = " and ".join(f"model.{k}" for k in given) or "their absence"
    cfg.where["fused_elementwise"] = f"{path}: {said}" + (" (NeMo 1's defaults for the others)"
                                                        if defaults and len(given) < len(vals) else "")
    if len(set(vals.values())) > 1:
        on = [k for k, v in vals.items() if v]
        cfg.notes.append(f"{path}: {', '.join(on)} fused, {', '.join(k for k, v in vals.items() if not v)} not: "
                         "priced as unfused elementwise kernels (one switch prices both)")
