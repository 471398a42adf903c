"""Run configurations ``--config`` does not read, named for what they are: an llm-foundry (Composer) YAML
and a DeepSpeed JSON are answered with the flags that price the run they describe, never read as a
NeMo or Megatron-Bridge file that lacks its model section."""
from __future__ import annotations

from .errors import InputError


def refuse_foreign_config(d, path) -> None:
    """Refuse ``d`` (a parsed configuration file at ``path``) when it is an llm-foundry YAML (its batch,
    micro-batch, ``fsdp_config`` or ``max_seq_len`` keys) or a DeepSpeed configuration (its
    ``zero_optimization`` or batch keys); return otherwise.  llm-foundry's ``fsdp_config.sharding_strategy``
    is PyTorch FSDP's ShardingStrategy: FULL_SHARD is ZeRO 3, SHARD_GRAD_OP ZeRO 2, NO_SHARD DDP, and the
    hybrid ones the same within a shard group replicated across (HSDP), the shard group one node unless
    Composer's ``fsdp_config.data_parallel_replicate_degree`` says otherwise (torch/distributed/fsdp/
    _init_utils.py ``_init_intra_and_inter_node_groups``; composer/utils/parallelism.py FSDPConfig).

    Raises:
        InputError: naming ``path`` and the flags to give instead.
    """
    foundry = [k for k in ("global_train_batch_size", "device_train_microbatch_size", "fsdp_config", "max_seq_len")
               if isinstance(d, dict) and k in d]
    if foundry:
        fsdp = d.get("fsdp_config") if isinstance(d.get("fsdp_config"), dict) else {}
        shard = str(fsdp.get("sharding_strategy", "FULL_SHARD"))
        rep = fsdp.get("data_parallel_replicate_degree")
        hsdp = f"--dp-replicate {rep}" if rep else "--dp-replicate <its nodes: FSDP shards within a node>"
        zero = {"FULL_SHARD": "--zero 3 (its FULL_SHARD)", "SHARD_GRAD_OP": "--zero 2 (its SHARD_GRAD_OP)",
                "NO_SHARD": "--zero 0 (its NO_SHARD)", "HYBRID_SHARD": f"--zero 3 {hsdp} (its HYBRID_SHARD)",
                "_HYBRID_SHARD_ZERO2": f"--zero 2 {hsdp} (its _HYBRID_SHARD_ZERO2)"}.get(
            shard, f"a --zero (its {shard} is not priced: FULL_SHARD 3, SHARD_GRAD_OP 2, NO_SHARD 0, HYBRID_SHARD 3 "
                   "and _HYBRID_SHARD_ZERO2 2 with --dp-replicate)")
        raise InputError(path, "", f"an llm-foundry YAML ({', '.join(foundry)}), which --config does not read (NeMo "
                         f"YAML, Megatron-Bridge YAML, torchtitan TOML): give --gbs, --mbs, {zero}, "
                         "--recompute full (activation_checkpointing) and --stack llm-foundry")
    deepspeed = [k for k in ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size")
                 if isinstance(d, dict) and k in d]
    if deepspeed:
        raise InputError(path, "", f"a DeepSpeed configuration ({', '.join(deepspeed)}), which --config does not read "
                         "(NeMo YAML, Megatron-Bridge YAML, torchtitan TOML): give --gbs, --mbs, --zero (its "
                         "zero_optimization.stage), --optimizer-offload where it offloads the optimizer, and "
                         "--stack deepspeed")
