"""What a run of a model on a cluster can be priced as, checked where the library prices it (predict_runs,
search) as well as by the CLI: the recipe the model runs (Gemma 2's soft-capped attention unfused on the
Megatron family), the switches the model, the GPU and the stack refuse, and the switches that need a
layout field.  The CLI adds what only its flags can say (a switch named by hand)."""
from __future__ import annotations

from .errors import InputError
from .moe import check_flex_fabric, check_moe_recipe
from .specs import ClusterSpec, ModelSpec, Recipe
from .specs.recipe import recompute_modules_problem
from .stack_rules import check_megatron_rules, softcap_recipe
from .stacks import TE_STACKS, get_stack


def model_recipe(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec) -> Recipe:
    """The recipe ``model`` runs on ``cluster`` under ``recipe``: unfused attention for soft-capped scores
    on the Megatron family (costmodel.stack_rules.softcap_recipe), after refusing what the model, GPU or
    fabric cannot run (costmodel.moe.check_moe_recipe, check_flex_fabric; recompute modules the model
    lacks, costmodel.specs.recipe.recompute_modules_problem).

    Raises:
        InputError: naming the switch and the rule.
    """
    check_moe_recipe(model, recipe, cluster.gpu)
    check_flex_fabric(model, recipe, cluster)
    if recipe.recomputed != ("core_attn",):
        why = recompute_modules_problem(model, recipe.recomputed)
        if why:
            raise InputError("--recompute-modules", "", why)
    return softcap_recipe(model, recipe, {})[0]


def check_layout_switches(recipe: Recipe, layout: dict, is_moe: bool = False, num_layers: int | None = None,
                          modules_given: bool = False, searched: bool = False) -> None:
    """Recipe switches that need a layout field: recompute modules (other than the default, or named by
    hand: ``modules_given``) act under selective recomputation only (but for the layouts a search tries,
    ``searched``: Megatron-core ignores the modules without it, TransformerConfig); the precision-aware
    optimizer is the distributed optimizer's (ZeRO-1/2); an offloaded optimizer is a sharded one; what
    Megatron-LM refuses at start-up (costmodel.stack_rules.check_megatron_rules).

    Raises:
        InputError: naming the switch and what it needs.
    """
    if recipe.optimizer_offload and layout["zero"] == 0:
        raise InputError("--optimizer-offload", "", "offloads the sharded optimizer of ZeRO-1/2/3 (DeepSpeed "
                         "offload_optimizer, Megatron's distributed optimizer): not --zero 0")
    if (modules_given or recipe.recomputed != ("core_attn",) and not searched) and layout["recompute"] != "selective":
        raise InputError("--recompute-modules", "", f"applies to --recompute selective, not {layout['recompute']}")
    if recipe.precision_aware and layout["zero"] not in (1, 2):
        flag = "--main-grads-dtype" if recipe.main_grads_dtype == "bf16" else "--optimizer-states-dtype"
        raise InputError(flag, "", f"bf16 is the precision-aware optimizer, which runs with Megatron's distributed "
                         f"optimizer (--zero 1 or 2), not --zero {layout['zero']}")
    check_megatron_rules(recipe, layout, is_moe, num_layers)


def search_zero_stages(recipe: Recipe) -> tuple:
    """The ZeRO stages a search tries for ``recipe``: the distributed optimizer's (1) under the
    precision-aware optimizer; under optimizer offload a sharded one (Megatron's distributed optimizer,
    not FSDP2, on the TE stacks; ZeRO 1-3 that the stack has elsewhere, DeepSpeed's ZeRO-Offload stage 2
    among them); else the stages the stack's framework has (costmodel.stacks)."""
    if recipe.precision_aware:
        return (1,)
    if recipe.optimizer_offload:
        return (1,) if recipe.stack in TE_STACKS else tuple(z for z in get_stack(recipe.stack).zero_stages if z >= 1)
    return get_stack(recipe.stack).zero_stages
