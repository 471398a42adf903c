"""``costmodel compare``'s inputs read as files: the training log (warm-up only refused) and the power
trace, each error naming the file or ``--power``; what it says of the log's records (how many were
used, discarded and unreadable); and the refusals before any pricing: a log that times no iteration,
and every value neither the log nor a flag gives, asked for at once."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..compare import REQUIRED, STACK_DEFAULTS, catalog_models_where
from ..errors import InputError
from ..files import not_a_file


def _local(msg: str, path) -> str:
    """A reader's ``"FILE: ..."`` or ``"FILE:LINE: ..."`` message without the file (the error names it)."""
    p = str(path)
    if msg.startswith(p + ": "):
        return msg[len(p) + 2:]
    return "line " + msg[len(p) + 1:] if msg.startswith(p + ":") else msg


def _read_log(path, warmup_steps, rank):
    from ..readers.training_logs import TrainingLogParseError, read_training_log
    if not Path(path).is_file():
        raise InputError(path, "", "is a directory, not a log file" if Path(path).is_dir() else not_a_file(path))
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
            if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16's byte-order mark (Windows tools write it)
                raise InputError(path, "", "UTF-16 text, not UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)")
            if b"\x00" in head:            # text logs hold no NUL byte; gzip, ELF and images do
                raise InputError(path, "", "a binary file, not a training log (decompress a .gz log first)")
        tlog = read_training_log(path, warmup_steps=warmup_steps, rank=rank, strict=False)
    except TrainingLogParseError as e:
        errs = [_local(x, path) for x in e.errors] or ["no iteration lines"]
        if Path(path).stat().st_size == 0 or not Path(path).read_text(errors="replace").strip():
            raise InputError(path, "", "empty: no lines to read") from None
        # iteration lines that were refused say more than 'none found': the first of them, and how many
        refused = [x for x in errs if not x.startswith("no iteration lines found")]
        if refused and errs[0].startswith("no iteration lines found"):
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            raise InputError(path, "", f"unusable training log: no usable iteration line; {refused[0]}{more}") from None
        raise InputError(path, "", f"unusable training log: {errs[0]}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, "", f"cannot read ({e})") from None
    if tlog.warmup_only:
        it = tlog.iterations
        its = sorted({int(i) for i in it.iteration})
        bad = [(np.isfinite(x) & (x > 0)) for x in (it.skipped_iterations, it.nan_iterations)]
        if (bad[0] | bad[1]).all():
            what = "NaN" if bad[1].all() else "skipped" if bad[0].all() else "skipped or NaN"
            raise InputError(path, "", f"every logged record ({len(its)}) counts {what} iterations (Megatron's "
                             "'number of skipped/nan iterations'): no step of it updated the model, so none times "
                             "the run; log iterations that train")
        raise InputError(path, "", f"every logged record is warm-up (iterations {', '.join(map(str, its[:6]))}"
                         f"{', ...' if len(its) > 6 else ''}: the first steps and the first after a start build "
                         "communicators, allocate and compile): their steps are not the run's; log more iterations, "
                         "or pass --warmup-steps 0 to compare them anyway")
    return tlog


#: nvidia-smi's query fields of the power limit a capture may carry (nvidia-smi --help-query-gpu)
_LIMIT_FIELDS = ("enforced.power.limit", "power.limit")


def trace_limit_note(ptrace, cluster) -> list:
    """The note where a capture states the GPUs' power limit (an nvidia-smi CSV's ``power.limit`` or
    ``enforced.power.limit`` column, its median) and it differs from the cluster's by over 1%: compare
    predicts at the cluster's (ClusterSpec.power_limit_w), which a cluster file's
    ``power.gpu_power_limit`` sets; [] otherwise."""
    cols = getattr(getattr(ptrace, "table", None), "columns", None) or {}
    field = next((f for f in _LIMIT_FIELDS if f in cols), None)
    if field is None:
        return []
    v = np.asarray(cols[field], dtype=float)
    if not np.isfinite(v).any():
        return []
    limit = float(np.nanmedian(v))
    if abs(limit - cluster.power_limit_w) <= 0.01 * cluster.power_limit_w:
        return []
    return [f"the capture's {field} reads {limit:.0f} W, the prediction runs at {cluster.key}'s "
            f"{cluster.power_limit_w:.0f} W limit: a cluster file with power.gpu_power_limit: {limit:.0f} W "
            "(hardware/README.md) prices the run at the limit it ran under"]


def _read_trace(path, gpus_per_node):
    """The run's power trace, read through the format registry; an nvidia-smi CSV without an ``index``
    column is numbered with the cluster's GPUs per node."""
    from ..errors import ReaderParseError
    from ..readers.registry import read_power_trace
    if Path(path).is_dir():
        raise InputError("--power", "", f"{path} is a directory; name the trace file")
    if not Path(path).is_file():
        raise InputError(path, "", not_a_file(path))
    try:
        fmt, data, warns = read_power_trace(path, gpus_per_node)
    except (ReaderParseError, ValueError, OSError) as e:
        first = (getattr(e, "errors", None) or [None])[0]      # one line: the first bad line says why
        raise InputError("--power", "", str(e).split("\n")[0] + (f" (the first: {first})" if first else "")) from None
    if data is None:
        raise InputError("--power", "", f"{path} is {fmt}, not a power/temperature trace (nvidia-smi CSV or dmon, "
                                        "dcgmi dmon, the suite's JSONL)")
    if data.t_unix.size == 0 or not (data.power_w == data.power_w).any():
        why = (f"; {len(warns)} bad line(s), the first: {warns[0]}" if warns else
               " (a suite run on CPU samples none)" if fmt == "suite-jsonl" else "")
        raise InputError("--power", "", f"{path} ({fmt}) has no power samples{why}")
    return data, _summarised(list(warns))


#: bad lines of a trace named one by one, the rest counted (a column in another unit fails on every row)
MAX_NAMED_LINES = 5


def _summarised(warns: list) -> list:
    """``warns`` with at most :data:`MAX_NAMED_LINES` named and one more line counting the rest."""
    if len(warns) <= MAX_NAMED_LINES + 1:
        return warns
    return warns[:MAX_NAMED_LINES] + [f"... and {len(warns) - MAX_NAMED_LINES} more bad line(s) of the trace, "
                                      "each left out"]


def _records_text(tlog, out) -> str:
    """'3 logged records used (iterations 20-40), 1 discarded': the counts are of printed records, each of
    which may average several iterations (a log interval)."""
    def n(k, word):
        return f"{k} {word}{'' if k == 1 else 's'}"
    its = tlog.iterations
    # the records the figures come from: kept, with a step time or a throughput (a Composer block
    # printed before its first throughput window has neither)
    used = tlog.kept & (np.isfinite(its.step_time_s) | np.isfinite(its.tokens_per_s_per_gpu))
    it = its.iteration[used]
    span = ""
    if it.size:
        lo, hi = int(it.min()), int(it.max())
        span = f" ({'iteration' if lo == hi else 'iterations'} {lo}{'' if lo == hi else f'-{hi}'})"
    bad = f", {out['records_unreadable']} unreadable (named in the notes)" if out.get("records_unreadable") else ""
    return f"{n(out['iterations_used'], 'logged record')} used{span}, {out['warmup_steps_discarded']} discarded{bad}"


def unreadable_note(tlog, log, used: int) -> list:
    """A note where more of the log's record lines are unreadable (costmodel.readers TrainingLog
    ``unreadable_records``) than the ``used`` records the measured figures rest on: a damaged or edited log."""
    if tlog.unreadable_records <= used:
        return []
    return [f"{log}: {tlog.unreadable_records} of its record lines are unreadable (named in these notes), more than "
            f"the {used} the measured figures rest on: a damaged or edited log"]


def _refuse_untimed(tlog, log) -> None:
    """Refuse a log none of whose iterations prints a step time or tokens/s before asking for the flags it
    lacks: nothing could be compared with them either (a printed value that is no time is named later,
    with the kept iterations).

    Raises:
        InputError: naming the log and how its framework prints a step time."""
    its = tlog.iterations
    timed = np.isfinite(its.step_time_s).any() or np.isfinite(its.tokens_per_s_per_gpu).any()
    if not timed and not any("is not a positive finite value" in e or "beyond any training step" in e
                             for e in tlog.errors):
        raise InputError(log, "", f"the {tlog.framework} log prints no step time nor tokens/s in any iteration "
                         "(NeMo: enable log_step_timing; torchtitan: tps; llm-foundry: the speed_monitor callback)")


def _catalog_of(params) -> str:
    """'; its N parameters are the catalog's a / b' for the catalog models within 0.5% of ``params`` (a
    log's printed total, torchtitan's), or ''."""
    if not params:
        return ""
    alike = catalog_models_where(lambda x: abs(x.params() / params - 1.0) <= 0.005)
    return f"; its {params:,} parameters are the catalog's {' / '.join(alike)}" if alike else ""


def _ask_once(ll: dict, flags: dict, model, nodes, stack: str, log, args: dict | None = None) -> None:
    """Refuse, in one message, every value neither the log nor a flag gives and nothing may default:
    the required layout fields (less the stack's own defaults), the world (``--nodes``) and the model
    (``--model``, when the log prints no dimensions; the catalog models of the parameter count the log's
    ``args`` print, where any).

    Raises:
        InputError: naming every missing flag and why.
    """
    own = STACK_DEFAULTS.get(stack, {})
    miss = [f"--{k.replace('_', '-')}" for k in REQUIRED if flags.get(k) is None and ll.get(k) is None and k not in own]
    floor = f"; its consumed_samples count makes it at least {ll['gbs_floor']}" if ll.get("gbs_floor") else ""
    why = [f"{m}: " + ("no argument dump or start-up line gives it, and its iteration lines give no one global "
                       f"batch size (none printed, or a ramp-up's several){floor}" if m == "--gbs" else
                       "no argument dump or start-up line gives it") for m in miss]
    if nodes is None and not ll.get("world_size") and flags.get("dp") is None and ll.get("dp") is None:
        miss.append("--nodes")
        why.append("--nodes (or --dp): no world size was read from it (an argument dump's, a start-up line's or "
                   "torchtitan's device-mesh line; never the cluster's node count by default)")
    dims = [k for k in ("num_layers", "hidden", "num_heads", "vocab") if ll.get(k) is None]
    if not model and dims:
        miss.append("--model")
        why.append(f"--model: no {', '.join(dims)} was read from it (only an argument dump or a NeMo config gives "
                   "them)" + _catalog_of((args or {}).get("total_parameters")))
    if miss:
        # one missing flag is named once, as the message's field; several each beside its reason
        said = why[0].removeprefix(f"{miss[0]}: ") if len(miss) == 1 else "; ".join(why)
        raise InputError(" ".join(miss), "", f"the log ({log}) does not say: " + said
                         + f": pass {'them' if len(miss) > 1 else 'it'}")
