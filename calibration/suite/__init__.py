"""The calibration microbenchmark suite run by ``python -m costmodel.calibration.run`` on the operator's
GPUs.

One module per job:

* :mod:`.dist`        process group from torchrun (env://) or srun (SLURM_* variables), node layout,
                      gathering every rank's records to rank 0.
* :mod:`.recorder`    the per-rank list of records (format: :mod:`costmodel.readers.suite_jsonl`).
* :mod:`.timing`      CUDA-event / perf_counter timing, median over iterations.
* :mod:`.shapes`      the GEMM shapes of catalog models per TP degree, and the grid.
* :mod:`.gemm`        bf16 / fp8 / fp32 matmul throughput.
* :mod:`.hbm`         device-memory copy and triad bandwidth.
* :mod:`.collectives` all_reduce, all_gather, reduce_scatter, all_to_all, send_recv over group scopes.
* :mod:`.overlap`     a GEMM alone vs. under a concurrent all_reduce.
* :mod:`.monitor`     NVML / amdsmi power, temperature and clock sampling in a background thread.
* :mod:`.thermal`     idle baseline, sustained-GEMM step response, power-limit sweep.
* :mod:`.provenance`  where and on what the run measured.

Nothing here is imported by the cost model itself; torch is needed only to run the suite.
"""
