"""Readers of real training logs: Megatron-LM, Megatron-DeepSpeed, NeMo, torchtitan, llm-foundry's
Composer console and DeepSpeed's engine (``costmodel compare``; the last two in :mod:`.composer` and
:mod:`.deepspeed`).

``costmodel compare --log train.log`` needs the measured step time and TFLOP/s of a run and the layout it
ran with.  :func:`read_training_log` detects the framework from the content and returns a
:class:`TrainingLog`: the argument/config dump (``args``, mapped to the project's layout fields by
:meth:`TrainingLog.layout`), one row per logged iteration (:class:`Iterations`, SI units), the
iterations kept after warm-up (``kept``) and :meth:`TrainingLog.aggregate` (median and spread).

Formats (what each framework prints; units as printed, converted to SI here):

* **Megatron-LM / Megatron-core** (``megatron/training/training.py``, ``training_log``;
  https://github.com/NVIDIA/Megatron-LM): every ``--log-interval`` iterations the last rank prints ::

     [2024-04-06 02:59:36] iteration       43/     100 | consumed samples:         5504 | elapsed time per
     iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: 8.600000E-06 |
     global batch size:   128 | lm loss: 1.825991E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros:
     0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |

  (one line, every field closed by ``|``; the timestamp only in recent versions).  The elapsed time is the
  mean over the logged interval, in ms; the throughput is model TFLOP/s per GPU.  At start-up rank 0 prints
  ``using world size: 16, data-parallel size: 4, context-parallel size: 1 tensor-model-parallel size: 4,
  pipeline-model-parallel size: 1``, ``using torch.bfloat16 for parameters ...`` and the argument dump
  ``------------------------ arguments ------------------------`` / ``  tensor_model_parallel_size ....
  4`` / ``-------------------- end of arguments ---------------------`` (``arguments.py``, ``_print_args``).
* **Megatron-DeepSpeed** (https://github.com/bigscience-workshop/Megatron-DeepSpeed, BLOOM's fork, and
  https://github.com/deepspeedai/Megatron-DeepSpeed): the same line with ``elapsed time per iteration (s)``
  (seconds), ``consumed tokens``, ``samples per second`` (whole job) and ``TFLOPs: 149.02`` (hardware
  TFLOP/s per GPU, recomputation counted); the dump adds ``deepspeed``, ``zero_stage``.  Terminals and
  pasted logs sometimes wrap a record over several lines: a record line that does not end with ``|`` is
  joined with the next (at most 3) lines until it does.
* **NeMo** (https://github.com/NVIDIA/NeMo; ``exp_manager.log_step_timing``, on by default, logs
  ``train_step_timing`` in seconds): PyTorch Lightning's progress bar (tqdm, refreshed with ``\\r``) ::

     Epoch 0: : 100%|##########| 50/50 [23:22<00:00, reduced_train_loss=0.186, global_step=49.00,
     consumed_samples=51200.0, train_step_timing in s=24.00]

  with ``TFLOPS_per_GPU=...`` when the FLOPs callback is on, or NeMo 2's progress printer
  ``Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 |
  global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146``.  The iteration is
  ``global_step`` (NeMo counts from 0).  NeMo 1 logs its Hydra config after
  ``************** Experiment configuration ***********`` as YAML indented by 4 spaces under a
  ``[NeMo I ...]`` header; ``trainer:`` and ``model:`` (``tensor_model_parallel_size``, ...) are read.
* **torchtitan** (https://github.com/pytorch/torchtitan, ``torchtitan/components/metrics.py``) ::

     [rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory:
     49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%

  with ANSI colour codes around each field (stripped here); ``tps`` is tokens/s per GPU, ``tflops`` model
  TFLOP/s per GPU, ``mfu`` in %; some versions add ``grad_norm:`` and ``elapsed_time_per_step: 1.234s``.
  torchtitan prints no step time otherwise, so ``step_time_s`` is NaN unless it is printed.

Common to all: launcher rank prefixes ``[rank3]:``, ``[default7]:`` (torchrun ``--tee``), ``3: `` (srun
``--label``) and ``[1,3]<stdout>:`` (Open MPI) are stripped and kept as the row's ``rank`` label; ``#``
lines at the top of the file (our copies' source header) are skipped; a line ``[...]`` or ``...`` (an
elision in our excerpt copies) is skipped.

Bad input (each reported once as ``"FILE:LINE: reason"``; the good rows are always kept):

* no iteration line at all: :class:`TrainingLogParseError` naming the file (always raised);
* a line that looks like an iteration record but cannot be parsed (garbage, a record cut in the middle of
  the file, a value that is not a number): an entry of ``errors``; in strict mode (default)
  :class:`TrainingLogParseError` is raised after the whole file is read, carrying the partial
  :class:`TrainingLog` as ``.log``;
* the last line of the file cut short (the job was killed or the log is still being written): a warning,
  that record is dropped, the rest kept;
* several ranks printing the same iteration (interleaved rank output): a warning; one rank is kept (the
  ``rank`` argument, else the rank of the first repeated record), and within it the first line of each
  iteration.
"""
from costmodel.errors import TrainingLogParseError

from .read import read_megatron_log, read_nemo_log, read_torchtitan_log, read_training_log, warmup_mask
from .records import FRAMEWORKS, Iterations, Spread, TrainingLog

__all__ = ["FRAMEWORKS", "Iterations", "Spread", "TrainingLog", "TrainingLogParseError", "read_training_log",
           "read_megatron_log", "read_nemo_log", "read_torchtitan_log", "warmup_mask"]
