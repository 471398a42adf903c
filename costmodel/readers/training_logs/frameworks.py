"""Iteration records of each framework: Megatron-LM / Megatron-DeepSpeed, NeMo, torchtitan."""
from __future__ import annotations

import math
import re

from .dumps import _ARGS_BEGIN, _NEMO_HEADER
from .lines import _Seg, _num, _short, _untimestamp, _wall_time, _where

# Megatron / Megatron-DeepSpeed
_MEG_START = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEG_MARKERS = ("elapsed time per iteration", "throughput per gpu", "tflops:", "number of skipped iterations",
                "consumed samples:")
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
    "load_balancing_loss": "load_balancing_loss",
}
_MDS_KEYS = {"consumed tokens", "samples per second", "tflops"}

# NeMo
_NEMO_PRINTER = re.compile(r"Training epoch\s+(\d+),\s*iteration\s+(\d+)\s*/\s*(\d+)\s*(\|.*)?$")
_NEMO_BAR = re.compile(r"\[([^\[\]]*(?:global_step|train_step_timing in s|reduced_train_loss)=[^\[\]]*)\]")
_NEMO_BAR_COUNT = re.compile(r"\|\s*(\d+)/(\d+|\?)\s*\[")
_NEMO_MARKERS = ("train_step_timing in s", "reduced_train_loss=", "global_step=")
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
    # a rate printed as inf or nan (a step timed at zero) is read, to be named and dropped with its record
    "tps": (re.compile(r"\b[tw]ps:\s*([-+\d,.]\S*|[-+]?(?:inf|nan)\b)"), "tokens_per_s_per_gpu", 1.0),
    "tflops": (re.compile(r"\btflops:\s*([-+\d,.]\S*|[-+]?(?:inf|nan)\b)"), "tflops_per_gpu", 1.0),
    "mfu": (re.compile(r"\bmfu:\s*([\d.]+)\s*%"), "mfu", 0.01),
    "elapsed": (re.compile(r"\belapsed_time_per_step:\s*([\d.]+)\s*s"), "step_time_s", 1.0),
    "step_time": (re.compile(r"\bstep_time:\s*([\d.]+)"), "step_time_s", 1.0),
}
_TT_COMPLETE = re.compile(r"(?:mfu:\s*(?:[\d.]+%|N/A)|elapsed_time_per_step:\s*[\d.]+s)\s*$")

# start-of-training markers: the first record after one averages over the start-up of the (re)started job
_START_MARKERS = ("[before the start of training step]", "Training starts at step")


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
            bad.append((target, f"{key}: {val.strip()!r}"))
            continue
        if target == "step_time_s" and rec[target] != rec[target]:     # a logged 'nan' step measures nothing
            del rec[target]
            bad.append((target, f"{key}: {val.strip()!r}"))
    if any(t == "step_time_s" for t, _ in bad):
        return None, f"{_where(path, seg)}: iteration {m.group(1)}: not a number: {', '.join(b for _, b in bad)}", \
            False, mds
    if "step_time_s" not in rec:
        return None, f"{_where(path, seg)}: iteration {m.group(1)} has no 'elapsed time per iteration'", False, mds
    # another field that is not a number is left out; the step time still counts
    soft = f"{_where(path, seg)}: iteration {m.group(1)}: not a number, left out: {', '.join(b for _, b in bad)}" \
        if bad else None
    return rec, soft, False, mds


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


#: torchtitan's start-up line: "Training starts at step N, with local batch size B, global batch size G,
#: sequence length S" (train.py, 2025-02..03, commits 3aff9bd9e..12983cc48), then "Trainer is initialized
#: with local batch size B, global batch size G, [gradient accumulation steps A, ]sequence length S" (the
#: accumulation count since 8570415c3, 2025-06), then in tokens, "Trainer is initialized with T tokens per
#: DP rank, U tokens per train step, gradient accumulation steps A, maximum context length S"
#: (trainer.py since 73aed7f6c, 2026-08: B = T / S and G = U / S sequences); and its model size line
#: (train.py / trainer.py ``Model <name> <flavor> size: N total parameters``)
_TT_START = re.compile(r"(?:Training starts at step \d+, with|Trainer is initialized with) local batch size (\d+), "
                       r"global batch size (\d+), (?:gradient accumulation steps \d+, )?sequence length (\d+)")
_TT_START_TOKENS = re.compile(r"Trainer is initialized with (\d+) tokens per DP rank, (\d+) tokens per train step, "
                              r"gradient accumulation steps \d+, maximum context length (\d+)")
_TT_SIZE = re.compile(r"\bsize:\s*([\d,]+) total parameters")
#: torchtitan's activation-checkpointing line: "Applied {mode} activation checkpointing to the model"
#: (torchtitan/distributed/activation_checkpoint.py at 4a950ea: mode full, selective or memory_budget) or
#: "Applied {FullAC, SelectiveAC, MemoryBudgetAC} ..." (its policy classes since; SelectiveAC is per-op)
_TT_AC = re.compile(r"Applied (\w+) activation checkpointing to the model")
_TT_AC_GRANULARITY = {"full": "full", "fullac": "full", "selective": "selective", "selectiveac": "selective"}
#: its device-mesh line: "Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1,
#: ..." (parallel_dims.py since 183a0d2e7), before it "Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]"
_TT_MESH = re.compile(r"Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), dp_shard=(\d+), "
                      r"cp=(\d+), tp=(\d+)")
_TT_MESH_OLD = re.compile(r"Building \d+-D device mesh with \[([^\]]*)\], \[([\d, ]+)\]")
_TT_DEGREE_ARGS = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
                   "cp": "context_parallel_size"}
#: its Float8 line: "Float8 training active with recipe {tensorwise, rowwise, rowwise_with_gw_hp}"
#: (components/quantization/float8.py since 8a2686c4a, 2025-09; components/float8.py before), "Float8
#: tensorwise scaled training active" (the tensorwise path of 2025) and "Float8 training active"
#: (float8_linear.py of 2024: torchao's dynamic per-tensor scaling, tensorwise)
_TT_FLOAT8 = re.compile(r"Float8 (?:training active(?: with recipe (\w+))?|(tensorwise|rowwise) scaled training active)")
#: torchao's recipes as the model prices them: row-wise with the weight gradient in high precision as
#: row-wise (its bf16 weight-gradient GEMM is not priced: said in a warning)
_TT_FLOAT8_RECIPES = {None: "tensorwise", "tensorwise": "tensorwise", "rowwise": "rowwise",
                      "rowwise_with_gw_hp": "rowwise"}
#: its compile line (distributed/compile.py; parallelize_llama.py before): torch.compile fuses the norms,
#: rotary embedding and SwiGLU (costmodel.stacks fused_elementwise)
_TT_COMPILE = "Compiling each TransformerBlock with torch.compile"


def _torchtitan_mesh(text: str) -> dict:
    """World size and TP / PP / CP degrees (argument-dump names) of a torchtitan device-mesh line, and its
    HSDP replicate degree as ``num_distributed_optimizer_instances`` (1 where its shard degree is 1: then DDP,
    ``use_distributed_optimizer`` false), or {}."""
    m = _TT_MESH.search(text)
    if m:
        pp, rep, shard, cp, tp = (int(g) for g in m.groups())
        # HSDP (replicas of a shard group of more than one rank) as Megatron's optimizer instances; a
        # replicate degree over one-rank shards is DDP (no sharded optimizer)
        # (FSDP2 shards over dp_shard x cp)
        dp = dict(num_distributed_optimizer_instances=rep if shard * cp > 1 else 1)
        if shard * cp == 1 and rep > 1:
            dp["use_distributed_optimizer"] = False
        return dict(world_size=pp * rep * shard * cp * tp, tensor_model_parallel_size=tp,
                    pipeline_model_parallel_size=pp, context_parallel_size=cp, **dp)
    m = _TT_MESH_OLD.search(text)
    if not m:
        return {}
    names = [n.strip(" '\"") for n in m.group(1).split(",") if n.strip()]
    dims = [int(d) for d in m.group(2).split(",") if d.strip()]
    if len(names) != len(dims):
        return {}
    out = dict(world_size=math.prod(dims))
    # the line names only the dims above 1 (torchtitan's ParallelDims.build_mesh appends a dim where its
    # degree > 1): a degree it leaves out is 1
    out.update({arg: dict(zip(names, dims)).get(n, 1) for n, arg in _TT_DEGREE_ARGS.items()})
    deg = dict(zip(names, dims))
    rep, shard = deg.get("dp_replicate", 1), deg.get("dp_shard", 1) * deg.get("cp", 1)
    if rep > 1 or shard > 1:        # the mesh names its data-parallel dims: HSDP, FSDP or DDP as above
        out["num_distributed_optimizer_instances"] = rep if shard > 1 else 1
        if shard == 1:
            out["use_distributed_optimizer"] = False
    return out


def torchtitan_args(segs, path="", warnings=None) -> dict:
    """What a torchtitan log states of its run, as argument-dump keys: ``global_batch_size`` and
    ``seq_length`` from its start-up line, and its local batch as ``micro_batch_size`` where the mesh
    line says PP 1 (with a pipeline the local batch is split into micro-batches the log does not print),
    ``total_parameters`` from its model-size line, the world size and TP, PP,
    CP degrees from its device-mesh line, ``fp8`` and ``fp8_recipe`` from its Float8 line,
    ``torch_compile`` from its compile line, ``recompute_granularity``
    from its activation-checkpointing line (full, or selective: per-op SAC, which an older log's
    'selective' does not tell from every-Nth-layer checkpointing, said in ``warnings``); the first of each.
    A memory-budget policy, which the model does not price, is said in ``warnings`` and not read."""
    args: dict = {}
    float8_seen, local_batch = False, None
    for s in segs:
        if "world_size" not in args:
            args.update(_torchtitan_mesh(s.text))
        m = _TT_AC.search(s.text)
        if m and "recompute_granularity" not in args and warnings is not None:
            mode = m.group(1).lower()
            if mode in _TT_AC_GRANULARITY:
                args["recompute_granularity"] = _TT_AC_GRANULARITY[mode]
                if mode == "selective":
                    warnings.append(f"{path}: the log applied torchtitan's selective activation checkpointing, read "
                                    "as per-op ('op'); a layer option (selective_ac_option a number) is not priced")
            else:
                warnings.append(f"{path}: the log applied torchtitan's {m.group(1)} activation checkpointing, which "
                                "the model does not price: pass --recompute")
        start = _torchtitan_start(s.text)
        if start and "global_batch_size" not in args:
            local_batch, gbs, seq = start
            args.update(global_batch_size=gbs, seq_length=seq)
        m = _TT_SIZE.search(s.text)
        if m and "total_parameters" not in args:
            args["total_parameters"] = int(m.group(1).replace(",", ""))
        float8_seen = float8_seen or _torchtitan_float8(s.text, args, path, warnings)
        if _TT_COMPILE in s.text:
            args["torch_compile"] = True
    if local_batch is not None and args.get("pipeline_model_parallel_size") == 1:
        # without a pipeline each rank runs its local batch in one forward (gradient accumulation, where
        # the global batch asks for it, repeats it): that batch is the micro-batch
        args["micro_batch_size"] = local_batch
    return args


def _torchtitan_start(text: str):
    """(local batch, global batch, sequence length) of torchtitan's start-up line in ``text``
    (:data:`_TT_START`), the token form in whole sequences, or None (a token count that is no whole
    number of sequences, as packed documents may make it, is not read)."""
    m = _TT_START.search(text)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    m = _TT_START_TOKENS.search(text)
    if not m:
        return None
    per_rank, per_step, seq = (int(g) for g in m.groups())
    if not seq or per_rank % seq or per_step % seq:
        return None
    return per_rank // seq, per_step // seq, seq


def _torchtitan_float8(text: str, args: dict, path: str, warnings) -> bool:
    """Read ``fp8`` and ``fp8_recipe`` (argument-dump names) into ``args`` from torchtitan's Float8 line
    ``text`` (the caller reads the first one only); a recipe the model does not price (MX) is said in
    ``warnings`` and the precision left unread.  Returns whether ``text`` is such a line."""
    m = _TT_FLOAT8.search(text)
    if not m:
        return False
    name = m.group(1) or m.group(2)
    if name not in _TT_FLOAT8_RECIPES:
        if warnings is not None:
            warnings.append(f"{path}: the log trains Float8 with recipe {name!r}, which the model does not price "
                            "(tensorwise, rowwise): the precision is not read (pass --precision)")
        return True
    args["fp8"], args["fp8_recipe"] = True, _TT_FLOAT8_RECIPES[name]
    if name == "rowwise_with_gw_hp" and warnings is not None:
        warnings.append(f"{path}: Float8 recipe rowwise_with_gw_hp priced as rowwise: its weight-gradient GEMMs "
                        "in bf16 are not")
    return True
