"""DeepSpeed's own training log: its engine's throughput lines and its configuration print.

At every ``steps_per_print`` optimizer steps rank 0's ``ThroughputTimer.stop`` (deepspeed/utils/timer.py,
DeepSpeed commit edaa72212) logs::

    [2024-08-01 12:01:00,001] [INFO] [timer.py:260:stop] epoch=0/micro_step=80/global_step=10,
    RunningAvgSamplesPerSec=41.2, CurrSamplesPerSec=41.5, MemAllocated=30.1GB, MaxMemAllocated=61.8GB

(one line).  The timer runs from each micro-step's forward (or the DeepSpeed data loader's fetch) to its
``step()``, so ``CurrSamplesPerSec`` is the engine's ``train_batch_size`` (the global batch) over the
summed micro-step times of the last optimizer step: the step time is the global batch over it; the
running average leaves out the first ``start_step`` (2) steps.  The memory figures are
``memory_allocated`` / ``max_memory_allocated`` over 1024**3 (GiB), not reserved memory.

At start-up ``DeepSpeedConfig.print`` (deepspeed/runtime/config.py) logs ``  <attribute> <dots>
<value>`` for every attribute of the configuration: ``train_batch_size``,
``train_micro_batch_size_per_gpu``, ``zero_optimization_stage``, ``world_size``, ``bfloat16_enabled``
(``bfloat16_config`` in later versions, printed as ``enabled=True ...``), ``fp16_enabled`` and ``zero_config``
(``DeepSpeedZeroConfig``'s fields: ``overlap_comm=True``, ``offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(
device='cpu', ...)`` or ``None``, ``offload_param`` alike).
"""
from __future__ import annotations

import re

from ...errors import InputError
from .lines import _num, _short, _wall_time, _where

_STEP = re.compile(r"\bepoch=(\d+)/micro_step=(\d+)/global_step=(\d+), RunningAvgSamplesPerSec=([^,\s]+), "
                   r"CurrSamplesPerSec=([^,\s]+)")
#: the start of a timer line, to tell a line the file cuts short from another line
_STEP_START = re.compile(r"\bepoch=\d+/micro_step=\d+/global_step=\d+")
#: the timer line's peak allocated memory: max_memory_allocated() / 1024**3, printed as "GB"
#: (deepspeed/utils/timer.py ThroughputTimer.stop): GiB of tensors, not the allocator's reserved cache
_MAX_MEM = re.compile(r"\bMaxMemAllocated=([\d.]+)GB")
_CONFIG = re.compile(r"\[config\.py:\d+:print\]\s+(\w+)\s*\.*\s+(\S.*?)\s*$")
#: the configuration attributes read, as the argument-dump keys the layout reader takes
_KEYS = {"train_batch_size": "global_batch_size", "train_micro_batch_size_per_gpu": "micro_batch_size",
         "zero_optimization_stage": "zero_stage", "world_size": "world_size",
         "gradient_accumulation_steps": "gradient_accumulation_steps"}


def parse_deepspeed(segs, path):
    """The optimizer-step records of DeepSpeed's throughput lines: ``(records, errors, truncated, dropped)``
    as the other parsers give them (dropped: the rank of each line an error left without a record); ``samples_per_s`` is the job's (the global batch per step),
    ``memory_gib`` its peak allocated memory (:data:`_MAX_MEM`)."""
    records, errors, truncs, dropped = [], [], [], []
    for i, s in enumerate(segs):
        m = _STEP.search(s.text)
        if not m:
            if i == len(segs) - 1 and _STEP_START.search(s.text):      # the file ends inside the line
                truncs.append(f"{_where(path, s)}: DeepSpeed timer line cut before CurrSamplesPerSec: {_short(s.text)}")
            continue
        try:
            rate = _num(m.group(5))
        except ValueError:
            errors.append(f"{_where(path, s)}: DeepSpeed step {m.group(3)}: CurrSamplesPerSec is not a number: "
                          f"{_short(s.text)}")
            dropped.append(s.rank)
            continue
        # a rate <= 0 measures nothing: the reader drops the record, naming its line
        rec = {"iteration": int(m.group(3)), "line": s.line, "rank": s.rank, "t_unix": _wall_time(s.text),
               "samples_per_s": rate}
        mem = _MAX_MEM.search(s.text, m.end())
        if mem:
            rec["memory_gib"] = float(mem.group(1))
        records.append(rec)
    return records, errors, truncs, dropped


def check_deepspeed_batch(args: dict, path) -> None:
    """Refuse a configuration print whose global batch is not its micro-batch x gradient-accumulation
    steps x data-parallel world size (``world_size`` there: DeepSpeedConfig's, the data-parallel group's),
    which DeepSpeed asserts at start-up (runtime/config.py ``_batch_assertion``): the lines come from
    different runs, or were edited.

    Raises:
        InputError: naming the file and train_batch_size.
    """
    keys = ("global_batch_size", "micro_batch_size", "gradient_accumulation_steps", "world_size")
    gbs, mbs, gas, world = (args.get(k) for k in keys)
    if None not in (gbs, mbs, gas, world) and gbs != mbs * gas * world:
        raise InputError(path, "train_batch_size", f"{gbs} is not train_micro_batch_size_per_gpu {mbs} x "
                         f"gradient_accumulation_steps {gas} x world_size {world} = {mbs * gas * world}, which DeepSpeed "
                         "asserts: the configuration lines come from different runs, or were edited")


def deepspeed_args(segs) -> dict:
    """The configuration print's layout as argument-dump keys (``global_batch_size``,
    ``micro_batch_size``, ``zero_stage``, ``world_size``, ``bf16`` / ``fp16``; from ``zero_config``
    ``overlap_grad_reduce`` (overlap_comm), ``optimizer_cpu_offload`` and ``offload_param`` (an offload
    device other than none)), with ``deepspeed`` True; the first print of each attribute."""
    args = {"deepspeed": True}
    for s in segs:
        m = _CONFIG.search(s.text)
        if not m:
            continue
        key, val = m.group(1), m.group(2)
        if key in _KEYS and _KEYS[key] not in args:
            try:
                v = _num(val)
            except ValueError:
                continue
            if v.is_integer():
                args[_KEYS[key]] = int(v)
        elif key in ("bfloat16_enabled", "fp16_enabled") and val in ("True", "False"):
            args.setdefault("bf16" if key.startswith("bfloat16") else "fp16", val == "True")
        elif key == "bfloat16_config" and "enabled=" in val:
            args.setdefault("bf16", "enabled=True" in val)
        elif key == "zero_config" and "zero_config" not in args:
            args["zero_config"] = True
            ov = re.search(r"\boverlap_comm=(True|False)\b", val)
            if ov:
                args["overlap_grad_reduce"] = ov.group(1) == "True"
            for what, to in (("offload_optimizer", "optimizer_cpu_offload"), ("offload_param", "offload_param")):
                off = re.search(rf"\b{what}=(None|\w+\(device='(\w+)')", val)
                if off:
                    args[to] = off.group(2) not in (None, "none")
    return args
