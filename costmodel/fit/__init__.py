"""Fits that turn measurements into profiles (hardware/README.md schema).

Two users: ``costmodel calibrate fit`` (:func:`fit_profile`, a profile from a cluster's own
measurements) and ``python -m costmodel.fit.builtin`` (:mod:`.builtin`, every built-in profile from the
public data in ``hardware/profiles/data/``).  Layout: :mod:`.measurements` (inputs, read through the
format registry of :mod:`costmodel.readers`, and the :class:`FitReport`), :mod:`.primitives` (GEMM and
NCCL protocol fits, fit statistics), one module per profile section (:mod:`.gemm`, :mod:`.hbm`,
:mod:`.comm`, :mod:`.overlap`, :mod:`.power`, :mod:`.thermal`) and :mod:`.assembly` (:func:`fit_profile`).

Inputs of ``costmodel calibrate fit`` (any mix, detected by content): the suite's JSONL
(``python -m costmodel.calibration.run``), nccl-tests stdout, ``nvidia-smi --query-gpu`` CSV, ``nvidia-smi
dmon``, ``dcgmi dmon``.  The output is a profile in the schema of ``hardware/README.md``: every
section the inputs cover is fitted and carries a ``fit:`` record (n_points, R^2 of log time,
median and max relative error, inputs); every section they do not cover is copied from the base
profile (the catalog profile of the GPU) with ``kept_from`` and a note, and :class:`FitReport` warns
about it.  What is fitted from what (formulas in the docstring of each ``fit_*`` function):

=====================  ====================================================  ==========================
section                model                                                 data
=====================  ====================================================  ==========================
gemm.<dtype>           roofline x tile/wave/K-loop efficiency (gemm.py)      suite ``gemm`` records
hbm.efficiency         achieved / datasheet bandwidth (median)               suite ``hbm`` records
comm.intra_node.<c>    NCCL protocol lines alpha_p + f n/(eff_p link)        suite ``collective`` (intra),
                       (collective.py), soft_l1 on log time                  single-node nccl-tests
comm.inter_node.<c>    hierarchical_time_s, intra scope fixed                suite (inter), multi-node
                                                                             nccl-tests (needs --cluster)
overlap                GEMM time while a collective runs / alone (median)    suite ``overlap`` records
power                  P = idle + c_flop u_flop + c_hbm u_hbm + c_link u_link suite phases x samples
                       (power.py), bounded least squares                     (unthrottled windows)
power.gamma            P - idle = k f^gamma under power limits               suite power-limit phases
power.v_floor_clock_ratio  the clock below which P - idle falls linearly      (built-in: Perseus clock sweeps)
power.idle_w           median power of idle samples                          suite idle phase or traces
thermal                T(t) = T0 + dT (1 - exp(-t/tau)), R_th = dT/dP        suite sustained-GEMM phase
                       per slot (first-order RC, thermal.py)                 per slot; traces: T vs P
=====================  ====================================================  ==========================
"""
from .assembly import GENERATED_BY, base_profile, fit_profile, gpu_key_for, poor_fits, resolve_gpu
from .comm import fit_comm_section
from .gemm import fit_gemm_section
from .hbm import fit_hbm_section
from .measurements import FitReport, Measurements, load_measurements
from .overlap import fit_overlap_section
from .power import fit_power_section
from .thermal import fit_thermal_section

__all__ = ["GENERATED_BY", "base_profile", "fit_profile", "gpu_key_for", "poor_fits", "resolve_gpu", "fit_comm_section",
           "fit_gemm_section", "fit_hbm_section", "FitReport", "Measurements", "load_measurements",
           "fit_overlap_section", "fit_power_section", "fit_thermal_section"]
