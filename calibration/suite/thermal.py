"""Idle baseline, sustained-GEMM temperature step response and power-limit sweep (``phase`` records).

The monitor thread (:mod:`.monitor`) samples power, temperature and clocks throughout; these
benchmarks only create the load and write the windows:

* ``idle`` (``--idle-s``): nothing runs; phase rates 0.  Gives P_idle and the idle temperature.
* ``sustained_gemm`` (``--sustain-s``): one large GEMM back to back, one phase record over the
  whole run with the FLOP/s achieved, then ``cooldown`` (``--cooldown-s``) idle.  The temperature rise and
  decay is the step response of the first-order RC model of costmodel.thermal
  (dT/dt = (T_in + R_th P - T) / tau); the clock and FLOP/s sag under it shows thermal slowdown.
* ``power_limit`` (``--power-limits``): the same GEMM at each power limit (one phase each), a percentage of the
  maximum settable limit (NVML nvmlDeviceGetPowerManagementLimitConstraints), clamped to the
  minimum; as in Zeus's power-limit sweeps (You et al., NSDI 2023).  Setting a limit needs root
  (NVML_ERROR_NO_PERMISSION otherwise: the sweep is skipped with a note).  The original limit
  is restored in a ``finally`` block, also on errors and on SIGTERM (run.py turns SIGTERM into
  SystemExit).
"""
from __future__ import annotations

import time

from .gemm import make_gemm
from .shapes import GemmShape
from .timing import Timer, median


def idle(rec, seconds: float, name: str = "idle"):
    """Sleep ``seconds`` and write one phase record with zero work rates."""
    t0 = time.time()
    time.sleep(max(0.0, seconds))
    rec.phase(name, t0, time.time(), flops_per_s=0.0, hbm_bytes_per_s=0.0, link_bytes_per_s=0.0)


def sustained_gemm(rec, device, shape: tuple[int, int, int], dtype: str, seconds: float, name: str,
                   check_s: float = 0.5, **extra) -> float:
    """Run the GEMM ``shape`` = (m, n, k) back to back for ``seconds``; one phase record ``name``.

    The GEMMs are queued in batches of about ``check_s`` seconds with a device synchronisation
    after each, so the window ends within ``check_s`` of ``seconds``.  The single phase spans the
    whole run (what the step-response fit of costmodel/fit/thermal.py reads as ``sustained_gemm``).
    Returns:
        achieved FLOP/s over the whole run (2 m n k x calls / wall time).
    Raises:
        as :func:`.gemm.make_gemm` (e.g. out of memory).
    """
    g = GemmShape(1, *shape, source="sustain")
    fn = make_gemm(g, dtype, device)
    timer = Timer(device)
    one = median(timer.time_each(fn, 3, 2))
    per_batch = max(1, int(check_s / max(one, 1e-9)))
    start = time.time()
    calls = 0
    while time.time() - start < seconds:
        for _ in range(per_batch):
            fn()
        timer.sync()
        calls += per_batch
    end = time.time()
    rate = calls * g.flops / (end - start)
    rec.phase(name, start, end, flops_per_s=rate, dtype=dtype, m=g.m, n=g.n, k=g.k, calls=calls, **extra)
    return rate


def sustain(rec, device, shape, dtype: str, seconds: float, cooldown_s: float):
    """The step response: ``seconds`` of sustained GEMM, then ``cooldown_s`` idle (``cooldown``)."""
    rate = sustained_gemm(rec, device, shape, dtype, seconds, "sustained_gemm")
    rec.log(f"sustain: {rate / 1e12:.1f} TFLOP/s over {seconds:.0f} s")
    if cooldown_s > 0:
        idle(rec, cooldown_s, "cooldown")


def limits_w(percents, lo: float, hi: float) -> list[tuple[float, float]]:
    """(percent, watts) per percent of ``hi``, clamped to [lo, hi], duplicates after clamping dropped."""
    out, seen = [], set()
    for p in percents:
        w = min(hi, max(lo, p / 100.0 * hi))
        if round(w) not in seen:
            seen.add(round(w))
            out.append((float(p), w))
    return out


def power_limit_sweep(rec, monitor, device, percents, shape, dtype: str, seconds_each: float,
                      settle_s: float = 2.0):
    """Sustained GEMM at each power limit; the original limit restored in ``finally``.

    Args:
        monitor: :class:`.monitor.Monitor` of this GPU.
        percents: power limits in percent of the maximum settable limit.
        shape, dtype: the GEMM; seconds_each: duration at each limit; settle_s: wait after setting.
    Writes notes (never raises) when the monitor cannot set limits or lacks permission.
    """
    rng, orig = monitor.power_limit_range_w(), monitor.power_limit_w()
    if monitor.kind is None:
        rec.note(f"power-limit sweep skipped: {monitor.why_not}")
        return
    if rng is None or orig is None:
        rec.note("power-limit sweep skipped: the GPU reports no power-limit range")
        return
    try:
        monitor.set_power_limit_w(orig)  # permission probe: a no-op when allowed
    except PermissionError as e:
        rec.note(f"power-limit sweep skipped: no permission to set power limits ({e})")
        return
    except (NotImplementedError, RuntimeError) as e:
        rec.note(f"power-limit sweep skipped: {e}")
        return
    plan = limits_w(percents, *rng)
    if any(abs(w - p / 100.0 * rng[1]) > 0.5 for p, w in plan):
        rec.note(f"power limits clamped to the settable range {rng[0]:.0f}-{rng[1]:.0f} W")
    try:
        for pct, w in plan:
            monitor.set_power_limit_w(w)
            time.sleep(settle_s)
            rate = sustained_gemm(rec, device, shape, dtype, seconds_each, "power_limit", power_limit_pct=pct,
                                  power_limit_set_w=w)
            rec.log(f"power limit {w:.0f} W ({pct:.0f}%): {rate / 1e12:.1f} TFLOP/s")
    except Exception as e:  # noqa: BLE001
        rec.note(f"power-limit sweep stopped: {type(e).__name__}: {str(e)[:200]}", "warning")
    finally:
        try:
            monitor.set_power_limit_w(orig)
        except Exception as e:  # noqa: BLE001
            rec.note(f"could not restore the power limit to {orig:.0f} W ({e}); restore it by hand "
                     f"(nvidia-smi -i {monitor.slot} -pl {orig:.0f})", "warning")
