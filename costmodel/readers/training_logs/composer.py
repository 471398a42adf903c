"""MosaicML Composer's console log, as llm-foundry's ``train.py`` prints it.

Composer's ``ConsoleLogger.log_to_console`` (composer/loggers/console_logger.py) prints one block per
console interval: a progress header, then one tab-indented line per metric logged since the last
block, ``prefix`` "Train " on training metrics, floats with 4 decimals (``format_log_data_value``)::

    [batch=120/4800]:
    	 Train time/batch: 119
    	 Train time/sample: 30464
    	 Train time/token: 62390272
    	 Train memory/peak_reserved_mem: 71.2310
    	 Train trainer/device_train_microbatch_size: 8
    	 Train loss/train/total: 2.8107
    	 Train throughput/batches_per_sec: 0.2110
    	 Train throughput/samples_per_sec: 54.0160
    	 Train throughput/device/tokens_per_sec: 13828.0960
    	 Train throughput/device/mfu: 0.5002

The header is ``[batch=N/M]`` for a run whose ``max_duration`` is in batches (llm-foundry's
``...ba``), ``[epoch=E][batch=N/M]`` for one in epochs, ``[token=N/M]`` or ``[sample=N/M]`` otherwise;
evaluation blocks start ``[Eval batch=...`` and are not records.  What each metric means (composer
commit 640518880):

* ``throughput/*`` (callbacks/speed_monitor.py ``SpeedMonitor``): averages over a rolling window of
  ``window_size`` batches (100 by default), printed once the window is full: batches/s, samples/s
  and tokens/s of the job and per device (``device/``: divided by the world size), ``device/mfu``
  the model FLOPs the model declares per batch over the device's datasheet peak.  The step time is
  1 / ``batches_per_sec``; the global batch (sequences) is samples/s over batches/s and the sequence
  length tokens/s over samples/s.
* ``time/batch``, ``time/sample``, ``time/token`` (trainer/trainer.py): counts at the batch's start.
* ``memory/peak_reserved_mem`` (callbacks/memory_monitor.py): the caching allocator's peak reserved
  bytes over 1e9 (GB, not GiB), rounded to 5 significant digits.
* ``trainer/device_train_microbatch_size`` (trainer/trainer.py): the micro-batch per device.
"""
from __future__ import annotations

import math
import re

from .lines import _num, _short, _where

# the training progress header (console_logger.py _get_progress_string): its unit and count
_HEADER = re.compile(r"^\s*(?:\[epoch=(\d+)\])?\[(batch|sample|token|epoch)=(\d+)(?:/(\d+))?\]:\s*$")
_ITEM = re.compile(r"^\s*Train (\S+): (\S.*?)\s*$")
#: memory_monitor.py converts bytes to GB (1e9); the model counts GiB
_GB_TO_GIB = 1e9 / 2 ** 30


def _block_items(segs, i):
    """The ``(key, value, segment)`` lines of the block whose header is ``segs[i]``, and the index of the
    next segment after it."""
    items, j = [], i + 1
    while j < len(segs):
        m = _ITEM.match(segs[j].text)
        if not m:
            break
        items.append((m.group(1), m.group(2), segs[j]))
        j += 1
    return items, j


def _record(head, items, path):
    """One record of a block: ``(record | None, error | None)``."""
    m = _HEADER.match(head.text)
    vals, bad = {}, []
    for key, val, seg in items:
        try:
            vals[key] = _num(val)
        except ValueError:
            if not val.startswith(('"', "{", "Tensor", "None")):       # strings, mappings, tensors, None
                bad.append(f"{key}: {val!r}")
    if bad:
        return None, f"{_where(path, head)}: Composer record: not a number: {', '.join(bad)}"
    unit, count = m.group(2), int(m.group(3))
    batch = vals.get("time/batch")
    it = count if unit == "batch" else (int(batch) + 1 if batch is not None and math.isfinite(batch) else None)
    if it is None:
        return None, f"{_where(path, head)}: Composer record [{unit}=...] without Train time/batch: {_short(head.text)}"
    rec = {"iteration": it, "line": head.line, "rank": head.rank}
    bps, sps = vals.get("throughput/batches_per_sec"), vals.get("throughput/samples_per_sec")
    if bps is not None and bps > 0:
        rec["step_time_s"] = 1.0 / bps
        if sps is not None and sps > 0:
            # both rates are printed to 4 decimals (Composer's format_log_data_value): their ratio lands
            # near the whole batch (256.019), which it is when within the 1 % the arguments allow
            g = sps / bps
            rec["global_batch_size"] = float(round(g)) if round(g) and abs(g / round(g) - 1) < 0.01 else g
    for key, col, scale in (("throughput/device/tokens_per_sec", "tokens_per_s_per_gpu", 1.0),
                            ("throughput/device/mfu", "mfu", 1.0), ("loss/train/total", "loss", 1.0),
                            ("memory/peak_reserved_mem", "memory_gib", _GB_TO_GIB)):
        if key in vals:
            rec[col] = vals[key] * scale
    rec["_optimizer"] = next((k[3:].split("/")[0] for k in vals if k.startswith("lr-")), None)
    rec["_sizes"] = {k: vals[k] for k in ("trainer/device_train_microbatch_size", "throughput/tokens_per_sec",
                                           "throughput/samples_per_sec", "throughput/device/samples_per_sec")
                     if k in vals}
    return rec, None


def parse_composer(segs, path):
    """The training records of a Composer console log: ``(records, errors, truncated, dropped)`` as the
    other parsers give them (costmodel.readers.training_logs.read; dropped: the rank of each block an error
    left without a record), records with ``_sizes`` (the
    micro-batch and the rates that give the sequence length, for :func:`composer_args`)."""
    records, errors, truncs = [], [], []
    i, dropped = 0, []
    while i < len(segs):
        if not _HEADER.match(segs[i].text):
            i += 1
            continue
        items, j = _block_items(segs, i)
        if not items:
            if j >= len(segs):
                truncs.append(f"{_where(path, segs[i])}: a Composer progress header with no metric after it")
            i = j
            continue
        rec, err = _record(segs[i], items, path)
        if rec is not None:
            records.append(rec)
        if err is not None:
            errors.append(err)
            if rec is None:
                dropped.append(segs[i].rank)
        i = j
    return records, errors, truncs, dropped


#: optimizer classes as Composer's LRMonitor names them (``lr-{optimizer.__class__.__name__}/group{i}``,
#: composer/callbacks/lr_monitor.py): Composer's decoupled optimizers (composer/optim/decoupled_weight_decay.py)
#: and llm-foundry's DecoupledLionW (llmfoundry/optim/lion.py), PyTorch's own
COMPOSER_OPTIMIZERS = {"DecoupledAdamW": "adamw", "AdamW": "adamw", "Adam": "adam", "DecoupledLionW": "lionw",
                       "DecoupledSGDW": "sgd", "SGD": "sgd"}


def composer_args(records) -> dict:
    """The layout a Composer log states, in the argument-dump keys the layout reader takes
    (costmodel.readers.training_logs.dumps): ``micro_batch_size`` (the last
    ``trainer/device_train_microbatch_size``), ``global_batch_size`` (samples/s over batches/s, where
    the records agree on one whole number), ``seq_length`` (tokens/s over samples/s, likewise) and
    ``world_size`` (the job's samples/s over a device's, which SpeedMonitor divides by the world size) and
    ``optimizer`` (the class its learning-rate metric names, :data:`COMPOSER_OPTIMIZERS`)."""
    args = {}
    mbs = [r["_sizes"]["trainer/device_train_microbatch_size"] for r in records
           if "trainer/device_train_microbatch_size" in r["_sizes"]]
    if mbs and float(mbs[-1]).is_integer():
        args["micro_batch_size"] = int(mbs[-1])
    sz = [r["_sizes"] for r in records]
    for key, values in (("global_batch_size", [r.get("global_batch_size") for r in records]),
                        ("world_size", [z["throughput/samples_per_sec"] / z["throughput/device/samples_per_sec"]
                                        for z in sz if z.get("throughput/device/samples_per_sec")
                                        and "throughput/samples_per_sec" in z]),
                        ("seq_length", [r["_sizes"]["throughput/tokens_per_sec"] / r["_sizes"]["throughput/samples_per_sec"]
                                        for r in records if r["_sizes"].get("throughput/samples_per_sec")
                                        and "throughput/tokens_per_sec" in r["_sizes"]])):
        whole = {round(v) for v in values if v is not None and v > 0 and abs(v / round(v) - 1) < 0.01}
        if len(whole) == 1 and all(v is None or abs(v / next(iter(whole)) - 1) < 0.01 for v in values):
            args[key] = whole.pop()
    names = {r["_optimizer"] for r in records if r.get("_optimizer")}
    if len(names) == 1 and (opt := COMPOSER_OPTIMIZERS.get(next(iter(names)))):
        args["optimizer"] = opt
    return args
