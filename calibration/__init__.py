"""The GPU microbenchmark suite (``run.py``, ``suite/``), installed as ``costmodel.calibration``.

Run it where the GPUs are: ``torchrun --nproc-per-node 8 -m costmodel.calibration.run --out raw.jsonl``
(``costmodel calibrate run`` prints and runs that line).  It may use :mod:`costmodel`; the cost model
never imports it.
"""
