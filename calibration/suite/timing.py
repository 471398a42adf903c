"""Timing of one operation: CUDA events on a GPU, ``time.perf_counter`` on CPU; median of iterations.

On a GPU each iteration is bracketed by two CUDA events on the current stream
(``torch.cuda.Event(enable_timing=True)``; elapsed time in ms from ``Event.elapsed_time``, CUDA
Runtime API ``cudaEventElapsedTime``), after ``warmup`` untimed runs, and the device is
synchronised once at the end.  This is how mamf-finder (Bekman, ml-engineering) and the PyTorch
benchmark utilities time kernels.  On CPU the wall time of each (blocking) call is taken.
"""
from __future__ import annotations

import statistics
import time


class Timer:
    """Times a callable on one device.

    Args:
        device: ``torch.device``; ``cuda`` uses events, anything else ``perf_counter``.
    """

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"

    def sync(self):
        """Wait for all queued work on the device (no-op on CPU)."""
        if self.cuda:
            import torch
            torch.cuda.synchronize(self.device)

    def time_each(self, fn, iters: int, warmup: int = 0, before=None) -> list[float]:
        """Run ``fn`` ``warmup`` times untimed, then ``iters`` times timed.

        Args:
            fn: the operation (no arguments).
            iters: timed iterations (>= 1).
            warmup: untimed iterations first.
            before: optional callable run before every iteration, outside the timed window (e.g. a
                barrier); the device is synchronised after it.
        Returns:
            list of ``iters`` durations in seconds.
        Raises:
            whatever ``fn`` raises (e.g. ``torch.cuda.OutOfMemoryError``).
        """
        for _ in range(warmup):
            if before:
                before()
            fn()
        self.sync()
        if not self.cuda:
            out = []
            for _ in range(iters):
                if before:
                    before()
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return out
        import torch
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(iters)]
        for start, end in pairs:
            if before:
                before()
                self.sync()
            start.record()
            fn()
            end.record()
        self.sync()
        return [s.elapsed_time(e) * 1e-3 for s, e in pairs]


def timed_window(fn, device, iters: int, warmup: int, before=None):
    """Warm ``fn`` up, then time ``iters`` runs: ``(durations_s, t_start_unix, t_end_unix)``.

    The wall-clock window brackets the timed runs only (phase records and monitor samples are
    matched to it).  Raises whatever ``fn`` raises.
    """
    timer = Timer(device)
    timer.time_each(fn, 0, warmup, before=before)
    t0 = time.time()
    times = timer.time_each(fn, iters, before=before)
    return times, t0, time.time()


def median(xs) -> float:
    """Median of a non-empty sequence of seconds (``statistics.median``)."""
    return float(statistics.median(xs))
