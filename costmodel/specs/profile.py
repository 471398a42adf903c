"""The calibrated profile of one GPU model (hardware/profiles/*.yaml): its schema, reader and writer.

:func:`load_profile` reads a profile into a typed :class:`Profile`; :func:`dump_profile` writes the
mapping the fits build (``costmodel calibrate fit``, ``python -m costmodel.fit.builtin``) as YAML.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from ..errors import InputError
from .loading import _get, _get_int, _read_mapping, _resolve, _sub, hardware_dir, refuse_nulls, yaml_load
from .recipe import ATTENTION_KERNELS, kernel_head_dim
from .params import (COLLECTIVES, NVLS_EFF_MAX, POWER_BASES, POWER_TERMS, PROTOCOLS, SCALE_OUT_FABRICS,
                     AttentionKernelParams, CollectiveParams, GroupFit,
                     GemmParams, PowerParams, ThermalParams)

#: sigma of a normal distribution over its median absolute deviation (Rousseeuw & Croux 1993, JASA 88:1273)
MAD_TO_SIGMA = 1.4826

@dataclass(frozen=True)
class Profile:
    """Fitted efficiencies of one GPU model (hardware/profiles/*.yaml, written by costmodel.fit).

    Attributes:
        key: file stem; gpu: GPU file stem it was fitted for.
        gemm: dtype -> :class:`GemmParams`.
        hbm_efficiency: achieved / datasheet HBM bandwidth.
        flash_efficiency: FlashAttention-2 FLOP/s / dense 16-bit peak (``attention.flash_efficiency``).
        attention_kernels: kernel name (costmodel.specs.recipe.ATTENTION_KERNELS) -> tuple of
            :class:`AttentionKernelParams`, one per measured head dim, ascending (``attention.kernels``;
            "fa2" defaults to ``flash_efficiency`` at every sequence length and head dim).
        comm: scope ('intra_node' | 'inter_node') -> collective -> :class:`CollectiveParams`.
        comm_group_size: scope -> collective -> ranks of the measurement the latencies were fitted at.
        comm_protocols: scope -> collective -> the NCCL protocol names of ``comm``'s protocols, in order.
        comm_groups: scope -> collective -> :class:`GroupFit` per measured group size, ascending,
            the entry's own at ``group_size`` among them, for the entries with ``by_group_size``
            (costmodel.comm ``_group_params`` picks one per group); absent elsewhere.
        comm_fabric: scope -> collective -> the scale-out fabric the entry was measured on (its
            ``fabric`` key: infiniband, roce, efa, ...), or None where the entry does not say (then it
            is taken to be the cluster's own, as a calibration of that cluster is).
        power: :class:`PowerParams` (cap range 0..inf: the GPU's range is the datasheet's) or None
            when the profile has no ``power:``.
        thermal: :class:`ThermalParams` or None when the profile has no ``thermal:``.
        moe_grouped_slowdown, moe_sequential_slowdown: routed expert GEMMs, grouped or one per expert,
            over the batched-GEMM model of the mean count (``moe.*_gemm_slowdown``, fitted from the
            suite's ``moe_gemm`` records, costmodel/fit/moe.py); 1 (the model as is) when the
            profile has no ``moe:`` section.
        moe_grouped_group_s: the time each group (local expert) adds to a grouped GEMM over one
            batched GEMM of the same rows, s (``moe.grouped_gemm_group_s``: Transformer Engine's
            multi-stream grouped GEMM, costmodel/fit/builtin/grouped_gemm.py); 0 when not measured.
        overlap_slowdown: time of compute that runs while a collective is in flight over its time
            alone (``overlap.compute_slowdown``, measured by the calibration suite); the published
            mean :data:`PUBLISHED_OVERLAP_SLOWDOWN` when the profile has no ``overlap:`` section.
        fit_sigma: entry -> relative one-sigma error of its fit (``"gemm.bf16"``, ``"hbm"``,
            ``"comm.intra_node.all_reduce"``, ...; see :func:`fit_sigma`), None without fit data.
        raw: the YAML mapping as read (for display: fit quality, provenance, notes).
        path: where it was read from.
    """

    key: str
    gpu: str
    gemm: dict
    hbm_efficiency: float
    flash_efficiency: float
    comm: dict
    comm_group_size: dict
    raw: dict = field(repr=False)
    comm_protocols: dict = field(default_factory=dict, repr=False)
    comm_fabric: dict = field(default_factory=dict, repr=False)
    comm_groups: dict = field(default_factory=dict, repr=False)
    path: str = ""
    power: PowerParams | None = None
    thermal: ThermalParams | None = None
    overlap_slowdown: float = 1.0
    moe_grouped_slowdown: float = 1.0
    moe_sequential_slowdown: float = 1.0
    moe_grouped_group_s: float = 0.0
    fit_sigma: dict = field(default_factory=dict, repr=False)
    attention_kernels: dict = field(default_factory=dict)

    def derivation(self, path: str) -> list[tuple[str, str]]:
        """The ``derived_from: "<gpu>:<dotted path>"`` hops of the entry at the dotted ``path``, as
        (gpu, path) pairs: followed through this profile's own entries (as :func:`fit_sigma` follows
        them, at most 4), ending at another GPU's entry or at an entry of this profile's own data.
        Empty where the entry at ``path`` is its own."""
        hops = []
        for _ in range(4):
            entry = _entry_at(self.raw, path)
            src = entry.get("derived_from") if isinstance(entry, dict) else None
            if not (isinstance(src, str) and ":" in src):
                break
            gpu, path = src.split(":", 1)
            hops.append((gpu, path))
            if gpu != self.key:
                break
        return hops

    def copied_from(self, path: str) -> str | None:
        """The GPU whose built-in entry this profile's entry at the dotted ``path`` copies (the last
        hop of :meth:`derivation`), or None where the entry is this profile's own."""
        hops = self.derivation(path)
        return hops[-1][0] if hops and hops[-1][0] != self.key else None

    def attention_efficiency(self, kernel: str, seq_len, head_dim: float = 128, head_dim_v: float | None = None,
                             through_te: bool = False):
        """Efficiency of fused-attention ``kernel`` over sequences of ``seq_len`` tokens (array), on the
        model's FLOPs at query/key head dim ``head_dim`` and value head dim ``head_dim_v`` (default: the
        same).

        The kernel runs at the head dims it is compiled for (:func:`costmodel.specs.recipe.kernel_head_dim`;
        FlashAttention-1/2 one head dim for both, FA3/FA4 each apart), computing the padding: the
        efficiency at the padded head dim times (d + d_v) / (padded d + padded d_v).  Between two
        measured head dims the efficiency is interpolated linearly in the head dim; outside them it is
        the nearest one's (no backward of another head dim is measured, FlashAttention-3 paper fig. 6).
        ``through_te``: the kernel is called by Transformer Engine's DotProductAttention, which hands
        FlashAttention only head dims that are multiples of 8 and otherwise falls back to unfused
        attention (TE v1.8 attention.py: "FAv2 requires head_dim % 8 == 0").

        Raises:
            InputError: the profile has no fit for ``kernel`` (naming the profile and the field), or
                the kernel does not run the head dim (naming --attention-kernel).
        """
        d_v = head_dim if head_dim_v is None else head_dim_v
        if through_te and (head_dim % 8 or d_v % 8):
            raise InputError("--attention-kernel", "", f"the model's head dim {head_dim:g}"
                             + (f"/{d_v:g}" if d_v != head_dim else "") + f" is not a multiple of 8: Transformer "
                             f"Engine hands the {kernel} kernel (given, or the stack's default) only multiples of 8 "
                             "and runs unfused attention otherwise: give --no-flash-attention to price that")
        try:
            if kernel in ("fa1", "fa2"):
                pad = pad_v = kernel_head_dim(kernel, max(head_dim, d_v))
            else:
                pad, pad_v = kernel_head_dim(kernel, head_dim), kernel_head_dim(kernel, d_v)
        except ValueError as e:
            raise InputError("--attention-kernel", "", f"{e} (the model's head dim; the kernel given or the stack's "
                             "default): name a kernel that runs it, or --no-flash-attention (unfused attention runs "
                             "any head dim)") from None
        return self._kernel_efficiency(kernel, seq_len, pad) * (head_dim + d_v) / (pad + pad_v)

    def _kernel_efficiency(self, kernel: str, seq_len, head_dim: int):
        """Measured efficiency of ``kernel`` at its compiled ``head_dim`` (see attention_efficiency)."""
        fits = self.attention_kernels.get(kernel)
        if fits is None:
            if kernel == "fa2":
                return self.flash_efficiency * np.ones_like(np.asarray(seq_len, dtype=np.float64))
            if kernel == "fa1":          # without its own fit: FlashAttention-2's over FA2_OVER_FA1
                return self._kernel_efficiency("fa2", seq_len, head_dim) / FA2_OVER_FA1
            amd = kernel == "cudnn" and str(self.gpu).lower().startswith("mi")
            raise InputError(self.path, f"attention.kernels.{kernel}",
                             f"no {kernel} fit for {self.gpu} (fitted: {', '.join(sorted({'fa2', *self.attention_kernels}))}): "
                             + ("cuDNN is NVIDIA's library; " if amd else "") + "pick another --attention-kernel")
        # fractional index among the measured head dims, clamped at both ends
        x = float(np.interp(head_dim, [f.head_dim for f in fits], np.arange(len(fits))))
        lo, w = int(x), x - int(x)
        e = fits[lo].efficiency(seq_len)
        return e if w == 0 else (1 - w) * e + w * fits[lo + 1].efficiency(seq_len)


#: FlashAttention-2's speed over FlashAttention (v1) on the same GPU: "around 2x speedup compared to
#: FlashAttention, reaching 50-73% of the theoretical maximum FLOPs/s on A100", where FlashAttention
#: reaches "only 25-40%" (Dao 2023, "FlashAttention-2", arXiv:2307.08691, abstract)
FA2_OVER_FA1 = 2.0


#: Compute slowdown while a collective runs beside it, when no profile measured one: the mean over
#: GPT and Llama training kernels on 4x A100, H100, MI250 and MI210 of overlapped vs alone compute
#: time, 18.9% (max 40.0%): "Characterizing Compute-Communication Overlap in GPU-Accelerated
#: Distributed Deep Learning: Performance and Power Implications", arXiv:2507.03114 (2025), abstract.
PUBLISHED_OVERLAP_SLOWDOWN = 1.189
#: the largest ``overlap.compute_slowdown`` a profile may state: overlapped compute never runs faster than
#: alone (>= 1), and the same study's worst kernel lost 40%; 3x is far beyond any measured contention
MAX_OVERLAP_SLOWDOWN = 3.0


def _group_fits(p: dict, g0: int, names: tuple, w: str, pre: str) -> tuple:
    """:class:`GroupFit` per group size of one comm entry: its own at ``g0`` and each of its
    ``by_group_size`` mapping (group size -> {protocols, algorithm}), ascending.

    Raises:
        InputError: ``by_group_size`` is not a mapping, a key is not an integer >= 2 or repeats
            ``group_size``, an entry is not a mapping or has bad ``protocols`` (naming the field).
    """
    by = p["by_group_size"]
    if not isinstance(by, dict) or not by:
        raise InputError(w, pre + "by_group_size", "expected a mapping group size -> {protocols, algorithm}, got "
                         + _short_repr(by))
    own = str(p.get("algorithm", ""))
    fits = {g0: GroupFit(g0, CollectiveParams.from_protocols(_protocols(p, w, pre, _eff_max("intra_node", own))),
                         names, own)}
    for key, q in by.items():
        at = f"{pre}by_group_size.{key}"
        try:
            g = int(str(key))
        except ValueError:
            g = 0
        if g < 2 or g in fits:
            raise InputError(w, at, f"expected an integer group size >= 2, once, other than group_size {g0}, "
                             f"got {key!r}")
        if not isinstance(q, dict):
            raise InputError(w, at, "expected a mapping with protocols and algorithm, got " + _short_repr(q))
        _known_keys(q, _GROUP_KEYS, w, at + ".")
        alg = str(q.get("algorithm", own))
        fits[g] = GroupFit(g, CollectiveParams.from_protocols(_protocols(q, w, at + ".", _eff_max("intra_node", alg))),
                           tuple(x["name"] for x in q["protocols"]), alg)
    return tuple(fits[g] for g in sorted(fits))


#: the keys of a comm entry and of one of its ``by_group_size`` fits (hardware/README.md); a misspelt
#: one would leave the model's default in force unseen
_ENTRY_KEYS = ("protocols", "group_size", "algorithm", "fabric", "by_group_size", "fit", "note", "derived_from",
               "kept_from")
_GROUP_KEYS = ("protocols", "algorithm", "fit", "note", "derived_from", "kept_from")


def _known_keys(d: dict, known: tuple, w: str, pre: str) -> None:
    """Raises InputError naming the first key of ``d`` not in ``known`` (a misspelt key would leave
    its field at a default, or missing, unseen), with the known key it is closest to."""
    for k in d:
        if k not in known:
            close = difflib.get_close_matches(str(k), known, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]}? " if close else ""
            raise InputError(w, f"{pre}{k}", f"unknown key ({hint}known: {', '.join(known)})")


def _short_repr(v, width: int = 80) -> str:
    """``repr(v)`` cut to ``width`` characters, for one-line errors."""
    r = repr(v)
    return r if len(r) <= width else r[:width - 3] + "..."


#: the busbw efficiency a collective that moves its bytes over the GPU's own links cannot exceed: a
#: ring or point-to-point collective's busbw is the link traffic per GPU (NVIDIA/nccl-tests
#: doc/PERFORMANCE.md, "bus bandwidth"), at most the link; only a reduction in the switch (NVLS,
#: SHARP) exceeds it (:data:`NVLS_EFF_MAX`)
LINK_EFF_MAX = 1.0


def _eff_max(scope: str, algorithm: str) -> float:
    """The largest busbw efficiency a comm entry of ``algorithm`` in ``scope`` may hold."""
    return LINK_EFF_MAX if scope == "intra_node" and algorithm in ("ring", "p2p", "tree") else NVLS_EFF_MAX


def _protocols(p: dict, w: str, pre: str, maximum: float = NVLS_EFF_MAX) -> list:
    """``[(alpha_s, busbw_efficiency), ...]`` of one comm entry's ``protocols`` list (seconds, ratio).

    Raises:
        InputError: the list is missing or empty, an item is not a mapping, a name is not one of
            LL / LL128 / Simple or repeats, or a value is missing, not positive or above ``maximum``
            (:func:`_eff_max`: a ring above its link).
    """
    items = p.get("protocols")
    if not isinstance(items, list) or not items:
        old = " (this is the old single-ramp schema with n_half_bytes/gamma; regenerate the profile)" \
            if "n_half_bytes" in p else ""
        raise InputError(w, pre + "protocols", "missing: expected a list of {name, alpha_s, busbw_efficiency}, "
                         f"one per NCCL protocol{old}")
    out, seen = [], set()
    for i, q in enumerate(items):
        at = f"{pre}protocols[{i}]."
        if not isinstance(q, dict):
            raise InputError(w, at[:-1], f"expected a mapping with name, alpha_s, busbw_efficiency, got {q!r}")
        name = q.get("name")
        if name not in PROTOCOLS or name in seen:
            raise InputError(w, at + "name", f"expected one of {', '.join(PROTOCOLS)} (each once), got {name!r}")
        seen.add(name)
        # a collective's fixed latency is microseconds on GPUs, up to seconds for gloo on a loaded CPU
        # (the suite's CPU run): an hour is a typo
        out.append((_get(q, "alpha_s", w, "seconds", prefix=at, maximum=3600.0),
                    _get(q, "busbw_efficiency", w, prefix=at, maximum=maximum)))
    return out


def _moe_slowdowns(d: dict, w: str) -> dict:
    """The ``moe:`` section's fitted expert-GEMM slowdowns (absent entries: 1, the model as is) and
    per-group grouped-GEMM time (absent: 0)."""
    m = d.get("moe")
    if m is None:
        return {}
    if not isinstance(m, dict):
        raise InputError(w, "moe", "expected a mapping")
    out = {}
    for key, field_ in (("grouped_gemm_slowdown", "moe_grouped_slowdown"),
                        ("sequential_gemm_slowdown", "moe_sequential_slowdown")):
        if key in m:
            out[field_] = _get(m, key, w, prefix="moe.")
    if "grouped_gemm_group_s" in m:
        out["moe_grouped_group_s"] = _get(m, "grouped_gemm_group_s", w, "seconds", prefix="moe.", maximum=1e-3)
    return out


def _not_a_hardware_file(d: dict, w: str) -> None:
    """Refuse a cluster or GPU file given where a profile goes, naming what it is (its keys would each
    be an unknown profile key, which says less).

    Raises:
        InputError: naming the file and the keys that make it a cluster or GPU file.
    """
    from .hardware import GPU_KEYS
    cluster = [k for k in ("gpus_per_node", "nodes", "intra_node", "inter_node", "cooling") if k in d]
    gpu = [k for k in ("tdp", "hbm_capacity", "hbm_bandwidth", "peak_tflops", "architecture") if k in d and k in GPU_KEYS]
    for what, keys, flag in (("a cluster file", cluster, "--cluster"), ("a GPU file", gpu, "a cluster's gpu:")):
        if len(keys) >= 2 and not any(k in d for k in ("gemm", "comm")):
            raise InputError(w, "", f"is {what} ({', '.join(keys)}), not a calibrated profile (gpu, gemm, comm, "
                             f"power, thermal): give it as {flag}")


def load_profile(path_or_gpu: str, flag: str = "--profile") -> Profile:
    """Load a profile by path or by GPU file stem (hardware/profiles/<stem>.yaml).

    Each ``comm.<scope>.<collective>`` entry holds ``protocols`` (NCCL's LL / LL128 / Simple, each with
    ``alpha_s`` in seconds and ``busbw_efficiency``; see costmodel/collective.py) and ``group_size``.
    Raises:
        InputError: missing file, missing section, or a missing or non-positive parameter.
    """
    path = _resolve(path_or_gpu, hardware_dir() / "profiles", (".yaml", ".yml"), "profile", flag)
    try:
        d = _read_mapping(path)
    except InputError:
        refuse_measurement(path)        # a capture given for a profile: say how to fit one from it
        raise
    return profile_from_mapping(d, str(path), path.stem)


def refuse_measurement(path) -> None:
    """Refuse a measurement file given where a profile goes, saying how to fit one from it (a profile is
    YAML; the readers tell a measurement by its content, costmodel.readers.registry).

    Raises:
        InputError: naming the file and its format."""
    from ..errors import NoUsableDataError
    from ..readers.registry import detect_format
    if not Path(path).is_file():
        return
    try:
        fmt = detect_format(path)
    except (NoUsableDataError, OSError, UnicodeDecodeError):
        return
    raise InputError(path, "", f"is a measurement file ({fmt}), not a profile: fit one from it with costmodel "
                     f"calibrate fit {path} -o PROFILE.yaml, then use that")


def profile_from_mapping(d: dict, w: str, profile_key: str) -> Profile:
    """A :class:`Profile` from a profile mapping already read (a fit's profile before it is written, so
    that the fit prices its data by the path the predictions take), checked as :func:`load_profile`
    checks a file.

    Args:
        d: the mapping (hardware/README.md schema).  w: the name errors give it.  profile_key: the profile's key.
    Raises:
        InputError: as :func:`load_profile`, naming ``w``.
    """
    refuse_nulls(d, w, skip=("fit", "provenance"))      # a fit's statistics may be null (r2 of one point)
    for k in d:
        for sec, keys in (("power", _POWER_KEYS), ("thermal", _THERMAL_KEYS)):
            if k in keys and k not in _PROFILE_KEYS:     # a section's key one level too high: ignored before
                raise InputError(w, str(k), f"a key of the {sec}: section, not of the profile's top level: indent "
                                 f"it under {sec}:")
    _not_a_hardware_file(d, w)
    _known_keys(d, _PROFILE_KEYS, w, "")
    gemm = {}
    for dt, g in _sub(d, "gemm", w).items():
        if not isinstance(g, dict):
            raise InputError(w, f"gemm.{dt}", "expected a mapping")
        pre = f"gemm.{dt}."
        for key in g:
            if key not in _GEMM_KEYS:      # a misspelt key would leave its default in force unseen
                raise InputError(w, f"{pre}{key}", f"unknown key (known: {', '.join(_GEMM_KEYS)})")
        k_half, launch_s = (_get(g, k, w, kind, positive=False, prefix=pre)
                            for k, kind in (("k_half", "number"), ("launch_s", "seconds")))
        for k, v, hi in (("k_half", k_half, 1e9), ("launch_s", launch_s, 1.0)):
            if v < 0:       # a fixed cost per tile and per launch: never negative
                raise InputError(w, pre + k, f"must be >= 0, got {g[k]!r}")
            if v > hi:      # a half-efficiency depth of 1e9, a launch of a second (even a CPU's): a typo
                raise InputError(w, pre + k, f"must be at most {hi:g}" + (" s" if k == "launch_s" else "")
                                 + f", got {g[k]!r}")
        ints = {}
        for k in ("tile_m", "tile_n", "num_sms"):
            try:
                ints[k] = _get_int(g, (k,), w)
            except InputError as e:     # name the entry, not the bare key
                raise InputError(w, pre + k, e.message) from None
        gemm[dt] = GemmParams(eta_max=_get(g, "eta_max", w, prefix=pre, maximum=1.0), k_half=k_half, launch_s=launch_s,
                              **ints, power_limited=_get_bool(g, "power_limited", w, pre))
    comm, sizes, names, fabrics, groups = {}, {}, {}, {}, {}
    c = _sub(d, "comm", w)
    for scope in ("intra_node", "inter_node"):
        s = c.get(scope)
        if not isinstance(s, dict):
            raise InputError(w, f"comm.{scope}", "missing section")
        comm[scope], sizes[scope], names[scope], fabrics[scope] = {}, {}, {}, {}
        _known_keys(s, COLLECTIVES, w, f"comm.{scope}.")
        for coll in COLLECTIVES:
            p = s.get(coll)
            if not isinstance(p, dict):
                raise InputError(w, f"comm.{scope}.{coll}", "missing")
            pre = f"comm.{scope}.{coll}."
            comm[scope][coll] = CollectiveParams.from_protocols(
                _protocols(p, w, pre, _eff_max(scope, str(p.get("algorithm", "")))))
            names[scope][coll] = tuple(q["name"] for q in p["protocols"])
            fab = p.get("fabric")
            if fab is not None and fab not in SCALE_OUT_FABRICS:
                raise InputError(w, pre + "fabric", f"{fab!r} is not one of {', '.join(SCALE_OUT_FABRICS)}")
            fabrics[scope][coll] = fab
            g0 = p.get("group_size", 8)
            if isinstance(g0, bool) or not isinstance(g0, (int, float)) or not float(g0).is_integer() or g0 < 1:
                raise InputError(w, pre + "group_size", f"expected an integer >= 1, got {g0!r}")
            sizes[scope][coll] = int(g0)
            _known_keys(p, _ENTRY_KEYS, w, pre)
            if "by_group_size" in p:
                if scope != "intra_node" or coll == "send_recv":   # node counts / a pair: one law each
                    raise InputError(w, pre + "by_group_size", "only comm.intra_node collectives (not send_recv) "
                                     "take fits per group size")
                groups.setdefault(scope, {})[coll] = _group_fits(p, int(g0), names[scope][coll], w, pre)
    return Profile(
        key=profile_key, gpu=_gpu_key(d, w), gemm=gemm,
        hbm_efficiency=_get(_sub(d, "hbm", w), "efficiency", w, prefix="hbm.", maximum=1.0),
        flash_efficiency=_get(_sub(d, "attention", w), "flash_efficiency", w, prefix="attention.", maximum=1.0),
        comm=comm, comm_group_size=sizes, comm_protocols=names, comm_fabric=fabrics, comm_groups=groups,
        raw=d, path=w,
        power=_power(d, w), thermal=_thermal(d, w),
        overlap_slowdown=_get(d["overlap"], "compute_slowdown", w, prefix="overlap.", minimum=1.0,
                              maximum=MAX_OVERLAP_SLOWDOWN) if isinstance(d.get("overlap"), dict)
        else PUBLISHED_OVERLAP_SLOWDOWN, fit_sigma=_fit_sigmas(d, gemm, comm, w),
        **_moe_slowdowns(d, w),
        attention_kernels=_attention_kernels(_sub(d, "attention", w), w))


def has_builtin_profile(gpu_key: str) -> bool:
    """Whether the catalog has a profile of GPU ``gpu_key`` (hardware/profiles/<key>.yaml or .yml)."""
    return any((hardware_dir() / "profiles" / f"{gpu_key}{ext}").is_file() for ext in (".yaml", ".yml"))


def cluster_profile(cluster, profile_arg: str | None = None) -> Profile:
    """The profile a run on ``cluster`` uses: ``profile_arg`` (``--profile``) when given, else the
    built-in ``hardware/profiles/<gpu>.yaml`` of the cluster's GPU.

    Raises:
        InputError: ``--profile`` is bad; or none was given and the cluster's GPU (a GPU file outside
            the catalog) has no built-in profile: the message names the cluster file and says what to pass.
    """
    if profile_arg:
        return load_profile(profile_arg)
    key = cluster.gpu.key
    if not has_builtin_profile(key):
        known = sorted(p.stem for p in (hardware_dir() / "profiles").glob("*.yaml"))
        raise InputError(cluster.path or cluster.key, "gpu", f"GPU {key!r} has no built-in profile; pass --profile FILE "
                         f"(a calibrated profile: `costmodel calibrate fit`) or use a catalog GPU ({', '.join(known)})")
    return load_profile(key)


def _get_bool(d: dict, key: str, w: str, pre: str, default: bool = True) -> bool:
    """``d[key]`` as a YAML boolean (absent: ``default``).

    Raises:
        InputError: a value that is not true or false, naming ``pre + key``.
    """
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise InputError(w, pre + key, f"expected true or false, got {v!r}")
    return v


def _gpu_key(d: dict, w: str) -> str:
    """The profile's ``gpu`` (the GPU file stem it was fitted for): required, as a profile applied to
    another GPU than its own is what the users' notes and checks compare against."""
    g = d.get("gpu")
    if g is None:
        raise InputError(w, "gpu", "missing: the GPU file stem this profile was fitted for (e.g. h100-sxm-80gb)")
    if not isinstance(g, str):      # present, but YAML read it as another type (gpu: 42, gpu: [a, b])
        kind = ("true/false" if isinstance(g, bool) else "a number" if isinstance(g, (int, float))
                else "a list" if isinstance(g, list) else "a mapping" if isinstance(g, dict) else type(g).__name__)
        raise InputError(w, "gpu", f"must be a name, the GPU file stem this profile was fitted for (e.g. "
                         f"h100-sxm-80gb), got {g!r} ({kind})")
    if not g.strip():
        raise InputError(w, "gpu", "empty: name the GPU file stem this profile was fitted for (e.g. h100-sxm-80gb)")
    return g


_GEMM_KEYS = ("eta_max", "k_half", "launch_s", "tile_m", "tile_n", "num_sms", "power_limited", "power_check", "fit",
              "note", "derived_from", "kept_from")
#: the DVFS exponent's physical span (P = P0 + D (f / f_max)^gamma; CMOS dynamic power C V^2 f), with
#: margin: the built-in profiles hold 2.1-3.7
GAMMA_RANGE = (0.5, 4.0)
#: no GPU's power term reaches this, W (a board draws at most a few kW)
MAX_GPU_W = 1e4
_POWER_KEYS = ("idle_w", "static_w", "flop_w", "hbm_w", "link_w", "spin_w", "gamma", "v_floor_clock_ratio",
               "kernel_limit_w", "basis", "fit", "note", "derived_from", "kept_from")
_THERMAL_KEYS = ("r_th_c_per_w", "tau_s", "fit", "note", "derived_from", "kept_from")
#: the sections of a profile (hardware/README.md); anything else at the top level is a misplaced key
_PROFILE_KEYS = ("gpu", "provenance", "gemm", "hbm", "attention", "comm", "moe", "overlap", "power", "thermal")
_KERNEL_FIT_KEYS = ("eta_max", "s_half", "s_max", "fit", "note")
_KERNEL_KEYS = _KERNEL_FIT_KEYS + ("head_dim", "by_head_dim", "derived_from")


def _attention_kernel_fit(k, w: str, pre: str, head_dim, known=_KERNEL_FIT_KEYS) -> AttentionKernelParams:
    """One ``{eta_max, s_half, s_max}`` mapping of ``attention.kernels`` at ``head_dim``."""
    if not isinstance(k, dict):
        raise InputError(w, pre.rstrip("."), "expected a mapping with eta_max and s_half")
    for key in k:
        if key not in known:
            raise InputError(w, f"{pre}{key}", f"unknown key (known: {', '.join(known)})")
    return AttentionKernelParams(eta_max=_get(k, "eta_max", w, prefix=pre, maximum=1.0),
                                 s_half=_get(k, "s_half", w, prefix=pre, positive=False, maximum=1e9, minimum=0.0),
                                 s_max=_get(k, "s_max", w, prefix=pre, required=False, default=float("inf"),
                                            minimum=1.0),
                                 head_dim=head_dim)


def _is_head_dim(d) -> bool:
    """A head dim a fused-attention kernel can have been measured at: a multiple of 8, 8 to 512."""
    return isinstance(d, int) and not isinstance(d, bool) and 8 <= d <= 512 and d % 8 == 0


def _attention_kernels(a: dict, w: str) -> dict:
    """``attention.kernels`` as name -> tuple of AttentionKernelParams by ascending head dim (empty
    without the section): each kernel's own entry at its ``head_dim`` (128 where not written, the
    head dim of every kernel table before head dims were fitted apart), and one per ``by_head_dim`` key."""
    ks = a.get("kernels") or {}
    if not isinstance(ks, dict):
        raise InputError(w, "attention.kernels", "expected a mapping of kernel name -> {eta_max, s_half}")
    out = {}
    for name, k in ks.items():
        if name not in ATTENTION_KERNELS:
            raise InputError(w, f"attention.kernels.{name}", f"unknown kernel (known: {', '.join(ATTENTION_KERNELS)})")
        pre = f"attention.kernels.{name}."
        if not isinstance(k, dict):
            raise InputError(w, pre.rstrip("."), "expected a mapping with eta_max and s_half")
        d = k.get("head_dim", 128)
        if not _is_head_dim(d):
            raise InputError(w, pre + "head_dim", f"expected a head dim, a multiple of 8 from 8 to 512, got {d!r}")
        fits = {d: _attention_kernel_fit(k, w, pre, d, _KERNEL_KEYS)}
        other = k.get("by_head_dim") or {}
        if not isinstance(other, dict):
            raise InputError(w, pre + "by_head_dim", "expected a mapping of head dim -> {eta_max, s_half}")
        for key, sub in other.items():
            dk = int(key) if isinstance(key, str) and key.isdigit() else key      # YAML writers quote int keys
            if not _is_head_dim(dk):
                raise InputError(w, f"{pre}by_head_dim[{key!r}]", "expected a head dim, a multiple of 8 from 8 to 512")
            if dk in fits:
                raise InputError(w, f"{pre}by_head_dim.{dk}", f"head dim {dk} is fitted twice"
                                 + (f" (the entry's head_dim is {d})" if dk == d else ""))
            fits[dk] = _attention_kernel_fit(sub, w, f"{pre}by_head_dim.{dk}.", dk)
        out[str(name)] = tuple(fits[x] for x in sorted(fits))
    return out


def _power(d: dict, w: str):
    """The profile's ``power:`` section as PowerParams (cap range filled in by the caller), or None."""
    s = d.get("power")
    if s is None:
        return None
    if not isinstance(s, dict):
        raise InputError(w, "power", "expected a mapping")
    _known_keys(s, _POWER_KEYS, w, "power.")
    g = lambda k, kind="watts", positive=True: _get(s, k, w, kind, prefix="power.", positive=positive)
    vf = _get(s, "v_floor_clock_ratio", w, "number", prefix="power.", required=False, default=0.0, maximum=1.0)
    basis = s.get("basis") or {}
    if not isinstance(basis, dict) or any(v not in POWER_BASES for v in basis.values()):
        raise InputError(w, "power.basis", f"expected a mapping of coefficient -> one of {', '.join(POWER_BASES)}")
    limit = _get(s, "kernel_limit_w", w, "watts", prefix="power.", required=False, default=float("inf"))
    if limit <= g("idle_w"):
        raise InputError(w, "power.kernel_limit_w", f"{limit:g} W is not above idle_w ({g('idle_w'):g} W): no kernel "
                         "runs under such a limit")
    static = _get(s, "static_w", w, "watts", prefix="power.", required=False, default=None, positive=False)
    if static is not None and not 0 <= static <= g("idle_w"):
        raise InputError(w, "power.static_w", f"{static:g} W must lie in 0 .. idle_w ({g('idle_w'):g} W): it is the "
                         "part of the idle power that does not fall with the SM clock")
    coeff = {t.name: g(t.key, positive=t.positive) for t in POWER_TERMS}
    for t in POWER_TERMS:       # a negative activity term would have a busy GPU draw less than an idle one
        if coeff[t.name] < 0:
            raise InputError(w, f"power.{t.key}", f"must be >= 0, got {coeff[t.name]:g}")
        if coeff[t.name] > MAX_GPU_W:
            raise InputError(w, f"power.{t.key}", f"{coeff[t.name]:g} W is above {MAX_GPU_W:g} W, more than any GPU "
                             "draws")
    gamma = g("gamma", "number")
    if not GAMMA_RANGE[0] <= gamma <= GAMMA_RANGE[1]:
        # dynamic power C V^2 f: exponent 1 at a fixed voltage, about 3 where the voltage follows the clock
        raise InputError(w, "power.gamma", f"{gamma:g} is outside {GAMMA_RANGE[0]:g} .. {GAMMA_RANGE[1]:g}: dynamic "
                         "power C V^2 f grows with the clock to a power of 1 (fixed voltage) to about 3 (voltage "
                         "following the clock)")
    return PowerParams(idle_w=g("idle_w"), coeff_w=coeff,
                       gamma=gamma, min_cap_w=0.0, max_cap_w=float("inf"), v_floor_clock_ratio=vf,
                       kernel_limit_w=limit, basis={str(k): str(v) for k, v in basis.items()}, static_w=static)


def _thermal(d: dict, w: str):
    """The profile's ``thermal:`` section as ThermalParams, or None."""
    s = d.get("thermal")
    if s is None:
        return None
    if not isinstance(s, dict):
        raise InputError(w, "thermal", "expected a mapping")
    _known_keys(s, _THERMAL_KEYS, w, "thermal.")
    # a GPU's junction-to-inlet resistance is a few hundredths to tenths of a C per W; its time
    # constant seconds to minutes: beyond these bounds a value is a typo that heats GPUs past the sun
    return ThermalParams(r_th_c_per_w=_get(s, "r_th_c_per_w", w, prefix="thermal.", maximum=2.0),
                         tau_s=_get(s, "tau_s", w, "seconds", prefix="thermal.", maximum=3600.0))


def _fit_sigmas(d: dict, gemm: dict, comm: dict, w: str = "profile") -> dict:
    """:func:`fit_sigma` of every GEMM, HBM and collective entry of a profile mapping.

    Raises:
        InputError: a ``fit:`` residual that is not a finite number >= 0 (names the file and field).
    """
    entries = {f"gemm.{dt}": d["gemm"][dt] for dt in gemm}
    entries["hbm"] = d.get("hbm")
    for scope, colls in comm.items():
        for coll in colls:
            entries[f"comm.{scope}.{coll}"] = e = d["comm"][scope][coll]
            for k, q in (e.get("by_group_size") or {}).items():    # keys checked by _group_fits
                entries[f"comm.{scope}.{coll}.by_group_size.{int(str(k))}"] = q
    for name, e in entries.items():
        f = e.get("fit") if isinstance(e, dict) else None
        for k in ("median_rel_err_ge_1MiB", "median_rel_err"):
            v = f.get(k) if isinstance(f, dict) else None
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 10):
                # above 10 (1000 %) no prediction rests on the fit: calibrate refuses 100 %
                raise InputError(w, f"{name}.fit.{k}", f"must be a number in 0 .. 10 (a relative error), got {v!r}")
    return {name: fit_sigma(e) for name, e in entries.items()}


def fit_sigma(entry, depth: int = 0) -> float | None:
    """Relative one-sigma error of a profile entry's fit: 1.4826 x its median relative residual.

    For residuals spread like a normal distribution, sigma = 1.4826 x the median absolute relative
    residual (the MAD estimator, Rousseeuw & Croux 1993).  The residual is the entry's
    ``fit.median_rel_err_ge_1MiB`` (collectives) or ``fit.median_rel_err`` (written by the fits,
    costmodel/fit).  An entry without a fit that is ``derived_from: "<gpu>:<dotted.path>"`` another
    GPU's built-in entry borrows that entry's sigma (the parameters are that fit's, so at least its
    residuals apply).  Returns None when neither exists.
    """
    if not isinstance(entry, dict):
        return None
    f = entry.get("fit")
    if isinstance(f, dict):
        v = f.get("median_rel_err_ge_1MiB", f.get("median_rel_err"))
        if v is not None:
            return MAD_TO_SIGMA * float(v)
    src = entry.get("derived_from")
    if isinstance(src, str) and ":" in src and depth < 4:
        return fit_sigma(_built_in_entry(src), depth + 1)
    return None


@lru_cache(maxsize=None)
def _built_in(gpu: str):
    """The built-in profile mapping of ``gpu`` (read once per process), or None."""
    try:
        return yaml_load((hardware_dir() / "profiles" / f"{gpu}.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None


def _entry_at(d, path: str):
    """The entry of mapping ``d`` at the dotted ``path`` (``comm.intra_node.all_reduce``), or None."""
    for key in path.split("."):
        d = d.get(key) if isinstance(d, dict) else None
    return d


def _built_in_entry(src: str):
    """The entry at ``"<gpu>:<dotted.path>"`` of the built-in profile of that GPU, or None."""
    gpu, path = src.split(":", 1)
    return _entry_at(_built_in(gpu), path)


# ------------------------------------------------------------------------------------------ writer
class Flow(dict):
    """A mapping written on one line (``{name: LL, alpha_s: ..., busbw_efficiency: ...}``)."""


class ProfileDumper(yaml.SafeDumper):
    """yaml.SafeDumper that writes :class:`Flow` mappings in flow style."""


ProfileDumper.add_representer(Flow, lambda d, x: d.represent_mapping("tag:yaml.org,2002:map", x, flow_style=True))


def plain(x):
    """numpy scalars/strings -> Python types, recursively (for yaml.dump); keeps :class:`Flow`."""
    if isinstance(x, dict):
        return type(x)({str(k): plain(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def dump_profile(d: dict, head: str = "") -> str:
    """YAML text of profile mapping ``d`` after the comment lines ``head`` (numpy scalars made plain;
    :class:`Flow` items on one line; keys in insertion order, lines up to 110 characters)."""
    return head + yaml.dump(plain(d), Dumper=ProfileDumper, sort_keys=False, width=110, allow_unicode=False)
