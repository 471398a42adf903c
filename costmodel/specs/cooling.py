"""How a cluster's nodes are cooled (cluster YAML ``cooling:``): the slots, the air or coolant path
between them and the inlet temperature, as costmodel.thermal uses them."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .loading import _get, _get_str


@dataclass(frozen=True)
class CoolingSpec:
    """How a node is cooled (cluster YAML ``cooling:``), per GPU slot in local-rank order.

    Attributes:
        type: 'air' or 'liquid'; airflow: e.g. 'front-to-back'.
        inlet_temp_c: coolant/air inlet temperature, C.
        r_th_scale: per slot, multiplier of the GPU's junction-to-inlet thermal resistance.
        rows: per slot, position name ('front', 'rear', ...).
        upstream: per slot, tuple of slots whose exhaust air reaches it first.
        preheat_c_per_w: inlet rise of a slot per W dissipated by each upstream slot, C/W
            (1 / (rho c_p V_dot) of the air stream; 0 for liquid cooling).
    """

    type: str
    airflow: str | None
    inlet_temp_c: float
    r_th_scale: tuple
    rows: tuple
    upstream: tuple
    preheat_c_per_w: float



#: inlet temperatures a cooling system delivers, C: from a -20 C outdoor-air economiser intake to a
#: 60 C warm-water loop (ASHRAE TC 9.9 thermal guidelines: air classes A1-A4 up to 45 C, liquid classes
#: W+ above 45 C)
INLET_RANGE_C = (-20.0, 60.0)
#: the inlet temperatures equipment is rated for, C, by cooling type (ASHRAE TC 9.9, "Thermal Guidelines
#: for Data Processing Environments", 5th ed., 2021): air, the allowable ranges of classes A1-A4 (A1
#: 15-32, A2 10-35, A3 5-40, A4 5-45 C); liquid, its facility-water classes W17-W+ (from 2 C; W45 to 45 C,
#: W+ above, to the 60 C warm-water loop of INLET_RANGE_C).  An inlet outside is a scenario, not a hall
RATED_INLET_C = {"air": (5.0, 45.0), "liquid": (2.0, 60.0)}


#: a slot's position label (reports only: the inlet rise comes from ``upstream`` and ``preheat_c_per_w``)
SLOT_ROWS = ("front", "middle", "rear", "coldplate")
#: the direction air crosses the chassis
AIRFLOWS = ("front-to-back", "back-to-front")


def _upstream_cycle(up: list) -> list:
    """A circle of slots in the ``upstream`` lists (slot i's list names the slots whose exhaust reaches
    it), as [a, b, ..., a], or [] when the heating runs one way."""
    state = [0] * len(up)                       # 0 unseen, 1 on the current path, 2 done
    path: list = []

    def visit(i):
        state[i] = 1
        path.append(i)
        for j in up[i]:
            if state[j] == 1:
                return path[path.index(j):] + [j]
            if state[j] == 0:
                found = visit(j)
                if found:
                    return found
        state[i] = 2
        path.pop()
        return []
    for i in range(len(up)):
        if state[i] == 0:
            found = visit(i)
            if found:
                return found
    return []


def _cooling(c: dict, ctype: str, gpus_per_node: int, w: str) -> CoolingSpec:
    """Parse a cluster's ``cooling:`` section (hardware/README.md); slots default to identical.

    Raises:
        InputError: a slot list whose length is not gpus_per_node, a bad upstream index, a negative
            preheat, air cooling with upstream slots but no preheat coefficient, or a preheat
            coefficient without upstream slots.
    """
    inlet = _get(c, "inlet_temp", w, "celsius", prefix="cooling.", positive=False)
    if not INLET_RANGE_C[0] <= inlet <= INLET_RANGE_C[1]:
        raise InputError(w, "cooling.inlet_temp", f"{c['inlet_temp']!r} is not a coolant temperature a data centre "
                         f"runs: it must be between {INLET_RANGE_C[0]:g} and {INLET_RANGE_C[1]:g} C (air inlets of "
                         "ASHRAE's classes reach 45 C, warm-water loops 60 C)")
    slots = c.get("slots")
    if slots is None:
        scale, rows = (1.0,) * gpus_per_node, ("",) * gpus_per_node
    else:
        if not isinstance(slots, list) or len(slots) != gpus_per_node:
            raise InputError(w, "cooling.slots", f"expected a list of {gpus_per_node} slots (one per GPU), "
                             f"got {len(slots) if isinstance(slots, list) else type(slots).__name__}")
        scale, rows = [], []
        for i, s in enumerate(slots):
            if not isinstance(s, dict):
                raise InputError(w, f"cooling.slots[{i}]", "expected a mapping with row and r_th_scale")
            # a slot runs at most a few times the reference resistance (measured rear slots: 1.1-1.3x)
            scale.append(_get(s, "r_th_scale", w, prefix=f"cooling.slots[{i}].", required=False, default=1.0,
                              maximum=10.0))
            rows.append(_get_str(s, "row", w, SLOT_ROWS, required=False, default="", prefix=f"cooling.slots[{i}]."))
        scale, rows = tuple(scale), tuple(rows)
    up = c.get("upstream", [[] for _ in range(gpus_per_node)])
    if not isinstance(up, list) or len(up) != gpus_per_node or not all(isinstance(u, list) for u in up):
        raise InputError(w, "cooling.upstream", f"expected {gpus_per_node} lists of upstream slot indices")
    for i, u in enumerate(up):
        for j in u:
            if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < gpus_per_node or j == i:
                raise InputError(w, f"cooling.upstream[{i}]", f"{j!r} is not another slot index 0..{gpus_per_node - 1}")
    loop = _upstream_cycle(up)
    if loop:
        raise InputError(w, "cooling.upstream", f"slots {' -> '.join(map(str, loop))} heat each other in a circle: air "
                         "(or coolant) runs one way, so a slot cannot be upstream of a slot upstream of it")
    # an upstream GPU's watt warms the air behind it by hundredths of a C: above 1 C/W is a typo
    pre = _get(c, "preheat_c_per_w", w, prefix="cooling.", positive=False, required=False, default=0.0, maximum=1.0)
    if pre < 0:
        raise InputError(w, "cooling.preheat_c_per_w", f"must be >= 0, got {pre}")
    if ctype == "air" and any(up) and pre == 0 and "preheat_c_per_w" not in c:
        raise InputError(w, "cooling.preheat_c_per_w", "missing: air cooling with upstream slots needs it")
    if pre > 0 and "upstream" not in c:
        # a coefficient without the slots it applies to would preheat nothing, silently (an explicit list
        # of empty lists says no slot is behind another)
        raise InputError(w, "cooling.upstream", f"missing: preheat_c_per_w {pre:g} C/W needs the slots whose exhaust "
                         "reaches each slot (one list per slot; [] for a front slot)")
    airflow = _get_str(c, "airflow", w, AIRFLOWS, required=False, prefix="cooling.")
    if airflow is not None and ctype != "air":
        raise InputError(w, "cooling.airflow", f"is an air-cooling field; this cluster's cooling is {ctype}")
    return CoolingSpec(type=ctype, airflow=airflow, inlet_temp_c=inlet, r_th_scale=scale,
                       rows=rows, upstream=tuple(tuple(u) for u in up), preheat_c_per_w=pre)
