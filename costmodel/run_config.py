"""A training run's own configuration file as the layout source of ``predict --config``.

Three formats, recognised by content:

* **NeMo (1.x) YAML** (NeMo's ``megatron_gpt_config.yaml`` family and NeMo-Framework-Launcher
  ``conf/training/*/*.yaml``; a top-level ``training:`` is descended into): ``trainer.num_nodes``,
  ``trainer.devices``, ``trainer.precision`` and ``model.``: ``tensor_model_parallel_size``,
  ``pipeline_model_parallel_size``, ``virtual_pipeline_model_parallel_size``, ``context_parallel_size``,
  ``expert_model_parallel_size``, ``expert_tensor_parallel_size``, ``micro_batch_size``,
  ``global_batch_size``, ``encoder_seq_length`` (or ``data.seq_length``), ``sequence_parallel``,
  ``activations_checkpoint_granularity`` / ``_method`` / ``_num_layers``, ``fp8``,
  ``use_flash_attention``, ``ub_tp_comm_overlap``, ``overlap_p2p_comm``, ``optim.name`` (``distributed_fused_adam``: the
  distributed optimizer, ZeRO-1) and ``optim.overlap_grad_sync``.
* **Megatron-Bridge YAML** (its ``ConfigContainer`` dumped as YAML, top-level ``_target_:
  megatron.bridge.training.config.ConfigContainer``, or an override file with ``model:`` and ``train:``):
  ``model.``: the parallel sizes as in NeMo, ``sequence_parallel``, ``recompute_granularity`` /
  ``recompute_method`` / ``recompute_num_layers``, ``seq_length`` (or ``dataset.sequence_length``),
  ``moe_token_dispatcher_type``, ``moe_grouped_gemm``, ``moe_expert_capacity_factor``,
  ``moe_pad_expert_input_to_capacity``, ``attention_backend``; ``train.global_batch_size`` and
  ``micro_batch_size``; ``mixed_precision.fp8`` / ``bf16`` / ``fp16`` (or a recipe name such as
  ``bf16_mixed``); ``ddp.use_distributed_optimizer`` (ZeRO-1), ``ddp.use_megatron_fsdp`` or
  ``data_parallel_sharding_strategy: optim_grads_params`` (ZeRO-3), ``ddp.overlap_grad_reduce``;
  ``comm_overlap.tp_comm_overlap`` and ``overlap_p2p_comm`` (when not null).  The world is not in these
  files: it comes from the flags.
* **torchtitan TOML** (``train_configs/*.toml`` of torchtitan before its Python configs, commit
  76d5c72e2): ``[parallelism]`` degrees (``data_parallel_shard_degree`` other than 1: FSDP, ZeRO-3;
  -1 takes the rest of the world), ``pipeline_parallel_microbatch_size``, ``[compile]`` (torch.compile
  fuses the norms, rotary embedding and SwiGLU: ``fused_elementwise``), ``[training]``
  ``local_batch_size``, ``global_batch_size``, ``seq_len``, ``[activation_checkpoint] mode``, and a
  ``float8`` converter or ``[float8]`` section (fp8).

A value the file leaves to an interpolation (``${...}``) or to ``???`` is not read; what the file does
not say is left to the flags and the stack's defaults.  torchtitan's current Python configurations
are code, not data, and are refused with that reason.
"""
from __future__ import annotations

import math

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .config_keys import one_edit_apart, read_checked, track
from .errors import InputError
from .formats import FP8_FORMATS, TE_FP8_RECIPES
from .specs import MOE_DISPATCHER_ALIASES, megatron_capacity_factor, recompute_module_list
from .specs.loading import yaml_load
from .stacks import MOE_FLAG_SWITCHES, SWITCHES_BY_NAME, attention_backend_switches


@dataclass
class RunConfig:
    """What a run's configuration says.

    Attributes:
        layout: layout field -> value (costmodel.layouts.LAYOUT_FIELDS names) for the fields it gives.
        recipe: ``gbs``, ``seq_len``, ``precision`` and recipe switches (costmodel.stacks) it gives.
        nodes, gpus_per_node: the run's world (None where the file does not say).
        stack: the stack whose file it is (``nemo`` or ``torchtitan``).
        kind: the file's format in words (``NeMo YAML``, ``Megatron-Bridge YAML``, ``torchtitan TOML``).
        where: field -> ``"FILE: key"``, for messages.
        notes: what was not read and why.
        custom_pipeline_split: the run's own split of layers over pipeline stages (Megatron-core
            ``pipeline_model_parallel_layout`` or first/last-stage layer counts), None when even.
        model: model dimension -> (value, where) the file states, checked against --model.
        dropout: whether the run trains with dropout (its attention or hidden dropout above 0), None
            where the file does not say; it overrides the model's own switch.
        defaults: recipe key -> the framework's own default for a value the file leaves out, which the
            run trains with unless its command line (here: the flag) overrides it.
    """

    layout: dict = field(default_factory=dict)
    recipe: dict = field(default_factory=dict)
    nodes: int | None = None
    gpus_per_node: int | None = None
    stack: str = "nemo"
    kind: str = ""
    where: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    custom_pipeline_split: str | None = None
    model: dict = field(default_factory=dict)
    dropout: bool | None = None
    defaults: dict = field(default_factory=dict)


#: torchtitan's own values for the [training] keys a TOML leaves out (torchtitan/config/job_config.py
#: Training: ``local_batch_size: int = 8``, ``seq_len: int = 2048``, ``global_batch_size: int = -1``,
#: the local batch times the DP degree)
TORCHTITAN_TRAINING_DEFAULTS = {"seq_len": 2048, "local_batch_size": 8}


# the model dimensions a Megatron-style configuration states (model.<key>) -> ModelSpec attribute;
# MoE keys only when the run has experts, the KV groups only without MLA
_DIMS = (("num_layers", "num_layers"), ("hidden_size", "hidden"), ("ffn_hidden_size", "dense_mlp_width"),
         ("num_attention_heads", "num_heads"), ("vocab_size", "vocab"))
_MOE_DIMS = (("num_moe_experts", "num_experts"), ("moe_ffn_hidden_size", "ffn_hidden"), ("moe_router_topk", "topk"))


def _model_dims(cfg: RunConfig, m: dict, path: str) -> None:
    """Record in ``cfg.model`` (attribute -> (value, where)) the model dimensions ``m`` (the ``model``
    mapping of a NeMo or Megatron-Bridge configuration) states."""
    dims = list(_DIMS)
    if isinstance(m.get("num_moe_experts"), int) and m["num_moe_experts"] > 1:
        dims += _MOE_DIMS
    elif "num_moe_experts" in m and m["num_moe_experts"] in (None, 0, 1):
        # a config that says it has no experts is of a dense model (num_experts 1 in costmodel.specs)
        cfg.model["num_experts"] = (1, f"{path}: model.num_moe_experts")
    if not m.get("multi_latent_attention") and m.get("num_query_groups") is not None:
        dims.append(("num_query_groups", "num_kv_heads"))
    for key, attr in dims:
        v = m.get(key)
        if v is not None and not _unset(v):
            try:
                cfg.model[attr] = (_int(v), f"{path}: model.{key}")
            except (ValueError, OverflowError):
                raise InputError(path, f"model.{key}", f"expected an integer, got {v!r}") from None
    # the run's dropout, a training choice its own file makes (Megatron's attention_dropout /
    # hidden_dropout): on when either probability is above 0
    probs = {}
    for key in ("attention_dropout", "hidden_dropout"):
        v = m.get(key)
        if v is None or _unset(v):
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise InputError(path, f"model.{key}", f"expected a dropout probability in [0, 1), got {v!r}")
        probs[key] = v
    if probs:
        on = [k for k, v in probs.items() if v > 0]
        cfg.dropout, cfg.where["dropout"] = bool(on), f"{path}: model.{(on or list(probs))[0]}"


def check_model_dims(cfg: RunConfig, model) -> None:
    """Refuse a configuration whose model dimensions are not those of ``model`` (a ModelSpec): the
    layout and batch would be read from one model and applied to another.

    Raises:
        InputError: the first dimension that differs, naming the file, its key and both values.
    """
    for attr, (v, where) in cfg.model.items():
        if attr == "flavor":                   # torchtitan's model.flavor: a parameter count such as "8B"
            n = _flavor_params(v)
            if n is not None and not 0.75 <= model.params() / n <= 1.33:
                file, key = where.split(": ", 1)
                raise InputError(file, key, f"{v!r} is not {model.name} ({model.params() / 1e9:.1f}B parameters): "
                                 "the configuration is of another model (pass its --model)")
            continue
        mine = getattr(model, attr)
        if mine != v:
            file, key = where.split(": ", 1)
            raise InputError(file, key, f"{v} is not {model.name}'s {mine}: the configuration is of another model "
                             "(pass its --model, or a config.json of it)")


def _flavor_params(flavor) -> float | None:
    """Parameters a torchtitan flavor names ("8B", "70B", "405B", "16B_A3B": its total), else None
    ("debugmodel")."""
    import re
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*([BbMm])", str(flavor))
    if m is None:
        return None
    return float(m.group(1)) * (1e9 if m.group(2) in "Bb" else 1e6)


def _unset(v) -> bool:
    return v is None or (isinstance(v, str) and (v.startswith("${") or v.strip() == "???"))


def _take(cfg: RunConfig, path: str, target: dict, name: str, d: dict, key: str, conv=lambda v: v, prefix=""):
    """Read ``d[key]`` into ``target[name]`` (converted), recording where it came from; skip an unset or
    interpolated value (noted)."""
    v = d.get(key)
    if _unset(v):
        if isinstance(v, str):
            cfg.notes.append(f"{path}: {prefix}{key}: {v!r} is interpolated: not read")
        return
    try:
        target[name] = conv(v)
    except (TypeError, ValueError):
        raise InputError(path, prefix + key, f"{v!r} is not a valid value"
                         + (f": expected {conv.expect}" if hasattr(conv, "expect") else "")) from None
    cfg.where[name] = f"{path}: {prefix}{key}"


def _bool(v) -> bool:
    if not isinstance(v, bool):        # YAML's true/false; a string or number is not read as a switch
        raise ValueError(v)
    return v


def _int(v):
    # inf and nan are floats that are no whole number (int(inf) raises OverflowError, not ValueError)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v:
        raise ValueError(v)
    return int(v)


def _count(v) -> int:
    """A whole number >= 1 (a parallel degree, a batch, a length)."""
    n = _int(v)
    if n < 1:
        raise ValueError(v)
    return n


def _table(d: dict, path: str, *keys: str) -> dict:
    """The TOML/YAML table at ``d[k1][k2]...``; {} where a level is absent.

    Raises:
        InputError: a level that is not a table (naming the file and the dotted key)."""
    cur = d
    for i, k in enumerate(keys):
        v = cur.get(k)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise InputError(path, ".".join(keys[:i + 1]), f"expected a table, got {v!r}")
        cur = v
    return cur


def _precision(v) -> str:
    s = str(v).lower()
    if s in ("bf16", "bf16-mixed", "bf16_mixed"):
        return "bf16"
    if s in ("16", "16-mixed", "fp16", "fp16-mixed"):
        return "fp16"
    raise ValueError(v)


_bool.expect, _int.expect, _count.expect = "true or false", "a whole number", "a whole number >= 1"
_precision.expect = "bf16, bf16-mixed, 16, 16-mixed or fp16 (32-bit training is not modelled)"


def _megatron_parallelism(cfg: RunConfig, path: str, m: dict) -> None:
    """The parallel sizes of a Megatron-style ``model`` mapping (NeMo, Megatron-Bridge) into the layout:
    TP, PP, CP, EP, ETP, VP (null: no interleaving) and sequence parallelism."""
    L, mp = cfg.layout, "model."
    for name, key in (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
                      ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"),
                      ("etp", "expert_tensor_parallel_size")):
        _take(cfg, path, L, name, m, key, _int, mp)
    if "virtual_pipeline_model_parallel_size" in m and m["virtual_pipeline_model_parallel_size"] is None:
        L["vp"], cfg.where["vp"] = 1, f"{path}: model.virtual_pipeline_model_parallel_size"
    else:
        _take(cfg, path, L, "vp", m, "virtual_pipeline_model_parallel_size", _int, mp)
    _take(cfg, path, L, "sp", m, "sequence_parallel", _bool, mp)


def _granularity(cfg: RunConfig, path: str, m: dict, prefix: str):
    """The recompute granularity of ``m`` under ``prefix`` (NeMo ``activations_checkpoint_``, Megatron-
    Bridge ``recompute_``), with the block method's layer count; the raw value, None when unset.

    Raises:
        InputError: a granularity that is not null, selective or full.
    """
    key = prefix + "granularity"
    gran = m.get(key)
    if key not in m or (isinstance(gran, str) and _unset(gran)):
        return None
    L = cfg.layout
    L["recompute"] = {None: "none", "selective": "selective", "full": "full"}.get(gran)
    if L["recompute"] is None:
        raise InputError(path, f"model.{key}", f"{gran!r} is not null, selective or full")
    cfg.where["recompute"] = f"{path}: model.{key}"
    if gran == "full" and m.get(prefix + "method") == "block":
        _take(cfg, path, L, "recompute_num_layers", m, prefix + "num_layers", _int, "model.")
    return gran


def _nemo(d: dict, path: str) -> RunConfig:
    if "training" in d and isinstance(d["training"], dict) and "model" in d["training"]:
        d = d["training"]
    m, t = d.get("model") or {}, d.get("trainer") or {}
    if not isinstance(m, dict):
        raise InputError(path, "model", "expected a mapping")
    cfg = RunConfig(stack="nemo", kind="NeMo YAML")
    L, R = cfg.layout, cfg.recipe
    mp = "model."
    _megatron_parallelism(cfg, path, m)
    _take(cfg, path, L, "mbs", m, "micro_batch_size", _int, mp)
    _granularity(cfg, path, m, "activations_checkpoint_")
    opt = m.get("optim") or {}
    if isinstance(opt, dict) and not _unset(opt.get("name")):
        L["zero"] = 1 if "distributed" in str(opt["name"]) else 0
        cfg.where["zero"] = f"{path}: model.optim.name"
        if "overlap_grad_sync" in opt:
            _take(cfg, path, R, "dp_overlap", opt, "overlap_grad_sync", _bool, "model.optim.")
    _take(cfg, path, R, "gbs", m, "global_batch_size", _int, mp)
    _take(cfg, path, R, "seq_len", m, "encoder_seq_length", _int, mp)
    if "seq_len" not in R and isinstance(m.get("data"), dict):
        _take(cfg, path, R, "seq_len", m["data"], "seq_length", _int, "model.data.")
    _take(cfg, path, R, "precision", t, "precision", _precision, "trainer.")
    if m.get("fp8") is True:
        R["precision"], cfg.where["precision"] = "fp8", f"{path}: model.fp8"
        rec = m.get("fp8_recipe")
        if rec is not None and not _unset(rec):
            if not isinstance(rec, str) or rec.lower() not in TE_FP8_RECIPES:
                raise InputError(path, "model.fp8_recipe", f"expected one of {', '.join(TE_FP8_RECIPES)}, got {rec!r}")
            R["fp8_recipe"], cfg.where["fp8_recipe"] = rec.lower(), f"{path}: model.fp8_recipe"
    _take(cfg, path, R, "flash_attention", m, "use_flash_attention", _bool, mp)
    _take(cfg, path, R, "tp_comm_overlap", m, "ub_tp_comm_overlap", _bool, mp)
    _take(cfg, path, R, "pp_overlap", m, "overlap_p2p_comm", _bool, mp)
    _model_dims(cfg, m, path)
    world = {}
    for name, key in (("nodes", "num_nodes"), ("gpus_per_node", "devices")):
        _take(cfg, path, world, name, t, key, _int, "trainer.")
    cfg.nodes, cfg.gpus_per_node = world.get("nodes"), world.get("gpus_per_node")
    return cfg


_SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
#: the MoE switches a Megatron-Bridge model config names by their Megatron key (costmodel.stacks);
#: the capacity factor, whose None means dropless, is read on its own
_BRIDGE_MOE = (("moe_dispatcher", SWITCHES_BY_NAME["moe_dispatcher"].megatron_key,
                lambda v: MOE_DISPATCHER_ALIASES.get(str(v), str(v))),
               *((s.name, s.megatron_key, _bool) for s in MOE_FLAG_SWITCHES))


#: what a block-scaled fp8 recipe (Megatron-Bridge's subchannel / ``fp8_recipe: blockwise``) is priced as
_BLOCKWISE_NOTE = ("is priced as delayed per-tensor fp8: its casts move about as many bytes, but its block-scaled "
                   "GEMM, slower on Hopper, is not modelled")


def _bridge_seq_len(d: dict, m: dict, path: str, cfg: RunConfig) -> None:
    """The sequence length of a Megatron-Bridge config: the dataset's (``sequence_length`` of a GPT
    dataset, ``seq_length`` of a fine-tuning one: what each sample holds), else the model's
    ``seq_length`` (its maximum); a disagreement and sequence packing (``packed_sequence_specs``: each
    sample several documents, each attending to itself, priced as one unless --doc-tokens says) are
    noted."""
    R = cfg.recipe
    ds = d.get("dataset") if isinstance(d.get("dataset"), dict) else {}
    key = next((k for k in ("sequence_length", "seq_length") if ds.get(k) is not None), None)
    if key:
        _take(cfg, path, R, "seq_len", ds, key, _int, "dataset.")
    if "seq_len" not in R:
        _take(cfg, path, R, "seq_len", m, "seq_length", _int, "model.")
    elif isinstance(m.get("seq_length"), int) and m["seq_length"] != R["seq_len"]:
        cfg.notes.append(f"{path}: dataset.{key} {R['seq_len']} is what a sample holds; model.seq_length "
                         f"{m['seq_length']} (the model's maximum) is not used")
    packed = ds.get("packed_sequence_specs")
    if isinstance(packed, dict) and packed.get("packed_sequence_size"):
        cfg.notes.append(f"{path}: dataset.packed_sequence_specs: packed sequences of "
                         f"{packed['packed_sequence_size']} tokens hold several documents, each attending to itself "
                         "only; priced as one document per sequence unless --doc-tokens gives their length")


def _bridge_precision(mp, path: str, cfg: RunConfig) -> None:
    """Precision and fp8 scaling from Megatron-Bridge's ``mixed_precision``: a recipe name or a mapping
    (``fp8`` e4m3 / hybrid: fp8, its ``fp8_recipe`` the scaling).

    Raises:
        InputError: a value of another type, an unknown recipe name, an ``fp8`` that is not a format,
            an ``fp8_recipe`` the model does not know (naming the file and the key).
    """
    R = cfg.recipe
    if _unset(mp):
        return
    if isinstance(mp, str):
        name = mp.lower()
        R["precision"] = ("nvfp4" if "nvfp4" in name else "mxfp8" if "mxfp8" in name else "fp8" if "fp8" in name
                          else "fp16" if name.startswith("fp16") else "bf16" if "bf16" in name else None)
        if R["precision"] is None:
            raise InputError(path, "mixed_precision", f"{mp!r} names no bf16, fp16, fp8, mxfp8 or nvfp4 recipe")
        if R["precision"] == "fp8":
            # bf16_with_fp8_current_scaling_mixed: per-tensor current scaling; bf16_with_fp8_mixed: delayed
            R["fp8_recipe"] = "tensorwise" if "current_scaling" in name else "delayed"
            cfg.where["fp8_recipe"] = f"{path}: mixed_precision {mp}"
            if "subchannel" in name or "blockwise" in name:
                cfg.notes.append(f"{path}: mixed_precision {mp!r} (block-wise scaling) {_BLOCKWISE_NOTE}")
    elif isinstance(mp, dict):
        f8 = mp.get("fp8")
        if f8 not in (None, False) and str(f8).lower() not in FP8_FORMATS:
            raise InputError(path, "mixed_precision.fp8", f"expected {' or '.join(FP8_FORMATS)} (or null), got {f8!r}")
        rec = mp.get("fp8_recipe")
        if rec is not None and (not isinstance(rec, str) or rec.lower() not in (*TE_FP8_RECIPES, "mxfp8", "blockwise")):
            raise InputError(path, "mixed_precision.fp8_recipe",
                             f"expected one of {', '.join((*TE_FP8_RECIPES, 'mxfp8', 'blockwise'))}, got {rec!r}")
        rec = (rec or "").lower()
        rec4 = mp.get("fp4_recipe")         # Megatron-core's fp4_recipe: nvfp4 (the one priced) or custom
        if mp.get("fp4") not in (None, False) and rec4 not in (None, "nvfp4"):
            cfg.notes.append(f"{path}: mixed_precision.fp4_recipe {rec4!r} is priced as NVFP4")
        R["precision"] = ("nvfp4" if mp.get("fp4") not in (None, False) else
                          ("mxfp8" if rec == "mxfp8" else "fp8") if f8 not in (None, False) else
                          "fp16" if mp.get("fp16") is True else "bf16" if mp.get("bf16") is True else None)
        if R["precision"] is None:
            del R["precision"]
            return
        if R["precision"] == "fp8" and rec:
            R["fp8_recipe"] = "delayed" if rec == "blockwise" else rec
            cfg.where["fp8_recipe"] = f"{path}: mixed_precision.fp8_recipe"
            if rec == "blockwise":
                cfg.notes.append(f"{path}: mixed_precision.fp8_recipe 'blockwise' {_BLOCKWISE_NOTE}")
    else:
        raise InputError(path, "mixed_precision", f"expected a recipe name or a mapping, got {mp!r}")
    cfg.where["precision"] = f"{path}: mixed_precision"


def _torch_dtype(v) -> str | None:
    """'bf16' / 'fp32' of a Megatron-Bridge dtype entry (``{_target_: torch.bfloat16}`` or a string)."""
    name = str(v.get("_target_") if isinstance(v, dict) else v).rsplit(".", 1)[-1].lower()
    return {"bfloat16": "bf16", "bf16": "bf16", "float32": "fp32", "fp32": "fp32"}.get(name)


def _bridge_optimizer(o, path: str, cfg: RunConfig) -> None:
    """Megatron-Bridge's ``optimizer``: the optimizer and the precision-aware optimizer's main-grad and
    state dtypes (megatron/core/optimizer/optimizer_config.py OptimizerConfig).

    Raises:
        InputError: a value of the wrong kind, an optimizer the model does not price, or bf16 dtypes
            without ``use_precision_aware_optimizer`` (Megatron-core keeps them fp32 then).
    """
    if not isinstance(o, dict):
        return
    R, W = cfg.recipe, cfg.where
    name = o.get("optimizer")
    if name is not None and not _unset(name):
        if name not in ("adam", "sgd"):
            raise InputError(path, "optimizer.optimizer", f"{name!r} is not adam or sgd, the optimizers the model "
                             "prices for Megatron-core")
        R["optimizer"], W["optimizer"] = name, f"{path}: optimizer.optimizer"
    pao = o.get("use_precision_aware_optimizer")
    if pao is not None and not isinstance(pao, bool):
        raise InputError(path, "optimizer.use_precision_aware_optimizer", f"expected true or false, got {pao!r}")
    for key, switch in (("main_grads_dtype", "main_grads_dtype"), ("exp_avg_dtype", "optimizer_states_dtype"),
                        ("exp_avg_sq_dtype", "optimizer_states_dtype")):
        v = o.get(key)
        if v is None:
            continue
        d = _torch_dtype(v)
        if d is None:
            raise InputError(path, f"optimizer.{key}", f"{v!r} is not torch.float32 or torch.bfloat16")
        if d == "bf16" and pao is not True:
            raise InputError(path, f"optimizer.{key}", "bf16 needs optimizer.use_precision_aware_optimizer true "
                             "(Megatron-core keeps it fp32 otherwise)")
        if pao is not True:
            continue
        if switch in R and R[switch] != d:
            raise InputError(path, f"optimizer.{key}", f"{d} differs from {W[switch].split(': ', 1)[1]} ({R[switch]}): "
                             "the model prices one dtype for both Adam moments")
        R[switch], W[switch] = d, f"{path}: optimizer.{key}"
    if R.get("optimizer_states_dtype") == "bf16" and o.get("store_param_remainders") is False:
        cfg.notes.append(f"{path}: optimizer.store_param_remainders false: the fp32 master is kept whole, "
                         "priced as its 16-bit remainder (2 bytes under)")


def _bridge(d: dict, path: str) -> RunConfig:
    m, t = d.get("model") or {}, d.get("train") or {}
    if not isinstance(m, dict) or not isinstance(t, dict):
        raise InputError(path, "model" if not isinstance(m, dict) else "train", "expected a mapping")
    cfg = RunConfig(stack="nemo", kind="Megatron-Bridge YAML")
    L, R = cfg.layout, cfg.recipe
    mp = "model."
    _megatron_parallelism(cfg, path, m)
    mods = m.get("recompute_modules")
    if _granularity(cfg, path, m, "recompute_") == "selective" and mods:
        if not isinstance(mods, (list, tuple)) or not all(isinstance(x, str) for x in mods):
            raise InputError(path, "model.recompute_modules", f"expected a list of module names, got {mods!r}")
        if any(x != x.strip() or not x for x in mods):
            raise InputError(path, "model.recompute_modules", f"{mods!r}: a name with spaces or an empty one")
        R["recompute_modules"] = ",".join(recompute_module_list(" ".join(mods), f"{path}: model.recompute_modules"))
        cfg.where["recompute_modules"] = f"{path}: model.recompute_modules"
    split = {k: m.get(k) for k in ("pipeline_model_parallel_layout", "num_layers_in_first_pipeline_stage",
                                   "num_layers_in_last_pipeline_stage") if m.get(k) is not None}
    if split:
        cfg.custom_pipeline_split = ", ".join(f"{k} {v!r}" for k, v in split.items())
        cfg.notes.append(f"{path}: model.{cfg.custom_pipeline_split}: the run splits its own layers over the "
                         "pipeline; modelled by its fullest stage, ceil(num_layers / PP) layers")
    _take(cfg, path, L, "mbs", t, "micro_batch_size", _int, "train.")
    _take(cfg, path, R, "gbs", t, "global_batch_size", _int, "train.")
    _bridge_seq_len(d, m, path, cfg)
    _bridge_precision(d.get("mixed_precision"), path, cfg)
    if "attention_backend" in m and m["attention_backend"] is not None:
        sw = attention_backend_switches(m["attention_backend"])
        if sw is None:
            raise InputError(path, "model.attention_backend", f"{m['attention_backend']!r} is not a Megatron-core "
                             "backend (flash, fused, unfused, local, auto)")
        for k, v in sw.items():
            R[k] = v
            cfg.where[k] = f"{path}: model.attention_backend"
    if isinstance(m.get("num_moe_experts"), int) and m["num_moe_experts"] > 0:
        for name, key, conv in _BRIDGE_MOE:
            if key in m and m[key] is None:      # Megatron-core reads a null switch as its default
                cfg.notes.append(f"{path}: model.{key}: null: the stack's default used")
            _take(cfg, path, R, name, m, key, conv, mp)
        if "moe_expert_capacity_factor" in m:
            cf = m["moe_expert_capacity_factor"]
            try:
                R["moe_capacity_factor"] = megatron_capacity_factor(cf)
            except ValueError:
                raise InputError(path, "model.moe_expert_capacity_factor", f"{cf!r} is not a number (null or "
                                 "below 0: dropless)") from None
            cfg.where["moe_capacity_factor"] = f"{path}: model.moe_expert_capacity_factor"
        backend = m.get("moe_flex_dispatcher_backend")
        if R.get("moe_dispatcher") == "flex" and backend not in (None, "deepep"):
            # the flex dispatcher's other backend (NVIDIA's HybridEP) has no public measurement here
            cfg.notes.append(f"{path}: model.moe_flex_dispatcher_backend {backend!r} is priced as DeepEP, whose "
                             "measured bandwidths (hardware/profiles/data/deepep_normal_kernels_h800_b200.md) the "
                             "flex dispatcher's cost uses")
    _bridge_optimizer(d.get("optimizer"), path, cfg)
    ddp = d.get("ddp") or {}
    if isinstance(ddp, dict) and ddp:
        opt = d.get("optimizer")
        opt_do = opt.get("use_distributed_optimizer") if isinstance(opt, dict) else None
        ddp_do = ddp.get("use_distributed_optimizer")
        if isinstance(opt_do, bool) and isinstance(ddp_do, bool) and opt_do != ddp_do:
            raise InputError(path, "optimizer.use_distributed_optimizer", f"{opt_do} contradicts "
                             f"ddp.use_distributed_optimizer {ddp_do}")
        shard = _SHARDING.get(ddp.get("data_parallel_sharding_strategy"), 0)
        L["zero"] = 3 if ddp.get("use_megatron_fsdp") is True or shard == 3 else \
            max(shard, 1 if ddp.get("use_distributed_optimizer") is True else 0)
        cfg.where["zero"] = f"{path}: ddp.use_distributed_optimizer / use_megatron_fsdp"
        _take(cfg, path, R, "dp_overlap", ddp, "overlap_grad_reduce", _bool, "ddp.")
        if ddp.get("overlap_param_gather") not in (None, ddp.get("overlap_grad_reduce")):
            cfg.notes.append(f"{path}: ddp.overlap_grad_reduce {ddp.get('overlap_grad_reduce')} and "
                             f"overlap_param_gather {ddp['overlap_param_gather']}: --dp-overlap follows the grad reduce")
    _model_dims(cfg, m, path)
    co = d.get("comm_overlap") or {}
    if isinstance(co, dict):
        _take(cfg, path, R, "tp_comm_overlap", co, "tp_comm_overlap", _bool, "comm_overlap.")
        # null there lets Bridge turn it on with VP; the model section's value is the dataclass
        # default before that setup runs, so only an explicit comm_overlap value is read
        _take(cfg, path, R, "pp_overlap", co, "overlap_p2p_comm", _bool, "comm_overlap.")
    return cfg


def _torchtitan(d: dict, path: str) -> RunConfig:
    cfg = RunConfig(stack="torchtitan", kind="torchtitan TOML")
    L, R = cfg.layout, cfg.recipe
    par, tr = _table(d, path, "parallelism"), _table(d, path, "training")
    for name, key in (("tp", "tensor_parallel_degree"), ("pp", "pipeline_parallel_degree"),
                      ("cp", "context_parallel_degree"), ("ep", "expert_parallel_degree")):
        _take(cfg, path, L, name, par, key, _count, "parallelism.")
    shard, rep = par.get("data_parallel_shard_degree", -1), par.get("data_parallel_replicate_degree", 1)
    for key, v in (("data_parallel_shard_degree", shard), ("data_parallel_replicate_degree", rep)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v != -1)):
            raise InputError(path, f"parallelism.{key}", f"expected -1 (the ranks left) or a degree >= 1, got {v!r}")
    L["zero"] = 3 if shard != 1 else 0
    cfg.where["zero"] = f"{path}: parallelism.data_parallel_shard_degree"
    if shard not in (-1, 1) and rep not in (None, 1):
        cfg.notes.append(f"{path}: HSDP (replicate {rep} x shard {shard}) is modelled as FSDP over all of DP")
    if L.get("pp", 1) > 1:
        _take(cfg, path, L, "mbs", par, "pipeline_parallel_microbatch_size", _count, "parallelism.")
    else:
        _take(cfg, path, L, "mbs", tr, "local_batch_size", _count, "training.")
    g = tr.get("global_batch_size")
    if isinstance(g, int) and g > 0:
        R["gbs"], cfg.where["gbs"] = g, f"{path}: training.global_batch_size"
    elif tr.get("local_batch_size") is not None:                          # x DP, once the world is known
        try:
            R["local_batch_size"] = _count(tr["local_batch_size"])
        except (TypeError, ValueError):
            raise InputError(path, "training.local_batch_size", f"{tr['local_batch_size']!r} is not a valid "
                             "value") from None
    _take(cfg, path, R, "seq_len", tr, "seq_len", _count, "training.")
    for key, v in TORCHTITAN_TRAINING_DEFAULTS.items():
        if key not in R and not (key == "local_batch_size" and "gbs" in R):
            cfg.defaults[key] = v
    ac = _table(d, path, "activation_checkpoint").get("mode")
    if ac is not None:
        if ac not in ("none", "selective", "full"):
            raise InputError(path, "activation_checkpoint.mode", f"{ac!r} is not none, selective or full")
        L["recompute"], cfg.where["recompute"] = ac, f"{path}: activation_checkpoint.mode"
    comp = d.get("compile")
    if isinstance(comp, dict) and isinstance(comp.get("enable"), bool):     # [compile] enable / components
        on = comp["enable"] and "model" in (comp.get("components") or ["model"])
        R["fused_elementwise"], cfg.where["fused_elementwise"] = on, f"{path}: compile.enable"
    elif isinstance(tr.get("compile"), bool):                              # older: training.compile
        R["fused_elementwise"], cfg.where["fused_elementwise"] = tr["compile"], f"{path}: training.compile"
    model = _table(d, path, "model")
    fl = model.get("flavor")
    if isinstance(fl, str) and fl.strip():
        cfg.model["flavor"] = (fl, f"{path}: model.flavor")
    conv = model.get("converters") or []
    if not isinstance(conv, list) or not all(isinstance(c, str) for c in conv):
        raise InputError(path, "model.converters", f"expected a list of converter names, got {conv!r}")
    mx = [c for c in conv if c in _TORCHTITAN_MX]
    if mx:
        raise InputError(path, "model.converters", f"{mx[0]!r} (torchao's MXFP8) is not priced on torchtitan: the "
                         "model's mxfp8 is Transformer Engine's (--stack megatron or nemo)")
    for c in conv:
        if c not in _TORCHTITAN_FLOAT8:
            cfg.notes.append(f"{path}: model.converters {c!r} is not a converter the model prices: not used")
    f8 = [c for c in conv if c in _TORCHTITAN_FLOAT8]
    old_f8 = _table(d, path, "float8").get("enable_float8_linear") is True
    if f8 or old_f8:
        R["precision"] = "fp8"
        cfg.where["precision"] = f"{path}: " + (f"model.converters ({f8[0]!r})" if f8 else "float8.enable_float8_linear")
        _torchtitan_float8_recipe(d, path, cfg)
    elif any(_table(d, path, *k).get("recipe_name") is not None for k in (("quantize", "linear", "float8"), ("float8",))):
        cfg.notes.append(f"{path}: a float8 recipe_name without the float8 converter in model.converters: the "
                         "linears stay 16-bit")
    return cfg


#: torchtitan's float8 converter names: "float8" (2024-25), "quantize.linear.float8" (the
#: [quantize.linear.float8] configs of 2025); and its MX ones, which the model does not price there
_TORCHTITAN_FLOAT8 = ("float8", "quantize.linear.float8")
_TORCHTITAN_MX = ("mx", "quantize.linear.mx", "quantize.grouped_mm.mx")


def _torchtitan_float8_recipe(d: dict, path: str, cfg: RunConfig) -> None:
    """torchao's float8 recipe name (``[quantize.linear.float8]`` or the older ``[float8]``
    ``recipe_name``): tensorwise and rowwise are the model's recipes of those names;
    rowwise_with_gw_hp (row-wise, the weight-gradient GEMM in bf16) is noted and priced as rowwise.

    Raises:
        InputError: a recipe name that is not a string, or not one of torchao's (naming the key)."""
    names = {k: sec.get("recipe_name") for k, sec in (("quantize.linear.float8", _table(d, path, "quantize", "linear",
                                                                                         "float8")),
                                                      ("float8", _table(d, path, "float8")))}
    if len({str(v).lower() for v in names.values() if v is not None}) > 1:
        cfg.notes.append(f"{path}: quantize.linear.float8.recipe_name {names['quantize.linear.float8']!r} and "
                         f"float8.recipe_name {names['float8']!r} differ: the first is read")
    for key, sec in (("quantize.linear.float8", _table(d, path, "quantize", "linear", "float8")),
                     ("float8", _table(d, path, "float8"))):
        if sec.get("recipe_name") is not None:
            name = sec["recipe_name"]
            if not isinstance(name, str):
                raise InputError(path, f"{key}.recipe_name", f"expected a recipe name, got {name!r}")
            low = name.lower()
            if low not in ("tensorwise", "rowwise", "rowwise_with_gw_hp"):
                raise InputError(path, f"{key}.recipe_name", f"expected one of tensorwise, rowwise, "
                                 f"rowwise_with_gw_hp (torchao's float8 recipes), got {name!r}")
            rec = "tensorwise" if low == "tensorwise" else "rowwise"
            cfg.recipe["fp8_recipe"], cfg.where["fp8_recipe"] = rec, f"{path}: {key}.recipe_name"
            if low == "rowwise_with_gw_hp":
                cfg.notes.append(f"{path}: {key}.recipe_name 'rowwise_with_gw_hp' is priced as rowwise: its "
                                 "weight-gradient GEMM in bf16 is not modelled")
            return


def read_run_config(path) -> RunConfig:
    """Read a NeMo YAML, Megatron-Bridge YAML or torchtitan TOML run configuration (module docstring).

    Raises:
        InputError: a missing, unreadable, binary or unrecognised file, a Python configuration, or a
            value of the wrong kind (naming the file and key).
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(path, "", "is a directory, not a run configuration")
    if not p.is_file():
        raise InputError(path, "", "no such file")
    if p.suffix.lower() == ".py":
        raise InputError(path, "", "a Python configuration (torchtitan's current format) is code, not data: pass "
                         "its degrees as flags, or a TOML/YAML configuration")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, "", f"not a UTF-8 text file (byte {e.start}: {e.reason})") from None
    if p.suffix.lower() == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:                                   # the tomli backport (a dependency on Python 3.10)
            import tomli as tomllib
        try:
            d = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(path, "", f"not valid TOML ({e})") from None
        if "parallelism" not in d and "training" not in d:
            raise InputError(path, "", "a TOML file without [parallelism] or [training]: not a torchtitan configuration")
        return _checked(_torchtitan, d, str(path))
    try:
        d = yaml_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(path, "", f"not valid YAML{at} ({str(e).splitlines()[0]})") from None
    if not isinstance(d, dict) or not ("model" in d or "training" in d):
        raise InputError(path, "", "no model: section: not a NeMo or Megatron-Bridge run configuration (NeMo YAML, "
                         "Megatron-Bridge YAML or torchtitan TOML are read)")
    if "ConfigContainer" in str(d.get("_target_", "")) or ("train" in d and "trainer" not in d):
        return _checked(_bridge, d, str(path))
    if "trainer" not in d:
        # the section that tells the two formats apart, misspelt, would make a Megatron-Bridge file a
        # NeMo one (or a NeMo file lose its trainer): refused before either reader guesses
        near = [k for k in d if isinstance(k, str) and (one_edit_apart(k, "train") or one_edit_apart(k, "trainer"))]
        if near:
            raise InputError(path, near[0], "not a key the readers know; did you mean train: (Megatron-Bridge) or "
                             "trainer: (NeMo)? (one edit away; the file has neither, so its format cannot be told)")
    return _checked(_nemo, d, str(path))


def _checked(reader, d: dict, path: str) -> RunConfig:
    """``reader`` on ``d``, then a key it never looked at one typo from a key it looked for and
    missed is refused (costmodel.config_keys)."""
    doc = track(d)
    return read_checked(lambda: reader(doc, path), doc, path)
