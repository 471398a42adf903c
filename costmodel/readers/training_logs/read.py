"""The training-log readers: framework detection, repeated ranks, warm-up (see the package docstring)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from costmodel.errors import InputError, TrainingLogParseError

from .dumps import _megatron_args, _nemo_args, _nemo_config, check_logged_counts
from .composer import composer_args, parse_composer
from .deepspeed import check_deepspeed_batch, deepspeed_args, parse_deepspeed
from .frameworks import _START_MARKERS, _join_wrapped, _parse_megatron, _parse_nemo, _parse_torchtitan, torchtitan_args
from .lines import _segments
from .records import FRAMEWORKS, Iterations, TrainingLog


# ---------------------------------------------------------------------------------------------- warm-up
#: values no training record can hold: a step of over 10^6 s (11.6 days), over 10^5 TFLOP/s (100 PFLOP/s)
#: per GPU, 50x any GPU's dense peak; a corrupted or mis-scaled field, dropped and named like a negative one
_IMPLAUSIBLE = {"step_time_s": 1e6, "tflops_per_gpu": 1e5}

def warmup_mask(iterations: Iterations, framework: str, start_lines=(), warmup_steps=None):
    """Which rows of ``iterations`` are kept after warm-up; returns ``(mask, description, fell_back)``.

    ``warmup_steps=N`` discards the first N logged records (file order), nothing else.  ``None`` applies the
    default rule, which discards:

    * the first two optimizer steps of the run (Megatron and torchtitan iterations 1-2, NeMo global_step 0-1:
      CUDA context, NCCL communicators, allocator growth, ``torch.compile``);
    * the first record after each start-of-training marker (Megatron ``[before the start of training step]``,
      torchtitan ``Training starts at step``): it averages over the start-up of a (re)started job;
    * records with ``number of skipped iterations > 0`` (fp16 loss-scale search at the start of a run) or
      ``number of nan iterations > 0`` (Megatron skips the optimizer step of an iteration whose gradients
      are NaN: its record times a shorter step).

    With ``warmup_steps`` the first that many records are discarded instead of the first two rules; the
    skipped and NaN records still are.  If the rule would discard every record, all are kept (with
    ``warmup_steps``, all after the warm-up) and ``fell_back`` is True.

    Args:
        iterations: the rows (:class:`Iterations`).
        framework: one of :data:`FRAMEWORKS` (NeMo counts steps from 0).
        start_lines: line numbers of start-of-training markers.
        warmup_steps: None (default rule) or the number of leading records to discard.
    Raises:
        ValueError: negative ``warmup_steps``.
    """
    n = len(iterations)
    skipped, nan_its = iterations.skipped_iterations, iterations.nan_iterations
    # a record whose optimizer step was skipped times another step, whatever the warm-up
    bad = (np.isfinite(skipped) & (skipped > 0)) | (np.isfinite(nan_its) & (nan_its > 0))
    if warmup_steps is not None:
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        after = np.arange(n) >= warmup_steps
        keep = after & ~bad
        desc = f"first {warmup_steps} logged record(s) and records with skipped or NaN iterations > 0 discarded"
        if keep.any() or not after.any():      # (a count past every record is the caller's to refuse)
            return keep, desc, False
        return after, desc + " (would discard every record: the skipped ones kept)", True
    first = 0 if framework == "nemo" else 1
    keep = iterations.iteration >= first + 2
    order = np.argsort(iterations.line, kind="stable")
    for s in start_lines:
        after = [i for i in order if iterations.line[i] > s]
        if after:
            keep[after[0]] = False
    keep &= ~bad
    desc = ("default rule: iterations < " + str(first + 2) + ", the first record after a start-of-training marker, "
            "records with skipped or NaN iterations > 0")
    if n and not keep.any():
        return np.ones(n, dtype=bool), desc + " (would discard every record: all kept)", True
    return keep, desc, False


#: the times and rates a record may print, and every figure it measures: a record one of whose times or
#: rates measures nothing is an edited or broken line, and none of its figures is used
_RATES = ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "samples_per_s")
_FIGURES = _RATES + ("mfu", "memory_gib")


def _drop_unmeasurable(records: list, path, errors: list) -> int:
    """Set to NaN, naming each in ``errors``, every figure of a record a time or rate of which measures
    nothing: <= 0 or infinite, or beyond any training step (:data:`_IMPLAUSIBLE`); its other figures
    (throughput, MFU, memory) go with it, so that every metric rests on the same records.  Returns how
    many records."""
    n = 0
    for r in records:
        for c in _RATES:
            v = r.get(c)
            if v is not None and not (v > 0 and math.isfinite(v)) and not math.isnan(v):
                errors.append(f"{path}:{r['line']}: {c} {v:g} is not a positive finite value: the record is ignored")
            elif v is not None and v > _IMPLAUSIBLE.get(c, math.inf):
                errors.append(f"{path}:{r['line']}: {c} {v:g} is beyond any training step's (over "
                              f"{_IMPLAUSIBLE[c]:g}): the record is ignored")
            else:
                continue
            for f in _FIGURES:
                if f in r:
                    r[f] = math.nan
            n += 1
            break
    return n


# ---------------------------------------------------------------------------------------------- driver
def _select_rank(records, rank, path, warnings, errors, quiet_same_rank=False):
    """Drop repeated iterations printed by several ranks; see the module docstring."""
    seen = {}
    dup = False
    for r in records:
        if r["iteration"] in seen:
            dup = True
            break
        seen[r["iteration"]] = r
    if not dup and rank is None:
        return records
    labels = []
    for r in records:
        if r["rank"] not in labels:
            labels.append(r["rank"])
    if rank is not None:
        want = str(rank)
        chosen = [lab for lab in labels if lab is not None and (lab == want or re.sub(r"\D+", "", lab) == want)]
        if not chosen:
            seen = ", ".join(repr(x) for x in labels if x is not None)
            errors.append(f"{path}: no iteration line from rank {want!r} ("
                          + (f"rank prefixes seen: {seen})" if seen else "its lines carry no rank prefix)"))
            return []
        label = chosen[0]
    else:
        counts = {}
        for r in records:
            counts[r["iteration"]] = counts.get(r["iteration"], 0) + 1
        first_dup = next(r for r in records if counts[r["iteration"]] > 1)
        label = first_dup["rank"]
    mine = [r for r in records if r["rank"] == label]
    _refuse_unmarked_restart(mine, path)
    out, by_it = [], {}
    for r in mine:
        if r["iteration"] in by_it:
            if quiet_same_rank:
                out[by_it[r["iteration"]]] = r  # a progress bar refreshed: keep its last state
            continue
        by_it[r["iteration"]] = len(out)
        out.append(r)
    dropped = len(records) - len(out)
    if dropped and not (quiet_same_rank and len(labels) == 1):
        first_line = out[0]["line"] if out else records[0]["line"]
        if labels == [None]:
            warnings.append(f"{path}:{first_line}: iterations are printed more than once (several ranks, no rank "
                            f"prefix); kept the first line of each iteration, dropped {dropped} line(s)")
        else:
            shown = ", ".join("(none)" if x is None else repr(x) for x in labels[:8])
            warnings.append(f"{path}:{first_line}: iterations are printed more than once (interleaved ranks; rank "
                            f"prefixes seen: {shown}); kept rank {label!r}, first line of each iteration, dropped "
                            f"{dropped} line(s); choose another with compare --rank N")
        spread = _copies_spread(records, out)
        if spread:
            warnings.append(f"{path}: the copies of an iteration disagree: {spread}; the kept rank's figures are "
                            "compared (a pipeline's last stage prints the step the job took; choose with --rank N)")
    return out


#: the largest relative difference between two copies of one iteration's figure that is only the print's
#: rounding or clock jitter between ranks
_COPY_SPREAD = 0.05


def _copies_spread(records, kept) -> str:
    """'' when every copy of a kept iteration agrees with the kept record's step time (or tokens/s) within
    :data:`_COPY_SPREAD`, else the widest gap: iteration, the two ranks and their figures."""
    mine = {r["iteration"]: r for r in kept}
    worst = (0.0, None)
    for r in records:
        k = mine.get(r["iteration"])
        if k is None or r is k:
            continue
        for f in ("step_time_s", "tokens_per_s_per_gpu"):
            a, b = k.get(f), r.get(f)
            if a and b and a == a and b == b:
                gap = abs(b - a) / a
                if gap > worst[0]:
                    worst = (gap, (f, k, r))
                break
    if worst[0] <= _COPY_SPREAD:
        return ""
    f, k, r = worst[1]
    name = lambda x: "(no prefix)" if x["rank"] is None else repr(x["rank"])     # noqa: E731
    return (f"at iteration {k['iteration']} rank {name(r)} printed {f} {r[f]:.4g}, rank {name(k)} {k[f]:.4g} "
            f"({100 * (r[f] / k[f] - 1):+.0f}%)")


#: how much later than a higher iteration's first print a repeated iteration must be to be a second run,
#: s: more than the clock skew of the nodes that print (NTP keeps it under a second), less than a
#: restart's start-up (launch, NCCL set-up and a checkpoint load take minutes)
_RESTART_S = 60.0


def _refuse_unmarked_restart(records, path) -> None:
    """Refuse one rank's records (line order) that repeat an iteration printed after the run had gone
    past it: the repeat's timestamp is over :data:`_RESTART_S` later than the first print of a higher
    iteration (a second run appended without a start-of-training marker; several ranks printing the same
    step, or per-rank files joined, print each repeat at about its first's time).  Records without
    timestamps are not judged.

    Raises:
        InputError: naming the repeat's line and the first run's line it comes after.
    """
    first, top = {}, None           # iteration -> its first record; the highest iteration's first record
    for r in records:
        it, t = r["iteration"], r.get("t_unix")
        if it not in first:
            first[it] = r
            if top is None or it > top["iteration"]:
                top = r
            continue
        if t is not None and top["iteration"] > it and top.get("t_unix") is not None and t > top["t_unix"] + _RESTART_S:
            raise InputError(f"{path}:{r['line']}", "", f"iteration {it} is printed again here, after iteration "
                             f"{top['iteration']} (line {top['line']}, an earlier time): a second run appended to "
                             "the log without a start-up line; split the file and compare each run")


# Megatron-LM's report_memory line: "[Rank 3] (after 10 iterations) memory (MB) | ... | max reserved: 66080.0"
_MEMORY_REPORT = re.compile(r"\bmemory \(MB\)\s*\|.*\bmax reserved:\s*([\d.]+)")


def _refuse_restart(records, starts, path) -> None:
    """Refuse a log holding a restarted run: a start-of-training marker (``starts``: its line and rank
    label) after which the iterations of that rank count again from at most the last one before it (a job resumed from a checkpoint, or another run
    appended): its steps ran on another start, perhaps other nodes, and one median over both would
    mix them.

    Raises:
        InputError: naming the marker's line and the last record before it.
    """
    for at, rank in starts:
        # a rank that prints records and its own marker (torchtitan): its records alone tell a restart from
        # interleaved output; a marker of a rank printing none (Megatron's rank 0) speaks for every rank
        mine = [r for r in records if r.get("rank") == rank] if rank is not None else []
        mine = mine or records
        before = [r for r in mine if r["line"] < at]
        after = [r for r in mine if r["line"] > at]
        if before and after and min(r["iteration"] for r in after) <= max(r["iteration"] for r in before):
            last = max(before, key=lambda r: r["iteration"])
            first = min(after, key=lambda r: r["line"])
            raise InputError(f"{path}:{at}", "", f"the run starts again here: iteration {first['iteration']} "
                             f"(line {first['line']}) follows iteration {last['iteration']} (line {last['line']}), a "
                             "restart or a second run in one log; split the file and compare each run")


def _read(path, framework=None, warmup_steps=None, rank=None, strict=True) -> TrainingLog:
    path = Path(path)
    segs = _segments(path)
    warnings, errors = [], []
    join_warnings = []
    if framework in (None, "megatron", "megatron-deepspeed"):
        segs_m = _join_wrapped(segs, join_warnings, path)
    else:
        segs_m = segs

    # records, errors, truncs, the rank of each record line an error dropped
    found = {k: ([], [], [], []) for k in ("megatron", "nemo", "torchtitan", "llm-foundry", "deepspeed")}
    mds_keys = False
    bar_lines = 0
    if framework in (None, "megatron", "megatron-deepspeed"):
        for s in segs_m:
            rec, err, trunc, mds = _parse_megatron(s, path)
            mds_keys = mds_keys or mds
            _collect(found["megatron"], rec, err, trunc, s.rank)
    if framework in (None, "nemo"):
        for s in segs:
            rec, err, trunc, is_bar = _parse_nemo(s, path)
            bar_lines += bool(is_bar and rec)
            _collect(found["nemo"], rec, err, trunc, s.rank)
    if framework in (None, "torchtitan"):
        for s in segs:
            rec, err, trunc = _parse_torchtitan(s, path)
            _collect(found["torchtitan"], rec, err, trunc, s.rank)
    if framework in (None, "llm-foundry"):
        found["llm-foundry"] = parse_composer(segs, path)
    if framework in (None, "deepspeed"):
        found["deepspeed"] = parse_deepspeed(segs, path)

    if framework is None:
        # Megatron-DeepSpeed prints DeepSpeed's throughput lines beside its own records: its own win
        order = ("llm-foundry", "torchtitan", "nemo", "megatron") + (() if found["megatron"][0] else ("deepspeed",))
        kind = max(order, key=lambda k: (len(found[k][0]), len(found[k][1]) + len(found[k][2]), -order.index(k)))
    else:
        kind = "megatron" if framework == "megatron-deepspeed" else framework
    records, errs, truncs, dropped_ranks = found[kind]
    errors.extend(errs)
    if kind == "megatron":
        warnings.extend(join_warnings)
    trunc_warnings = []
    for t in truncs:
        where, _, reason = t.partition(": ")
        trunc_warnings.append(f"{where}: last line is truncated, record dropped ({reason})")
    warnings.extend(trunc_warnings)

    log = TrainingLog(path=str(path), framework=kind, warnings=warnings, errors=errors)
    if kind == "megatron":
        log.args, log.args_complete, log.startup_args = _megatron_args(segs, path, warnings)
        check_logged_counts(log.args, path)
        if (mds_keys or log.args.get("deepspeed") is True or "zero_stage" in log.args
                or framework == "megatron-deepspeed"):
            log.framework = "megatron-deepspeed"
    elif kind == "llm-foundry":
        log.args = composer_args(records)
        for r in records:
            r.pop("_sizes", None)
    elif kind == "deepspeed":
        log.args = deepspeed_args(segs)
        check_logged_counts(log.args, path)
        check_deepspeed_batch(log.args, path)
        for r in records:           # CurrSamplesPerSec is the global batch over the step's time
            rate = r.get("samples_per_s")
            # a rate that measures nothing is named as printed (_drop_unmeasurable), not as a step
            if log.args.get("global_batch_size") and rate is not None and rate > 0 and math.isfinite(rate):
                r["step_time_s"] = log.args["global_batch_size"] / rate
    elif kind == "torchtitan":
        log.args = torchtitan_args(segs, path, warnings)
        log.startup_args = frozenset(log.args)     # its start-up lines: torchtitan prints no argument dump
    elif kind == "nemo":
        log.config = _nemo_config(segs, path, warnings)
        log.args = _nemo_args(log.config)
        check_logged_counts(log.args, path)
        log.args_complete = bool(log.config)
        if records and bar_lines and all(math.isnan(r.get("step_time_s", math.nan)) for r in records):
            warnings.append(f"{path}: NeMo progress lines carry no 'train_step_timing in s' (enable "
                            f"exp_manager.log_step_timing); step_time_s is NaN")

    markers = [s for s in segs if any(k in s.text for k in _START_MARKERS) or s.text.strip() == "training ..."]
    starts = [s.line for s in markers]
    _refuse_restart(records, [(s.line, s.rank) for s in markers], path)
    log.memory_reports_gib = [float(m.group(1)) / 1024.0 for s in segs for m in [_MEMORY_REPORT.search(s.text)] if m]
    if segs and "memory (MB)" in segs[-1].text and not _MEMORY_REPORT.search(segs[-1].text):
        warnings.append(f"{path}:{segs[-1].line}: last line is truncated, memory report dropped "
                        f"(no max reserved: {segs[-1].text.strip()[-60:]!r})")
    n_parsed = len(records)
    records = _select_rank(records, rank, path, warnings, errors, quiet_same_rank=(kind == "nemo"))
    log.unreadable_records = _own_dropped(dropped_ranks, records) + _drop_unmeasurable(records, path, errors)
    log.iterations = Iterations.from_records(records)
    log.kept, log.warmup, fell_back = warmup_mask(log.iterations, log.framework, starts, warmup_steps)
    log.warmup_only = fell_back
    if fell_back:
        warnings.append(f"{path}: the warm-up rule would discard all {len(records)} iteration record(s); all kept")
    nan_loss = [r["line"] for i, r in enumerate(records) if log.kept[i] and isinstance(r.get("loss"), float)
                and not math.isfinite(r["loss"])]
    if nan_loss:
        # the step ran (unlike Megatron's skipped or NaN-counted iterations, whose optimizer step did not)
        warnings.append(f"{path}:{nan_loss[0]}: {len(nan_loss)} kept record(s) print a NaN or infinite loss, the first "
                        "here: a diverged run; its step times are used as printed")

    if n_parsed and not records:
        raise TrainingLogParseError(errors, log)
    if not records:
        what = {"megatron": "Megatron 'iteration N/ M | ... elapsed time per iteration ... |'",
                "nemo": "NeMo 'train_step_timing in s' / 'global_step='",
                "torchtitan": "torchtitan 'step: N  loss: ...'",
                "llm-foundry": "Composer '[batch=N/M]:' blocks of 'Train throughput/...' lines",
                "deepspeed": "DeepSpeed 'epoch=E/micro_step=M/global_step=N, ... CurrSamplesPerSec=...'"}
        looked = what[kind] if framework else "; ".join(what.values())
        raise TrainingLogParseError([f"{path}: no iteration lines found (looked for {looked})"] + errors
                                    + trunc_warnings, log)
    if strict and errors:
        raise TrainingLogParseError(errors, log)
    return log


def _own_dropped(dropped_ranks: list, records: list) -> int:
    """How many of the record lines an error dropped (``dropped_ranks``: each one's rank label) are of the
    ranks ``records`` come from (after rank selection): other ranks' garbled lines are not theirs."""
    kept_ranks = {r.get("rank") for r in records}
    return sum(1 for rk in dropped_ranks if not kept_ranks or rk in kept_ranks)


def _collect(bucket, rec, err, trunc, rank=None):
    records, errs, truncs, dropped = bucket
    if rec is not None:
        records.append(rec)
    if err is not None:         # with a record: a field of it left out
        (truncs if trunc else errs).append(err)
    if err is not None and rec is None and not trunc:
        dropped.append(rank)    # the rank of a record line none of whose figures could be read


def read_training_log(path, warmup_steps=None, framework=None, rank=None, strict=True) -> TrainingLog:
    """Read a Megatron-LM, Megatron-DeepSpeed, NeMo, torchtitan, llm-foundry (Composer) or DeepSpeed
    training log, detecting the framework.

    Formats, units and the bad-input policy: see the module docstring.  Detection: the framework whose
    iteration-record format matches the most lines (ties: llm-foundry, torchtitan, NeMo, Megatron, then
    DeepSpeed, which a log with Megatron records never is: Megatron-DeepSpeed prints both); Megatron logs are
    reported as ``"megatron-deepspeed"`` when the records carry ``TFLOPs`` / ``samples per second`` /
    ``consumed tokens`` or the dump has ``deepspeed`` / ``zero_stage``.

    Args:
        path: the log file (str or Path).
        warmup_steps: discard the first N logged records; None applies the default rule of
            :func:`warmup_mask` (first two steps, first record after a (re)start, fp16 skipped iterations).
        framework: force one of :data:`FRAMEWORKS` instead of detecting it.
        rank: when several ranks print the same iterations, keep this rank (its prefix label, e.g. ``"default7"``,
            or its number); default: the rank of the first repeated record.
        strict: raise :class:`TrainingLogParseError` (carrying the partial log as ``.log``) when some record-like
            lines could not be parsed; False returns the log with ``errors`` filled.
    Returns:
        :class:`TrainingLog` (times in s, TFLOP/s per GPU).
    Raises:
        TrainingLogParseError: no iteration line at all (always), or bad record lines (strict); the message
            names the file and each line.
        ValueError: unknown ``framework`` or negative ``warmup_steps``.
        OSError: the file cannot be read.
    """
    if framework is not None and framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; expected one of {', '.join(FRAMEWORKS)}")
    return _read(path, framework, warmup_steps, rank, strict)


def read_megatron_log(path, warmup_steps=None, rank=None, strict=True) -> TrainingLog:
    """Read a Megatron-LM / Megatron-core or Megatron-DeepSpeed log (``iteration N/ M | ... |`` records).

    Format: ``training_log`` in https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/training.py and
    the argument dump of ``megatron/training/arguments.py``; Megatron-DeepSpeed's variant in
    https://github.com/bigscience-workshop/Megatron-DeepSpeed (details in the module docstring).
    ``framework`` of the result is ``"megatron"`` or ``"megatron-deepspeed"`` (see :func:`read_training_log`).
    Units: ``elapsed time per iteration (ms)`` or ``(s)`` -> ``step_time_s`` in s; ``throughput per GPU
    (TFLOP/s/GPU)`` and ``TFLOPs`` -> ``tflops_per_gpu`` in TFLOP/s per GPU.  Arguments and errors as
    :func:`read_training_log` (:class:`TrainingLogParseError`, ValueError, OSError).
    """
    return _read(path, "megatron", warmup_steps, rank, strict)


def read_nemo_log(path, warmup_steps=None, rank=None, strict=True) -> TrainingLog:
    """Read a NeMo log: Lightning progress bar or NeMo 2 progress printer lines with ``train_step_timing in s``
    (seconds per step) and ``TFLOPS_per_GPU`` (TFLOP/s per GPU), and the YAML experiment configuration when NeMo 1
    prints it.

    Format: ``exp_manager.log_step_timing`` in https://github.com/NVIDIA/NeMo (``nemo/utils/exp_manager.py``,
    step timing in s; ``nemo/lightning/pytorch/callbacks/progress_printer.py`` for NeMo 2); details in the module
    docstring.  Iteration = ``global_step`` (from 0).  Arguments and errors as :func:`read_training_log`.
    """
    return _read(path, "nemo", warmup_steps, rank, strict)


def read_torchtitan_log(path, warmup_steps=None, rank=None, strict=True) -> TrainingLog:
    """Read a torchtitan log (``step: N  loss: ...  memory: ...GiB(..%)  tps: N  tflops: X  mfu: Y%``; ANSI colour
    codes stripped).

    Format: ``MetricsProcessor.log`` in https://github.com/pytorch/torchtitan
    (``torchtitan/components/metrics.py``).  ``tps`` -> ``tokens_per_s_per_gpu`` (tokens/s per GPU), ``tflops``
    -> ``tflops_per_gpu`` (TFLOP/s per GPU), ``mfu`` -> fraction, ``memory`` -> ``memory_gib``; ``step_time_s``
    only when ``elapsed_time_per_step: 1.2s`` is printed.  Arguments and errors as :func:`read_training_log`.
    """
    return _read(path, "torchtitan", warmup_steps, rank, strict)
