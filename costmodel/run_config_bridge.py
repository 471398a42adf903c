"""The Megatron-Bridge YAML reader of ``predict --config`` (costmodel.run_config, its module docstring)."""
from __future__ import annotations

import re

from .config_fusions import read_fusions
from .errors import InputError
from .formats import FP8_FORMATS, TE_FP8_RECIPES
from .megatron_structure import ATTN_BACKENDS
from .readers.training_logs.dumps import MEGATRON_FSDP_SHARDING
from .run_config import (RunConfig, _bool, _cross_entropy, _granularity, _int, _megatron_moe, _megatron_parallelism, _model_dims,
                         _take, _unset, cuda_graph_note)
from .specs import recompute_module_list
from .stacks import attention_backend_switches


#: Megatron-Bridge's mixed-precision recipe names (megatron/bridge/training/mixed_precision.py: bf16_mixed,
#: fp16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed, ...), spelt exactly: a misspelt name is
#: no recipe Bridge has, not its nearest one
_BRIDGE_PRECISION_NAME = re.compile(r"(bf16|fp16)(_with_(fp8(_(current|delayed|subchannel|blockwise)_scaling)?|mxfp8|"
                                    r"nvfp4))?_mixed")
#: what a block-scaled fp8 recipe (Megatron-Bridge's subchannel / ``fp8_recipe: blockwise``) is priced as
_BLOCKWISE_NOTE = ("is priced as delayed per-tensor fp8: its casts move about as many bytes, but its block-scaled "
                   "GEMM, slower on Hopper, is not modelled")


#: the dataset configs whose sequence length Megatron-Bridge asserts equals the model's (ConfigContainer.validate,
#: megatron/bridge/training/config.py at 067f987); a DatasetProvider (HFDatasetConfig) is not checked
_SEQ_ASSERTED = ("GPTDatasetConfig", "GPTSFTDatasetConfig", "DirectHFSFTDatasetConfig", "EnergonDatasetConfig",
                 "MockVLMSFTDatasetConfig")


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
        if str(ds.get("_target_", "")).rsplit(".", 1)[-1] in _SEQ_ASSERTED:
            raise InputError(path, "model.seq_length", f"{m['seq_length']} differs from dataset.{key} {R['seq_len']}: "
                             f"Megatron-Bridge asserts they match for a {ds['_target_'].rsplit('.', 1)[-1]} "
                             "(ConfigContainer.validate)")
        cfg.notes.append(f"{path}: dataset.{key} {R['seq_len']} is what a sample holds; model.seq_length "
                         f"{m['seq_length']} (the model's maximum) is not used, and where the recipe's dataset is a "
                         "GPT pretraining one (no _target_ here to say) Megatron-Bridge refuses the pair "
                         "(ConfigContainer.validate)")
    packed = ds.get("packed_sequence_specs")
    if isinstance(packed, dict) and packed.get("packed_sequence_size"):
        cfg.notes.append(f"{path}: dataset.packed_sequence_specs: packed sequences of "
                         f"{packed['packed_sequence_size']} tokens hold several documents, each attending to itself "
                         "only; priced as one document per sequence unless --doc-tokens gives their length")


#: the fp8 scaling each section defaults to when it names no ``fp8_recipe``: MixedPrecisionConfig's
#: (megatron/bridge/training/mixed_precision.py: "tensorwise") and TransformerConfig's (Megatron-core
#: megatron/core/transformer/transformer_config.py: "delayed")
_FP8_RECIPE_DEFAULT = {"mixed_precision": "tensorwise", "model": "delayed"}


def _bridge_precision(mp, path: str, cfg: RunConfig, sec: str = "mixed_precision") -> None:
    """Precision and fp8 scaling from Megatron-Bridge's ``mixed_precision``: a recipe name or a mapping
    (``fp8`` e4m3 / hybrid: fp8, its ``fp8_recipe`` the scaling, else the section's default,
    :data:`_FP8_RECIPE_DEFAULT`); ``sec`` "model" reads the same keys of the model section, which
    train when the file has no ``mixed_precision`` (Bridge copies that section over the model's only
    when it is set: MixedPrecisionConfig.setup).

    Raises:
        InputError: a value of another type, an unknown recipe name, an ``fp8`` that is not a format,
            an ``fp8_recipe`` the model does not know (naming the file and the key).
    """
    R = cfg.recipe
    if _unset(mp):
        return
    if isinstance(mp, str):
        name = mp.lower()
        if not _BRIDGE_PRECISION_NAME.fullmatch(name):
            raise InputError(path, "mixed_precision", f"{mp!r} is not a Megatron-Bridge mixed-precision recipe name "
                             "(bf16_mixed, fp16_mixed, bf16_with_fp8_mixed, bf16_with_fp8_current_scaling_mixed, "
                             "bf16_with_fp8_subchannel_scaling_mixed, bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed, ...)")
        R["precision"] = ("nvfp4" if "nvfp4" in name else "mxfp8" if "mxfp8" in name else "fp8" if "fp8" in name
                          else "fp16" if name.startswith("fp16") else "bf16" if "bf16" in name else None)
        if R["precision"] is None:
            raise InputError(path, "mixed_precision", f"{mp!r} names no bf16, fp16, fp8, mxfp8 or nvfp4 recipe")
        if R["precision"] == "fp8":
            # bf16_with_fp8_current_scaling_mixed: per-tensor current scaling; bf16_with_fp8_mixed: delayed
            R["fp8_recipe"] = "tensorwise" if "current_scaling" in name else "delayed"
            cfg.where["fp8_recipe"] = f"{path}: mixed_precision {mp}"
            if "current_scaling" in name:
                # the recipe keeps its first and last layer in BF16 (megatron/bridge/training/
                # mixed_precision.py: first_last_layers_bf16=True, num_layers_at_start/end_in_bf16 1)
                R["bf16_edge_layers"], cfg.where["bf16_edge_layers"] = 1, f"{path}: mixed_precision {mp}"
            if "subchannel" in name or "blockwise" in name:
                cfg.notes.append(f"{path}: mixed_precision {mp!r} (block-wise scaling) {_BLOCKWISE_NOTE}")
            # its fp8 recipes set fp8_param_gather=True (megatron/bridge/training/mixed_precision.py)
            R["fp8_param_gather"], cfg.where["fp8_param_gather"] = True, f"{path}: mixed_precision {mp}"
    elif isinstance(mp, dict):
        f8 = mp.get("fp8")
        if f8 not in (None, False) and str(f8).lower() not in FP8_FORMATS:
            raise InputError(path, f"{sec}.fp8", f"expected {' or '.join(FP8_FORMATS)} (or null), got {f8!r}")
        rec = mp.get("fp8_recipe")
        if rec is not None and (not isinstance(rec, str) or rec.lower() not in (*TE_FP8_RECIPES, "mxfp8", "blockwise")):
            raise InputError(path, f"{sec}.fp8_recipe",
                             f"expected one of {', '.join((*TE_FP8_RECIPES, 'mxfp8', 'blockwise'))}, got {rec!r}")
        given, rec = rec is not None, (rec or _FP8_RECIPE_DEFAULT[sec]).lower()
        if f8 not in (None, False) and mp.get("fp4") not in (None, False):
            raise InputError(path, f"{sec}.fp4", "and fp8 are both set: Megatron-Bridge refuses them together "
                             "(MixedPrecisionConfig.finalize: 'fp4 and fp8 cannot be used simultaneously')")
        if mp.get("bf16") is True and mp.get("fp16") is True:
            raise InputError(path, f"{sec}.fp16", "and bf16 are both true: Megatron-Bridge asserts one precision mode")
        rec4 = mp.get("fp4_recipe")         # Megatron-core's fp4_recipe: nvfp4 (the one priced) or custom
        if mp.get("fp4") not in (None, False) and rec4 not in (None, "nvfp4"):
            cfg.notes.append(f"{path}: {sec}.fp4_recipe {rec4!r} is priced as NVFP4")
        R["precision"] = ("nvfp4" if mp.get("fp4") not in (None, False) else
                          ("mxfp8" if rec == "mxfp8" else "fp8") if f8 not in (None, False) else
                          "fp16" if mp.get("fp16") is True else "bf16" if mp.get("bf16") is True else None)
        if R["precision"] is None:
            del R["precision"]
            return
        _bridge_edge_layers(mp, path, cfg, sec)
        if R["precision"] == "fp8" and rec:
            R["fp8_recipe"] = "delayed" if rec == "blockwise" else rec
            cfg.where["fp8_recipe"] = f"{path}: {sec}.fp8_recipe" + ("" if given else f" absent ({rec}, the "
                                                                            "section's default)")
            if rec == "blockwise":
                cfg.notes.append(f"{path}: {sec}.fp8_recipe 'blockwise' {_BLOCKWISE_NOTE}")
    else:
        raise InputError(path, "mixed_precision", f"expected a recipe name or a mapping, got {mp!r}")
    cfg.where["precision"] = f"{path}: {sec}" + ("" if sec == "mixed_precision" else
                                                 " (no mixed_precision section: the model's own fields train)")


def _bridge_edge_layers(mp: dict, path: str, cfg: RunConfig, sec: str = "mixed_precision") -> None:
    """The BF16 first and last layers of a ``mixed_precision`` mapping (``first_last_layers_bf16`` with
    ``num_layers_at_start_in_bf16`` / ``num_layers_at_end_in_bf16``, Megatron-core's names), priced as N of
    each (the larger where they differ, noted); its ``fp8_param_gather`` (MixedPrecisionConfig's default
    False) under a per-tensor fp8 recipe, noted under another.

    Raises:
        InputError: a layer count that is not a whole number >= 0 (naming the key)."""
    if cfg.recipe.get("precision") == "fp8":
        cfg.recipe["fp8_param_gather"] = mp.get("fp8_param_gather") is True
        cfg.where["fp8_param_gather"] = f"{path}: {sec}.fp8_param_gather" + ("" if "fp8_param_gather" in mp else
                                                                             " absent (False, its default)")
    elif mp.get("fp8_param_gather") is True:
        cfg.notes.append(f"{path}: {sec}.fp8_param_gather under {cfg.recipe.get('precision')}: priced as 16-bit "
                         "parameter gathers and weights")
    if mp.get("first_last_layers_bf16") is not True:
        return
    n = []
    for key in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"):
        v = mp.get(key, 1)          # Megatron-core's TransformerConfig default
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(path, f"{sec}.{key}", f"expected a whole number of layers >= 0, got {v!r}")
        n.append(v)
    if n[0] != n[1]:
        cfg.notes.append(f"{path}: {sec} keeps {n[0]} first and {n[1]} last layers in BF16: priced as "
                         f"{max(n)} of each")
    cfg.recipe["bf16_edge_layers"], cfg.where["bf16_edge_layers"] = max(n), f"{path}: {sec}.first_last_layers_bf16"


def _bridge_model_or_mixed_precision(d: dict, m: dict, path: str, cfg: RunConfig) -> None:
    """The precision the run trains in: ``mixed_precision`` where the file sets it (Bridge then copies it
    over the model's fields, a model ``fp8`` it overrides with another value noted), else the model
    section's own ``fp8`` / ``fp4`` / ``bf16`` / ``fp16`` (:func:`_bridge_precision`)."""
    mp = d.get("mixed_precision")
    own = [k for k in ("fp8", "fp4") if m.get(k) not in (None, False)]
    if _unset(mp) and (own or any(m.get(k) is True for k in ("bf16", "fp16"))):
        _bridge_precision(m, path, cfg, "model")
        return
    _bridge_precision(mp, path, cfg)
    if own and not _unset(mp) and not (isinstance(mp, dict) and mp.get(own[0]) == m[own[0]]):
        cfg.notes.append(f"{path}: model.{own[0]} {m[own[0]]!r} is overwritten by the mixed_precision section "
                         "(Megatron-Bridge MixedPrecisionConfig.setup): not read")


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
    off = o.get("optimizer_cpu_offload")
    if off is not None and not isinstance(off, bool):
        raise InputError(path, "optimizer.optimizer_cpu_offload", f"{off!r} is not a valid value: expected true or false")
    if off:
        R["optimizer_offload"], W["optimizer_offload"] = True, f"{path}: optimizer.optimizer_cpu_offload"
        frac = o.get("optimizer_offload_fraction", 1.0)
        if frac != 1.0:
            cfg.notes.append(f"{path}: optimizer.optimizer_offload_fraction {frac!r}: priced as the whole optimizer "
                             "offloaded (Megatron-core's default fraction, 1.0)")
    if R.get("optimizer_states_dtype") == "bf16" and o.get("store_param_remainders") is False:
        cfg.notes.append(f"{path}: optimizer.store_param_remainders false: the fp32 master is kept whole, "
                         "priced as its 16-bit remainder (2 bytes under)")


def _bridge_fsdp(dist, path: str, cfg: RunConfig) -> None:
    """``dist.use_megatron_fsdp`` (Bridge turns Megatron-FSDP on from it alone, ConfigContainer.validate)
    and ``dist.use_torch_fsdp2``: both shard parameters, gradients and states (ZeRO-3); FSDP2 priced as
    Megatron-FSDP, noted.

    Raises:
        InputError: ``dist`` not a mapping, a switch not true or false, both on (Bridge refuses them
            together), or FSDP2 beside the distributed optimizer (which it replaces)."""
    if dist is None:
        return
    if not isinstance(dist, dict):
        raise InputError(path, "dist", f"expected a mapping, got {dist!r}")
    on = []
    for k in ("use_megatron_fsdp", "use_torch_fsdp2"):
        v = dist.get(k)
        if v is not None and not isinstance(v, bool):
            raise InputError(path, f"dist.{k}", f"{v!r} is not a valid value: expected true or false")
        if v:
            on.append(k)
    if len(on) == 2:
        raise InputError(path, "dist.use_torch_fsdp2", "and dist.use_megatron_fsdp are mutually exclusive "
                         "(Megatron-Bridge ConfigContainer.validate)")
    if not on:
        return
    if on[0] == "use_torch_fsdp2" and cfg.layout.get("zero") in (1, 2):
        # FSDP2 replaces the distributed optimizer (Megatron-LM arguments.py asserts the one or the other)
        raise InputError(path, "dist.use_torch_fsdp2", f"shards like ZeRO-3, but {cfg.where['zero'].split(': ', 1)[1]} "
                         "turns the distributed optimizer on, which FSDP2 replaces")
    if on[0] == "use_megatron_fsdp" and "ddp.data_parallel_sharding_strategy" in cfg.where.get("zero", ""):
        return                       # its strategy, read with the ddp section, says how far it shards
    # Megatron-FSDP always runs with the distributed optimizer (Bridge turns it on): ZeRO-3, not ZeRO-1
    cfg.layout["zero"], cfg.where["zero"] = 3, f"{path}: dist.{on[0]}"
    if on[0] == "use_torch_fsdp2":
        cfg.notes.append(f"{path}: dist.use_torch_fsdp2: PyTorch FSDP2 under Megatron-core is priced as Megatron-FSDP "
                         "(ZeRO-3: parameters, gradients and optimizer states sharded over DP)")


def _bridge_grad_reduce(d: dict, path: str, cfg: RunConfig) -> None:
    """Gradients reduced in bf16 where the run says so: ``mixed_precision.grad_reduce_in_fp32`` (its default
    True; a recipe name's own value, False for fp16 recipes, whose gradients stay fp16 anyway), else, with
    no mixed_precision section, ``ddp.grad_reduce_in_fp32`` where the file gives it.  Priced as bf16 main
    grads (--main-grads-dtype bf16) under the distributed optimizer (ZeRO 1-2); otherwise the run is
    priced with fp32 reduction, noted.

    Raises:
        InputError: a value that is not true or false, naming the key."""
    mp, ddp = d.get("mixed_precision"), d.get("ddp") if isinstance(d.get("ddp"), dict) else {}
    if isinstance(mp, dict):
        key, v = "mixed_precision.grad_reduce_in_fp32", mp.get("grad_reduce_in_fp32", True)
        mine = ddp.get("grad_reduce_in_fp32")
        if mine is not None and mine != v:
            # MixedPrecisionConfig.setup copies its fields over the DDP config's (mixed_precision.py)
            cfg.notes.append(f"{path}: ddp.grad_reduce_in_fp32 {mine} is overwritten by the mixed_precision section's "
                             f"grad_reduce_in_fp32 ({v}{'' if 'grad_reduce_in_fp32' in mp else ', its default'}), as "
                             f"Megatron-Bridge applies it")
    elif _unset(mp) and "grad_reduce_in_fp32" in ddp:
        key, v = "ddp.grad_reduce_in_fp32", ddp["grad_reduce_in_fp32"]
    else:
        return                       # a recipe name: bf16 ones reduce in fp32, fp16 ones in fp16
    if not isinstance(v, bool):
        raise InputError(path, key, f"{v!r} is not a valid value: expected true or false")
    if v or cfg.recipe.get("precision") == "fp16" or "main_grads_dtype" in cfg.recipe:
        return
    # a file that sets no ZeRO stage runs the distributed optimizer (Megatron-Bridge's recipes set
    # use_distributed_optimizer; --zero's default 1)
    if cfg.layout.get("zero", 1) in (1, 2):
        cfg.recipe["main_grads_dtype"], cfg.where["main_grads_dtype"] = "bf16", f"{path}: {key}"
    else:
        cfg.notes.append(f"{path}: {key} false: bf16 gradient reduction is priced under the distributed optimizer "
                         f"only; this run (ZeRO {cfg.layout.get('zero', 0)}) is priced reducing fp32 gradients")


#: Megatron-core's activation offloading switches (TransformerConfig): not priced
_ACTIVATION_OFFLOAD_KEYS = ("cpu_offloading", "fine_grained_activation_offloading")


#: MixedPrecisionConfig's fields (megatron/bridge/training/mixed_precision.py at 067f987)
_MIXED_PRECISION_FIELDS = frozenset((
    "fp32", "fp16", "bf16", "params_dtype", "pipeline_dtype", "autocast_dtype", "autocast_enabled",
    "grad_reduce_in_fp32", "fp8", "fp8_recipe", "first_last_layers_bf16", "fp8_margin", "fp8_amax_history_len",
    "fp8_amax_compute_algo", "fp8_wgrad", "fp8_dot_product_attention", "fp8_multi_head_attention", "fp8_param",
    "fp8_param_gather", "fp4", "fp4_recipe", "fp4_param", "fp4_param_gather", "loss_scale", "initial_loss_scale",
    "min_loss_scale", "loss_scale_window", "hysteresis", "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16",
    "reuse_grad_buf_for_mxfp8_param_ag"))
#: NeMo 1's model keys and the Megatron-Bridge (TransformerConfig) key that says the same
_NEMO1_MODEL_KEYS = {"activations_checkpoint_granularity": "recompute_granularity",
                     "activations_checkpoint_method": "recompute_method",
                     "activations_checkpoint_num_layers": "recompute_num_layers",
                     "encoder_seq_length": "seq_length", "optim": "the optimizer section"}


def _bridge_foreign_keys(d: dict, m: dict, path: str, cfg: RunConfig) -> None:
    """Say the keys Megatron-Bridge itself would skip (its override merge warns "not found ... Skipping"):
    a ``mixed_precision`` key that is no MixedPrecisionConfig field, a NeMo 1 model key (the recompute
    setting it names is then left to the recipe)."""
    mp = d.get("mixed_precision")
    if isinstance(mp, dict):
        odd = [k for k in mp if isinstance(k, str) and not k.startswith("_") and k not in _MIXED_PRECISION_FIELDS]
        if odd:
            cfg.notes.append(f"{path}: mixed_precision.{', mixed_precision.'.join(odd)}: not a MixedPrecisionConfig "
                             "field; Megatron-Bridge skips it, and so does the prediction")
    for k, bridge in _NEMO1_MODEL_KEYS.items():
        if k in m:
            cfg.notes.append(f"{path}: model.{k} is NeMo 1's key, which Megatron-Bridge does not read (its own: "
                             f"{bridge}): not read")


def _bridge(d: dict, path: str) -> RunConfig:
    m, t = d.get("model") or {}, d.get("train") or {}
    for key in ("model", "train", "ddp", "dataset", "comm_overlap"):
        if d.get(key) is not None and not isinstance(d[key], dict):
            raise InputError(path, key, f"expected a mapping, got {d[key]!r}")
    cfg = RunConfig(stack="nemo", kind="Megatron-Bridge YAML")
    L, R = cfg.layout, cfg.recipe
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
        if isinstance(split.get("pipeline_model_parallel_layout"), str):
            # parsed against the layout and the model once both are known (costmodel.pipeline_layout)
            cfg.pipeline_layout = split["pipeline_model_parallel_layout"]
            cfg.where["pipeline_layout"] = f"{path}: model.pipeline_model_parallel_layout"
        else:
            cfg.notes.append(f"{path}: model.{cfg.custom_pipeline_split}: the run splits its own layers over the "
                             "pipeline; modelled by its fullest stage, ceil(num_layers / PP) layers")
    _take(cfg, path, L, "mbs", t, "micro_batch_size", _int, "train.")
    _take(cfg, path, R, "gbs", t, "global_batch_size", _int, "train.")
    _bridge_seq_len(d, m, path, cfg)
    _bridge_model_or_mixed_precision(d, m, path, cfg)
    _bridge_foreign_keys(d, m, path, cfg)
    if "attention_backend" in m and m["attention_backend"] is not None:
        sw = attention_backend_switches(_enum_name(m["attention_backend"]))
        if sw is None:
            raise InputError(path, "model.attention_backend", f"{m['attention_backend']!r} is not a Megatron-core "
                             "backend (flash, fused, unfused, local, auto)")
        for k, v in sw.items():
            R[k] = v
            cfg.where[k] = f"{path}: model.attention_backend"
    _megatron_moe(cfg, path, m)
    read_fusions(cfg, path, m)
    _cross_entropy(cfg, path, m)
    cuda_graph_note(cfg, path, m, ("enable_cuda_graph", "external_cuda_graph", "cuda_graph_impl"))
    _bridge_optimizer(d.get("optimizer"), path, cfg)
    ddp = d.get("ddp") or {}
    if isinstance(ddp, dict) and ddp:
        opt = d.get("optimizer")
        opt_do = opt.get("use_distributed_optimizer") if isinstance(opt, dict) else None
        ddp_do = ddp.get("use_distributed_optimizer")
        if isinstance(opt_do, bool) and isinstance(ddp_do, bool) and opt_do != ddp_do:
            raise InputError(path, "optimizer.use_distributed_optimizer", f"{opt_do} contradicts "
                             f"ddp.use_distributed_optimizer {ddp_do}")
        for k in ("use_distributed_optimizer", "use_megatron_fsdp"):
            if not _unset(ddp.get(k)) and not isinstance(ddp.get(k), bool):
                raise InputError(path, f"ddp.{k}", f"{ddp[k]!r} is not a valid value: expected true or false")
        keys = [k for k in ("use_distributed_optimizer", "use_megatron_fsdp", "data_parallel_sharding_strategy")
                if ddp.get(k) is not None]
        if keys:                    # a ddp block that says nothing of sharding leaves it to the optimizer's
            # the strategy is Megatron-FSDP's ("Sharding strategy for FSDP", Megatron-core
            # DistributedDataParallelConfig): without use_megatron_fsdp it shards nothing
            # Bridge sets ddp.use_megatron_fsdp from dist.use_megatron_fsdp (ConfigContainer.validate)
            dist = d.get("dist") if isinstance(d.get("dist"), dict) else {}
            fsdp = ddp.get("use_megatron_fsdp") is True or dist.get("use_megatron_fsdp") is True
            shard = MEGATRON_FSDP_SHARDING.get(ddp.get("data_parallel_sharding_strategy"), 0) if fsdp else 0
            if not fsdp and ddp.get("data_parallel_sharding_strategy") not in (None, "no_shard"):
                cfg.notes.append(f"{path}: ddp.data_parallel_sharding_strategy "
                                 f"{ddp['data_parallel_sharding_strategy']!r} applies under Megatron-FSDP only "
                                 "(ddp.use_megatron_fsdp and dist.use_megatron_fsdp are not true): not read")
            L["zero"] = 3 if ddp.get("use_megatron_fsdp") is True or shard == 3 else \
                max(shard, 1 if ddp.get("use_distributed_optimizer") is True else 0)
            cfg.where["zero"] = f"{path}: " + " / ".join(f"ddp.{k}" for k in keys)
        _take(cfg, path, R, "dp_overlap", ddp, "overlap_grad_reduce", _bool, "ddp.")
        # HSDP: DistributedDataParallelConfig.num_distributed_optimizer_instances (costmodel.layouts.shard_dp)
        _take(cfg, path, L, "dp_replicate", ddp, "num_distributed_optimizer_instances", _int, "ddp.")
        if ddp.get("overlap_param_gather") not in (None, ddp.get("overlap_grad_reduce")):
            cfg.notes.append(f"{path}: ddp.overlap_grad_reduce {ddp.get('overlap_grad_reduce')} and "
                             f"overlap_param_gather {ddp['overlap_param_gather']}: --dp-overlap follows the grad reduce")
    opt = d.get("optimizer")
    if "zero" not in L and isinstance(opt, dict) and opt.get("use_distributed_optimizer") is not None:
        _take(cfg, path, L, "zero", opt, "use_distributed_optimizer", lambda v: int(_bool(v)), "optimizer.")
    _bridge_fsdp(d.get("dist"), path, cfg)
    _bridge_grad_reduce(d, path, cfg)
    for k in _ACTIVATION_OFFLOAD_KEYS:
        if m.get(k) is True:
            cfg.notes.append(f"{path}: model.{k}: activation offloading to the host is not priced: the memory "
                             "counts the activations on the GPU and the step leaves out their copies")
    _model_dims(cfg, m, path)
    co = d.get("comm_overlap") or {}
    if isinstance(co, dict):
        _take(cfg, path, R, "tp_comm_overlap", co, "tp_comm_overlap", _bool, "comm_overlap.")
    model_sec = d.get("model")
    if "tp_comm_overlap" not in R and isinstance(model_sec, dict):
        # without a comm_overlap setting Bridge's CommOverlapConfig.setup never runs, and the model's own
        # tp_comm_overlap (the TransformerConfig field Megatron-core reads) is what trains
        _take(cfg, path, R, "tp_comm_overlap", model_sec, "tp_comm_overlap", _bool, "model.")
    if isinstance(co, dict):
        # null there lets Bridge turn it on with VP; the model section's value is the dataclass
        # default before that setup runs, so only an explicit comm_overlap value is read
        _take(cfg, path, R, "pp_overlap", co, "overlap_p2p_comm", _bool, "comm_overlap.")
    if isinstance(co, dict) and co:
        _bridge_comm_overlap_setup(co, m, path, cfg)
    return cfg


def _bridge_comm_overlap_setup(co: dict, m: dict, path: str, cfg: RunConfig) -> None:
    """What Bridge's CommOverlapConfig.setup writes over the model and DDP configs when the file has a
    ``comm_overlap`` section (megatron/bridge/training/comm_overlap.py at 067f987): the MoE EP overlap and its
    delayed wgrad start False and take the section's values (``_get_model_comm_overlap_cfgs``, then
    ``_override_user_cfgs``), so the model section's are not what trains; under the distributed optimizer the
    DP overlap starts on for DP > 1 (``_get_optimizer_overlap_cfgs``) and takes the section's value, over the
    ddp section's.

    Raises:
        InputError: a value that is not true or false, naming the key."""
    R, W = cfg.recipe, cfg.where
    for key in ("overlap_moe_expert_parallel_comm", "delay_wgrad_compute", "overlap_grad_reduce"):
        if co.get(key) is not None and not isinstance(co.get(key), bool):
            raise InputError(path, f"comm_overlap.{key}", f"{co[key]!r} is not a valid value: expected true or false")
    ep = co.get("overlap_moe_expert_parallel_comm")
    if m.get("overlap_moe_expert_parallel_comm") not in (None, ep if ep is not None else False):
        cfg.notes.append(f"{path}: model.overlap_moe_expert_parallel_comm {m['overlap_moe_expert_parallel_comm']} is "
                         "written over by the comm_overlap section's setup (Bridge's CommOverlapConfig): not read")
    if "moe_ep_overlap" in R or ep:          # a dense run's section may say false: nothing to switch
        R["moe_ep_overlap"] = bool(ep)
        W["moe_ep_overlap"] = f"{path}: comm_overlap.overlap_moe_expert_parallel_comm" if ep is not None else \
            f"{path}: comm_overlap without overlap_moe_expert_parallel_comm (Bridge's setup: off)"
    if (cfg.layout.get("zero") or 0) >= 1:
        dp = co.get("overlap_grad_reduce")
        if dp is None and R.get("dp_overlap") is False:
            cfg.notes.append(f"{path}: ddp.overlap_grad_reduce false is written over by the comm_overlap section's "
                             "setup, which turns the DP overlap on under the distributed optimizer for DP > 1")
        R["dp_overlap"] = True if dp is None else dp
        W["dp_overlap"] = f"{path}: comm_overlap.overlap_grad_reduce" if dp is not None else \
            f"{path}: comm_overlap without overlap_grad_reduce (Bridge's setup: on under the distributed optimizer)"


def _enum_name(v):
    """An enum as Megatron-Bridge's YAML writes one (``{_target_: ...AttnBackend, _call_: true, _args_: [2],
    _name_: fused}``, megatron/training/config/yaml_utils.py _enum_representer) by its member's name; any
    other value as it is."""
    if isinstance(v, dict) and str(v.get("_target_", "")).endswith("AttnBackend"):
        if isinstance(v.get("_name_"), str):
            return v["_name_"]
        args = v.get("_args_")
        by_value = {n: k for k, n in ATTN_BACKENDS.items()}
        if isinstance(args, list) and len(args) == 1 and args[0] in by_value:
            return by_value[args[0]]
    return v
