"""Assemble a profile from a cluster's own measurements (``costmodel calibrate fit``).

:func:`fit_profile` fits every section the measurements cover (one module per section) and keeps the
rest from the base profile; :func:`resolve_gpu` and :func:`base_profile` choose the datasheet and the
base.
"""
from __future__ import annotations

import copy
import re
import time

from costmodel.collective import COLLECTIVES
from costmodel.errors import FitError
from costmodel.specs import ClusterSpec, GpuSpec, list_gpus, load_gpu

from .comm import fit_comm_section
from .gemm import fit_gemm_section
from .hbm import fit_hbm_section
from .measurements import FitReport, Measurements
from .moe import fit_moe_section
from .overlap import fit_overlap_section
from .power import fit_power_section
from .thermal import fit_thermal_section

GENERATED_BY = "costmodel calibrate fit"


def gpu_key_for(name: str | None) -> str | None:
    """Catalog GPU key whose datasheet name matches an NVML/ROCm device name, or None.

    Matching: the key's model token ("H200", "A100", "GH200") as a word of the device name (e.g.
    "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"), or as the start of one where no
    key matches a whole word ("MI250X" -> mi250; "GH200" is not an H200); the form factor must agree (a PCIe or NVL key needs
    the word in the name, a name with it needs such a key); then the key with the most matching
    tokens, ties refused.  A memory size in the name ("A100-PCIE-40GB") other than the key's ("80gb") is
    another card: no match (a superchip's name counts its CPU memory, "NVIDIA GH200 480GB", and is not
    compared).
    """
    if not name:
        return None
    dev = name.upper().replace("-", " ")
    words = dev.split()
    dev_mem = {w for w in words if re.fullmatch(r"\d+GB", w)}
    forms = {"PCIE", "NVL"}
    specs = [load_gpu(key) for key in list_gpus()]
    best = None
    for whole in (True, False):
        best, score, tie = None, 0, False
        for g in specs:
            toks = g.key.upper().split("-")
            model = toks[0]                                  # "H200", "A100", "MI250"
            if not (model in words if whole else any(w.startswith(model) for w in words)):
                continue
            if any((f in toks) != any(w.startswith(f) for w in words) for f in forms):
                continue
            key_mem = {t for t in toks if re.fullmatch(r"\d+GB", t)}
            if dev_mem and key_mem and not dev_mem & key_mem and not model.startswith("G"):
                continue
            s = 1 + sum(tok in dev for tok in toks[1:])
            if s > score:
                best, score, tie = g.key, s, False
            elif s == score:
                tie = True
        if best is not None or tie:
            break
    return None if tie else best


def resolve_gpu(meas: Measurements, gpu: str | None) -> tuple[GpuSpec, str]:
    """The GPU datasheet the measurements are normalised by, and why.

    Raises:
        FitError: ``gpu`` not given and the inputs (suite provenance, nccl-tests rank lines, trace device
            names) name no catalog GPU (or several).
    """
    if gpu:
        return load_gpu(gpu, "--gpu"), f"--gpu {gpu}"
    names = {r.get("gpu_name") for s in meas.suites for r in s["provenance"]} - {None}
    names |= set(getattr(meas, "device_names", []) or [])
    keys = {gpu_key_for(n) for n in names}
    if len(keys) == 1 and None not in keys:
        k = keys.pop()
        return load_gpu(k), f"the GPU the inputs name {sorted(names)}"
    if not names:
        # a GPU run whose provenance recorded no name (NVML unavailable); a CPU run is refused on loading
        named = any(s["provenance"] for s in meas.suites)
        why = ("the suite's provenance has gpu_name null (no device name recorded)" if named
               else "no suite provenance, rank line or device name")
        raise FitError(f"the inputs name no GPU model: {why}; pass --gpu "
                       f"(one of {', '.join(list_gpus())}) or --cluster (its GPU is used)")
    raise FitError(f"cannot match GPU names {sorted(names)} to one catalog GPU: pass --gpu with one of "
                   f"{', '.join(list_gpus())}")


def base_profile(gpu: GpuSpec, base: str | None = None) -> tuple[dict, str]:
    """The profile mapping that uncovered sections are kept from (``hardware/profiles/<gpu>.yaml``;
    ``base``: a path, or a built-in profile's name), read and checked by
    :func:`costmodel.specs.load_profile`: its kept sections are written as they are, so a bad value
    there is the base's, not the fit's.

    Raises:
        FitError: the base profile cannot be read or has a bad field (naming it), or was fitted for
            another catalog GPU than ``gpu`` (its kept sections would price this GPU with another's GEMMs
            and power; a GPU outside the catalog, which has no profile of its own, may borrow one); or a
            GPU outside the catalog has no ``base``.
    """
    from ..errors import InputError
    from ..specs import has_builtin_profile, load_profile
    builtin = has_builtin_profile(gpu.key)
    if base is None and not builtin:
        raise FitError(f"{gpu.key} has no built-in profile to keep the sections the inputs do not measure from "
                       "(fused attention always): pass --base with a profile of this GPU, or the built-in profile "
                       "of the catalog GPU nearest it, whose efficiencies the kept sections then borrow")
    try:
        prof = load_profile(base or gpu.key, flag="--base")
    except InputError as e:
        raise FitError(f"the base profile is not usable: {e}") from None
    if prof.gpu != gpu.key and not builtin:
        # a GPU outside the catalog has no profile of its own: the kept sections borrow another GPU's
        # efficiencies, relative to this GPU's own peaks and bandwidths (as the derived built-in profiles do)
        return _tdp_scaled_power(_numeric_power_thermal(prof), prof.gpu, gpu), prof.path
    if prof.gpu != gpu.key:
        raise FitError(f"{prof.path}: gpu: the base profile was fitted for {prof.gpu}, the measurements are of "
                       f"{gpu.key}: pass that GPU's profile as --base (or none: the built-in one)")
    return _numeric_power_thermal(prof), prof.path


def _numeric_power_thermal(prof) -> dict:
    """``prof.raw`` with its power and thermal values as the loader parsed them (W, C/W, s): a base
    written with units ("80W") is kept as numbers, which the fits compute with."""
    import math
    raw = dict(prof.raw)
    if prof.power is not None and isinstance(raw.get("power"), dict):
        pw, pp = dict(raw["power"]), prof.power
        pw.update(idle_w=pp.idle_w, gamma=pp.gamma)
        if "v_floor_clock_ratio" in pw:
            pw["v_floor_clock_ratio"] = pp.v_floor_clock_ratio
        pw.update({f"{k}_w": v for k, v in pp.coeff_w.items()})
        if pp.static_w is not None:
            pw["static_w"] = pp.static_w
        if math.isfinite(pp.kernel_limit_w):
            pw["kernel_limit_w"] = pp.kernel_limit_w
        raw["power"] = pw
    if prof.thermal is not None and isinstance(raw.get("thermal"), dict):
        raw["thermal"] = dict(raw["thermal"], r_th_c_per_w=prof.thermal.r_th_c_per_w, tau_s=prof.thermal.tau_s)
    return raw


#: the power section's terms in watts, which scale with the board's power limit when borrowed
_WATT_KEYS = ("idle_w", "static_w", "flop_w", "hbm_w", "link_w", "spin_w", "kernel_limit_w")


def _tdp_scaled_power(raw: dict, src_key: str, gpu: GpuSpec) -> dict:
    """``raw`` (a base profile's mapping) with its power section borrowed for ``gpu``, another die: every
    term in watts times the TDP ratio (idle_w by costmodel.fit.builtin.variants.idle_w), each
    coefficient marked borrowed; its thermal resistance divided by that ratio (R_th x TDP held).  The rule the built-in profiles
    of dies without power data follow (costmodel/fit/builtin/variants.py: a datacenter GPU draws its
    TDP under a dense GEMM at its boost clock); copied unscaled, an H100's 896 W of GEMM power had
    throttled a 400 W part to 63% of its clock."""
    from .builtin.variants import idle_w
    src = load_gpu(src_key)
    ratio = float(gpu.tdp_w) / float(src.tdp_w)
    if not isinstance(raw.get("power"), dict):
        return _tdp_scaled_thermal(raw, src_key, src, gpu, ratio)
    pw = dict(raw["power"])
    for k in _WATT_KEYS:
        if isinstance(pw.get(k), (int, float)) and not isinstance(pw.get(k), bool):
            pw[k] = pw[k] * ratio
    # idle as the built-in profiles derive it: the part's own idle capture where both GPU files give one
    pw["idle_w"] = idle_w(gpu, src, raw["power"]["idle_w"])[0]
    if isinstance(pw.get("static_w"), (int, float)):
        pw["static_w"] = min(pw["static_w"], pw["idle_w"])
    pw["basis"] = {k: "borrowed" for k in ("idle_w", "spin_w", "flop_w", "hbm_w", "link_w", "gamma",
                                           "v_floor_clock_ratio", "static_w") if k in pw}
    pw["note"] = (f"borrowed from {src_key}: its terms in watts x the TDP ratio {gpu.tdp_w:g} / {src.tdp_w:g} W "
                  "(costmodel/fit/builtin/variants.py, other dies)")
    return _tdp_scaled_thermal(dict(raw, power=pw), src_key, src, gpu, ratio)


def _tdp_scaled_thermal(raw: dict, src_key: str, src: GpuSpec, gpu: GpuSpec, ratio: float) -> dict:
    """``raw`` with its thermal resistance borrowed for ``gpu`` by the built-in profiles' rule for a die
    without temperature data: heatsink and airflow sized for the same junction rise at TDP, R_th x TDP
    held (costmodel/fit/builtin/power.py _thermal_section; ``ratio`` = the TDPs' ratio); tau = R_th x C
    keeps its value, the heat capacity growing with the TDP.  The base's fit statistics are left out:
    they describe its own R_th."""
    th = raw.get("thermal")
    if not (isinstance(th, dict) and isinstance(th.get("r_th_c_per_w"), (int, float))):
        return raw
    kept = {k: v for k, v in th.items() if k != "fit"}
    return dict(raw, thermal=dict(kept, r_th_c_per_w=th["r_th_c_per_w"] / ratio, derived_from=f"{src_key}:thermal",
                                  note=f"borrowed from {src_key}: R_th x {src.tdp_w:g} / {gpu.tdp_w:g} W (R_th x TDP "
                                       "held, the built-in profiles' rule for a die without temperature data)"))


def _provenance(meas: Measurements, gpu: GpuSpec, gpu_why: str, base_path: str, cluster, argv):
    prov = [r for s in meas.suites for r in s["provenance"]]
    pick = lambda k: sorted({str(r.get(k)) for r in prov if r.get(k) is not None})
    t = [r.get("started_unix") for r in prov if r.get("started_unix")]
    d = dict(generated_by=GENERATED_BY, command=" ".join(argv) if argv else None,
             fitted_unix=round(time.time()), gpu=gpu.key, gpu_from=gpu_why, base_profile=base_path,
             cluster=cluster.key if cluster else None,
             inputs=[dict(path=p, sha256=h) for p, h in meas.files.items()])
    if prov:
        d["measured"] = dict(hosts=pick("host"), gpu_names=pick("gpu_name"), gpu_ids=pick("gpu_id"),
                             pci_bus_ids=pick("pci_bus_id"), devices=pick("device"), driver=pick("driver_version"),
                             cuda=pick("cuda_version"), rocm=pick("rocm_version"), nccl=pick("nccl_version"),
                             torch=pick("torch_version"), world_size=max(r["world_size"] for r in prov),
                             started_unix=min(t) if t else None)
    elif meas.captures or meas.device_names:
        # nccl-tests captures and traces: what their rank lines and device columns print
        caps = meas.captures
        vals = lambda k: sorted({str(c[k]) for c in caps if c.get(k)})       # noqa: E731
        d["measured"] = dict(hosts=sorted({h for c in caps for h in (c.get("hosts") or [])}),
                             gpu_names=sorted(set(meas.device_names)), nccl=vals("nccl_version"),
                             cuda=vals("cuda_version"), world_size=max((c.get("n_ranks") or 0 for c in caps), default=None)
                             or None)
    return d


def _rederived(entry: dict, fitted: dict, gpu_key: str, scope: str, base_path) -> dict:
    """An unmeasured collective's base entry after the fit: one that copies a collective of this GPU and
    scope (``derived_from: "<gpu>:comm.<scope>.<collective>"``) that this fit measured takes the new
    fit's protocols and fabric, so a fitted all-reduce reaches the reduce-scatter and all-gather copied
    from it (an InfiniBand capture relabels copies made from an EFA one);
    any other is kept from the base profile, marked ``kept_from``."""
    src = entry.get("derived_from") if isinstance(entry, dict) else None
    prefix = f"{gpu_key}:comm.{scope}."
    coll = src[len(prefix):] if isinstance(src, str) and src.startswith(prefix) else None
    if coll in fitted and "protocols" in fitted[coll]:
        out = {k: v for k, v in entry.items() if k not in ("protocols", "kept_from", "fit", "note", "fabric")}
        if "fabric" in fitted[coll]:            # the copy describes the links its source was measured on
            out["fabric"] = fitted[coll]["fabric"]
        return dict(out, protocols=copy.deepcopy(fitted[coll]["protocols"]),
                    note=f"No measurement of this collective: this fit's {scope} {coll} parameters (same links; "
                         "busbw normalisation makes ring collectives comparable).")
    return dict(entry, kept_from=base_path)


def fit_profile(meas: Measurements, gpu: GpuSpec, gpu_why: str = "", base: dict | None = None, base_path: str = "",
                cluster: ClusterSpec | None = None, report: FitReport | None = None, argv=None) -> tuple[dict, FitReport]:
    """Fit every section the measurements cover; keep the rest from ``base``.

    Args:
        meas: :func:`load_measurements` output.  gpu: the datasheet the data are normalised by.
        base: base profile mapping (:func:`base_profile`).  cluster: for the NIC and NVLink bandwidth.
        argv: the command line, recorded in the provenance.
    Returns:
        (profile mapping in the hardware/README.md schema, :class:`FitReport`).
    Raises:
        FitError: nothing in ``meas`` produced a fitted section (``meas`` of no file at all: the base
            borrowed whole, every section kept).
    """
    report = report if report is not None else FitReport()
    if base is None:
        base, base_path = base_profile(gpu)
    prof = copy.deepcopy(base)
    prof["gpu"] = gpu.key
    fitted = []

    def keep(section, why):
        report.warnings.append(f"{section}: {why}: kept from the base profile {base_path}")
        prof[section] = dict(prof.get(section) or {}, kept_from=base_path)

    hbm = fit_hbm_section(meas, gpu, report)
    if hbm:
        prof["hbm"] = hbm
        fitted.append("hbm")
    else:
        keep("hbm", "no HBM measurement")
    hbm_eff = float(prof["hbm"]["efficiency"])
    gemm = fit_gemm_section(meas, gpu, hbm_eff, report)
    for dt, e in gemm.items():
        prof["gemm"][dt] = e
        fitted.append(f"gemm.{dt}")
    for dt in prof["gemm"]:
        if dt not in gemm:
            prof["gemm"][dt] = dict(prof["gemm"][dt], kept_from=base_path)
            report.warnings.append(f"gemm.{dt}: not measured: kept from the base profile {base_path}")
    prof["attention"] = dict(prof.get("attention") or {}, kept_from=base_path)
    report.warnings.append(f"attention: the suite does not time fused attention: kept from the base profile {base_path}")
    comm = fit_comm_section(meas, gpu, base, cluster, report, base_path)
    for scope in ("intra_node", "inter_node"):
        for coll in COLLECTIVES:
            if coll in comm[scope]:
                prof["comm"][scope][coll] = comm[scope][coll]
                fitted.append(f"comm.{scope}.{coll}")
            else:
                prof["comm"][scope][coll] = _rederived(prof["comm"][scope][coll], comm[scope], gpu.key, scope,
                                                       base_path)
        missing = [c for c in COLLECTIVES if c not in comm[scope]]
        kept = [c for c in missing if "kept_from" in prof["comm"][scope][c]]
        if kept:
            report.warnings.append(f"comm.{scope}: no measurement of {', '.join(kept)}: kept from the base profile")
        if len(kept) < len(missing):
            report.warnings.append(f"comm.{scope}: no measurement of {', '.join(c for c in missing if c not in kept)}: "
                                   "derived, as the base profile derives them, from the collective this fit "
                                   "measured")
    mo = fit_moe_section(meas, gpu, prof, report)
    if mo:
        prof["moe"] = mo
        fitted.append("moe")
    ov = fit_overlap_section(meas, report)
    if ov:
        prof["overlap"] = ov
        fitted.append("overlap")
    pw = fit_power_section(meas, gpu, base, report)
    if pw:
        prof["power"] = pw
        fitted.append("power")
    elif base.get("power"):
        keep("power", "no power samples")
    if gemm and prof.get("power"):
        # the GEMMs measured here ran under this GPU's default power limit, the TDP
        prof["power"] = dict(prof["power"], kernel_limit_w=float(gpu.tdp_w))
    elif pw and (base.get("power") or {}).get("kernel_limit_w") is not None:
        # the kernel tables stay the base's, and so does the limit they were measured under
        prof["power"] = dict(prof["power"], kernel_limit_w=base["power"]["kernel_limit_w"])
    th = fit_thermal_section(meas, base, report)
    if th:
        prof["thermal"] = th
        fitted.append("thermal")
    elif base.get("thermal"):
        keep("thermal", "no temperature step response or trace")
    if not fitted and any("no --cluster" in w for w in report.warnings):
        raise FitError("the inputs hold inter-node measurements only, and these need --cluster (the NIC bandwidth "
                       "they are normalised by)")
    if not fitted and meas.files:          # no input at all: a profile borrowed whole, as asked
        why = [w for w in report.warnings if not w.endswith("kept from the base profile") and "kept from the base" not in w]
        raise FitError("the inputs cover no profile section (no GEMM, HBM, collective, power or temperature data "
                       "usable for " + gpu.key + ")" + (": " + "; ".join(why[:4]) if why else ""))
    report.warnings += borrowed_gaps(prof, base, gpu, base_path)
    prof["provenance"] = _provenance(meas, gpu, gpu_why, base_path, cluster, argv)
    prof["provenance"]["fitted_sections"] = fitted
    prof["provenance"]["warnings"] = list(report.warnings)
    return prof, report


def borrowed_gaps(prof: dict, base: dict, gpu: GpuSpec, base_path: str) -> list:
    """Warnings of what a profile built on another GPU's base cannot price on ``gpu``: a base fitted on
    another vendor's GPU (its kept sections carry that vendor's kernel libraries), a number format the GPU
    has a peak for but no GEMM fit prices (--precision refused with this profile), and cuDNN attention
    where the Transformer Engine stacks run it by default on ``gpu`` (costmodel.stacks.te_prefers_cudnn)
    but the profile has no cuDNN fit."""
    from ..errors import InputError
    from ..stacks import get_stack, te_prefers_cudnn
    out, src = [], base.get("gpu")
    if src and src != gpu.key:
        try:
            other = load_gpu(src)
        except InputError:
            other = None
        if other is not None and str(other.vendor).lower() != str(gpu.vendor).lower():
            said = lambda v: {"nvidia": "NVIDIA", "amd": "AMD"}.get(str(v).lower(), str(v))  # noqa: E731
            out.append(f"the base profile {base_path} was fitted on {said(other.vendor)}'s {other.name}; {gpu.name} is "
                       f"{said(gpu.vendor)}'s: the sections kept carry another vendor's kernel libraries' efficiencies "
                       f"(measure them here, or base the profile on one of {said(gpu.vendor)}'s GPUs)")
    gemm = prof.get("gemm") or {}
    for dt in sorted(set(gpu.peak_flops) - set(gemm) - {"tf32"}):
        out.append(f"gemm.{dt}: {gpu.name} has a peak for {dt} but the profile no {dt} GEMM fit: --precision {dt} is "
                   "refused with it (measure it with the suite)")
    kernels = ((prof.get("attention") or {}).get("kernels") or {})
    if te_prefers_cudnn(get_stack("megatron"), gpu) and "cudnn" not in kernels:
        out.append(f"attention.kernels.cudnn: the megatron and nemo stacks run Transformer Engine's cuDNN attention "
                   f"on {gpu.name} by default, and the profile has no cuDNN fit: predictions there need "
                   f"--attention-kernel {' or '.join(sorted(kernels)) or 'another kernel'}")
    return out


#: the largest median relative error of a fit that still describes its data: beyond it the fitted
#: line misses most points by more than their own value (time in ms read as us, a size column in
#: KiB), and its parameters would price every prediction wrongly.  Noisy but real captures stay
#: under it (two gloo ranks on CPU, the suite's --quick run: 72 %)
POOR_FIT_MEDIAN_REL_ERR = 1.0


def poor_fits(prof: dict, where: str = "") -> list[tuple[str, float]]:
    """``(section path, median relative error)`` of every fitted entry of a profile mapping whose
    ``fit.median_rel_err`` reaches :data:`POOR_FIT_MEDIAN_REL_ERR` (recursive; entries kept from a
    base profile carry their own fit, checked alike)."""
    out = []
    for k, v in prof.items():
        if not isinstance(v, dict) or k == "provenance":
            continue
        path = f"{where}.{k}" if where else str(k)
        fit = v.get("fit")
        # |predicted / measured - 1| reaches 1 and stops when the predictions vanish beside the times
        # (times in another unit, 1000x too long): at the bound is poor too
        if isinstance(fit, dict) and isinstance(fit.get("median_rel_err"), (int, float)) \
                and fit["median_rel_err"] >= POOR_FIT_MEDIAN_REL_ERR:
            out.append((path, float(fit["median_rel_err"])))
        out += poor_fits(v, path)
    return out

