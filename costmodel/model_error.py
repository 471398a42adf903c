"""The model-form error: how far the cost model itself is from published runs, by regime.

The fit residuals of a profile (costmodel.uncertainty) say how well the fitted parameters reproduce
their microbenchmarks; they say nothing of what the model leaves out.  ``costmodel validate`` does:
on published runs the step-time deviation of a regime (training stack, GPU generation, model size
or MoE),
relative to the prediction, is the model-form error of predictions in that regime.  Its one-sigma
value is the 68.27th percentile of the regime's absolute relative deviations (the half-width that holds a normal's one-sigma
share, with no assumption that the errors are centred: a biased model gets a wider band).  The band
of a prediction combines it with the fit residuals in quadrature (independent sources).

``python -m costmodel.fit.model_form`` measures it on the dev sets and writes
hardware/model_form.yaml; a regime with fewer than :data:`MIN_ROWS` rows falls back to
(stack, generation), then generation, then all rows (an MoE regime first to every MoE row).  The dev sets are used for this estimate and
for validation only, never to tune a prediction.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from pathlib import Path

import numpy as np
import yaml

from .errors import InputError
from .specs import hardware_dir
from .files import read_text

ONE_SIGMA_QUANTILE = 68.27   # percent of a normal distribution within one sigma
MIN_ROWS = 5
_SIZES = ((3e9, "<3B"), (30e9, "3-30B"), (float("inf"), ">30B"))


def generation(gpu) -> str:
    """GPU generation of a GpuSpec: its file's ``architecture`` (``hopper`` for an H100; costmodel.specs.hardware
    ARCHITECTURES), whatever the file is called."""
    return gpu.architecture


def size_class(params: float) -> str:
    """Model size class by parameter count: ``<3B``, ``3-30B`` or ``>30B``."""
    return next(name for limit, name in _SIZES if params < limit)


def regime(stack: str, gpu, params: float, moe: bool = False) -> tuple:
    """The regime of a prediction: (stack, GPU generation, size class); an MoE model's class is
    ``moe`` (its routing costs err apart from a dense model of its size)."""
    return (stack, generation(gpu), "moe" if moe else size_class(params))


def _levels(reg: tuple) -> tuple:
    """The table keys of a regime, finest first: an MoE regime falls back to every MoE row before the
    dense rows of its stack and generation (routing costs err apart from a dense model's)."""
    st, gen, size = reg
    return (f"{st}/{gen}/{size}",) + (("moe",) if size == "moe" else ()) + (f"{st}/{gen}", gen, "all")


def estimate(regimes: list, rel_errors: list) -> dict:
    """Model-form sigma per regime and per fallback level from validate's rows.

    Args:
        regimes: one :func:`regime` tuple per used row.
        rel_errors: the rows' step-time deviations relative to the prediction, (meas - pred) / pred (the
            band is +/- sigma x the predicted step time).
    Returns:
        ``{key: {"sigma_rel": s, "n": n}}`` with keys ``"stack/generation/size"``,
        ``"stack/generation"``, ``"generation"`` and ``"all"``, and ``"moe"`` (every MoE row) (levels
        with >= MIN_ROWS rows); the dense levels (stack/generation, generation) count dense rows only.
    """
    groups: dict = {}
    for reg, e in zip(regimes, rel_errors):
        # an MoE row measures routing costs a dense model has not: it sets the MoE levels and the
        # overall one, never a dense model's stack/generation or generation level
        keys = _levels(reg)
        if reg[2] == "moe":
            keys = [k for k in keys if k in (f"{reg[0]}/{reg[1]}/moe", "moe", "all")]
        for key in keys:
            groups.setdefault(key, []).append(abs(e))
    return {k: {"sigma_rel": round(float(np.percentile(v, ONE_SIGMA_QUANTILE)), 4), "n": len(v)}
            for k, v in sorted(groups.items()) if len(v) >= MIN_ROWS}


@dataclass(frozen=True)
class ModelFormError:
    """The measured model-form error table (hardware/model_form.yaml).

    Attributes:
        table: key (see :func:`estimate`) -> {"sigma_rel", "n"}.
        path: the file it was read from.
    """

    table: dict
    path: str

    def sigma(self, reg: tuple) -> tuple:
        """(relative sigma, the table key that gave it, its row count) for a regime, falling back from
        the full regime to every MoE row (an MoE regime), (stack, generation), generation, then all
        rows; (0.0, None, 0) when the table is empty.  A GPU generation no published run measured
        takes the widest sigma of the measured generations, not the mean of them all: nothing shows
        that the model errs less on it (its key then reads ``unmeasured <gen>: as <widest>``)."""
        for key in _levels(reg):
            if key in self.table:
                if key == "all" and reg[2] != "moe":
                    gens = {k: v for k, v in self.table.items() if "/" not in k and k not in ("all", "moe")}
                    if gens:
                        widest = max(gens, key=lambda k: gens[k]["sigma_rel"])
                        return gens[widest]["sigma_rel"], f"unmeasured {reg[1]}: as {widest}", gens[widest]["n"]
                return self.table[key]["sigma_rel"], key, self.table[key]["n"]
        return 0.0, None, 0


@lru_cache(maxsize=None)
def load_model_form(path: str | None = None) -> ModelFormError:
    """Read the model-form error table (default: the built-in hardware/model_form.yaml).

    Raises:
        InputError: the file is missing or malformed (names the file and the field).
    """
    p = Path(path) if path else hardware_dir() / "model_form.yaml"
    try:
        d = yaml.safe_load(read_text(p))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise InputError(p, "", f"cannot read the model-form error table ({e})") from None
    table = d.get("sigma") if isinstance(d, dict) else None
    if not isinstance(table, dict):
        raise InputError(p, "sigma", "missing: expected a mapping of regime -> {sigma_rel, n}")
    for k, v in table.items():
        if not (isinstance(v, dict) and isinstance(v.get("sigma_rel"), (int, float)) and v["sigma_rel"] >= 0
                and isinstance(v.get("n"), int)):
            raise InputError(p, f"sigma.{k}", "expected {sigma_rel: number >= 0, n: integer}")
    # read-only: the loader is cached, so a caller's edit would change every later band of the process
    frozen = MappingProxyType({k: MappingProxyType(dict(v)) for k, v in table.items()})
    return ModelFormError(table=frozen, path=str(p))
