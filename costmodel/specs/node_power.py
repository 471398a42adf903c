"""A cluster node's power: its rating, its non-GPU share and the GPU power limit its site enforces
(the ``power:`` section of hardware/clusters/*.yaml, hardware/README.md)."""
from __future__ import annotations

from ..errors import InputError
from .loading import _check_sources, _get, _get_int

#: the keys of a cluster file's ``power:`` section
POWER_KEYS = ("node_power_budget", "node_other_power", "gpu_power_limit")


def node_power(power: dict, d: dict, gpu, w: str) -> dict:
    """The power fields of a ClusterSpec: ``node_power_budget_w``, ``node_other_power_w`` with
    ``node_other_power_source`` (:func:`_node_other_power`) and ``gpu_power_limit_w``
    (:func:`_gpu_power_limit`), W.

    Raises:
        InputError: as those two, naming the file ``w`` and the field.
    """
    return dict(node_power_budget_w=_get(power, "node_power_budget", w, "watts", prefix="power."),
                gpu_power_limit_w=_gpu_power_limit(power, d, gpu, w), **_node_other_power(power, d, gpu, w))


def _gpu_power_limit(power: dict, d: dict, gpu, w: str) -> float | None:
    """The per-GPU power limit the site holds its GPUs to (``power.gpu_power_limit``, W: nvidia-smi's
    'Current Power Limit' where an administrator set it below the default, or what a shared module
    limit leaves the GPU, e.g. a GH200 superchip's limit less its Grace CPU); None when not given
    (the GPU's TDP, its default limit).

    Raises:
        InputError: not a power, outside the GPU's settable range (its ``power_limit_min`` .. TDP,
            as nvidia-smi -pl refuses), or without its ``sources`` line.
    """
    v = _get(power, "gpu_power_limit", w, "watts", required=False, prefix="power.")
    if v is None:
        return None
    lo = gpu.power_limit_min_w or 0.0
    if not lo < v <= gpu.tdp_w:
        raise InputError(w, "power.gpu_power_limit", f"{power['gpu_power_limit']!r} is outside {gpu.name}'s settable "
                         f"range: above its lowest limit {lo:g} W and at most its {gpu.tdp_w:g} W TDP")
    _check_sources(d, w, ["power.gpu_power_limit"])
    return v


def _node_other_power(power: dict, d: dict, gpu, w: str) -> dict:
    """``node_other_power_w`` and its source (ClusterSpec docstring).

    Raises:
        InputError: a rating that cannot feed the node's GPUs at their lowest power limit, a stated
            value that is negative, not a power or leaves the GPUs less than that, a stated value
            without its ``sources`` line, or a derived value below 0 (a node rating below its GPUs' TDP).
    """
    budget = _get(power, "node_power_budget", w, "watts", prefix="power.")
    G = _get_int(d, ("gpus_per_node",), w)
    least = gpu.power_limit_min_w or gpu.idle_power_w or 0.0     # what a GPU draws at the least it can be held to
    if budget <= G * least:
        bare = " (a bare number reads as watts: write the unit, e.g. 10.2kW)" if isinstance(
            power["node_power_budget"], (int, float)) else ""
        raise InputError(w, "power.node_power_budget", f"{budget:g} W cannot feed the {G} GPUs even at their lowest "
                         f"power limit ({G} x {least:g} W){bare}")
    if "node_other_power" in power:
        v = _get(power, "node_other_power", w, "watts", prefix="power.", positive=False)
        if v < 0 or budget - v < G * least:
            raise InputError(w, "power.node_other_power", f"{power['node_other_power']!r} must be >= 0 and leave the "
                             f"{G} GPUs at least their lowest power limit ({G} x {least:g} W) of power.node_power_budget "
                             f"({budget:g} W)")
        _check_sources(d, w, ["power.node_other_power"])
        return dict(node_other_power_w=v, node_other_power_source=str(d["sources"]["power.node_other_power"]))
    v = budget - G * gpu.tdp_w
    if v < 0:
        raise InputError(w, "power.node_power_budget", f"{budget:g} W is below the {G} GPUs' TDP ({G} x {gpu.tdp_w:g} "
                         "W): state power.node_other_power (with its source) or correct the rating")
    return dict(node_other_power_w=v, node_other_power_source=(
        f"DERIVED: power.node_power_budget {budget / 1e3:g} kW - {G} x {gpu.tdp_w:g} W GPU TDP, the node "
        "rating's non-GPU share (an upper bound where the rating is a datasheet maximum; see that field's source)"))
