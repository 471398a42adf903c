"""The copies FSDP2 makes around its collectives, on the compute stream.

PyTorch's ``fully_shard`` (FSDP2; torchtitan's data parallelism) gathers and reduces each unit's
parameters through one flat buffer per collective, so every collective comes with memory-bound
copies (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, pytorch/pytorch at 010ae4a8):

* before each all-gather, ``all_gather_copy_in``: a foreach copy of this rank's fp32 shards into the
  gather input in the 16-bit parameter dtype (read 4, write 2 bytes per local element);
* after it, ``foreach_all_gather_copy_out``: ``split_with_sizes_copy`` of the gathered buffer into
  each unsharded parameter (read 2, write 2 per parameter element of the unit);
* before each reduce-scatter, ``foreach_reduce_scatter_copy_in``: ``_chunk_cat`` of the unsharded
  16-bit gradients into the reduce-scatter input in the reduce dtype (read 2, write the reduce dtype's
  bytes: 4 with torchtitan's default fp32 ``mixed_precision_reduce``).

With ``reshard_after_forward`` (the default without a pipeline) a micro-batch gathers each unit twice,
in the forward and again in the backward, and reduce-scatters it once; the recomputation of activation
checkpointing runs on the backward's gathered parameters and copies nothing more.  The copies run on
the compute stream between the layer's kernels (the copy-out waits for the all-gather; the chunk-cat
precedes the reduce-scatter), so they add to the layer's time.  The accumulation into the sharded
gradient after the first micro-batch (12 bytes per local element) is left out: under 1 / DP of the
copy-out's bytes.

Megatron-core's distributed optimizer and Megatron-FSDP reduce and gather in place in their
contiguous buffers, FSDP1 (llm-foundry's Composer) in its flat parameters' views, DeepSpeed ZeRO-3
into its partitioned flat buffers: no such copies (costmodel.stacks ``fsdp_copies``).

Units: bytes, seconds; arrays over layouts.
"""
from __future__ import annotations

import numpy as np

#: bytes per local (sharded) element of the copy into the all-gather input: the fp32 shard read,
#: written in the 16-bit parameter dtype
COPY_IN_BYTES = 4.0 + 2.0
#: kernels a unit's all-gather adds (the foreach copy-in, the copy-out) and its reduce-scatter (the
#: chunk-cat)
ALL_GATHER_KERNELS, REDUCE_SCATTER_KERNELS = 2, 1


def copy_bytes(unit_params, shards, param_bytes: float, reduce_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes of FSDP2's copies for one unit per micro-batch on one GPU (module
    docstring).

    Args:
        unit_params: parameters of the unit this GPU holds unsharded (array; after TP / EP).
        shards: the FSDP world size the unit is sharded over (array, >= 1).
        param_bytes: bytes per gathered parameter element (2 for bf16).
        reduce_bytes: bytes per element of the reduce-scatter input (4 for an fp32 reduce).
    """
    p = np.asarray(unit_params, dtype=np.float64)
    gather = COPY_IN_BYTES * p / np.asarray(shards, dtype=np.float64) + 2.0 * param_bytes * p
    return gather, gather + (param_bytes + reduce_bytes) * p
