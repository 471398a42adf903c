"""The built-in profiles (``hardware/profiles/<gpu>.yaml``), fitted from public measurements.

One command regenerates every one of them, from the repository root::

    python -m costmodel.fit.builtin            # writes hardware/profiles/<gpu>.yaml, prints the fit table
    python -m costmodel.fit.builtin OUTDIR     # writes OUTDIR/<gpu>.yaml instead

Inputs: the verbatim copies of published measurements in ``hardware/profiles/data/`` (each starts
with its source header: URL, commit, hardware, configuration; the folder's README says which fit
uses which file) and the GPU datasheets of ``hardware/gpus/`` (:func:`.data.datasheet`).  What is
fitted (formulas in ``costmodel/gemm.py``, ``costmodel/collective.py``, ``costmodel/power.py`` and
``costmodel/thermal.py``), step by step (:func:`.build.build_profiles`):

* HBM, GEMM, attention: :mod:`.compute`;
* collectives inside and across nodes: :mod:`.comm`;
* power and thermal (H100 nvidia-smi training trace, FlagPerf A100 power/temperature benchmarks,
  Zeus power-limit sweeps): :mod:`.power`.

The published training-throughput tables (``shared/data/throughput``) are never read here: profiles
are fitted to microbenchmarks only.
"""
from .build import Build, build_profiles, main, write_profiles
from .data import DATA, F, GENERATED_BY, GPUS, PROFILES, datasheet, load_public

__all__ = ["Build", "build_profiles", "main", "write_profiles", "DATA", "F", "GENERATED_BY", "GPUS", "PROFILES",
           "datasheet", "load_public"]
