"""A Megatron-LM launch script given where a run configuration is expected: not read as a run (its values
sit in shell variables, expansions and loops), but its argument names say which costmodel flags carry them."""
from __future__ import annotations

import re

from .errors import InputError

#: Megatron-LM arguments (megatron/training/arguments.py) and the costmodel flag that carries each
_FLAGS = (("tensor-model-parallel-size", "--tp"), ("pipeline-model-parallel-size", "--pp"),
          ("context-parallel-size", "--cp"), ("expert-model-parallel-size", "--ep"),
          ("expert-tensor-parallel-size", "--etp"), ("micro-batch-size", "--mbs"), ("global-batch-size", "--gbs"),
          ("seq-length", "--seq-len"), ("recompute-granularity", "--recompute"))


def is_launch_script(path: str, text: str) -> bool:
    """Whether ``text`` (the file at ``path``) is a shell launch script: a ``.sh`` name, a ``#!`` line or a
    command line that starts a Megatron-LM training script (``torchrun ... pretrain_gpt.py``)."""
    return (path.lower().endswith(".sh") or text.lstrip().startswith("#!")
            or re.search(r"^\s*(torchrun|srun|mpirun|python3?)\b.*\bpretrain_\w+\.py", text, re.M) is not None)


def launch_script_error(path: str, text: str) -> InputError:
    """The refusal of a launch script as ``--config``, naming the flags that carry the Megatron-LM
    arguments it sets (their values as written, a shell variable included)."""
    said = []
    for arg, flag in _FLAGS:
        m = re.search(rf"--{arg}[= ]+([^\s\\)\"']+)", text)
        if m:
            said.append(f"{flag} {m.group(1)}")
    hint = f" ({' '.join(said)})" if said else ""
    return InputError(path, "", "a shell launch script, which --config does not read (NeMo YAML, Megatron-Bridge "
                      f"YAML, torchtitan TOML): give its Megatron-LM arguments as flags{hint}")
