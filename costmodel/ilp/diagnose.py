"""Infeasibility diagnosis: which limit family (temperature, node power, memory) must rise, and how far."""
from __future__ import annotations

import numpy as np
import pulp

from ..errors import InfeasibleError
from .evaluation import evaluate
from .instance import FEAS_RTOL, Instance, Solution
from .model import _Model

_FAMILIES = ("temperature", "node_power", "memory")


def _temp_digits(inst: Instance) -> int:
    """Decimals of the temperatures a diagnosis prints: 2 where the limit has them (42.55 C), else 1."""
    return 2 if abs(inst.max_temp_c * 10 - round(inst.max_temp_c * 10)) > 1e-9 else 1


def _diagnose(inst: Instance, solver) -> InfeasibleError:
    """Relax each limit family alone (then all together) with a minimised slack; build the error."""
    names = {"temperature": "max temperature", "node_power": "node power budget", "memory": "HBM capacity"}

    # a limit given to the hundredth is printed so, with what it must rise to; a node budget in kW, the
    # unit --node-power-kw takes it in (and the --json record gives it in), to the watt
    def fmt(f, v):
        return (f"{v:.{_temp_digits(inst)}f} C" if f == "temperature" else f"{round(v) / 1e3:g} kW"
                if f == "node_power" else f"{v / 1e9:.3f} GB")

    def rise(f, rel):
        # a temperature rises by degrees (a percentage of degrees Celsius means nothing); the others by share
        return (f"+{rel * _limit(inst, f):.{_temp_digits(inst)}f} C" if f == "temperature"
                else f"+{100 * rel:.2f}%")

    def required_by(sol: Solution, fams):
        o = inst.options[sol.layout_index]
        vals = {"temperature": max(r.temp_c for r in sol.gpus),
                "node_power": max(sum(r.power_w for r in sol.gpus if r.node == q)
                                  for q in {r.node for r in sol.gpus}),
                "memory": float(np.max(o.mem_fixed_bytes + np.array(sol.layers) * o.mem_per_layer_bytes))}
        return {f: max(vals[f], _limit(inst, f)) for f in fams}

    def relaxed(fams):
        m = _Model(inst, relax=fams)
        if m.empty:
            return None
        m.set_bounds()
        if not m.run(pulp.lpSum(m.sig[f] * (1.0 / m.limits[f]) for f in fams), solver):
            return None
        k, caps, layers, blocks = m.decision()
        sol = evaluate(inst, k, caps, layers, blocks)
        return sol, required_by(sol, fams)

    required, relative, layout_of = {}, {}, {}
    for f in _FAMILIES:
        r = relaxed((f,))
        if r is not None:
            required[f] = r[1][f]
            relative[f] = (required[f] - _limit(inst, f)) / _limit(inst, f)
            layout_of[f] = r[0].layout_name
    if required:
        order = sorted(required, key=lambda f: relative[f])
        f = order[0]
        msg = (f"no layout meets the limits: {names[f]} {fmt(f, _limit(inst, f))} must rise to "
               f"{fmt(f, required[f])} ({rise(f, relative[f])}, layout {layout_of[f]!r})")
        others = [f"{names[g]} {fmt(g, _limit(inst, g))} -> {fmt(g, required[g])} ({rise(g, relative[g])})"
                  for g in order[1:]]
        if others:
            msg += "; alternatively " + ", ".join(others)
        return InfeasibleError(f, msg, required, relative)
    r = relaxed(_FAMILIES)
    if r is None:  # cannot happen for a validated instance
        return InfeasibleError("unknown", "no layout meets the limits, even with every limit relaxed")
    sol, req = r
    fams = [f for f in _FAMILIES if req[f] > _limit(inst, f) * (1 + FEAS_RTOL)]
    rel = {f: (req[f] - _limit(inst, f)) / _limit(inst, f) for f in fams}
    msg = ("no layout meets the limits and no single limit suffices: " +
           ", ".join(f"{names[f]} {fmt(f, _limit(inst, f))} must rise to {fmt(f, req[f])} ({rise(f, rel[f])})"
                     for f in fams) + f" (layout {sol.layout_name!r})")
    return InfeasibleError("+".join(fams), msg, {f: req[f] for f in fams}, rel)


def _limit(inst: Instance, family: str) -> float:
    return {"temperature": inst.max_temp_c, "node_power": inst.node_power_budget_w,
            "memory": inst.hbm_bytes}[family]
