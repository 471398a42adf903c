"""``python -m costmodel.calibration.run``: the calibration microbenchmark suite, one JSONL file per job.

Run it where the GPUs are, under the usual launchers (the suite has none of its own)::

    torchrun --nproc-per-node 8 -m costmodel.calibration.run --out raw-node.jsonl           # one node
    srun -N 4 --ntasks-per-node 8 python -m costmodel.calibration.run --out raw-4n.jsonl   # Slurm, 4 nodes
    torchrun --nnodes 4 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m costmodel.calibration.run --out raw.jsonl
    python -m costmodel.calibration.run --quick --out raw-cpu.jsonl    # no launcher, world size 1

The folder is ``calibration/`` at the top of the repository; it installs as ``costmodel.calibration``.

Every rank measures (GEMMs, routed expert GEMMs of MoE models, HBM, collectives over group scopes, GEMM/all_reduce overlap, idle,
waiting in NCCL against waiting for the host,
sustained-GEMM step response, power-limit sweep) while a thread samples its GPU's power,
temperature and clocks; rank 0 gathers all records and writes ``--out``, a file in the format of
:mod:`costmodel.readers.suite_jsonl` ending with an ``end`` record.  Without a GPU the same code runs
on CPU with gloo, and notes say what was skipped.  Exit status: 0 done, 2 bad options or launcher
environment (one line on stderr naming the option or variable).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

BENCHMARKS = ("idle", "wait", "gemm", "moe_gemm", "hbm", "collectives", "overlap", "sustain", "power_limits")
DEFAULT_MODELS = "llama3-8b,llama3-70b,mixtral-8x7b"

# option -> (GPU, CPU, GPU --quick, CPU --quick); None in the parser means "take it from here"
DEFAULTS = {
    "models": (DEFAULT_MODELS, "llama3-8b", "llama3-8b", "llama3-8b"),
    "tp": ("1,2,4,8", "1,2,4,8", "1,8", "8"),
    "moe_ep": ("1,8,64", "1,8", "8", "8"),
    "tokens": ("4096,8192", "32", "2048", "16"),
    "gemm_grid": ("256,1024,4096,16384", "64,256", "1024,4096", "64,128"),
    "max_gemm_flops": (0.0, 2e9, 0.0, 5e8),
    "iters": (20, 5, 3, 3),
    "warmup": (5, 1, 1, 1),
    "hbm_bytes": ("256M,1G,4G", "16M", "256M", "1M"),
    "min_bytes": ("1K", "1K", "1K", "1K"),
    "max_bytes": ("1G", "4M", "16M", "64K"),
    "coll_iters": (20, 5, 3, 3),
    "coll_warmup": (5, 1, 1, 1),
    "coll_dtype": ("bf16", "fp32", "bf16", "fp32"),
    "overlap_gemm": ("8192,8192,8192", "256,256,256", "4096,4096,4096", "256,256,256"),
    "overlap_bytes": ("256M", "1M", "32M", "1M"),
    "idle_s": (30.0, 0.0, 0.0, 0.0),
    "wait_s": (20.0, 1.0, 0.0, 0.0),
    "sustain_s": (120.0, 2.0, 0.0, 0.0),
    "cooldown_s": (60.0, 0.0, 0.0, 0.0),
    "sustain_gemm": ("8192,8192,8192", "256,256,256", "8192,8192,8192", "256,256,256"),
    "power_limits": ("50,60,70,80,90,100", "off", "off", "off"),
    "limit_s": (20.0, 2.0, 5.0, 1.0),
}


# ------------------------------------------------------------------------------------------ parsing

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)


def parse_size(text) -> int:
    """Bytes from ``"1024"``, ``"1K"``, ``"64KiB"``, ``"1G"``, ``"4GB"``: K/M/G/T are powers of 1024,
    as in nccl-tests' ``-b 8 -e 128M`` (nccl-tests README).

    Raises:
        ValueError: not a size.
    """
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 1024, 64K, 1G)")
    scale = 1024 ** " KMGT".index(m.group(2).upper() or " ")
    return int(float(m.group(1)) * scale)


def _csv(conv, what):
    def parse(text):
        items = [x.strip() for x in str(text).split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"empty {what} list")
        try:
            return [conv(x) for x in items]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"bad {what} list {text!r}: {e}") from None
    return parse


def _pos_int(x):
    v = int(x)
    if v < 1:
        raise ValueError(f"{x} is not a positive integer")
    return v


def _shape3(text):
    v = _csv(_pos_int, "M,N,K")(text)
    if len(v) != 3:
        raise argparse.ArgumentTypeError(f"expected M,N,K, got {text!r}")
    return v


def _positive(x):
    v = _nonneg(x)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{x} is not > 0")
    return v


def _nonneg(x):
    try:
        v = float(x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{x!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"{x} is not a finite number >= 0")
    return v


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except the 'auto' ones (None), which depend on the device and --quick."""

    def _get_help_string(self, action):
        if action.default is None or action.default is argparse.SUPPRESS or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (``--help`` lists every option with its default)."""
    p = argparse.ArgumentParser(
        prog="python -m costmodel.calibration.run",
        description="Calibration microbenchmarks (GEMM, HBM, collectives, overlap, power/thermal) for costmodel. "
                    "Launch under torchrun or srun (one process per GPU), or alone for one process. Rank 0 "
                    "writes all ranks' records to --out (JSONL, costmodel/readers/suite_jsonl.py).",
        epilog="Defaults marked 'auto' differ on GPU, on CPU and with --quick (see DEFAULTS in calibration/run.py). "
               "Sizes take K/M/G/T suffixes, powers of 1024 (nccl-tests convention).",
        formatter_class=_Help)
    g = p.add_argument_group("run")
    g.add_argument("--out", default="calibration-raw.jsonl", help="output JSONL file (written by rank 0)")
    g.add_argument("--force", action="store_true", help="replace an existing --out file (its records are lost)")
    g.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="where to run: cuda (nccl/rccl backend) or cpu (gloo); auto = cuda if torch sees a GPU")
    g.add_argument("--quick", action="store_true",
                   help="CI mode: tiny sizes, few iterations, no idle/sustain/power-limit runs")
    g.add_argument("--only", type=_csv(str, "benchmark"), default=None,
                   help=f"run only these benchmarks (of {','.join(BENCHMARKS)}; default all)")
    g.add_argument("--skip", type=_csv(str, "benchmark"), default=None, help="benchmarks not to run (default none)")
    g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    g = p.add_argument_group("process group")
    g.add_argument("--launcher", choices=("auto", "env", "slurm", "none"), default="auto",
                   help="where rank/world size come from: env (torchrun's RANK/WORLD_SIZE), slurm (srun's "
                        "SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, MASTER_ADDR = first host of the node list), none")
    g.add_argument("--master-port", type=int, default=None,
                   help="MASTER_PORT when the environment has none (srun), default 29500")
    g.add_argument("--timeout-s", type=_positive, default=1800.0, help="process-group timeout per collective, s")
    g.add_argument("--simulate-nodes", type=int, default=0,
                   help="testing only: treat the ranks as N equal nodes (exercises the inter-node groups on one host)")
    g = p.add_argument_group("GEMM")
    g.add_argument("--models", type=_csv(str, "model"), default=None,
                   help=f"catalog models (or config.json paths) whose layer GEMMs to time (auto: {DEFAULT_MODELS})")
    g.add_argument("--tp", type=_csv(_pos_int, "TP"), default=None, help="TP degrees of the model shapes (auto)")
    g.add_argument("--tokens", type=_csv(_pos_int, "token"), default=None,
                   help="M = micro-batch x sequence length tokens per GEMM (auto: 4096,8192 on GPU)")
    g.add_argument("--moe-ep", type=_csv(_pos_int, "EP"), default=None,
                   help="EP degrees of the routed expert GEMMs of the MoE models in --models (auto: 1,8,64 on GPU)")
    g.add_argument("--gemm-passes", type=_csv(str, "pass"), default="fwd,bwd",
                   help="fwd (y = x w) and/or bwd (dgrad and wgrad shapes)")
    g.add_argument("--gemm-grid", default=None,
                   help="also time every (m, n, k) of these sizes, or 'off' (auto: 256,1024,4096,16384 on GPU)")
    g.add_argument("--gemm-dtypes", type=_csv(str, "dtype"), default="bf16,fp8",
                   help="bf16, fp16, fp32, fp8 (fp8 via torch._scaled_mm where the GPU has fp8 tensor cores; "
                        "on CPU 16-bit becomes fp32)")
    g.add_argument("--max-gemm-flops", type=float, default=None,
                   help="skip shapes above this many FLOPs, 0 = no limit (auto: 0 on GPU, 2e9 on CPU)")
    g.add_argument("--iters", type=_pos_int, default=None, help="timed GEMM/HBM iterations, median reported (auto: 20)")
    g.add_argument("--warmup", type=int, default=None, help="untimed GEMM/HBM iterations first (auto: 5)")
    g = p.add_argument_group("HBM")
    g.add_argument("--hbm-bytes", type=_csv(parse_size, "size"), default=None,
                   help="array sizes of copy and triad (auto: 256M,1G,4G on GPU)")
    g = p.add_argument_group("collectives")
    g.add_argument("--collectives", type=_csv(str, "collective"),
                   default="all_reduce,all_gather,reduce_scatter,all_to_all,send_recv",
                   help="collectives to time")
    g.add_argument("--min-bytes", type=parse_size, default=None, help="smallest message size (auto: 1K)")
    g.add_argument("--max-bytes", type=parse_size, default=None,
                   help="largest message size, powers of 2 (auto: 1G on GPU)")
    g.add_argument("--coll-iters", type=_pos_int, default=None, help="timed iterations per size (auto: 20)")
    g.add_argument("--coll-warmup", type=int, default=None, help="untimed iterations per size (auto: 5)")
    g.add_argument("--coll-dtype", choices=("bf16", "fp16", "fp32"), default=None,
                   help="buffer dtype (auto: bf16 on GPU, fp32 on CPU)")
    g.add_argument("--intra-sizes", type=_csv(_pos_int, "group size"), default="2,4,8",
                   help="intra-node group sizes (those that fit the ranks per node)")
    g = p.add_argument_group("overlap")
    g.add_argument("--overlap-gemm", type=_shape3, default=None, help="M,N,K of the overlapped GEMM (auto)")
    g.add_argument("--overlap-bytes", type=parse_size, default=None, help="all_reduce size under the GEMM (auto: 256M)")
    g = p.add_argument_group("power and temperature")
    g.add_argument("--sample-hz", type=_positive, default=20.0, help="NVML/amdsmi sampling rate")
    g.add_argument("--idle-s", type=_nonneg, default=None, help="idle baseline, s (auto: 30 on GPU, 0 with --quick)")
    g.add_argument("--wait-s", type=_nonneg, default=None,
                   help="GPUs spinning in an all-reduce while rank 0 sleeps (waiting power), s (auto: 20 on GPU, "
                        "0 with --quick)")
    g.add_argument("--sustain-s", type=_nonneg, default=None,
                   help="sustained GEMM for the temperature step response, s (auto: 120 on GPU, 0 with --quick)")
    g.add_argument("--cooldown-s", type=_nonneg, default=None,
                   help="idle after the sustained GEMM, s (auto: 60 on GPU)")
    g.add_argument("--sustain-gemm", type=_shape3, default=None, help="M,N,K of the sustained GEMM (auto: 8192^3)")
    g.add_argument("--power-limits", default=None,
                   help="power limits in percent of the maximum, e.g. 50,60,...,100, or 'off' (auto: that list on "
                        "GPU where NVML lets this user set limits; the original limit is always restored)")
    g.add_argument("--limit-s", type=_nonneg, default=None, help="sustained GEMM at each power limit, s (auto: 20)")
    return p


def resolve(args: argparse.Namespace, on_gpu: bool) -> dict:
    """Fill every 'auto' option from :data:`DEFAULTS` for this device and mode; a JSON-able dict.

    Raises:
        ValueError: an unknown benchmark / collective / pass name, or a bad size or percent list.
    """
    col = (0 if on_gpu else 1) + (2 if args.quick else 0)
    o = dict(vars(args))
    for key, vals in DEFAULTS.items():
        if o.get(key) is None:
            o[key] = vals[col]
    if str(o["gemm_grid"]).strip().lower() in ("off", "none", ""):
        o["gemm_grid"] = []
    conv = {"models": _csv(str, "model"), "tp": _csv(_pos_int, "TP"), "tokens": _csv(_pos_int, "token"),
            "moe_ep": _csv(_pos_int, "EP"),
            "gemm_grid": _csv(_pos_int, "size"), "hbm_bytes": _csv(parse_size, "size"),
            "min_bytes": parse_size, "max_bytes": parse_size, "overlap_bytes": parse_size,
            "overlap_gemm": _shape3, "sustain_gemm": _shape3}
    for key, f in conv.items():
        if isinstance(o[key], str):
            o[key] = f(o[key])
    pl = str(o["power_limits"]).strip().lower()
    o["power_limits"] = [] if pl in ("off", "none", "", "0") else _csv(float, "percent")(pl)
    if any(not 0 < x <= 100 for x in o["power_limits"]):
        raise ValueError(f"--power-limits {pl!r}: percents must be in (0, 100]")
    from .suite.collectives import COLLECTIVES
    for name, allowed, flag in ((o["only"] or [], BENCHMARKS, "--only"), (o["skip"] or [], BENCHMARKS, "--skip"),
                                (o["collectives"], COLLECTIVES, "--collectives"),
                                (o["gemm_passes"], ("fwd", "bwd"), "--gemm-passes")):
        bad = [x for x in name if x not in allowed]
        if bad:
            raise ValueError(f"{flag}: unknown {', '.join(bad)} (known: {', '.join(allowed)})")
    if not 1 <= o["min_bytes"] <= o["max_bytes"]:
        raise ValueError(f"--min-bytes {o['min_bytes']} must be >= 1 and <= --max-bytes {o['max_bytes']}")
    if o["sample_hz"] <= 0:
        raise ValueError(f"--sample-hz {o['sample_hz']} must be > 0")
    o["benchmarks"] = [b for b in BENCHMARKS if (o["only"] is None or b in o["only"]) and b not in (o["skip"] or [])]
    return o


# ------------------------------------------------------------------------------------------ running


def _fail(msg: str) -> int:
    print(f"python -m costmodel.calibration.run: {msg}", file=sys.stderr)
    return 2


def _guard(rec, name, fn):
    """Run one benchmark; an exception becomes a warning note (the run goes on)."""
    t0 = time.time()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the end record must still be written
        tb = traceback.extract_tb(e.__traceback__)[-1]
        rec.note(f"{name} failed: {type(e).__name__}: {str(e)[:300]} (at {Path(tb.filename).name}:{tb.lineno})",
                 "warning")
    rec.log(f"{name}: done in {time.time() - t0:.1f} s")


def _benchmarks(rec, ctx, o, monitor):
    """(name, callable) of every selected benchmark in run order."""
    from .suite import collectives, gemm, hbm, moe_gemm, overlap, shapes, thermal, wait
    from costmodel.specs import load_model
    dev = ctx.device
    dtypes, dnotes = gemm.resolve_dtypes(o["gemm_dtypes"], dev)
    models = [load_model(m, "--models") for m in o["models"]]
    big_dtype = "bf16" if ctx.is_cuda else "fp32"

    def do_gemm():
        for lvl, msg in dnotes:
            rec.note(msg, lvl)
        sh = shapes.model_shapes(models, o["tokens"], o["tp"], tuple(o["gemm_passes"]))
        sh += shapes.grid_shapes(o["gemm_grid"])
        rec.log(f"gemm: {len(sh)} shapes x {dtypes}")
        gemm.run(rec, dev, sh, dtypes, o["iters"], o["warmup"], o["max_gemm_flops"])

    def do_idle():
        if o["idle_s"] <= 0:
            rec.note("idle baseline skipped (--idle-s 0)")
            return
        thermal.idle(rec, o["idle_s"])

    def do_sustain():
        if o["sustain_s"] <= 0:
            rec.note("sustained-GEMM step response skipped (--sustain-s 0)")
            return
        if not ctx.is_cuda:
            rec.note("sustained GEMM runs on CPU: a short code-path check, no temperature is sampled")
        thermal.sustain(rec, dev, o["sustain_gemm"], big_dtype, o["sustain_s"], o["cooldown_s"])

    def do_limits():
        if not o["power_limits"]:
            rec.note("power-limit sweep skipped (--power-limits off)" if ctx.is_cuda
                     else "power-limit sweep skipped: CPU run")
            return
        thermal.power_limit_sweep(rec, monitor, dev, o["power_limits"], o["sustain_gemm"], big_dtype, o["limit_s"])

    table = {
        "idle": do_idle,
        "wait": lambda: wait.run(rec, ctx, o["wait_s"]),
        "gemm": do_gemm,
        "moe_gemm": lambda: moe_gemm.run(rec, dev, models, o["tokens"], o["moe_ep"], big_dtype, o["iters"],
                                         o["warmup"]),
        "hbm": lambda: hbm.run(rec, dev, o["hbm_bytes"], o["iters"], o["warmup"]),
        "collectives": lambda: collectives.run(
            rec, ctx, o["collectives"], collectives.message_sizes(o["min_bytes"], o["max_bytes"]),
            o["coll_dtype"], o["coll_iters"], o["coll_warmup"], tuple(o["intra_sizes"])),
        "overlap": lambda: overlap.run(rec, ctx, tuple(o["overlap_gemm"]), big_dtype, o["overlap_bytes"],
                                       o["coll_dtype"], o["coll_iters"], o["coll_warmup"]),
        "sustain": do_sustain,
        "power_limits": do_limits,
    }
    return [(b, table[b]) for b in o["benchmarks"]]


def write_output(path: Path, texts: list[str], host: str) -> int:
    """Write every rank's JSONL text then the ``end`` record to ``path`` (via a temporary file).

    Returns:
        number of records before the end record.
    """
    from costmodel.readers.suite_jsonl import make_record
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [ln for t in texts for ln in t.splitlines() if ln.strip()]
    end = make_record("end", host, 0, finished_unix=time.time(), n_records=len(lines))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        for ln in lines:
            f.write(ln + "\n")
        f.write(json.dumps(end, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
    return len(lines)


def _unwritable(path: Path) -> str | None:
    """Why the suite could not write its output file ``path`` (None when it can): a directory, or a
    folder that cannot be created or written."""
    if path.is_dir():
        return "is a directory; name the JSONL file to write"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".probe")  # one per rank
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"cannot write there ({e.strerror or e})"
    return None


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through the finally blocks (power limits restored)


def main(argv=None) -> int:
    """Run the suite; returns the exit status (0 done, 2 bad options or environment)."""
    args = build_parser().parse_args(argv)
    started = time.time()
    from costmodel.files import is_own_output
    kept = Path(args.out).is_file() and not args.force and not is_own_output(args.out)
    why = _unwritable(Path(args.out)) or ("exists: its records would be replaced; give --force to replace it, or "
                                          "another file" if kept else None)
    if why:                          # before any benchmark runs: a whole suite must not be lost at the end
        return _fail(f"--out {args.out}: {why}")
    if importlib.util.find_spec("torch") is None:
        return _fail("needs torch: pip install 'costmodel[calibrate]'")
    from .suite import dist
    try:
        ctx = dist.setup(args.device, args.launcher, args.master_port, args.timeout_s, args.simulate_nodes)
    except ValueError as e:
        return _fail(str(e))
    try:
        return _run(args, ctx, started)
    finally:
        dist.shutdown(ctx)


def _run(args, ctx, started) -> int:
    from costmodel.errors import InputError
    from .suite import dist, monitor as mon, provenance
    from .suite.recorder import Recorder
    try:
        o = resolve(args, ctx.is_cuda)
    except (ValueError, argparse.ArgumentTypeError) as e:
        return _fail(str(e))
    monitor = mon.open_monitor(ctx.device)
    slot = provenance.slot_of(ctx, monitor)
    rec = Recorder(ctx.host, ctx.rank, slot, monitor.power_limit_w, verbose=ctx.rank == 0 and not args.quiet)
    try:
        benches = _benchmarks(rec, ctx, o, monitor)
    except (InputError, ValueError) as e:
        monitor.close()
        return _fail(str(e))
    args_rec = {k: v for k, v in o.items() if k not in ("only", "skip")}
    rec.add("provenance", **provenance.record_fields(ctx, monitor, args_rec, started))
    rec.log(f"{ctx.world_size} rank(s) on {ctx.n_nodes} node(s), {ctx.device}, backend {ctx.backend}, "
            f"monitor {monitor.kind}")
    for lvl, msg in ctx.notes:
        rec.note(msg, lvl)
    if monitor.kind is None:
        rec.note(f"power/temperature not sampled: {monitor.why_not}")
    sampler = mon.Sampler(monitor, args.sample_hz).start()
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, _sigterm)
    try:
        for name, fn in benches:
            _guard(rec, name, fn)
            dist.barrier(ctx)
    finally:
        sampler.stop()
        sampler.write(rec, slot)
        monitor.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    texts = dist.gather_text(ctx, rec.to_jsonl())
    if ctx.rank == 0:
        n = write_output(Path(o["out"]), texts, ctx.host)
        rec.log(f"wrote {n} records + end to {o['out']}")
    dist.barrier(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
