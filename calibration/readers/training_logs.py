"""Readers of real training logs: Megatron-LM, Megatron-DeepSpeed, NeMo and torchtitan (issue #5, ``compare``).

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
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from costmodel.errors import TrainingLogParseError

FRAMEWORKS = ("megatron", "megatron-deepspeed", "nemo", "torchtitan")

# ---------------------------------------------------------------------------------------------- lexing
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ANSI_PASTED = re.compile(r"\[(?:\d{1,3}(?:;\d{1,3})*)?m")  # the same with the ESC byte lost in a copy-paste
_PREFIX = re.compile(r"^\s*(?:\[(?P<br>(?:rank|default)\d+)\]:|\[1,(?P<mpi>\d+)\]<std(?:out|err)>:"
                     r"|(?P<srun>\d+):(?=\s))"
                     r"[ \t]?")
_ELISION = re.compile(r"^\s*(?:\[\s*(?:\.\.\.|…)\s*\]|\.\.\.|…)\s*$")
_TIMESTAMP = re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s*")

# Megatron / Megatron-DeepSpeed
_MEG_START = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEG_MARKERS = ("elapsed time per iteration", "throughput per gpu", "tflops:", "number of skipped iterations",
                "consumed samples:")
_ARGS_BEGIN = re.compile(r"^\s*-{3,}\s*arguments\s*-{3,}\s*$")
_ARGS_END = re.compile(r"^\s*-{3,}\s*end of arguments\s*-{3,}\s*$")
_ARG_LINE = re.compile(r"^\s*([A-Za-z_]\w*)\s+\.{2,}\s?(.*?)\s*$")
_WORLD = re.compile(r"using world size:\s*\d+")
_WORLD_ITEMS = re.compile(r"(world size|data-parallel[- ]size|context-parallel size|tensor-model-parallel size|"
                          r"pipeline-model-parallel size|expert-model-parallel size):\s*(\d+)")
_PARAMS_DTYPE = re.compile(r"using (torch\.\w+) for parameters")
_PADDED_VOCAB = re.compile(r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)")
_MEG_KEYS = {
    "consumed samples": "consumed_samples",
    "consumed tokens": "consumed_tokens",
    "elapsed time per iteration (ms)": ("step_time_s", 1e-3),
    "elapsed time per iteration (s)": "step_time_s",
    "throughput per gpu (tflop/s/gpu)": "tflops_per_gpu",
    "tflops": "tflops_per_gpu",
    "tokens per gpu (tokens/s/gpu)": "tokens_per_s_per_gpu",
    "learning rate": "lr",
    "global batch size": "global_batch_size",
    "lm loss": "loss",
    "loss": "loss",
    "loss scale": "loss_scale",
    "grad norm": "grad_norm",
    "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations",
    "samples per second": "samples_per_s",
}
_MDS_KEYS = {"consumed tokens", "samples per second", "tflops"}

# NeMo
_NEMO_PRINTER = re.compile(r"Training epoch\s+(\d+),\s*iteration\s+(\d+)\s*/\s*(\d+)\s*(\|.*)?$")
_NEMO_BAR = re.compile(r"\[([^\[\]]*(?:global_step|train_step_timing in s|reduced_train_loss)=[^\[\]]*)\]")
_NEMO_BAR_COUNT = re.compile(r"\|\s*(\d+)/(\d+|\?)\s*\[")
_NEMO_MARKERS = ("train_step_timing in s", "reduced_train_loss=", "global_step=")
_NEMO_CONFIG = re.compile(r"\*+\s*Experiment configuration\s*\*+")
_NEMO_HEADER = re.compile(r"^\s*\[NeMo [IWED] [^\]]*\]")
_NEMO_KEYS = {
    "train_step_timing in s": "step_time_s",
    "tflops_per_gpu": "tflops_per_gpu",
    "reduced_train_loss": "loss",
    "consumed_samples": "consumed_samples",
    "global_batch_size": "global_batch_size",
    "lr": "lr",
    "global_step": "global_step",
}

# torchtitan
_TT_STEP = re.compile(r"\bstep:\s*([\d,]+)\s+loss:")
_TT_BAD_STEP = re.compile(r"\bstep:\s*\S+\s+loss:")
_TT_FIELDS = {
    "loss": (re.compile(r"\bloss:\s*([-+\w.]+)"), "loss", 1.0),
    "grad_norm": (re.compile(r"\bgrad_norm:\s*([-+\w.]+)"), "grad_norm", 1.0),
    "memory": (re.compile(r"\bmemory:\s*([\d.]+)\s*GiB"), "memory_gib", 1.0),
    "tps": (re.compile(r"\b[tw]ps:\s*([\d,.]+)"), "tokens_per_s_per_gpu", 1.0),
    "tflops": (re.compile(r"\btflops:\s*([\d,.]+)"), "tflops_per_gpu", 1.0),
    "mfu": (re.compile(r"\bmfu:\s*([\d.]+)\s*%"), "mfu", 0.01),
    "elapsed": (re.compile(r"\belapsed_time_per_step:\s*([\d.]+)\s*s"), "step_time_s", 1.0),
    "step_time": (re.compile(r"\bstep_time:\s*([\d.]+)"), "step_time_s", 1.0),
}
_TT_COMPLETE = re.compile(r"(?:mfu:\s*(?:[\d.]+%|N/A)|elapsed_time_per_step:\s*[\d.]+s)\s*$")

# start-of-training markers: the first record after one averages over the start-up of the (re)started job
_START_MARKERS = ("[before the start of training step]", "Training starts at step")

_FLOAT_COLS = ("step_time_s", "tflops_per_gpu", "samples_per_s", "tokens_per_s_per_gpu", "consumed_samples",
               "consumed_tokens", "lr", "loss", "grad_norm", "loss_scale", "skipped_iterations", "nan_iterations",
               "global_batch_size", "mfu", "memory_gib", "t_unix")
# wall-clock time a record was printed at: Megatron-LM's "[2024-04-06 02:59:36]" prefix, torchtitan's
# logging "2025-06-16 22:30:50,322"; naive times are read as UTC, as the nvidia-smi reader reads its
# timestamps, so a log and a trace written on one machine share a time base whatever the reader's zone
_WALL = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d+))?")


def _wall_time(text):
    """Unix seconds of the first date-time stamp in the first 80 characters of ``text``, or NaN."""
    from datetime import datetime, timezone
    m = _WALL.search(text[:80])
    if not m:
        return math.nan
    try:
        t = datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return math.nan
    return t + (float("0." + m.group(3)) if m.group(3) else 0.0)


@dataclass(frozen=True)
class Spread:
    """Median and spread of one metric over the kept iterations (NaN everywhere when ``n == 0``).

    Attributes: ``median``, ``q1``, ``q3`` (25th/75th percentiles, linear interpolation), ``iqr`` (q3 - q1),
    ``min``, ``max`` in the metric's unit, and ``n`` (rows with a value).
    """

    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    n: int

    @staticmethod
    def of(values) -> "Spread":
        """Spread of the finite entries of ``values``."""
        v = np.asarray(values, dtype=float)
        v = v[np.isfinite(v)]
        if v.size == 0:
            nan = float("nan")
            return Spread(nan, nan, nan, nan, nan, nan, 0)
        q1, med, q3 = np.percentile(v, [25, 50, 75])
        return Spread(float(med), float(q1), float(q3), float(q3 - q1), float(v.min()), float(v.max()), int(v.size))

    def as_dict(self) -> dict:
        """Plain dict (for JSON)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Iterations:
    """One row per logged iteration record, as numpy arrays of equal length.

    Attributes (float64, NaN where the log does not print the field):
        iteration: iteration number as printed (int64; NeMo ``global_step`` counts from 0).
        step_time_s: time per iteration, s (Megatron: mean over the logged interval).
        tflops_per_gpu: TFLOP/s per GPU as printed (Megatron-core and torchtitan: model FLOPs; Megatron-DeepSpeed
            ``TFLOPs``: hardware FLOPs with recomputation; NeMo ``TFLOPS_per_GPU``).
        samples_per_s: samples (sequences) per second of the whole job (Megatron-DeepSpeed).
        tokens_per_s_per_gpu: tokens per second per GPU (torchtitan ``tps``).
        consumed_samples, consumed_tokens: cumulative counts at this iteration.
        lr: learning rate; loss: language-model loss; grad_norm; loss_scale.
        skipped_iterations, nan_iterations: counts over the logged interval (Megatron).
        global_batch_size: sequences per iteration.
        mfu: model FLOPs utilisation as a fraction (torchtitan prints %).
        memory_gib: peak reserved device memory, GiB (torchtitan).
        t_unix: wall-clock time the record was printed, Unix s (Megatron-LM's ``[YYYY-MM-DD hh:mm:ss]``
            prefix, torchtitan's logging time; naive times read as UTC, as nvidia-smi's), NaN if none.
        line: 1-based line number of the record (its first line when wrapped) (int64).
        rank: rank-prefix label of the record (``"default7"``, ``"rank3"``, ``"3"``) or None (object array).
    """

    iteration: np.ndarray
    step_time_s: np.ndarray
    tflops_per_gpu: np.ndarray
    samples_per_s: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    consumed_samples: np.ndarray
    consumed_tokens: np.ndarray
    lr: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    loss_scale: np.ndarray
    skipped_iterations: np.ndarray
    nan_iterations: np.ndarray
    global_batch_size: np.ndarray
    mfu: np.ndarray
    memory_gib: np.ndarray
    t_unix: np.ndarray
    line: np.ndarray
    rank: np.ndarray

    def __len__(self) -> int:
        return len(self.iteration)

    def take(self, idx) -> "Iterations":
        """The rows at index array or boolean mask ``idx``."""
        return Iterations(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @staticmethod
    def from_records(records) -> "Iterations":
        """Build from record dicts (keys: ``iteration``, ``line``, ``rank`` and any of the float columns)."""
        cols = {"iteration": np.array([r["iteration"] for r in records], dtype=np.int64),
                "line": np.array([r["line"] for r in records], dtype=np.int64),
                "rank": np.array([r.get("rank") for r in records], dtype=object)}
        for c in _FLOAT_COLS:
            cols[c] = np.array([r.get(c, math.nan) for r in records], dtype=float)
        return Iterations(**cols)


@dataclass
class TrainingLog:
    """A parsed training log.

    Attributes:
        path: the file read.
        framework: ``"megatron"``, ``"megatron-deepspeed"``, ``"nemo"`` or ``"torchtitan"``.
        args: the argument dump as ``name -> value`` (``None``/bool/int/float/str as printed; Megatron names).
            Megatron: the ``arguments`` dump, completed (never overridden) by the ``using world size ...`` and
            ``using torch.X for parameters`` lines.  NeMo: the ``model:`` keys of the YAML config at top level
            and ``trainer.devices``, ``trainer.num_nodes``, ``trainer.precision``.  Empty when nothing is printed.
        config: NeMo's YAML config as a nested dict (empty for other frameworks).
        iterations: every parsed iteration record (after dropping repeated ranks and a truncated last line).
        kept: boolean mask over ``iterations``: the rows left after warm-up (see :func:`warmup_mask`).
        warmup: how the warm-up rows were chosen (a sentence, for reports).
        errors: ``"FILE:LINE: reason"`` for every record-like line that could not be parsed.
        warnings: ``"FILE[:LINE]: reason"`` for a truncated last line, repeated ranks, wrapped records,
            an unclosed argument dump or a warm-up rule that would have discarded everything.
        args_complete: True when the whole argument dump was read (Megatron ``end of arguments`` seen, or a NeMo
            config); then a key missing from it means the framework version lacks the feature.
    """

    path: str
    framework: str
    args: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    iterations: Iterations = None
    kept: np.ndarray = None
    warmup: str = ""
    args_complete: bool = False
    errors: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def __len__(self) -> int:
        return 0 if self.iterations is None else len(self.iterations)

    @property
    def kept_iterations(self) -> Iterations:
        """The :class:`Iterations` rows left after warm-up."""
        return self.iterations.take(self.kept)

    def aggregate(self) -> dict:
        """Median and spread of the kept (post-warm-up) iterations.

        Returns:
            ``{"n": rows kept, "step_time_s": Spread (s), "tflops_per_gpu": Spread (TFLOP/s per GPU),
            "tokens_per_s_per_gpu": Spread, "samples_per_s": Spread}``; a metric the log does not print has
            ``n == 0`` and NaN values.
        """
        it = self.kept_iterations
        return {"n": len(it), "step_time_s": Spread.of(it.step_time_s), "tflops_per_gpu": Spread.of(it.tflops_per_gpu),
                "tokens_per_s_per_gpu": Spread.of(it.tokens_per_s_per_gpu),
                "samples_per_s": Spread.of(it.samples_per_s)}

    def layout(self) -> dict:
        """The run's layout and model size from ``args``, in the project's field names.

        Returns a dict (None where the log does not say):
            ``tp`` (tensor_model_parallel_size), ``pp`` (pipeline_model_parallel_size), ``cp``
            (context_parallel_size), ``ep`` (expert_model_parallel_size), ``vp`` (virtual_pipeline_model_parallel_size,
            else num_layers / (PP * num_layers_per_virtual_pipeline_stage), else 1 when the dump shows no
            interleaving), ``dp`` (data_parallel_size, else world_size / (TP * PP * CP)), ``mbs``, ``gbs``,
            ``seq_len`` (seq_length / encoder_seq_length), ``recompute`` (``"none" | "selective" | "full"`` from
            recompute_granularity, else recompute_activations -> selective, else checkpoint_activations -> full),
            ``sp`` (sequence_parallel), ``zero`` (DeepSpeed zero_stage; use_distributed_optimizer or NeMo's
            distributed_fused_adam -> 1; else 0), ``precision`` (``"fp8" | "bf16" | "fp16" | "fp32"``),
            ``world_size``, and the model: ``num_layers``, ``hidden``, ``ffn_hidden``, ``num_heads``,
            ``num_kv_heads`` (num_query_groups when group_query_attention, else num_heads), ``vocab``
            (padded_vocab_size, else vocab_size), ``num_experts``, ``moe_topk``.
        """
        return _layout(self.args, self.args_complete)


# ---------------------------------------------------------------------------------------------- values
def _arg_value(s: str):
    s = s.strip()
    if s in ("None", "null", ""):
        return None
    if s in ("True", "true"):
        return True
    if s in ("False", "false"):
        return False
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _num(s: str) -> float:
    """A printed number: ``1,234``, ``1.0E-05``, ``49.00``, ``nan``; ValueError otherwise."""
    t = s.strip().replace(",", "")
    if not t:
        raise ValueError("empty value")
    return float(t)


def _strip_prefixes(s: str):
    """Remove ANSI codes and launcher rank prefixes; returns ``(text, rank label or None)``."""
    if "\x1b" in s:
        s = _ANSI.sub("", s)
    if "m" in s and "[" in s:
        s = _ANSI_PASTED.sub(lambda m: m.group(0) if m.start() and (s[m.start() - 1].isalnum()
                                                                    or s[m.start() - 1] in "_]") else "", s)
    labels = []
    while True:
        m = _PREFIX.match(s)
        if not m:
            break
        labels.append(m.group("br") or (m.group("mpi") and "1," + m.group("mpi")) or m.group("srun"))
        s = s[m.end():]
    return s, ("/".join(labels) if labels else None)


@dataclass
class _Seg:
    """One logical line: physical line number, text without prefixes, rank label, last content line of the file."""

    line: int
    text: str
    rank: str | None
    last: bool = False
    end_line: int = 0
    no_newline: bool = False


def _segments(path: Path):
    raw = path.read_text(encoding="utf-8", errors="replace")
    no_newline = bool(raw) and not raw.endswith("\n")
    phys = raw.split("\n")
    if phys and phys[-1] == "":
        phys.pop()
    segs = []
    header = True
    for i, pl in enumerate(phys, start=1):
        if header and pl.lstrip().startswith("#"):
            continue
        header = False
        for part in pl.split("\r"):  # tqdm refreshes the progress bar with carriage returns
            if not part.strip():
                continue
            text, rank = _strip_prefixes(part)
            if not text.strip() or _ELISION.match(text):
                continue
            segs.append(_Seg(i, text, rank, end_line=i))
    if segs:
        segs[-1].last = True
        segs[-1].no_newline = no_newline
    return segs


# ---------------------------------------------------------------------------------------------- parsers
def _where(path, seg):
    return f"{path}:{seg.line}" if seg.end_line == seg.line else f"{path}:{seg.line}-{seg.end_line}"


def _short(text, n=100):
    t = text.strip()
    return repr(t if len(t) <= n else t[:n] + "...")


def _join_wrapped(segs, warnings, path):
    """Join Megatron records wrapped over several lines (the record is closed by ``|``)."""
    out, joined, first = [], 0, None
    i = 0
    while i < len(segs):
        s = segs[i]
        body = _untimestamp(s.text)
        if _MEG_START.match(body) and not body.rstrip().endswith("|"):
            text, j = body.rstrip(), i
            while (not text.endswith("|") and j + 1 < len(segs) and j - i < 3
                   and segs[j + 1].line == segs[j].end_line + 1):
                nxt = _untimestamp(segs[j + 1].text)
                if _MEG_START.match(nxt) or _ARGS_BEGIN.match(nxt) or _NEMO_HEADER.match(nxt):
                    break
                text = text + " " + nxt.strip()
                j += 1
            if j > i:  # closed, or not: then one incomplete record spanning lines i..j (one error / warning)
                if text.endswith("|"):
                    joined += 1
                    first = first or s.line
                out.append(_Seg(s.line, text, s.rank, segs[j].last, segs[j].end_line, segs[j].no_newline))
                i = j + 1
                continue
        out.append(s)
        i += 1
    if joined:
        warnings.append(f"{path}:{first}: {joined} iteration record(s) wrapped over several lines were joined")
    return out


def _untimestamp(text):
    return _TIMESTAMP.sub("", text) if text.lstrip().startswith("[") else text


def _parse_megatron(seg, path):
    """``(record dict | None, error | None, truncated: bool, deepspeed keys seen: bool)`` for one segment."""
    if "|" not in seg.text:
        return None, None, False, False
    body = _untimestamp(seg.text)
    m = _MEG_START.match(body)
    if not m:
        low = body.lower()
        if "|" in body and any(k in low for k in _MEG_MARKERS):
            return None, f"{_where(path, seg)}: iteration fields without an 'iteration N/ M |' start: {_short(body)}", \
                seg.last, False
        return None, None, False, False
    rec = {"iteration": int(m.group(1)), "line": seg.line, "rank": seg.rank, "t_unix": _wall_time(seg.text)}
    complete = body.rstrip().endswith("|")
    if not complete:
        return None, f"{_where(path, seg)}: iteration {m.group(1)} record is incomplete (no closing '|'): " \
                     f"{_short(body)}", seg.last, False
    mds = False
    bad = []
    for item in body[m.end():].split("|"):
        if not item.strip():
            continue
        key, sep, val = item.partition(":")
        key = " ".join(key.lower().split())
        if not sep or key not in _MEG_KEYS:
            continue
        mds = mds or key in _MDS_KEYS
        target = _MEG_KEYS[key]
        scale = 1.0
        if isinstance(target, tuple):
            target, scale = target
        if target == "loss" and key == "loss" and "loss" in rec:
            continue
        try:
            rec[target] = _num(val) * scale
        except ValueError:
            bad.append(f"{key}: {val.strip()!r}")
    if bad:
        return None, f"{_where(path, seg)}: iteration {m.group(1)}: not a number: {', '.join(bad)}", False, mds
    if "step_time_s" not in rec:
        return None, f"{_where(path, seg)}: iteration {m.group(1)} has no 'elapsed time per iteration'", False, mds
    return rec, None, False, mds


def _nemo_items(text, sep, kv):
    """``(key -> value, last item complete)``; keys lower-cased with whitespace collapsed."""
    out, last_ok = {}, True
    for item in text.split(sep):
        if not item.strip():
            continue
        key, s, val = item.partition(kv)
        last_ok = bool(s and val.strip())
        if not s:
            continue
        out[" ".join(key.strip().lower().split())] = val.strip()
    return out, last_ok


def _parse_nemo(seg, path):
    """``(record | None, error | None, truncated, is_bar)`` for one segment."""
    text = seg.text
    if "Training epoch" not in text and not any(k in text for k in _NEMO_MARKERS):
        return None, None, False, False
    m = _NEMO_PRINTER.search(text)
    if m:
        items, last_ok = _nemo_items(m.group(4) or "", "|", ":")
        rec = {"iteration": int(m.group(2)), "line": seg.line, "rank": seg.rank}
        is_bar = False
        if not last_ok or (seg.last and seg.no_newline):
            return None, f"{_where(path, seg)}: NeMo progress record is incomplete: {_short(text)}", seg.last, False
    else:
        b = _NEMO_BAR.search(text)
        if not b:
            if any(k in text for k in _NEMO_MARKERS):
                return None, (f"{_where(path, seg)}: NeMo progress line in no known form (Lightning bar "
                              f"'[..., key=value]' or 'Training epoch E, iteration N/M | key: value'): "
                              f"{_short(text)}"), seg.last, True
            return None, None, False, False
        items, _ = _nemo_items(b.group(1), ",", "=")
        rec = {"line": seg.line, "rank": seg.rank}
        c = _NEMO_BAR_COUNT.search(text[:b.start() + 1])
        if c:
            rec["iteration"] = int(c.group(1))
        is_bar = True
    bad = []
    for key, val in items.items():
        if key not in _NEMO_KEYS or not val:
            continue
        try:
            rec[_NEMO_KEYS[key]] = _num(val)
        except ValueError:
            bad.append(f"{key}: {val!r}")
    if "global_step" in rec:
        rec["iteration"] = int(round(rec.pop("global_step")))
    if bad:
        return None, f"{_where(path, seg)}: NeMo record: not a number: {', '.join(bad)}", False, is_bar
    if "iteration" not in rec:
        return None, f"{_where(path, seg)}: NeMo record without global_step or iteration: {_short(text)}", False, is_bar
    return rec, None, False, is_bar


def _parse_torchtitan(seg, path):
    """``(record | None, error | None, truncated)`` for one segment."""
    text = seg.text
    if "step:" not in text:
        return None, None, False
    m = _TT_STEP.search(text)
    if not m:
        if _TT_BAD_STEP.search(text) and ("tps:" in text or "mfu:" in text or "tflops:" in text):
            return None, f"{_where(path, seg)}: torchtitan step line with a bad step number: {_short(text)}", False
        return None, None, False
    if not _TT_COMPLETE.search(text):
        return None, f"{_where(path, seg)}: torchtitan step line is incomplete: {_short(text)}", seg.last
    rec = {"iteration": int(m.group(1).replace(",", "")), "line": seg.line, "rank": seg.rank,
           "t_unix": _wall_time(seg.text)}
    bad = []
    for name, (rx, col, scale) in _TT_FIELDS.items():
        f = rx.search(text, m.start())
        if not f:
            continue
        try:
            rec[col] = _num(f.group(1)) * scale
        except ValueError:
            if f.group(1) not in ("N/A",):
                bad.append(f"{name}: {f.group(1)!r}")
    if bad:
        return None, f"{_where(path, seg)}: torchtitan step {m.group(1)}: not a number: {', '.join(bad)}", False
    if not any(c in rec for c in ("tokens_per_s_per_gpu", "tflops_per_gpu", "step_time_s")):
        return None, f"{_where(path, seg)}: torchtitan step {m.group(1)} has no tps, tflops or step time", False
    return rec, None, False


# ---------------------------------------------------------------------------------------------- dumps
def _megatron_args(segs, path, warnings):
    """``(args, complete)`` from the argument dump and the start-up summary lines."""
    args, summary = {}, {}
    complete = False
    i = 0
    while i < len(segs):
        t = _TIMESTAMP.sub("", segs[i].text)
        if _ARGS_BEGIN.match(t):
            j = i + 1
            closed = False
            while j < len(segs):
                u = segs[j].text
                if _ARGS_END.match(u):
                    closed = True
                    break
                a = _ARG_LINE.match(u)
                if not a:
                    break
                args.setdefault(a.group(1), _arg_value(a.group(2)))
                j += 1
            complete = complete or closed
            if not closed:
                at = f"{path}:{segs[j].line}" if j < len(segs) else f"{path}: end of file"
                warnings.append(f"{at}: the argument dump that starts at line {segs[i].line} ends without "
                                f"'end of arguments' (excerpt or truncated log); read {j - i - 1} argument lines")
            i = j + 1
            continue
        if _WORLD.search(t):
            for k, v in _WORLD_ITEMS.findall(t):
                name = {"world size": "world_size", "data-parallel size": "data_parallel_size",
                        "data-parallel-size": "data_parallel_size", "context-parallel size": "context_parallel_size",
                        "tensor-model-parallel size": "tensor_model_parallel_size",
                        "pipeline-model-parallel size": "pipeline_model_parallel_size",
                        "expert-model-parallel size": "expert_model_parallel_size"}[k]
                summary.setdefault(name, int(v))
        p = _PARAMS_DTYPE.search(t)
        if p:
            summary.setdefault("params_dtype", p.group(1))
        p = _PADDED_VOCAB.search(t)
        if p:
            summary.setdefault("padded_vocab_size", int(p.group(1)))
        i += 1
    for k, v in summary.items():
        args.setdefault(k, v)
    return args, complete


def _nemo_config(segs, path, warnings):
    """YAML config printed by NeMo 1 after 'Experiment configuration' (4-space indented under a [NeMo I] header)."""
    import yaml

    for i, s in enumerate(segs):
        if not _NEMO_CONFIG.search(s.text):
            continue
        j = i + 1
        while j < len(segs) and not _NEMO_HEADER.match(segs[j].text):
            j += 1
        block, k = [], j + 1
        while k < len(segs) and not _NEMO_HEADER.match(segs[k].text) and \
                (segs[k].text.startswith("    ") or segs[k].text.startswith("\t")):
            block.append(segs[k].text[4:] if segs[k].text.startswith("    ") else segs[k].text[1:])
            k += 1
        if not block:
            continue
        try:
            cfg = yaml.safe_load("\n".join(block))
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = segs[j + 1 + mark.line].line if mark is not None and j + 1 + mark.line < len(segs) else segs[j].line
            warnings.append(f"{path}:{line}: NeMo experiment configuration is not valid YAML ({e.__class__.__name__});"
                            f" config not read")
            return {}
        return cfg if isinstance(cfg, dict) else {}
    return {}


def _nemo_args(cfg):
    args = {}
    model = cfg.get("model") or {}
    if isinstance(model, dict):
        for k, v in model.items():
            if not isinstance(v, (dict, list)):
                args[k] = v
        optim = model.get("optim")
        if isinstance(optim, dict) and optim.get("name"):
            args["optim.name"] = optim["name"]
    trainer = cfg.get("trainer") or {}
    if isinstance(trainer, dict):
        for k in ("devices", "num_nodes", "precision"):
            if k in trainer:
                args[f"trainer.{k}"] = trainer[k]
    return args


# ---------------------------------------------------------------------------------------------- layout
def _int_or_none(v):
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) else None


def _layout(args, complete=False):
    def get(*names):
        for n in names:
            if n in args and args[n] is not None:
                return args[n]
        return None

    tp = _int_or_none(get("tensor_model_parallel_size"))
    pp = _int_or_none(get("pipeline_model_parallel_size"))
    cp = _int_or_none(get("context_parallel_size"))
    ep = _int_or_none(get("expert_model_parallel_size"))
    world = _int_or_none(get("world_size"))
    if world is None and get("trainer.devices") is not None and get("trainer.num_nodes") is not None:
        d, n = _int_or_none(get("trainer.devices")), _int_or_none(get("trainer.num_nodes"))
        world = d * n if d and n else None
    has_cp_key = "context_parallel_size" in args
    if cp is None and tp is not None and not has_cp_key:
        cp = 1  # Megatron before context parallelism, or NeMo without the key
    if ep is None and tp is not None and "expert_model_parallel_size" not in args:
        ep = 1
    dp = _int_or_none(get("data_parallel_size"))
    if dp is None and world and tp and pp and cp and world % (tp * pp * cp) == 0:
        dp = world // (tp * pp * cp)
    num_layers = _int_or_none(get("num_layers"))
    vp = _int_or_none(get("virtual_pipeline_model_parallel_size"))
    per_stage = _int_or_none(get("num_layers_per_virtual_pipeline_stage"))
    if vp is None and per_stage and num_layers and pp and num_layers % (pp * per_stage) == 0:
        vp = num_layers // (pp * per_stage)
    if vp is None and pp == 1:
        vp = 1
    if vp is None and pp is not None and (complete or any(k in args for k in (
            "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage"))):
        vp = 1  # the dump shows no interleaving (a complete dump without the keys: a version without it)

    gran = get("recompute_granularity", "activations_checkpoint_granularity")
    if isinstance(gran, str) and gran.lower() in ("full", "selective"):
        recompute = gran.lower()
    elif get("recompute_activations") is True:
        recompute = "selective"
    elif get("checkpoint_activations") is True or get("activations_checkpoint_method") is not None:
        recompute = "full"
    elif any(k in args for k in ("recompute_granularity", "recompute_activations", "checkpoint_activations",
                                 "activations_checkpoint_granularity")):
        recompute = "none"
    else:
        recompute = None

    sp = get("sequence_parallel")
    sp = bool(sp) if isinstance(sp, bool) else None

    zero = None
    if get("deepspeed") is True or "zero_stage" in args:
        zero = _int_or_none(get("zero_stage"))
    if zero is None:
        if get("use_distributed_optimizer") is True:
            zero = 1
        elif isinstance(get("optim.name"), str):
            zero = 1 if "distributed" in get("optim.name") else 0
        elif "use_distributed_optimizer" in args:
            zero = 0

    precision = None
    fp8 = get("fp8")
    tprec = str(get("trainer.precision") or "").lower()
    pdt = str(get("params_dtype") or "")
    if fp8 not in (None, False):
        precision = "fp8"
    elif get("bf16") is True or "bf16" in tprec or "bfloat16" in pdt:
        precision = "bf16"
    elif get("fp16") is True or tprec in ("16", "16-mixed", "fp16") or "float16" in pdt:
        precision = "fp16"
    elif get("bf16") is False and get("fp16") is False:
        precision = "fp32"

    heads = _int_or_none(get("num_attention_heads"))
    groups = _int_or_none(get("num_query_groups"))
    gqa = get("group_query_attention")
    kv = groups if (groups and gqa is not False) else (heads if heads and (gqa is False or groups is None) else None)
    return {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vp": vp,
        "mbs": _int_or_none(get("micro_batch_size")), "gbs": _int_or_none(get("global_batch_size")),
        "seq_len": _int_or_none(get("seq_length", "encoder_seq_length")),
        "recompute": recompute, "sp": sp, "zero": zero, "precision": precision, "world_size": world,
        "num_layers": num_layers, "hidden": _int_or_none(get("hidden_size")),
        "ffn_hidden": _int_or_none(get("ffn_hidden_size")), "num_heads": heads, "num_kv_heads": kv,
        "vocab": _int_or_none(get("padded_vocab_size", "vocab_size")),
        "num_experts": _int_or_none(get("num_experts", "num_moe_experts")),
        "moe_topk": _int_or_none(get("moe_router_topk")),
    }


# ---------------------------------------------------------------------------------------------- warm-up
def warmup_mask(iterations: Iterations, framework: str, start_lines=(), warmup_steps=None):
    """Which rows of ``iterations`` are kept after warm-up; returns ``(mask, description, fell_back)``.

    ``warmup_steps=N`` discards the first N logged records (file order), nothing else.  ``None`` applies the
    default rule, which discards:

    * the first two optimizer steps of the run (Megatron and torchtitan iterations 1-2, NeMo global_step 0-1:
      CUDA context, NCCL communicators, allocator growth, ``torch.compile``);
    * the first record after each start-of-training marker (Megatron ``[before the start of training step]``,
      torchtitan ``Training starts at step``): it averages over the start-up of a (re)started job;
    * records with ``number of skipped iterations > 0`` (fp16 loss-scale search at the start of a run).

    If the default rule would discard every record, all are kept and ``fell_back`` is True.

    Args:
        iterations: the rows (:class:`Iterations`).
        framework: one of :data:`FRAMEWORKS` (NeMo counts steps from 0).
        start_lines: line numbers of start-of-training markers.
        warmup_steps: None (default rule) or the number of leading records to discard.
    Raises:
        ValueError: negative ``warmup_steps``.
    """
    n = len(iterations)
    if warmup_steps is not None:
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        keep = np.arange(n) >= warmup_steps
        return keep, f"first {warmup_steps} logged record(s) discarded", False
    first = 0 if framework == "nemo" else 1
    keep = iterations.iteration >= first + 2
    order = np.argsort(iterations.line, kind="stable")
    for s in start_lines:
        after = [i for i in order if iterations.line[i] > s]
        if after:
            keep[after[0]] = False
    skipped = iterations.skipped_iterations
    keep &= ~(np.isfinite(skipped) & (skipped > 0))
    desc = ("default rule: iterations < " + str(first + 2) + ", the first record after a start-of-training marker, "
            "records with skipped iterations > 0")
    if n and not keep.any():
        return np.ones(n, dtype=bool), desc + " (would discard every record: all kept)", True
    return keep, desc, False


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
            errors.append(f"{path}: no iteration line from rank {want!r} (ranks seen: "
                          f"{', '.join(str(x) for x in labels)})")
            return []
        label = chosen[0]
    else:
        counts = {}
        for r in records:
            counts[r["iteration"]] = counts.get(r["iteration"], 0) + 1
        first_dup = next(r for r in records if counts[r["iteration"]] > 1)
        label = first_dup["rank"]
    mine = [r for r in records if r["rank"] == label]
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
                            f"{dropped} line(s); pass rank= to choose another")
    return out


def _read(path, framework=None, warmup_steps=None, rank=None, strict=True) -> TrainingLog:
    path = Path(path)
    segs = _segments(path)
    warnings, errors = [], []
    join_warnings = []
    if framework in (None, "megatron", "megatron-deepspeed"):
        segs_m = _join_wrapped(segs, join_warnings, path)
    else:
        segs_m = segs

    found = {"megatron": ([], [], []), "nemo": ([], [], []), "torchtitan": ([], [], [])}  # records, errors, truncs
    mds_keys = False
    bar_lines = 0
    if framework in (None, "megatron", "megatron-deepspeed"):
        for s in segs_m:
            rec, err, trunc, mds = _parse_megatron(s, path)
            mds_keys = mds_keys or mds
            _collect(found["megatron"], rec, err, trunc)
    if framework in (None, "nemo"):
        for s in segs:
            rec, err, trunc, is_bar = _parse_nemo(s, path)
            bar_lines += bool(is_bar and rec)
            _collect(found["nemo"], rec, err, trunc)
    if framework in (None, "torchtitan"):
        for s in segs:
            rec, err, trunc = _parse_torchtitan(s, path)
            _collect(found["torchtitan"], rec, err, trunc)

    if framework is None:
        order = ("torchtitan", "nemo", "megatron")
        kind = max(order, key=lambda k: (len(found[k][0]), len(found[k][1]) + len(found[k][2]), -order.index(k)))
    else:
        kind = "megatron" if framework == "megatron-deepspeed" else framework
    records, errs, truncs = found[kind]
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
        log.args, log.args_complete = _megatron_args(segs, path, warnings)
        if (mds_keys or log.args.get("deepspeed") is True or "zero_stage" in log.args
                or framework == "megatron-deepspeed"):
            log.framework = "megatron-deepspeed"
    elif kind == "nemo":
        log.config = _nemo_config(segs, path, warnings)
        log.args = _nemo_args(log.config)
        log.args_complete = bool(log.config)
        if records and bar_lines and all(math.isnan(r.get("step_time_s", math.nan)) for r in records):
            warnings.append(f"{path}: NeMo progress lines carry no 'train_step_timing in s' (enable "
                            f"exp_manager.log_step_timing); step_time_s is NaN")

    n_parsed = len(records)
    records = _select_rank(records, rank, path, warnings, errors, quiet_same_rank=(kind == "nemo"))
    log.iterations = Iterations.from_records(records)
    starts = [s.line for s in segs
              if any(k in s.text for k in _START_MARKERS) or s.text.strip() == "training ..."]
    log.kept, log.warmup, fell_back = warmup_mask(log.iterations, log.framework, starts, warmup_steps)
    if fell_back:
        warnings.append(f"{path}: the warm-up rule would discard all {len(records)} iteration record(s); all kept")

    if n_parsed and not records:
        raise TrainingLogParseError(errors, log)
    if not records:
        what = {"megatron": "Megatron 'iteration N/ M | ... elapsed time per iteration ... |'",
                "nemo": "NeMo 'train_step_timing in s' / 'global_step='",
                "torchtitan": "torchtitan 'step: N  loss: ...'"}
        looked = what[kind] if framework else "; ".join(what.values())
        raise TrainingLogParseError([f"{path}: no iteration lines found (looked for {looked})"] + errors
                                    + trunc_warnings, log)
    if strict and errors:
        raise TrainingLogParseError(errors, log)
    return log


def _collect(bucket, rec, err, trunc):
    records, errs, truncs = bucket
    if rec is not None:
        records.append(rec)
    elif err is not None:
        (truncs if trunc else errs).append(err)


def read_training_log(path, warmup_steps=None, framework=None, rank=None, strict=True) -> TrainingLog:
    """Read a Megatron-LM, Megatron-DeepSpeed, NeMo or torchtitan training log, detecting the framework.

    Formats, units and the bad-input policy: see the module docstring.  Detection: the framework whose
    iteration-record format matches the most lines (ties: torchtitan, NeMo, Megatron); Megatron logs are
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


__all__ = ["FRAMEWORKS", "Iterations", "Spread", "TrainingLog", "TrainingLogParseError", "read_training_log",
           "read_megatron_log", "read_nemo_log", "read_torchtitan_log", "warmup_mask"]
