"""Expert GEMMs as an MoE layer runs them: ``moe_gemm`` records of routed, uneven per-expert token counts.

The batched GEMMs of :mod:`.gemm` give every expert the same rows.  A routed MoE layer does not:
each expert of a rank receives what the router sent it.  For each MoE model of ``--models``, each
EP degree of ``--moe-ep`` and each token count of ``--tokens`` (tokens per micro-batch on one
rank), the suite routes ``tokens x EP`` tokens (one micro-batch from every rank of the EP group)
top-k over the model's experts uniformly at random (``torch.rand(...).topk``: k distinct experts per
token, the assignment the balls-into-bins bound of costmodel/moe.py assumes), keeps the counts of
the first E/EP experts (this rank's), and times the forward FC1 GEMM of those experts
(``y_e = x_e @ W_e``, x_e of count_e rows x hidden, W_e hidden x (2 x FFN when gated)) two ways:

* ``sequential``: one ``torch.mm`` per expert on its slice, as Megatron-core's SequentialMLP (and
  DeepSpeed-MoE's expert loop) run them;
* ``grouped``: one ``torch._grouped_mm`` over all local experts with the counts as offsets (the
  grouped GEMM of Megatron's ``--moe-grouped-gemm``, torchtitan's ``use_grouped_mm``); CUDA sm_90+
  with bf16 only, a note where it is absent.

Each record carries the counts, so a fit can compare the time with the cost model's batched GEMM
of the mean count (costmodel/fit/moe.py).  On CPU the suite times fp32 ``sequential`` only.
"""
from __future__ import annotations

from .timing import median, timed_window

MODES = ("sequential", "grouped")


def routed_counts(tokens: int, topk: int, experts: int, ep: int, generator, device) -> list[int]:
    """Tokens each of this rank's ``experts / ep`` experts receives when ``tokens x ep`` tokens each
    pick ``topk`` distinct experts uniformly at random (module docstring).

    Raises:
        ValueError: ``ep`` not dividing ``experts`` or ``topk`` above ``experts``.
    """
    import torch
    if experts % ep or not 1 <= topk <= experts:
        raise ValueError(f"EP {ep} must divide the {experts} experts and top-k {topk} be at most that")
    picks = torch.rand(tokens * ep, experts, generator=generator, device="cpu").topk(topk, dim=1).indices
    counts = torch.bincount(picks.flatten(), minlength=experts)[: experts // ep]
    return [int(c) for c in counts]


def grouped_available(device, dtype: str) -> str:
    """Why ``torch._grouped_mm`` cannot run here ('' when it can)."""
    import torch
    if device.type != "cuda":
        return "grouped GEMM needs a GPU"
    if dtype != "bf16":
        return f"grouped GEMM runs bf16 only (got {dtype})"
    if not hasattr(torch, "_grouped_mm"):
        return f"torch {torch.__version__} has no torch._grouped_mm (needs 2.8 or later)"
    if torch.cuda.get_device_capability(device) < (9, 0):
        return "torch._grouped_mm needs sm_90 or later"
    return ""


def make_experts(counts, hidden: int, width: int, dtype: str, mode: str, device, generator=None):
    """Operands of one rank's expert FC1 and a no-argument callable running it in ``mode``."""
    import torch
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    rows = sum(counts)
    x = torch.randn(max(rows, 1), hidden, device=device, dtype=dt, generator=generator)
    w = torch.randn(len(counts), hidden, width, device=device, dtype=dt, generator=generator)
    if mode == "grouped":
        offs = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)
        wt = w.transpose(-2, -1).contiguous().transpose(-2, -1)     # column-major B, what cuBLAS takes
        return lambda: torch._grouped_mm(x, wt, offs=offs)
    bounds, start = [], 0
    for c in counts:
        bounds.append((start, start + c))
        start += c

    def run():
        return [torch.mm(x[a:b], w[e]) for e, (a, b) in enumerate(bounds) if b > a]
    return run


def run(rec, device, models, tokens_list, eps, dtype: str, iters: int, warmup: int, seed: int = 0):
    """Time every MoE model x EP x tokens x mode; ``moe_gemm`` records, notes for what is skipped.

    Args:
        rec: :class:`.recorder.Recorder`.
        models: :class:`costmodel.specs.ModelSpec` list (dense ones are skipped with a note).
        tokens_list: tokens per micro-batch on one rank.
        eps: EP degrees (those not dividing a model's experts are skipped with a note).
        dtype: 'bf16' on a GPU, 'fp32' on CPU.
    """
    import torch
    moe = [m for m in models if m.is_moe]
    if not moe:
        rec.note("moe_gemm skipped: no MoE model in --models (e.g. --models mixtral-8x7b,qwen3-30b-a3b)")
        return
    why_grouped = grouped_available(device, dtype)
    if why_grouped:
        rec.note(f"moe_gemm grouped mode skipped: {why_grouped}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for m in moe:
        width = (2 if m.gated else 1) * m.ffn_hidden
        for ep in eps:
            if m.num_experts % ep:
                rec.note(f"moe_gemm {m.name} EP {ep} skipped: EP does not divide {m.num_experts} experts")
                continue
            for tokens in tokens_list:
                counts = routed_counts(tokens, m.topk, m.num_experts, ep, gen, device)
                for mode in MODES:
                    if mode == "grouped" and why_grouped:
                        continue
                    try:
                        fn = make_experts(counts, m.hidden, width, dtype, mode, device)
                        times, t0, t1 = timed_window(fn, device, iters, warmup)
                    except Exception as e:  # noqa: BLE001 - one shape must not end the run
                        rec.note(f"moe_gemm {m.name} EP {ep} tokens {tokens} {mode} failed: "
                                 f"{type(e).__name__}: {str(e)[:200]}", "warning")
                        continue
                    finally:
                        if device.type == "cuda":
                            torch.cuda.empty_cache()
                    t = median(times)
                    flops = 2.0 * sum(counts) * width * m.hidden
                    rec.add("moe_gemm", model=m.name, ep=ep, tokens=tokens, topk=m.topk, mode=mode, dtype=dtype,
                            counts=counts, n=width, k=m.hidden, time_s=t, flops_per_s=flops / t, iters=iters,
                            t_start_unix=t0, t_end_unix=t1)
                    rec.phase("moe_gemm", t0, t1, flops_per_s=flops * iters / max(t1 - t0, 1e-9), dtype=dtype)
