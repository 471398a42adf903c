"""What PyTorch's ring attention moves besides its attention kernels: the partial outputs merged in
fp32 and the gradients accumulated and rotated in fp32.

torchtitan's context parallelism is PyTorch's experimental ``context_parallel``
(torch/distributed/tensor/experimental/_attention.py, pytorch/pytorch at 0123248a).  With CP ranks,
each of the CP ring steps runs the flash kernel on the local queries against one rank's keys and
values, and eager PyTorch ops do the rest (``convert_to_f32`` and load balancing on, the defaults):

Forward (``_templated_ring_attention``, ``_SDPAMerger``), per element of the local output
(``E_q`` = queries x query width on this GPU) and of the local keys and values (``E_kv``):

* the first step's output is converted to fp32 (read 2, write 4 bytes) and the merged output back to
  16 bits at the end (read 4, write 2): 12 bytes;
* every later step converts its output to fp32 (6) and merges it,
  ``out - sigmoid(lse_i - lse) * (out - out_i)``: a subtraction (read 4 + 4, write 4), a product
  with the per-row factor (read 4, write 4) and a subtraction (read 4 + 4, write 4): 38 bytes.  Ranks
  whose step covers half the queries (load balancing) merge half and re-concatenate the whole
  output (``_partial_update``: read 4, write 4), 27 bytes; the ring waits for the slowest rank, the
  last, whose every step is a full one;
* every step but the last concatenates its keys and values for the next rank (read 2, write 2).

Backward (``_templated_ring_attention_backward``):

* the fp32 gradient buffers start at zero (write 4 per query and key/value element) and end converted
  to 16 bits (read 4, write 2);
* every step but the last concatenates the keys and values for the next rank (4 per key/value
  element);
* each step adds its query gradient into the fp32 one (read 4 + 2, write 4: 10 bytes) and its key and
  value gradients into the ones it received (10 at the first step; 13 for the last rank's later
  steps: half added, the whole re-concatenated), then concatenates the fp32 key/value gradients for the
  next rank (read 4, write 4): those gradients travel in fp32, twice the bytes of the keys and values,
  one all-to-all a step (the last returns them to their owner).

About six kernels a step in each direction.  Units: bytes, counts; arrays broadcast.
"""
from __future__ import annotations

import numpy as np

#: eager kernels a ring step launches besides its attention kernel (conversion, the merge's three
#: elementwise ops and the per-row factor's two; the backward's accumulations and concatenations)
KERNELS_PER_STEP = 6


def merge_bytes(cp, e_q, e_kv) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes of the ring's merges and gradient accumulations per micro-batch
    on one GPU (module docstring), 0 without context parallelism.

    Args:
        cp: CP degree (array).  e_q: local output elements (queries x query width / TP).
        e_kv: local key and value elements (tokens x (key + value width) / TP).
    """
    cp = np.asarray(cp, dtype=np.float64)
    steps = cp - 1
    fwd = 12 * e_q + steps * (38 * e_q + 4 * e_kv)
    bwd = (4 + 6 + 10 * cp) * e_q + (4 + 6 + 10 + 8 * cp + steps * (4 + 13)) * e_kv
    on = cp > 1
    return np.where(on, fwd, 0.0), np.where(on, bwd, 0.0)


def grad_comm_factor(cp) -> np.ndarray:
    """The ring's backward CP traffic over its forward traffic (CP - 1 sends of 16-bit keys and values):
    the keys and values once more, and CP sends of their fp32 gradients (module docstring)."""
    cp = np.asarray(cp, dtype=np.float64)
    return 1.0 + 2.0 * cp / np.maximum(cp - 1, 1.0)
