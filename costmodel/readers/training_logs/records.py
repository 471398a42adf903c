"""What a training log reader returns: :class:`TrainingLog`, its :class:`Iterations` and :class:`Spread`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from .dumps import _layout

FRAMEWORKS = ("megatron", "megatron-deepspeed", "nemo", "torchtitan", "llm-foundry", "deepspeed")

_FLOAT_COLS = ("step_time_s", "tflops_per_gpu", "samples_per_s", "tokens_per_s_per_gpu", "consumed_samples",
               "consumed_tokens", "lr", "loss", "grad_norm", "loss_scale", "skipped_iterations", "nan_iterations",
               "global_batch_size", "mfu", "memory_gib", "t_unix", "load_balancing_loss")


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
        memory_gib: peak device memory, GiB: reserved (torchtitan, Composer), allocated (DeepSpeed's
            MaxMemAllocated).
        load_balancing_loss: Megatron-core's MoE auxiliary loss over its coefficient, the layers' mean
            of E sum_i P_i f_i (1 when routing is balanced; moe_utils.switch_load_balancing_loss_func).
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
    load_balancing_loss: np.ndarray
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


#: layout keys -> the arguments they are read from, first found first (dumps._layout)
_KEY_ARGS = {"tp": ("tensor_model_parallel_size",), "pp": ("pipeline_model_parallel_size",),
             "cp": ("context_parallel_size",), "ep": ("expert_model_parallel_size",),
             "dp": ("data_parallel_size", "world_size"), "world_size": ("world_size", "trainer.devices"),
             "vp": ("virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage"),
             "gbs": ("global_batch_size",), "precision": ("fp8", "bf16", "fp16", "params_dtype", "trainer.precision"),
             "recompute_num_layers": ("recompute_num_layers", "activations_checkpoint_num_layers"),
             "dp_replicate": ("num_distributed_optimizer_instances",)}
#: the words :meth:`TrainingLog.layout_sources` puts after the dump's name for a value the dump implies
#: without printing it (DP from the world size, a degree or count at its default)
IMPLIED = ", which sets no "


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
        warmup_only: the default rule would have discarded every record (all were kept instead).
        memory_reports_gib: the peak reserved memory of each of Megatron's ``memory (MB) | ... | max
            reserved: X`` lines, GiB (torch.cuda.max_memory_reserved in MiB, megatron/training/utils.py
            report_memory); :meth:`aggregate` takes their largest where the records print none.
        errors: ``"FILE:LINE: reason"`` for every record-like line that could not be parsed.
        unreadable_records: the record lines left out for it: none of their figures read, or one of
            their times or rates measuring nothing (<= 0, infinite, beyond any training step's).
        warnings: ``"FILE[:LINE]: reason"`` for a truncated last line, repeated ranks, wrapped records,
            an unclosed argument dump or a warm-up rule that would have discarded everything.
        args_complete: True when the whole argument dump was read (Megatron ``end of arguments`` seen, or a NeMo
            config); then a key missing from it means the framework version lacks the feature.
        startup_args: the names of ``args`` that only Megatron's start-up lines gave (no dump line).
    """

    path: str
    framework: str
    args: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    iterations: Iterations = None
    kept: np.ndarray = None
    warmup: str = ""
    warmup_only: bool = False
    memory_reports_gib: list = field(default_factory=list)
    args_complete: bool = False
    startup_args: frozenset = frozenset()
    errors: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    unreadable_records: int = 0

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
            "tokens_per_s_per_gpu": Spread, "samples_per_s": Spread, "memory_gib": Spread (GiB), "mfu": Spread
            (fraction)}``; a metric the log does not print has ``n == 0`` and NaN values.
        """
        it = self.kept_iterations
        mem = it.memory_gib
        if not np.isfinite(mem).any() and self.memory_reports_gib:
            # Megatron prints the memory apart from its records: the fullest rank's peak reserved
            mem = [max(self.memory_reports_gib)]
        return {"n": len(it), "step_time_s": Spread.of(it.step_time_s), "tflops_per_gpu": Spread.of(it.tflops_per_gpu),
                "tokens_per_s_per_gpu": Spread.of(it.tokens_per_s_per_gpu),
                "samples_per_s": Spread.of(it.samples_per_s), "memory_gib": Spread.of(mem),
                "mfu": Spread.of(it.mfu)}

    def layout_sources(self) -> dict:
        """Where each value of :meth:`layout` was read, for messages: layout key -> ``"argument dump"``
        (NeMo: ``"config"``), ``"start-up lines"`` (Megatron's ``using world size ...`` line, no dump
        line) or ``"iteration lines"`` (the global batch size they print); a value the log implies
        without printing it (DP from the world size, a degree a complete dump omits) says which key it
        lacks; keys :meth:`layout` leaves None are absent."""
        dump = "config" if self.framework == "nemo" else "argument dump"
        out = {}
        for k, v in self.layout().items():
            if v is None:
                continue
            names = [n for n in _KEY_ARGS.get(k, ()) if self.args.get(n) is not None]
            if k == "gbs" and not names:
                out[k] = "iteration lines"
            elif k in _KEY_ARGS and not names:
                # derived, not printed: DP from the world size, a degree a complete dump omits as 1
                why = {"dp": "DP derived from its world size", "vp": "no interleaving: VP 1"}.get(
                    k, f"{v} is the default without it")
                out[k] = f"{dump}{IMPLIED}{_KEY_ARGS[k][0]} ({why})"
            else:
                out[k] = "start-up lines" if names and names[0] in self.startup_args else dump
        return out

    def layout(self) -> dict:
        """The run's layout and model size from ``args``, in the project's field names.

        Returns a dict (None where the log does not say):
            ``tp`` (tensor_model_parallel_size), ``pp`` (pipeline_model_parallel_size), ``cp``
            (context_parallel_size), ``ep`` (expert_model_parallel_size), ``vp`` (virtual_pipeline_model_parallel_size,
            else num_layers / (PP * num_layers_per_virtual_pipeline_stage), else 1 when the dump shows no
            interleaving), ``dp`` (data_parallel_size, else world_size / (TP * PP * CP)), ``mbs``, ``gbs``
            (global_batch_size, else the one global batch size every iteration line prints, else the one
            number of samples consumed_samples grows by per iteration), ``seq_len`` (seq_length / encoder_seq_length), ``recompute`` (``"none" | "selective" | "full"`` from
            recompute_granularity, else recompute_activations -> selective, else checkpoint_activations -> full),
            ``sp`` (sequence_parallel), ``zero`` (DeepSpeed zero_stage; use_distributed_optimizer or NeMo's
            distributed_fused_adam -> 1; else 0), ``precision`` (``"fp8" | "bf16" | "fp16" | "fp32"``),
            ``world_size``, and the model: ``num_layers``, ``hidden``, ``ffn_hidden``, ``num_heads``,
            ``num_kv_heads`` (num_query_groups when group_query_attention, else num_heads), ``vocab``
            (padded_vocab_size, else vocab_size), ``num_experts``, ``moe_topk``.
        """
        out = _layout(self.args, self.args_complete)
        if out.get("gbs") is None and self.iterations is not None:
            # Megatron prints "global batch size" on every iteration line; a ramp-up prints several
            g = np.unique(self.iterations.global_batch_size[np.isfinite(self.iterations.global_batch_size)])
            if len(g) == 1 and g[0] >= 1 and g[0] == int(g[0]):
                out["gbs"] = int(g[0])
        if (out.get("gbs") is None and self.iterations is not None
                and not np.isfinite(self.iterations.global_batch_size).any()):
            # NeMo's progress bar prints consumed_samples and global_step, no batch size: the samples each
            # step adds, where every pair of records agrees (a ramp-up or a resume with another batch does not)
            it, cs = self.iterations.iteration, self.iterations.consumed_samples
            ok = np.isfinite(cs)
            d_it, d_cs = np.diff(it[ok].astype(np.float64)), np.diff(cs[ok])
            per = np.unique(d_cs[d_it > 0] / d_it[d_it > 0])
            if len(per) == 1 and per[0] >= 1 and per[0] == int(per[0]):
                out["gbs"] = int(per[0])
        return out

    def gbs_floor(self) -> int | None:
        """The least global batch size the records' consumed-sample counts allow, or None: the largest mean
        batch so far, consumed_samples over the steps done (Megatron's iteration N has done N steps, NeMo's
        global_step S, counted from 0, S + 1), which a ramp-up's smaller early batches only lower."""
        if self.iterations is None or not len(self.iterations.iteration):
            return None
        it, cs = self.iterations.iteration.astype(np.float64), self.iterations.consumed_samples
        done = it + (1.0 if self.framework == "nemo" else 0.0)
        ok = np.isfinite(cs) & (done > 0)
        return int(np.floor(np.max(cs[ok] / done[ok]) + 1e-9)) if ok.any() else None
