"""The memory passes ZeRO-3 / FSDP implementations make around their collectives, on the compute stream.

Each implementation (``flavour``, costmodel.stacks ``fsdp_copies``) moves bytes of its own:

* ``fsdp2``: PyTorch's ``fully_shard`` (torchtitan's data parallelism) gathers and reduces each unit's
  parameters through one flat buffer per collective (torch/distributed/fsdp/_fully_shard/
  _fsdp_collectives.py, pytorch/pytorch at 010ae4a8): before each all-gather, ``all_gather_copy_in``,
  a foreach copy of this rank's fp32 shards into the gather input in the 16-bit parameter dtype (read
  4, write 2 bytes per local element); after it, ``foreach_all_gather_copy_out``, a
  ``split_with_sizes_copy`` of the gathered buffer into each unsharded parameter (read 2, write 2 per
  parameter element of the unit); before each reduce-scatter, ``foreach_reduce_scatter_copy_in``, a
  ``_chunk_cat`` of the unsharded 16-bit gradients into the reduce-scatter input in the reduce dtype
  (read 2, write the reduce dtype's bytes: 4 with torchtitan's default fp32 ``mixed_precision_reduce``).
* ``fsdp1``: ``FullyShardedDataParallel`` (llm-foundry's Composer) gathers into its flat parameter,
  whose views the modules use, so nothing is copied out; but before each all-gather
  ``_use_low_precision_shard`` casts the fp32 local shard into the low-precision shard (read 4, write
  2 per local element), and the backward produces the flat gradient through the views' split (autograd
  concatenates the parameters' gradients: read 2, write 2 per element), casts it to the reduce dtype
  when that differs (``_post_backward_hook``: read 2, write the reduce bytes) and divides it in place
  by the pre-divide factor before the reduce-scatter (``_reduce_grad``: ``_div_if_needed``, a factor
  above 1 for any world size of 2 or more: read and write the reduce bytes) (torch/distributed/fsdp/
  _runtime_utils.py, _flat_param.py).
* ``deepspeed``: ZeRO-3 gathers into a flat buffer the parameters are views of (no copy), and reduces
  by copying each gradient into the contiguous reduction bucket (``contiguous_gradients``, its default:
  read 2, write 2), concatenating the bucket's per-rank partitions into one flat buffer and dividing it
  by the world size (deepspeed/runtime/comm/coalesced_collectives.py ``reduce_scatter_coalesced``:
  ``torch.cat``, then ``div_``: read 2, write 2 each), in the 16-bit communication dtype.

With ``reshard_after_forward`` (the default without a pipeline) a micro-batch gathers each unit twice,
in the forward and again in the backward, and reduce-scatters it once; the recomputation of activation
checkpointing runs on the backward's gathered parameters and copies nothing more.  The passes run on
the compute stream between the layer's kernels, so they add to the layer's time.  The accumulation into
the sharded gradient after the first micro-batch is left out: under 1 / DP of the gathered bytes.

Megatron-core's distributed optimizer and Megatron-FSDP reduce and gather in place in their
contiguous buffers (flavour ``""``: no passes).

Units: bytes, seconds; arrays over layouts.
"""
from __future__ import annotations

import numpy as np

#: bytes per local (sharded) element of the copy into the all-gather input: the fp32 shard read,
#: written in the 16-bit parameter dtype (fsdp2's copy-in, fsdp1's low-precision shard)
COPY_IN_BYTES = 4.0 + 2.0
#: kernels a unit's all-gather and its reduce-scatter add, per flavour: fsdp2 the foreach copy-in and
#: the copy-out, then the chunk-cat; fsdp1 the shard cast, then the split's concatenation, the cast and
#: the division; deepspeed nothing, then the bucket copies (one per parameter, counted as one), the
#: concatenation and the division
KERNELS = {"fsdp2": (2, 1), "fsdp1": (1, 3), "deepspeed": (0, 3)}
FLAVOURS = tuple(KERNELS)


def copy_bytes(unit_params, shards, param_bytes: float, reduce_bytes: float,
               flavour: str = "fsdp2") -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes of one unit's passes per micro-batch on one GPU (module docstring).

    Args:
        unit_params: parameters of the unit this GPU holds unsharded (array; after TP / EP).
        shards: the FSDP world size the unit is sharded over (array, >= 1).
        param_bytes: bytes per gathered parameter element (2 for bf16).
        reduce_bytes: bytes per element of the reduce-scatter input (4 for an fp32 reduce).
        flavour: one of :data:`FLAVOURS`.
    Raises:
        ValueError: an unknown flavour.
    """
    if flavour not in KERNELS:
        raise ValueError(f"FSDP flavour {flavour!r} is not one of {', '.join(FLAVOURS)}")
    p = np.asarray(unit_params, dtype=np.float64)
    local = p / np.asarray(shards, dtype=np.float64)
    if flavour == "fsdp2":
        gather = COPY_IN_BYTES * local + 2.0 * param_bytes * p
        return gather, gather + (param_bytes + reduce_bytes) * p
    if flavour == "fsdp1":
        cast = (param_bytes + reduce_bytes) if reduce_bytes != param_bytes else 0.0
        gather = COPY_IN_BYTES * local
        return gather, gather + (2.0 * param_bytes + cast + 2.0 * reduce_bytes) * p
    return np.zeros_like(p), 3 * 2.0 * param_bytes * p
