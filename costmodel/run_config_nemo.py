"""NeMo 1 run configurations (a YAML with ``trainer:`` and ``model:``, megatron_gpt_config.yaml's keys) read
into a :class:`costmodel.run_config.RunConfig`: layout, batch, sequence length, precision, the overlaps,
recompute, MoE and the fusions, each value with the key it came from, NeMo 1's own defaults where it
differs from NeMo 2's."""
from __future__ import annotations

from .config_fusions import NEMO1_FUSION_DEFAULTS, read_fusions
from .errors import InputError
from .formats import TE_FP8_RECIPES
from .run_config import (RunConfig, _bool, _cross_entropy, _granularity, _int, _megatron_moe, _megatron_parallelism,
                         _model_dims, _precision, _take, _unset, cuda_graph_note)


def _nemo_seq_len(cfg: RunConfig, path: str, R: dict, m: dict, L: dict) -> None:
    """NeMo 1's training sequence length: its dataset cuts samples of ``model.data.seq_length`` tokens
    (megatron_gpt_model.py build_train_valid_test_datasets and the mcore GPTDataset both take
    cfg.data.seq_length), while ``model.encoder_seq_length`` only shapes the pipeline's sends
    (fwd_bwd_function's seq_length): the dataset's length is priced, the other said; with PP > 1 the two
    must agree (the sends would not fit the activations).

    Raises:
        InputError: the two differ with PP > 1."""
    data = m.get("data") if isinstance(m.get("data"), dict) else {}
    _take(cfg, path, R, "seq_len", data, "seq_length", _int, "model.data.")
    enc, data_where = {}, cfg.where.get("seq_len")
    _take(cfg, path, enc, "seq_len", m, "encoder_seq_length", _int, "model.")
    if "seq_len" not in enc:
        return
    if "seq_len" not in R:
        # NeMo's own megatron_gpt_config.yaml: data.seq_length: ${model.encoder_seq_length}
        if "encoder_seq_length" in str(data.get("seq_length", "")) or "seq_length" not in data:
            cfg.unset.pop("seq_len", None)
            R["seq_len"] = enc["seq_len"]
        return
    cfg.where["seq_len"] = data_where
    if enc["seq_len"] != R["seq_len"]:
        if L.get("pp", 1) > 1:
            raise InputError(path, "model.encoder_seq_length", f"{enc['seq_len']} differs from model.data.seq_length "
                             f"{R['seq_len']}, the length of the samples: with pipeline parallelism NeMo sends "
                             f"activations of encoder_seq_length tokens between stages, which would not fit them")
        cfg.notes.append(f"{path}: model.encoder_seq_length {enc['seq_len']} differs from model.data.seq_length "
                         f"{R['seq_len']}: NeMo's dataset cuts samples of the latter (priced); the former only "
                         f"shapes the sends between pipeline stages (they must agree where PP > 1)")


def _nemo(d: dict, path: str) -> RunConfig:
    if "training" in d and isinstance(d["training"], dict) and "model" in d["training"]:
        d = d["training"]
    m, t = d.get("model") or {}, d.get("trainer") or {}
    for key, sec in (("model", m), ("trainer", t)):
        if not isinstance(sec, dict):
            raise InputError(path, key, f"expected a mapping, got {sec!r}")
    for key in ("optim", "data"):
        if m.get(key) is not None and not isinstance(m[key], dict):
            raise InputError(path, f"model.{key}", f"expected a mapping, got {m[key]!r}")
    cfg = RunConfig(stack="nemo", kind="NeMo YAML")
    L, R = cfg.layout, cfg.recipe
    mp = "model."
    acc = t.get("accumulate_grad_batches")
    if acc not in (None, 1) and not _unset(acc):
        # megatron_gpt_model.py _validate_trainer: the accumulation is global_batch_size's, in training_step
        raise InputError(path, "trainer.accumulate_grad_batches", f"{acc!r}: NeMo refuses it ('Gradient accumulation "
                         "is done within training_step. trainer.accumulate_grad_batches must equal 1'): the run "
                         "accumulates global_batch_size / (micro_batch_size x DP) micro-batches itself")
    _megatron_parallelism(cfg, path, m)
    _take(cfg, path, L, "mbs", m, "micro_batch_size", _int, mp)
    _granularity(cfg, path, m, "activations_checkpoint_")
    opt = m.get("optim") or {}
    if isinstance(opt, dict) and not _unset(opt.get("name")):
        L["zero"] = 1 if "distributed" in str(opt["name"]) else 0
        cfg.where["zero"] = f"{path}: model.optim.name"
        # HSDP: NeMo 1's mcore distributed optimizer takes its instances from here (megatron_gpt_model.py)
        _take(cfg, path, L, "dp_replicate", opt, "num_distributed_optimizer_instances", _int, "model.optim.")
        if "overlap_grad_sync" in opt:
            _take(cfg, path, R, "dp_overlap", opt, "overlap_grad_sync", _bool, "model.optim.")
    _take(cfg, path, R, "gbs", m, "global_batch_size", _int, mp)
    _nemo_seq_len(cfg, path, R, m, L)
    _nemo_fsdp(cfg, path, m)
    _take(cfg, path, R, "precision", t, "precision", _precision, "trainer.")
    fp8 = {}
    _take(cfg, path, fp8, "fp8", m, "fp8", _bool, mp)
    if fp8.get("fp8") is True:
        R["precision"], cfg.where["precision"] = "fp8", f"{path}: model.fp8"
        rec = m.get("fp8_recipe")
        if rec is not None and not _unset(rec):
            if not isinstance(rec, str) or rec.lower() not in TE_FP8_RECIPES:
                raise InputError(path, "model.fp8_recipe", f"expected one of {', '.join(TE_FP8_RECIPES)}, got {rec!r}")
            R["fp8_recipe"], cfg.where["fp8_recipe"] = rec.lower(), f"{path}: model.fp8_recipe"
        # NeMo 1 keeps fp8 parameters (and gathers them in fp8) with model.fp8_params, off unless set
        # (examples/nlp/language_modeling/conf/megatron_gpt_config.yaml: fp8_params: False)
        _take(cfg, path, R, "fp8_param_gather", m, "fp8_params", _bool, mp)
        if "fp8_param_gather" not in R:
            R["fp8_param_gather"] = False
            cfg.where["fp8_param_gather"] = f"{path}: NeMo 1's default when model.fp8_params is absent"
    _take(cfg, path, R, "flash_attention", m, "use_flash_attention", _bool, mp)
    _take(cfg, path, R, "tp_comm_overlap", m, "ub_tp_comm_overlap", _bool, mp)
    _take(cfg, path, R, "pp_overlap", m, "overlap_p2p_comm", _bool, mp)
    if "overlap_p2p_comm" not in m and (L.get("vp") or 1) > 1:
        # NeMo 1's models read cfg.get('overlap_p2p_comm', False): its example configurations write False
        # (examples/nlp/language_modeling/conf/megatron_gpt_config.yaml); it matters to interleaving only
        R["pp_overlap"], cfg.where["pp_overlap"] = False, f"{path}: NeMo's default when model.overlap_p2p_comm is absent"
    _cross_entropy(cfg, path, m)
    if "cross_entropy" not in R and (cfg.layout or R):
        # NeMo 1 builds Megatron-core's TransformerConfig from the model section (its default False); the
        # nemo stack's fused loss is NeMo 2's GPTConfig default
        R["cross_entropy"], cfg.where["cross_entropy"] = "megatron", f"{path}: NeMo 1's default when " \
            "model.cross_entropy_loss_fusion is absent"
    if R.get("precision") == "fp8" and cfg.where.get("zero", "").endswith("model.fsdp"):
        raise InputError(path, "model.fsdp", "with model.fp8: NeMo refuses it ('Torch FSDP does not support FP8.', "
                         "megatron_base_model.py)")
    if m.get("cpu_offloading") is True:
        cfg.notes.append(f"{path}: model.cpu_offloading: activations offloaded to the host are not priced (their "
                         "memory is counted on the GPU, their copies are not timed)")
    cuda_graph_note(cfg, path, m, ("enable_cuda_graph", "external_cuda_graph"))
    read_fusions(cfg, path, m, NEMO1_FUSION_DEFAULTS if (cfg.layout or R) else None)
    _megatron_moe(cfg, path, m)
    _model_dims(cfg, m, path)
    world = {}
    for name, key in (("nodes", "num_nodes"), ("gpus_per_node", "devices")):
        _take(cfg, path, world, name, t, key, _int, "trainer.")
    cfg.nodes, cfg.gpus_per_node = world.get("nodes"), world.get("gpus_per_node")
    if "ub_tp_comm_overlap" not in m and (cfg.layout or R or cfg.nodes):
        # NeMo 1's GPT model reads cfg.get('ub_tp_comm_overlap', False) (megatron_gpt_model.py): NeMo 2's
        # recipes turn it on, NeMo 1 leaves it off (a file that sets nothing read stays empty, and refused)
        R["tp_comm_overlap"], cfg.where["tp_comm_overlap"] = False, f"{path}: NeMo 1's default when " \
            "model.ub_tp_comm_overlap is absent"
    return cfg


#: NeMo 1's torch FSDP sharding strategies (nlp_overrides.py NLPFSDPStrategy: 'hybrid' asserted unsupported)
_FSDP_STRATEGIES = {"full": 3, "grad": 2}


def _nemo_fsdp(cfg: RunConfig, path: str, m: dict) -> None:
    """NeMo 1's torch FSDP (``model.fsdp``, its ``fsdp_sharding_strategy``: 'full' ZeRO-3, 'grad' ZeRO-2;
    megatron_trainer_builder.py): the ZeRO stage it shards as.

    Raises:
        InputError: FSDP beside the distributed optimizer ('Distributed optimizer cannot be used with
            FSDP.'), or a strategy NeMo does not run ('hybrid' is asserted unsupported)."""
    on = {}
    _take(cfg, path, on, "fsdp", m, "fsdp", _bool, "model.")
    if not on.get("fsdp"):
        return
    if cfg.layout.get("zero") == 1 and cfg.where.get("zero", "").endswith("model.optim.name"):
        raise InputError(path, "model.fsdp", "and the distributed optimizer (model.optim.name): NeMo refuses them "
                         "together ('Distributed optimizer cannot be used with FSDP.', megatron_trainer_builder.py)")
    strategy = m.get("fsdp_sharding_strategy", "full")
    if strategy not in _FSDP_STRATEGIES:
        raise InputError(path, "model.fsdp_sharding_strategy", f"{strategy!r}: NeMo 1's FSDP runs 'full' or 'grad' "
                         "('hybrid' is asserted unsupported, nlp_overrides.py)")
    cfg.layout["zero"], cfg.where["zero"] = _FSDP_STRATEGIES[strategy], f"{path}: model.fsdp"
