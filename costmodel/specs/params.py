"""The fitted parameter sets a profile holds, as typed dataclasses (the formulas that use them live
in the cost-term modules named in each docstring)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from typing import Any

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
PROTOCOLS = ("LL", "LL128", "Simple")  # NCCL's protocols, lowest latency first
#: scale-out fabrics a cluster file names (``inter_node.fabric``) and a profile's inter-node entry was
#: measured on (its ``fabric``)
SCALE_OUT_FABRICS = ("infiniband", "roce", "efa", "omnipath", "ethernet")
#: the largest physical busbw efficiency: NVLS all-reduce inside a node, where the NVSwitch does the
#: reduction, so busbw may exceed the link (8x H100: 480 GB/s busbw over 450 GB/s NVLink)
NVLS_EFF_MAX = 1.2


@dataclass(frozen=True)
class GemmParams:
    """Fitted GEMM-efficiency parameters of one GPU (formula: costmodel/gemm.py).

    Attributes:
        eta_max: sustained fraction of the dense peak, dimensionless, in (0, 1].
        k_half: K-loop overhead in reduction elements (k / (k + k_half) efficiency).
        launch_s: fixed per-kernel time in seconds (launch + prologue).
        tile_m, tile_n: output tile size of the kernel, elements.
        num_sms: streaming multiprocessors (compute units) of the GPU, from its datasheet.
        power_limited: whether the measurements ran long enough for the GPU's power limit to set
            their clock (a sustained loop such as Azure's 10,000 warm-up iterations): True, the
            default (``calibrate fit`` decides it from the suite's sustained GEMM,
            costmodel/fit/gemm.py); False for bursts too short
            for the limit to act (XLA's 10 kernel runs per shape, mamf-finder's best shape, ~15 ms),
            which ran at the maximum clock, so the power model throttles them under the cap
            (costmodel.power.compute_under_cap).
    """

    eta_max: float
    k_half: float
    launch_s: float
    tile_m: int
    tile_n: int
    num_sms: int
    power_limited: bool = True

    @classmethod
    def from_entry(cls, g: dict) -> "GemmParams":
        """The parameters of a profile's ``gemm.<dtype>`` mapping (already validated: the fit steps'
        own output); ``power_limited`` defaults to True as in the profile loader.

        Raises:
            KeyError: a missing parameter."""
        return cls(eta_max=g["eta_max"], k_half=g["k_half"], launch_s=g["launch_s"], tile_m=g["tile_m"],
                   tile_n=g["tile_n"], num_sms=g["num_sms"], power_limited=g.get("power_limited", True))


@dataclass(frozen=True)
class AttentionKernelParams:
    """Fitted efficiency of one fused-attention kernel (FlashAttention-2/3/4) on one GPU.

    eff(s) = eta_max s / (s + s_half): each query tile loops over the keys of a sequence of s
    tokens, and a fixed per-tile cost (prologue, softmax rescaling, the causal diagonal) weighs
    like ``s_half`` keys, the form of the GEMM k-loop (costmodel.gemm).  Efficiency is executed
    FLOP/s (causal half of the s x s block, backward 2.5 x forward) over the dense 16-bit peak,
    forward + backward together.  ``s_half`` = 0 where one sequence length was measured.  Above
    ``s_max``, the longest sequence measured, the efficiency stays at its value there: the form
    is not extrapolated beyond its data (FlashAttention-3's causal efficiency saturates near its
    non-causal one, Shah et al. 2024, which the saturating form would overshoot).  ``head_dim``: the
    head dim the kernel was measured at (a profile holds one fit per measured head dim).
    """

    eta_max: float
    s_half: float = 0.0
    s_max: float = float("inf")
    head_dim: int = 128

    def efficiency(self, seq_len):
        """Efficiency at ``seq_len`` tokens (array-like, > 0); in (0, eta_max]."""
        s = np.minimum(np.asarray(seq_len, dtype=np.float64), self.s_max)
        return self.eta_max * s / (s + self.s_half)


@dataclass(frozen=True)
class CollectiveParams:
    """Fitted parameters of one collective in one scope (formula: costmodel/collective.py).

    Attributes:
        alpha_s: latency shared by every protocol, seconds; a scalar or an array over layouts
            (costmodel.comm shifts it by the latency of extra ring hops).
        protocols: ``((alpha_s, busbw_efficiency), ...)`` per NCCL protocol: the latency on top of
            ``alpha_s`` (seconds, >= 0) and the asymptotic busbw over the link bandwidth (> 0).
    Raises:
        ValueError: no protocol, a negative protocol latency or a non-positive efficiency.
    """

    alpha_s: Any = 0.0
    protocols: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "protocols", tuple((float(a), float(e)) for a, e in self.protocols))
        if not self.protocols:
            raise ValueError("CollectiveParams needs at least one protocol (alpha_s, busbw_efficiency)")
        if any(a < 0 for a, _ in self.protocols) or not all(e > 0 for _, e in self.protocols):
            raise ValueError(f"protocol latencies must be >= 0 and efficiencies > 0, got {self.protocols}")

    @classmethod
    def from_protocols(cls, protocols) -> "CollectiveParams":
        """Build from absolute per-protocol ``(alpha_s, busbw_efficiency)`` pairs (seconds, ratio).

        The smallest latency becomes the shared ``alpha_s`` and the protocols keep the rest, so that
        shifting ``alpha_s`` (costmodel.comm) moves every protocol and may lower the fastest one to 0.
        Raises:
            ValueError: as the constructor.
        """
        base = min(float(a) for a, _ in protocols) if len(protocols) else 0.0
        return cls(alpha_s=base, protocols=tuple((float(a) - base, e) for a, e in protocols))

    def with_alpha(self, alpha_s) -> "CollectiveParams":
        """The same protocol lines with the shared latency ``alpha_s`` (s, scalar or array), without
        re-validating them (the hot path of costmodel.comm shifts alpha per group size)."""
        out = object.__new__(CollectiveParams)
        object.__setattr__(out, "alpha_s", alpha_s)
        object.__setattr__(out, "protocols", self.protocols)
        return out

    @classmethod
    def lines(cls, alpha_s, protocols) -> "CollectiveParams":
        """Protocol lines whose latencies and efficiencies may be arrays over layouts (a latency of
        ``inf`` leaves that protocol out where it is), built without validation: the hot path of
        costmodel.comm picks each layout's lines from the fits of several group sizes."""
        out = object.__new__(CollectiveParams)
        object.__setattr__(out, "alpha_s", alpha_s)
        object.__setattr__(out, "protocols", tuple(protocols))
        return out

    @property
    def absolute_protocols(self) -> tuple:
        """``((alpha_s + alpha_p, eff_p), ...)``: each protocol's total latency (s) and efficiency."""
        return tuple((self.alpha_s + a, e) for a, e in self.protocols)


@dataclass(frozen=True)
class GroupFit:
    """The lines of one collective measured over groups of one size (a profile's
    ``comm.<scope>.<coll>.by_group_size`` entry, or the entry itself at its ``group_size``).

    Attributes:
        group_size: ranks of the measured groups.
        params: the fitted :class:`CollectiveParams`.
        names: the NCCL protocol name of each of ``params.protocols``, in order.
        algorithm: the NCCL algorithm the measurement ran (``ring``, ``nvls``, ...): a fit of another
            algorithm than the entry's own prices only groups of exactly its size (NCCL switches
            algorithm by group size, e.g. no NVLS at <= 2 GPUs: NVIDIA/nccl src/transport/nvls.cc).
    """

    group_size: int
    params: CollectiveParams
    names: tuple
    algorithm: str = ""


@dataclass(frozen=True)
class PowerTerm:
    """One activity term of phase power (costmodel/power.py): coefficient x utilisation.

    Attributes:
        name: the utilisation's key (``flop``); the profile's coefficient is ``power.<name>_w``.
        activity: what the utilisation measures (0..1).
        positive: the fitted coefficient must be > 0 (else >= 0).
    """

    name: str
    activity: str
    positive: bool

    @property
    def key(self) -> str:
        """The coefficient's key in a profile's ``power:`` section, W."""
        return f"{self.name}_w"


#: every activity term of phase power, in the order they are summed
POWER_TERMS = (
    PowerTerm("flop", "tensor-core utilisation: achieved / dense peak FLOP/s", True),
    PowerTerm("hbm", "HBM utilisation: achieved / datasheet bandwidth", False),
    PowerTerm("link", "NVLink/NIC utilisation while NCCL moves data", False),
    PowerTerm("spin", "1 while the GPU waits for a peer inside an NCCL kernel (bubble, slower rank), else 0",
              False),
)


#: how a power coefficient was obtained: fitted on this GPU model's data, derived from another GPU's fit
#: by a stated rule (TDP scaling), or borrowed unchanged from another GPU
POWER_BASES = ("fitted", "derived", "borrowed")


@dataclass(frozen=True)
class PowerParams:
    """Fitted power coefficients of one GPU model (hardware/profiles/*.yaml ``power:``).

    Attributes:
        idle_w: power of a GPU held by a job (context up) with no kernel running, W.
        coeff_w: term name (:data:`POWER_TERMS`) -> extra power at utilisation 1, W (``flop``: at
            100% of the dense tensor peak; ``hbm``: of the datasheet HBM bandwidth; ``link``: NVLink/NIC
            traffic at full link rate; ``spin``: an NCCL kernel polling for a peer that has not
            arrived, so a waiting GPU draws idle_w + spin_w).
        gamma: DVFS exponent of dynamic power vs SM clock above the voltage floor, dimensionless (2-3).
        min_cap_w, max_cap_w: the GPU's settable power-limit range, W (datasheet / nvidia-smi -q).
        v_floor_clock_ratio: SM-clock ratio f/f_max below which the voltage stays at its minimum and
            dynamic power falls only linearly with the clock (costmodel/power.py); 0 = none known.
        min_clock_ratio: the lowest SM clock over the maximum (the GPU file's min_clock_mhz over
            GpuSpec.full_clock_mhz); a cap never takes the clock below it.
        kernel_limit_w: the power limit the profile's kernel efficiencies (GEMM, attention) were
            measured under, W: a kernel class's power at those efficiencies is at most this
            (costmodel.power.compute_under_cap); the profile's ``power.kernel_limit_w``, else the
            GPU's TDP (the default limit a calibration runs at).
        basis: coefficient key (``idle_w``, ``flop_w``, ..., ``gamma``) -> one of :data:`POWER_BASES`;
            empty when the profile does not say.
        static_w: the clock-independent part of idle_w, W (costmodel/power.py: a capped GPU draws
            static_w + (P - static_w) g(s)); None where the profile does not give it, and then the
            whole idle power is taken as clock-independent (:attr:`static_floor_w`).
    """

    idle_w: float
    coeff_w: dict
    gamma: float
    min_cap_w: float
    max_cap_w: float
    v_floor_clock_ratio: float = 0.0
    min_clock_ratio: float = 1e-3
    kernel_limit_w: float = float("inf")
    basis: dict = field(default_factory=dict)
    static_w: float | None = None

    @property
    def static_floor_w(self) -> float:
        """The power that does not fall with the SM clock, W: static_w, else idle_w."""
        return self.idle_w if self.static_w is None else self.static_w

    def not_fitted(self) -> list:
        """``coefficient (basis)`` of every coefficient the profile marks derived or borrowed."""
        return [f"{k} ({v})" for k, v in self.basis.items() if v != "fitted"]


@dataclass(frozen=True)
class ThermalParams:
    """Fitted (or derived) first-order thermal model of one GPU (hardware/profiles/*.yaml ``thermal:``;
    formula: costmodel/thermal.py).

    Attributes:
        r_th_c_per_w: junction-to-inlet thermal resistance at a slot of scale 1, C/W.
        tau_s: thermal time constant, s.
    """

    r_th_c_per_w: float
    tau_s: float
