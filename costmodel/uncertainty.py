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
"""
from __future__ import annotations

from dataclasses import dataclass

from .specs import Profile
from .specs.profile import MAD_TO_SIGMA  # noqa: F401  (the band's sigma per median residual)


@dataclass(frozen=True)
class Band:
    """One-sigma band of a step time.

    Attributes:
        band_s: the +/- half-width, seconds.
        rel: band_s / step_time_s.
        sigma: term -> relative sigma used (only terms with a fit).
        unfitted: terms whose parameters carry no fit residuals (not in the band).
    """

    band_s: float
    rel: float
    sigma: dict
    unfitted: tuple


def step_time_band(breakdown: dict, layout: dict, gpus_per_node: int, profile: Profile, dtype: str) -> Band:
    """One-sigma band of a step time from the profile's fit residuals (module docstring).

    Args:
        breakdown: term -> seconds (``report.record(...)["breakdown"]``).
        layout: the layout row (tp, pp, dp, cp, ep, sp, zero).
        gpus_per_node: of the cluster (which scope each group spans).
        profile: the profile (its ``fit_sigma``: costmodel/specs/profile.py ``fit_sigma``).
        dtype: GEMM dtype of the recipe (bf16, fp16, fp8).
    Returns:
        :class:`Band`.
    """
    sig = profile.fit_sigma

    def coll(c, size, stride):
        scope = "intra_node" if size * stride <= gpus_per_node else "inter_node"
        return sig.get(f"comm.{scope}.{c}")
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
    band = var ** 0.5
    return Band(band_s=band, rel=band / total if total > 0 else 0.0, sigma=sigma, unfitted=tuple(unfitted))
