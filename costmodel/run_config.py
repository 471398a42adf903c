"""A training run's own configuration file as the layout source of ``predict --config``.

Three formats, recognised by content:

* **NeMo (1.x) YAML** (NeMo's ``megatron_gpt_config.yaml`` family and NeMo-Framework-Launcher
  ``conf/training/*/*.yaml``; a top-level ``training:`` is descended into): ``trainer.num_nodes``,
  ``trainer.devices``, ``trainer.precision`` and ``model.``: ``tensor_model_parallel_size``,
  ``pipeline_model_parallel_size``, ``virtual_pipeline_model_parallel_size``, ``context_parallel_size``,
  ``expert_model_parallel_size``, ``expert_tensor_parallel_size``, ``micro_batch_size``,
  ``global_batch_size``, ``data.seq_length`` (or ``encoder_seq_length``), ``sequence_parallel``,
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
  ``bf16_mixed``; without that section the model's own ``fp8`` / ``fp8_recipe``) and its
  ``grad_reduce_in_fp32`` (else ``ddp.grad_reduce_in_fp32``); ``ddp.use_distributed_optimizer`` (ZeRO-1),
  ``ddp.use_megatron_fsdp``, ``dist.use_megatron_fsdp`` / ``use_torch_fsdp2`` or
  ``data_parallel_sharding_strategy: optim_grads_params`` (ZeRO-3), ``ddp.overlap_grad_reduce``;
  ``optimizer.optimizer_cpu_offload``; ``model.account_for_embedding_in_pipeline_split`` /
  ``account_for_loss_in_pipeline_split`` (false, Megatron-core's default: PP x VP must divide the layers);
  ``comm_overlap.tp_comm_overlap`` and ``overlap_p2p_comm`` (when not null).  The world is not in these
  files: it comes from the flags.  A key under ``model`` that names a parallel size Megatron-core does
  not have (``tensor_parallel_size``) is refused.
* **torchtitan TOML** (``train_configs/*.toml`` of torchtitan before its Python configs, commit
  76d5c72e2): ``[parallelism]`` degrees (``data_parallel_shard_degree`` other than 1: FSDP, ZeRO-3;
  -1 takes the rest of the world), ``pipeline_parallel_microbatch_size``, ``[compile]`` (torch.compile
  fuses the norms, rotary embedding and SwiGLU: ``fused_elementwise``), ``[training]``
  ``local_batch_size``, ``global_batch_size``, ``seq_len``, ``[activation_checkpoint] mode``, and a
  ``float8`` converter or ``[float8]`` section (fp8).

A value the file leaves to an interpolation (``${...}``) or to ``???`` is resolved only at launch: its
flag must give it (``RunConfig.unset``); what the file does not say is left to the flags and the
stack's defaults.  torchtitan's current Python configurations
are code, not data, and are refused with that reason.
"""
from __future__ import annotations

import math
import re

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .config_keys import one_edit_apart, read_checked, track
from .errors import InputError
from .foreign_configs import refuse_foreign_config
from .launch_script import is_launch_script, launch_script_error
from .specs import MOE_DISPATCHER_ALIASES, megatron_capacity_factor, megatron_cross_entropy
from .specs.loading import yaml_error_text, yaml_load
from .recipe_switches import MOE_FLAG_SWITCHES, SWITCHES_BY_NAME
from .files import read_text
from .files import not_a_file


@dataclass
class RunConfig:
    """What a run's configuration says.

    Attributes:
        layout: layout field -> value (costmodel.layout_fields.LAYOUT_FIELDS names) for the fields it gives.
        recipe: ``gbs``, ``seq_len``, ``precision`` and recipe switches (costmodel.stacks) it gives.
        nodes, gpus_per_node: the run's world (None where the file does not say).
        stack: the stack whose file it is (``nemo`` or ``torchtitan``).
        kind: the file's format in words (``NeMo YAML``, ``Megatron-Bridge YAML``, ``torchtitan TOML``).
        where: field -> ``"FILE: key"``, for messages.
        notes: what was not read and why.
        custom_pipeline_split: the run's own split of layers over pipeline stages (Megatron-core
            ``pipeline_model_parallel_layout`` or first/last-stage layer counts), None when even.
        pipeline_layout: the ``pipeline_model_parallel_layout`` string itself, None where not given as
            one (costmodel.pipeline_layout parses it).
        model: model dimension -> (value, where) the file states, checked against --model.
        dropout: whether the run trains with dropout (its attention or hidden dropout above 0), None
            where the file does not say; it overrides the model's own switch.
        defaults: recipe key -> the framework's own default for a value the file leaves out, which the
            run trains with unless its command line (here: the flag) overrides it.
        unset: field -> ``"FILE: key (value)"`` of a value the file leaves to an interpolation
            (``${...}``) or to ``???``, resolved only when the run starts: its flag must give it.
        dp_replicate: torchtitan's ``data_parallel_replicate_degree`` where its shard degree is left to
            the world (-1): the DP it must divide is known only with the cluster (1: none).
        stage_split: the pipeline split a torchtitan file runs (costmodel.run_config_torchtitan._stage_split:
            the stages it names, or torchtitan's own split and its weights), laid out once the model's
            layers are known (costmodel.torchtitan_split.stage_layout_text); None for an even split.
        split_without_embedding: ``"FILE: keys (values)"`` where a Megatron-style file leaves the
            embedding and the loss out of the pipeline split (Megatron-core's default), None where they
            count: PP x VP must then divide the layers (costmodel.cli.common.check_pipeline_accounting).
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
    pipeline_layout: str | None = None
    model: dict = field(default_factory=dict)
    dropout: bool | None = None
    defaults: dict = field(default_factory=dict)
    dp_replicate: int = 1
    unset: dict = field(default_factory=dict)
    split_without_embedding: str | None = None
    stage_split: dict | None = None


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
        if attr == "family":                   # torchtitan's model.name: the architecture ("llama3", "qwen3")
            _check_family(v, where, model)
            continue
        if attr == "flavor":                   # torchtitan's model.flavor: a parameter count such as "8B"
            if "debug" in str(v).lower():
                file, key = where.split(": ", 1)
                raise InputError(file, key, f"{v!r} is torchtitan's debug model (a few small layers for tests), not "
                                 f"{model.name}: give the run's own configuration")
            n, active = _flavor_params(v)
            have = model.params(active=active)
            if n is not None and not 0.75 <= have / n <= 1.33:
                file, key = where.split(": ", 1)
                raise InputError(file, key, f"{v!r} is not {model.name} ({have / 1e9:.1f}B {'active ' if active else ''}"
                                 "parameters): the configuration is of another model (pass its --model)")
            continue
        mine = getattr(model, attr)
        if mine != v:
            file, key = where.split(": ", 1)
            raise InputError(file, key, f"{v} is not {model.name}'s {mine}: the configuration is of another model "
                             "(pass its --model, or a config.json of it)")


def _check_family(family: str, where: str, model) -> None:
    """A torchtitan ``model.name`` (its architecture: llama3, qwen3, deepseek_v3, llama4, gpt_oss) must
    be the catalog model's family (its name starts with it, separators aside); a model from a
    config.json is not checked (its name is the user's).

    Raises:
        InputError: naming the file, the key and both names.
    """
    from .specs import list_models
    norm = lambda x: "".join(ch for ch in str(x).lower() if ch.isalnum())       # noqa: E731
    if model.name not in list_models() or norm(model.name).startswith(norm(family)):
        return
    file, key = where.split(": ", 1)
    raise InputError(file, key, f"{family!r} is not the family of {model.name}: the configuration is of another "
                     "model (pass its --model)")


def _flavor_params(flavor) -> tuple:
    """(parameters a torchtitan flavor names, whether they are the active ones): "8B", "70B", "405B",
    "16B_A3B" name the total; Llama 4's "17bx16e" and "17bx128e" the active parameters times the
    experts (torchtitan/models/llama4/__init__.py: both 17B active, Scout and Maverick); (None, False)
    for another ("debugmodel")."""
    import re
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*([BbMm])(x\d+e\b)?", str(flavor))
    if m is None:
        return None, False
    return float(m.group(1)) * (1e9 if m.group(2) in "Bb" else 1e6), m.group(3) is not None


def _unset(v) -> bool:
    return v is None or (isinstance(v, str) and (v.startswith("${") or v.strip() == "???"))


def _take(cfg: RunConfig, path: str, target: dict, name: str, d: dict, key: str, conv=lambda v: v, prefix=""):
    """Read ``d[key]`` into ``target[name]`` (converted), recording where it came from; skip an unset or
    interpolated value (recorded in ``cfg.unset``: its flag must give it)."""
    v = d.get(key)
    if _unset(v):
        if isinstance(v, str):
            cfg.unset[name] = f"{path}: {prefix}{key} ({v!r})"
        return
    try:
        target[name] = conv(v)
    except (TypeError, ValueError):
        raise InputError(path, prefix + key, f"{v!r} is not a valid value"
                         + (f": expected {conv.expect}" if hasattr(conv, "expect") else "")) from None
    cfg.where[name] = f"{path}: {prefix}{key}"


def _toml_key_at(text: str, err: str) -> str:
    """The key written on the line a TOML error names (``(at line N, column C)``), where the line assigns
    one (``Cannot overwrite a value``: a key written twice), else ''."""
    m = re.search(r"at line (\d+)", err)
    lines = text.splitlines()
    if not m or not 0 < int(m.group(1)) <= len(lines):
        return ""
    k = re.match(r"\s*([A-Za-z0-9_.\-\"']+)\s*=", lines[int(m.group(1)) - 1])
    return k.group(1).strip("\"'") if k else ""


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


def _cross_entropy(cfg: RunConfig, path: str, m: dict) -> None:
    """Megatron-core's ``cross_entropy_loss_fusion`` of a ``model`` mapping (NeMo, Megatron-Bridge): the
    fused cross-entropy (Transformer Engine's kernel with ``cross_entropy_fusion_impl`` te, else the
    native jit-fused one), or Megatron's vocab-parallel one (as compare reads it from a log)."""
    v = m.get("cross_entropy_loss_fusion")
    if v is None or _unset(v):
        return
    if not isinstance(v, bool):
        raise InputError(path, "model.cross_entropy_loss_fusion", f"{v!r} is not a valid value: expected true or false")
    cfg.recipe["cross_entropy"] = megatron_cross_entropy(v, m.get("cross_entropy_fusion_impl"))
    cfg.where["cross_entropy"] = f"{path}: model.cross_entropy_loss_fusion"


#: the parallelism fields of Megatron-core's ModelParallelConfig and TransformerConfig (megatron/core/
#: model_parallel_config.py, transformer/transformer_config.py at d98e8a64; Megatron-Bridge's GPTModelProvider
#: and NeMo 1's model section use the same names) that :data:`_PARALLEL_KEY` matches
MEGATRON_PARALLEL_KEYS = frozenset((
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "hierarchical_context_parallel_sizes", "expert_model_parallel_size",
    "expert_tensor_parallel_size", "sequence_parallel", "encoder_tensor_model_parallel_size",
    "encoder_pipeline_model_parallel_size"))
#: a key that names a parallel size the way a user would guess it (``tensor_parallel_size``, ``tp_size``,
#: ``data_parallel_size``, ``sequence_parallelism``)
_PARALLEL_KEY = re.compile(r"_parallel(_model)?_(size|sizes|degree)$|^(tp|pp|cp|ep|etp|dp|vp)(_size|_degree)?$|"
                           r"^sequence_parallel")


def _megatron_parallelism(cfg: RunConfig, path: str, m: dict) -> None:
    """The parallel sizes of a Megatron-style ``model`` mapping (NeMo, Megatron-Bridge) into the layout:
    TP, PP, CP, EP, ETP, VP (null: no interleaving) and sequence parallelism.

    Raises:
        InputError: a key that names a parallel size but is none of Megatron-core's
            (:data:`MEGATRON_PARALLEL_KEYS`; Bridge's and NeMo's config overrides refuse a field their
            dataclasses lack, and read past it the layout would take its defaults), or a CP exchange
            other than the p2p ring.
    """
    L, mp = cfg.layout, "model."
    wrong = [k for k in m if isinstance(k, str) and _PARALLEL_KEY.search(k) and k not in MEGATRON_PARALLEL_KEYS]
    if wrong:
        raise InputError(path, f"model.{wrong[0]}", "not a Megatron-core parallelism field (its sizes are "
                         "tensor_model_parallel_size, pipeline_model_parallel_size, virtual_pipeline_model_parallel_size, "
                         "context_parallel_size, expert_model_parallel_size, expert_tensor_parallel_size, "
                         "sequence_parallel; DP is the rest of the world)" + (f"; also {', '.join(wrong[1:])}" if wrong[1:] else ""))
    for name, key in (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
                      ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"),
                      ("etp", "expert_tensor_parallel_size")):
        _take(cfg, path, L, name, m, key, _int, mp)
        if key in m and m[key] is None and name != "etp":    # ETP's null is Megatron's "the layout's TP"
            cfg.notes.append(f"{path}: model.{key} is null: not read ({name.upper()} from --{name} or its default 1)")
    if "virtual_pipeline_model_parallel_size" in m and m["virtual_pipeline_model_parallel_size"] is None:
        L["vp"], cfg.where["vp"] = 1, f"{path}: model.virtual_pipeline_model_parallel_size"
    else:
        _take(cfg, path, L, "vp", m, "virtual_pipeline_model_parallel_size", _int, mp)
    _take(cfg, path, L, "sp", m, "sequence_parallel", _bool, mp)
    _pipeline_accounting(cfg, path, m)
    cp_comm = m.get("cp_comm_type")
    if not _unset(cp_comm) and cp_comm != "p2p" and (L.get("cp") or 1) > 1:
        # Megatron --cp-comm-type p2p / a2a / allgather / a2a+p2p (Transformer Engine's CP attention): the
        # model prices the p2p ring; the others move other tensors at other times
        raise InputError(path, "model.cp_comm_type", f"{cp_comm!r} is not priced: the model prices context "
                         "parallelism as the p2p ring (Megatron's default); set p2p or leave it out")


#: Megatron-core's switches that count the embedding and the loss as pipeline layers
#: (TransformerConfig, both False by default; Megatron-Bridge's GPTModelProvider keeps that default)
PIPELINE_ACCOUNTING_KEYS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")


def _pipeline_accounting(cfg: RunConfig, path: str, m: dict) -> None:
    """Record in ``cfg.split_without_embedding`` where the file leaves the embedding and the loss out of the
    pipeline split (both keys false or absent).

    Raises:
        InputError: a value that is not true or false, or one key true and the other not (the model prices
            the split with both counted or neither).
    """
    v = {}
    for k in PIPELINE_ACCOUNTING_KEYS:
        x = m.get(k, False)
        if not isinstance(x, bool):
            raise InputError(path, f"model.{k}", f"{x!r} is not a valid value: expected true or false")
        v[k] = x
    if len(set(v.values())) > 1:
        on = next(k for k in v if v[k])
        raise InputError(path, f"model.{on}", "is priced only together with "
                         f"{next(k for k in v if not v[k])} (the split with both the embedding and the loss counted)")
    if not any(v.values()):
        said = [k for k in PIPELINE_ACCOUNTING_KEYS if k in m]
        cfg.split_without_embedding = f"{path}: " + (
            " and ".join(f"model.{k} false" for k in said) if said else
            "no model.account_for_*_in_pipeline_split (false: Megatron-core's default)")


def _granularity(cfg: RunConfig, path: str, m: dict, prefix: str):
    """The recompute granularity of ``m`` under ``prefix`` (NeMo ``activations_checkpoint_``, Megatron-
    Bridge ``recompute_``), with the block method's layer count; the raw value, None when unset.

    Raises:
        InputError: a granularity that is not null, selective or full, or full without its method.
    """
    key = prefix + "granularity"
    gran = m.get(key)
    method = m.get(prefix + "method")
    if method is not None and not (isinstance(method, str) and _unset(method)) and method not in ("uniform", "block"):
        raise InputError(path, f"model.{prefix}method", f"{method!r} is not null, uniform or block")
    if key not in m or (isinstance(gran, str) and _unset(gran)):
        return None
    L = cfg.layout
    L["recompute"] = {None: "none", "selective": "selective", "full": "full"}.get(gran)
    if L["recompute"] is None:
        raise InputError(path, f"model.{key}", f"{gran!r} is not null, selective or full")
    cfg.where["recompute"] = f"{path}: model.{key}"
    if gran == "full" and (method is None or (isinstance(method, str) and _unset(method))) \
            and not (isinstance(method, str) and method.startswith("${")):
        raise InputError(path, f"model.{prefix}method", "missing with full recompute: Megatron-core raises without "
                         "it (TransformerConfig.__post_init__: recompute_method must be \"block\" or \"uniform\")")
    n = m.get(prefix + "num_layers")
    n_unset = n is None or (isinstance(n, str) and _unset(n) and not n.startswith("${"))
    # Megatron-core's TransformerConfig.__post_init__: full recompute needs recompute_num_layers,
    # selective refuses it
    if gran == "full" and n_unset:
        raise InputError(path, f"model.{prefix}num_layers", f"missing with full recompute ({method}): Megatron-core "
                         "raises without it (recompute_num_layers must be between 1 and the layers per pipeline rank)")
    if gran == "selective" and not n_unset:
        raise InputError(path, f"model.{prefix}num_layers", f"{n!r} with selective recompute: Megatron-core raises "
                         "(recompute_num_layers must be None)")
    if gran == "full" and method == "block":
        _take(cfg, path, L, "recompute_num_layers", m, prefix + "num_layers", _int, "model.")
        if L.get("recompute_num_layers", 0) < 0:
            raise InputError(path, f"model.{prefix}num_layers", f"{L['recompute_num_layers']} is below 0: the layers "
                             "per chunk a block recompute checkpoints")
        if L.get("recompute_num_layers") == 0:
            # the block method checkpoints the layers below this index of each chunk (transformer_block.py
            # _checkpointed_forward): 0 checkpoints none
            L["recompute"], L["recompute_num_layers"] = "none", 0
            cfg.notes.append(f"{path}: model.{prefix}num_layers 0 with the block method checkpoints no layer: no "
                             "recompute")
    elif gran == "full" and method == "uniform" and isinstance(n, int) and not isinstance(n, bool) and n > 1:
        cfg.notes.append(f"{path}: model.{prefix}num_layers {n} with the uniform method is priced as 1 (every layer "
                         f"re-runs either way; its memory keeps 1/{n} of the layer inputs but holds {n} layers' "
                         "activations while a unit re-runs)")
    return gran


#: the MoE switches a Megatron-Bridge model config names by their Megatron key (costmodel.stacks);
#: the capacity factor, whose None means dropless, is read on its own
_BRIDGE_MOE = (("moe_dispatcher", SWITCHES_BY_NAME["moe_dispatcher"].megatron_key,
                lambda v: MOE_DISPATCHER_ALIASES.get(str(v), str(v))),
               *((s.name, s.megatron_key, _bool) for s in MOE_FLAG_SWITCHES))


def _megatron_moe(cfg: RunConfig, path: str, m: dict) -> None:
    """The MoE switches of a Megatron-style ``model`` mapping (NeMo, Megatron-Bridge: the Megatron-core
    TransformerConfig keys) when it has experts: dispatcher, grouped GEMM, permute fusion and the other
    flag switches, the capacity factor (null or below 0: dropless) and the flex backend.

    Raises:
        InputError: a value of the wrong kind (naming the file and key).
    """
    R, mp = cfg.recipe, "model."
    # a dumped dense config says num_moe_experts: null beside the MoE keys' defaults; an override file
    # leaves the count to the recipe it overrides and gives only the switches
    if "num_moe_experts" in m and not (isinstance(m["num_moe_experts"], int) and m["num_moe_experts"] > 0):
        return
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
        # the flex dispatcher's other backend, NVIDIA's HybridEP, routes as DeepEP does; its published
        # latencies check the DeepEP pricing (tests/test_moe.py) rather than replace it
        cfg.notes.append(f"{path}: model.moe_flex_dispatcher_backend {backend!r} is priced as DeepEP, whose "
                         "measured bandwidths (hardware/profiles/data/deepep_normal_kernels_h800_b200.md) the "
                         "flex dispatcher's cost uses; HybridEP's published dispatch and combine latencies on "
                         "H100 and GB200 (hardware/profiles/data/megatron_moe_report_ep_dispatch_latency.md) "
                         "lie within 26% of that pricing")


def cuda_graph_note(cfg: RunConfig, path: str, m: dict, keys: tuple) -> None:
    """Note the CUDA-graph settings of ``m`` that are on: the model prices the kernels' launches as
    issued one by one (costmodel.stacks CPU dispatch), so a graphed run may be faster than predicted."""
    for k in keys:
        v = m.get(k)
        if v not in (None, False, "none", "None", "") and not _unset(v):
            cfg.notes.append(f"{path}: model.{k} {v!r}: CUDA graphs are not priced (each kernel's launch is)")


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
        raise InputError(path, "", not_a_file(p))
    if p.suffix.lower() == ".py":
        raise InputError(path, "", "a Python configuration (torchtitan's current format) is code, not data: pass "
                         "its degrees as flags, or a TOML/YAML configuration")
    try:
        text = read_text(p)
    except UnicodeDecodeError as e:
        raise InputError(path, "", f"not a UTF-8 text file (byte {e.start}: {e.reason})") from None
    if is_launch_script(str(path), text):
        raise launch_script_error(str(path), text)
    if p.suffix.lower() == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:                                   # the tomli backport (a dependency on Python 3.10)
            import tomli as tomllib
        try:
            d = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            twice = ": a key written twice in one table; give it once" if "overwrite" in str(e) else ""
            raise InputError(path, _toml_key_at(text, str(e)), f"not valid TOML ({e}){twice}") from None
        if "parallelism" not in d and "training" not in d:
            raise InputError(path, "", "a TOML file without [parallelism] or [training]: not a torchtitan configuration")
        from .run_config_torchtitan import _torchtitan
        return _checked(_torchtitan, d, str(path))
    try:
        d = yaml_load(text)
    except yaml.YAMLError as e:
        raise InputError(path, "", f"not valid YAML: {yaml_error_text(e)}") from None
    composed = [e for e in (d.get("defaults") if isinstance(d, dict) and isinstance(d.get("defaults"), list) else [])
                if not (e == "_self_" or (isinstance(e, dict) and all(str(k).startswith("optional ") for k in e)))]
    if composed:
        # the launcher's own files list only _self_ and optional overlays (tp_overlap); another entry
        # brings the run's values from a file --config does not read
        raise InputError(path, "defaults", f"{composed[0]!r}: a Hydra defaults entry composes this file from another, "
                         "which --config does not follow: give the composed configuration (the launcher prints it) "
                         "or the values as flags")
    refuse_foreign_config(d, path)
    if not isinstance(d, dict) or not ("model" in d or "training" in d):
        cut = isinstance(d, dict) and str(d.get("_target_", "")).startswith("megatron.bridge")
        raise InputError(path, "", "no model: section: " + ("a Megatron-Bridge ConfigContainer without its model "
                         "section (a file cut short?)" if cut else "not a NeMo or Megatron-Bridge run configuration "
                         "(NeMo YAML, Megatron-Bridge YAML or torchtitan TOML are read)"))
    strategy = d.get("trainer", {}).get("strategy") if isinstance(d.get("trainer"), dict) else None
    if isinstance(strategy, dict) and any(k.endswith("_parallel_size") for k in strategy if isinstance(k, str)):
        # NeMo 2's serialised recipe (NeMo-Run / fiddle): the layout sits in MegatronStrategy's arguments
        raise InputError(path, "trainer.strategy", "a NeMo 2 (NeMo-Run) configuration, whose parallel sizes sit in "
                         "trainer.strategy: --config reads NeMo 1 YAML (model:), Megatron-Bridge YAML and torchtitan "
                         "TOML; give its degrees, batch and sequence length as flags")
    if "ConfigContainer" in str(d.get("_target_", "")) or ("train" in d and "trainer" not in d):
        from .run_config_bridge import _bridge
        return _checked(_bridge, d, str(path))
    if "trainer" not in d:
        # the section that tells the two formats apart, misspelt, would make a Megatron-Bridge file a
        # NeMo one (or a NeMo file lose its trainer): refused before either reader guesses
        near = [k for k in d if isinstance(k, str) and (one_edit_apart(k, "train") or one_edit_apart(k, "trainer"))]
        if near:
            raise InputError(path, near[0], "not a key the readers know; did you mean train: (Megatron-Bridge) or "
                             "trainer: (NeMo)? (one edit away; the file has neither, so its format cannot be told)")
        # ConfigContainer's own sections beside model: a Megatron-Bridge file without its train section
        # (NeMo 1 keeps these under model:)
        bridge = [k for k in ("ddp", "comm_overlap", "mixed_precision", "scheduler", "dist", "rng") if k in d]
        if bridge:
            raise InputError(path, "train", f"missing: a Megatron-Bridge ConfigContainer (its {', '.join(bridge)} "
                             "section(s)) whose train section gives the micro-batch, global batch and iterations")
    from .run_config_nemo import _nemo
    return _checked(_nemo, d, str(path))


def _checked(reader, d: dict, path: str) -> RunConfig:
    """``reader`` on ``d``, then a key it never looked at one typo from a key it looked for and
    missed is refused (costmodel.config_keys)."""
    doc = track(d)
    return read_checked(lambda: reader(doc, path), doc, path)
