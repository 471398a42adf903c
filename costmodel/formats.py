"""GEMM number formats of a recipe's ``--precision``: which tensor-core rate the linear layers run at,
the bytes their quantized operands take, and what quantizing them costs.

Under every low-precision recipe the transformer layers' linear GEMMs (fprop, dgrad and wgrad) run in
the format; the attention core and the output layer and loss stay in 16 bits (Transformer Engine
quantizes its Linear/LayerNormLinear/GroupedLinear modules only; Megatron's output layer is not one).

* ``fp8``: per-tensor scaled E4M3/E5M2.  A fused cast-transpose reads the 16-bit tensor (2 bytes) and
  writes it row-wise and column-wise in fp8 (1 + 1): 4 bytes per element.  Its scale comes either from
  an amax history (``--fp8-recipe delayed``: TE DelayedScaling, Megatron-LM's default) or from the
  tensor itself (``tensorwise``: TE Float8CurrentScaling, NeMo's bf16_with_fp8_current_scaling_mixed,
  torchao's dynamic float8 that torchtitan runs), which reads the tensor once more for its amax
  before the cast: 6 bytes per element.  Measured (hardware/profiles/data/
  te_gemm_profiling_h200nvl_fp8_quantization.md, TE's GEMM benchmark on an H200 NVL): current
  scaling's autocast minus pre-quantized time of each pass moves 6 bytes per input element (5 per
  weight element, whose column-wise copy that benchmark does not need) at 3.9-4.0 TB/s, 82-84 % of
  the 4.8 TB/s datasheet bandwidth, as other memory-bound kernels do; 4 bytes would be 52-55 %.
* ``mxfp8``: OCP microscaling FP8, one power-of-two (E8M0) scale per 1x32 block, native to Blackwell
  tensor cores at the fp8 rate (Megatron-LM docs, "Low-Precision Training Guide": ``--fp8-format e4m3
  --fp8-recipe mxfp8``, Blackwell only; OCP Microscaling Formats (MX) v1.0 spec: 32-element blocks,
  E8M0 scale).  Row- and column-wise copies with their scales: 2 + 2 (1 + 1/32) bytes per element.
* ``nvfp4``: NVFP4, E2M1 values with one E4M3 scale per 16 elements and an FP32 per-tensor scale
  (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149), on Blackwell's fp4
  tensor cores (Megatron-LM docs above: ``--fp4-format e2m1``, Blackwell only).  The per-tensor scale
  needs the tensor's amax first: one more 2-byte read, then 2 + 2 (0.5 + 1/16) bytes per element.
  The recipe applies a 16x16 random Hadamard transform (RHT) to the inputs of the weight-gradient
  GEMM (the same paper, sec. 4.2): the column-wise copies of both passes.  Transformer Engine runs it
  inside the amax and the cast kernels as 16x16x16 bf16 tensor-core MMAs
  (transformer_engine/common/hadamard_transform/hadamard_transform.cu and
  hadamard_transform_cast_fusion.cu, ``mma_m16_n16_k16_b16_b16_b16``): 2 x 16 FLOPs per element in
  each of the two passes, 64 per element, with no bytes of their own.  At 64 / 5.1 = 12.5 FLOP per
  byte the casts stay far below the 16-bit ridge (B200: 2.25 PFLOP/s / 8 TB/s = 281): the roofline
  max of bytes and RHT FLOPs (costmodel.compute) is the bytes' time on every Blackwell GPU.

torchao's ``rowwise`` fp8 (torchtitan ``recipe_name = "rowwise"``; Transformer Engine has no row-wise
recipe) scales each row of a GEMM operand along the contraction dimension, so every operand is cast
twice, once along each axis (the fprop, dgrad and wgrad GEMMs contract x, W and grad_y over different
dims: docs.pytorch.org/ao "Quantized Training", ``to_fp8(input_bf16.t())``): along the row, one fused
amax-and-cast pass (read 2, write 1); along the column, a reduction over the tokens then the cast (read
2, then read 2 and write 1): 8 bytes per element.  Its dgrad and wgrad GEMMs run without fast
accumulation, for which torchao calls cuBLAS's per-tensor kernel at unit scales and multiplies the bf16
output by the outer product of the row scales in place (pytorch/ao torchao/float8/float8_ops.py
``addmm_float8_unwrapped``: "The rowwise CUTLASS-based kernel is so slow without fast-accum that we'd
rather use the tensorwise cuBLAS-based kernel and do the scaling manually afterwards"): 4 more bytes
per element of every input gradient and weight gradient.  Its forward GEMM, PyTorch's CUTLASS
row-wise kernel, runs "within 90-100 % of tensor-wise efficiency" for most shapes with "a long tail
going down to 50 %" (pytorch/pytorch issue 147971); no per-shape measurement of it is public, so it is
priced at the per-tensor rate, and the model's row-wise step is a lower bound: torchao's torchtitan
Llama 3 8B benchmark on 8 H100 runs row-wise at 0.88 of tensorwise's tokens/s (6768 vs 7689.5,
docs.pytorch.org/ao "Quantized Training", e2e training benchmarks), where the casts and rescales alone
cost a few percent.

Megatron's ``--first-last-layers-bf16`` keeps the first and last N layers in BF16: the recipe switch
``bf16_edge_layers`` (costmodel.compute.edge_layer_share blends those layers' BF16 times into the
slowest stage's mean layer).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class GemmFormat:
    """One ``--precision``.

    Attributes:
        name: the precision's name.
        dtype: the datasheet peak and profile GEMM key its linear layers use (bf16, fp16, fp8, fp4).
        operand_bytes: bytes per element of a quantized GEMM operand, block scales included.
        cast_bytes: HBM bytes per element of quantizing one GEMM input (0 in 16 bits).
        generations: GPU generations whose tensor cores run it (None: any).
        rht_flops: 16-bit tensor-core FLOPs per element its casts spend on random Hadamard transforms
            (NVFP4's weight-gradient inputs; 0 without).
    """

    name: str
    dtype: str
    operand_bytes: float
    cast_bytes: float
    generations: tuple | None = None
    rht_flops: float = 0.0

    @property
    def low(self) -> bool:
        """Below 16 bits: the linear layers are quantized, attention and logits stay 16-bit."""
        return self.dtype not in ("bf16", "fp16")


FORMATS = {
    "bf16": GemmFormat("bf16", "bf16", 2.0, 0.0),
    "fp16": GemmFormat("fp16", "fp16", 2.0, 0.0),
    "fp8": GemmFormat("fp8", "fp8", 1.0, 2.0 + 1.0 + 1.0),
    "mxfp8": GemmFormat("mxfp8", "fp8", 1.0 + 1 / 32, 2.0 + 2 * (1.0 + 1 / 32), ("blackwell",)),
    "nvfp4": GemmFormat("nvfp4", "fp4", 0.5 + 1 / 16, 2.0 + 2.0 + 2 * (0.5 + 1 / 16), ("blackwell",),
                        rht_flops=2 * 2 * 16),
}


#: FP8 scaling recipes (Megatron-LM ``--fp8-recipe`` names; torchao's rowwise) -> extra HBM bytes per
#: element of each cast over the fused cast-transpose: the amax read of current scaling, the second
#: axis's amax and cast of row-wise scaling (module docstring)
FP8_RECIPES = {"delayed": 0.0, "tensorwise": 2.0, "rowwise": 4.0}

#: HBM bytes per element of each input and weight gradient that a recipe rescales after its GEMM
#: (row-wise: the in-place multiply of the bf16 output by its row and column scales; module docstring)
FP8_GRAD_RESCALE_BYTES = {"rowwise": 2.0 + 2.0}

#: the stacks whose fp8 implementation has a recipe (Transformer Engine has no row-wise scaling)
FP8_RECIPE_STACKS = {"rowwise": ("torchtitan",)}

#: the recipes Transformer Engine runs (Megatron-LM ``--fp8-recipe``, NeMo and Megatron-Bridge configs)
TE_FP8_RECIPES = tuple(r for r in FP8_RECIPES if r not in FP8_RECIPE_STACKS)

#: the values of Megatron-LM's ``fp8`` argument (``--fp8-format``, megatron/training/arguments.py:
#: choices e4m3, hybrid), which Megatron-Bridge's mixed_precision.fp8 takes too
FP8_FORMATS = ("e4m3", "hybrid")


def cast_bytes(fmt: GemmFormat, fp8_recipe: str = "delayed") -> float:
    """HBM bytes per element of quantizing one GEMM input in ``fmt`` under the per-tensor FP8 scaling
    recipe ``fp8_recipe`` (which only the ``fp8`` format reads; module docstring).

    Raises:
        InputError: an unknown recipe (naming --fp8-recipe and the known ones).
    """
    if fp8_recipe not in FP8_RECIPES:
        raise InputError("--fp8-recipe", "", f"{fp8_recipe!r} is not one of {', '.join(FP8_RECIPES)}")
    return fmt.cast_bytes + (FP8_RECIPES[fp8_recipe] if fmt.name == "fp8" else 0.0)


def sp_gather_quantized(fmt: GemmFormat, fp8_recipe: str, stack) -> bool:
    """Whether the sequence-parallel all-gathers of the layer input (forward) and of the row-parallel
    layers' output gradients (backward) carry the quantized tensor: ``fmt`` is per-tensor scaled fp8
    and ``stack`` (a :class:`costmodel.stacks.Stack`, or None) lists ``fp8_recipe`` in its
    ``fp8_sp_gather`` (Transformer Engine casts the local shard, gathers fp8 and transposes the
    gathered tensor: transformer_engine/pytorch/module/layernorm_linear.py forward and
    base.py ``grad_output_preprocess``, "FP8 case with gather"; torchao's Float8ColwiseParallel /
    Float8RowwiseParallel, which torchtitan applies for tensorwise scaling only:
    torchtitan/models/llama3/infra/parallelize.py ``enable_float8_tensorwise_tp``)."""
    return fmt.name == "fp8" and stack is not None and fp8_recipe in stack.fp8_sp_gather


def sp_gather_cast_bytes(fmt: GemmFormat, fp8_recipe: str, tp) -> object:
    """HBM bytes per element of the gathered tensor (array over layouts, like ``tp``) of quantizing
    an operand that is cast before its sequence-parallel all-gather (:func:`sp_gather_quantized`):
    the cast of this rank's 1/TP shard without the column-wise copy (:func:`cast_bytes` less one
    write of the operand), then the transpose of the gathered quantized tensor for the
    weight-gradient GEMM (a read and a write of the operand, ``tex.fp8_transpose``)."""
    return (cast_bytes(fmt, fp8_recipe) - fmt.operand_bytes) / tp + 2.0 * fmt.operand_bytes


def grad_rescale_bytes(fmt: GemmFormat, fp8_recipe: str) -> float:
    """HBM bytes per element of each input / weight gradient the ``fp8_recipe`` rescales after its
    GEMM (:data:`FP8_GRAD_RESCALE_BYTES`; 0 for every other recipe and format)."""
    return FP8_GRAD_RESCALE_BYTES.get(fp8_recipe, 0.0) if fmt.name == "fp8" else 0.0


def gemm_format(precision: str) -> GemmFormat:
    """The :class:`GemmFormat` of a precision name.

    Raises:
        InputError: an unknown name (naming --precision and the known ones).
    """
    try:
        return FORMATS[precision]
    except KeyError:
        raise InputError("--precision", "", f"{precision!r} is not one of {', '.join(FORMATS)}") from None


def check_format_on_gpu(precision: str, gpu) -> None:
    """Refuse a format ``gpu``'s tensor cores do not run (MXFP8 and NVFP4 need Blackwell; a
    costmodel.specs.GpuSpec, by its architecture).

    Raises:
        InputError: naming --precision, the GPU and its generation.
    """
    from .model_error import generation
    f = gemm_format(precision)
    gen = generation(gpu)
    if f.generations is not None and gen not in f.generations:
        raise InputError("--precision", "", f"{precision} runs on {', '.join(f.generations)} tensor cores; "
                         f"{gpu.name} is {gen}")
    if f.dtype not in gpu.peak_flops:
        runs = [p for p, g in FORMATS.items() if g.dtype in gpu.peak_flops and (g.generations is None or gen in g.generations)]
        raise InputError("--precision", "", f"{precision} runs its GEMMs on {f.dtype} tensor cores, which {gpu.name} "
                         f"({gen}) lacks: {gpu.path or gpu.key} gives no peak_tflops.{f.dtype} (give --precision "
                         f"{' or '.join(runs)}, or add the peak to the file if the GPU has them)")
