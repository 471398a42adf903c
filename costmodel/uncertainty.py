"""The +/- band of a predicted step time, from the fit residuals recorded in the profile.

Each term of the step-time breakdown (costmodel/schedule.py) is driven by one fitted parameter set,
and the profile records how well that set reproduced its measurements (``fit.median_rel_err``, and
for collectives ``fit.median_rel_err_ge_1MiB``, written by costmodel/fit/primitives.py ``fit_stats``).
For residuals spread like a normal distribution, sigma = 1.4826 x the median absolute relative
residual (the MAD estimator, Rousseeuw & Croux 1993, JASA 88:1273), so each term gets
sigma_term = 1.4826 x median_rel_err of its fit, and, the fits being independent,

    band_s = sqrt(sum_terms (term_s x sigma_term)^2)          (one sigma)

Terms and the fit that drives them: compute and bubble (the GEMM fit of the recipe's dtype), the
optimizer step (HBM efficiency fit), TP (all-reduce, or all-gather/reduce-scatter with SP), CP
(send/recv), EP (all-to-all), PP (send/recv) and DP (all-reduce, or reduce-scatter with ZeRO >= 1)
communication, each in the scope its group spans (intra-node if it fits in a node).  An entry
without a ``fit`` that is derived from another GPU's fitted entry borrows that fit's sigma (the
transfer between GPUs adds error the band cannot know); one with neither contributes no sigma and
is listed in ``unfitted``: the band then understates the uncertainty, and the report says so.

The fit residuals say nothing of what the model leaves out: the model-form error of the
prediction's regime, measured on published runs (costmodel.model_error), joins them in quadrature.
"""
from __future__ import annotations

from dataclasses import dataclass

from .specs import Profile


@dataclass(frozen=True)
class Band:
    """One-sigma band of a step time.

    Attributes:
        band_s: the +/- half-width, seconds.
        rel: band_s / step_time_s: fit_rel and model_form_rel in quadrature.
        sigma: term -> relative sigma used (only terms with a fit).
        unfitted: terms whose parameters carry no fit residuals (not in the band).
        fit_rel: the fit residuals' part (module docstring).
        model_form_rel: the model-form error of the prediction's regime (costmodel.model_error).
        model_form_key: the regime table entry it came from (None without one).
    """

    band_s: float
    rel: float
    sigma: dict
    unfitted: tuple
    fit_rel: float = 0.0
    model_form_rel: float = 0.0
    model_form_key: str | None = None


def step_time_band(breakdown: dict, layout: dict, gpus_per_node: int, profile: Profile, dtype: str,
                   model_form: tuple = (0.0, None, 0)) -> Band:
    """One-sigma band of a step time from the profile's fit residuals (module docstring).

    Args:
        breakdown: term -> seconds (``report.record(...)["breakdown"]``).
        layout: the layout row (tp, pp, dp, cp, ep, sp, zero).
        gpus_per_node: of the cluster (which scope each group spans).
        profile: the profile (its ``fit_sigma``: costmodel/specs/profile.py ``fit_sigma``).
        dtype: GEMM dtype of the recipe (bf16, fp16, fp8).
        model_form: (relative sigma, table key, rows) of the regime (costmodel.model_error
            ``ModelFormError.sigma``), combined with the fit part in quadrature.
    Returns:
        :class:`Band`.
    """
    sig = profile.fit_sigma

    def coll(c, size, stride):
        scope = "intra_node" if size * stride <= gpus_per_node else "inter_node"
        # a group size the profile fitted on its own has its own residuals
        return sig.get(f"comm.{scope}.{c}.by_group_size.{size}", sig.get(f"comm.{scope}.{c}"))
    tp, cp, ep, dp, pp = (int(layout.get(k, 1)) for k in ("tp", "cp", "ep", "dp", "pp"))
    gemm = sig.get(f"gemm.{dtype}")
    sources = {
        "compute_s": gemm, "bubble_s": gemm, "optimizer_s": sig.get("hbm"),
        "tp_comm_s": coll("all_gather" if layout.get("sp") else "all_reduce", tp, 1),
        "cp_comm_s": coll("send_recv", cp, tp),
        "ep_comm_s": coll("all_to_all", ep, tp * cp),
        "pp_comm_s": coll("send_recv", 2, tp * cp * dp) if pp > 1 else None,
        "dp_comm_s": coll("reduce_scatter" if int(layout.get("zero", 0)) >= 1 else "all_reduce", dp, tp * cp),
    }
    sigma, unfitted, var = {}, [], 0.0
    for term, sec in breakdown.items():
        if sec <= 0:
            continue
        s = sources.get(term)
        if s is None:
            unfitted.append(term)
            continue
        sigma[term] = s
        var += (sec * s) ** 2
    total = sum(breakdown.values())
    fit_rel = var ** 0.5 / total if total > 0 else 0.0
    mf_rel, mf_key, _ = model_form
    rel = (fit_rel ** 2 + mf_rel ** 2) ** 0.5
    return Band(band_s=rel * total, rel=rel, sigma=sigma, unfitted=tuple(unfitted), fit_rel=fit_rel,
                model_form_rel=mf_rel, model_form_key=mf_key)
