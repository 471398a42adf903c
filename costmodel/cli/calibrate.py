"""``costmodel calibrate run | fit | show``: measure a cluster, fit a profile, inspect it.

A thin typer layer over ``costmodel.calibration.run`` (the suite, launched by torchrun),
:mod:`costmodel.fit` (the fits) and the profile YAML.  Bad input ends with one line on stderr and exit code 2.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from .. import report
from ..errors import InputError
from ..files import not_a_file
from ..specs.profile import refuse_measurement

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Calibrate the model against a cluster: run the microbenchmark suite on the GPUs "
                       "(run), fit a profile from its output and other measurement files (fit), show a "
                       "profile with its fit quality and provenance (show).")


#: processes a GPU-less run starts (CPU, gloo): two, so the collectives and the wait have a peer
CPU_PROCESSES = 2


def _visible_gpus() -> int:
    """Visible GPUs (torch, else nvidia-smi -L); 0 when neither finds one."""
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.device_count()
    except ImportError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        return sum(1 for ln in out.stdout.splitlines() if ln.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        return 0


def launch_command(out: str, nproc_per_node: int, nnodes: int = 1, rdzv_endpoint: str | None = None,
                   suite_args: list | None = None, python: str = sys.executable) -> list:
    """The torchrun command line that runs the suite (torch.distributed.run is torchrun's module).

    Multi-node (``nnodes > 1``) needs ``rdzv_endpoint`` (HOST:PORT of one node) and the same command
    on every node (torchrun's c10d rendezvous, https://pytorch.org/docs/stable/elastic/run.html).
    Raises:
        InputError: nnodes > 1 without a rendezvous endpoint, or a count below 1.
    """
    if nproc_per_node < 1 or nnodes < 1:
        raise InputError("--nproc-per-node/--nnodes", "", "must be >= 1")
    cmd = [python, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}"]
    if nnodes > 1:
        if not rdzv_endpoint:
            raise InputError("--rdzv-endpoint", "", "needed with --nnodes > 1 (HOST:PORT of the first node)")
        cmd += [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}"]
    return cmd + ["-m", "costmodel.calibration.run", "--out", out] + list(suite_args or [])


@app.command(short_help="Run the calibration suite on this machine (torchrun).", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(ctx: typer.Context,
        out: str = typer.Option("calibration-raw.jsonl", "--out", "-o", help="JSONL file the suite writes (rank 0)."),
        nproc_per_node: Optional[int] = typer.Option(None, "--nproc-per-node", help="(default: visible GPUs; 2 CPU processes without one)"),
        nnodes: int = typer.Option(1, "--nnodes", help="Nodes (run the same command on each)."),
        rdzv_endpoint: Optional[str] = typer.Option(None, "--rdzv-endpoint", help="HOST:PORT for --nnodes > 1."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the command, do not run it."),
        force: bool = typer.Option(False, "--force", help="Replace an existing --out file (its records are lost).")):
    """Run the calibration suite here through torchrun; arguments after the options go to the suite
    (see `python -m costmodel.calibration.run --help`).  Under Slurm use
    `srun -N NODES --ntasks-per-node GPUS python -m costmodel.calibration.run --out FILE` instead."""
    from ..files import check_no_clobber, check_output
    check_output(out, "--out", stream=True)     # the suite's records: never over an input, into a missing folder
    check_no_clobber(out, "--out", force, "the suite's records")
    if nproc_per_node is not None and nproc_per_node < 1:
        raise InputError("--nproc-per-node", "", f"must be >= 1, got {nproc_per_node}")
    if nnodes < 1:
        raise InputError("--nnodes", "", f"must be >= 1, got {nnodes}")
    gpus = _visible_gpus() if nproc_per_node is None else None
    n = nproc_per_node or gpus or CPU_PROCESSES
    if gpus == 0:
        print(f"costmodel: note: no GPU visible: the suite runs on {n} CPU processes (gloo), a check of its "
              "plumbing whose records calibrate fit refuses", file=sys.stderr)
    cmd = launch_command(out, n, nnodes, rdzv_endpoint, list(ctx.args) + (["--force"] if force else []))
    # torchrun's module under this interpreter, shown as run: a torchrun on PATH may be another Python's
    print(f"costmodel: {'would run' if dry_run else 'running'}: " + " ".join(shlex.quote(c) for c in cmd),
          file=sys.stderr)
    if dry_run:
        return
    if importlib.util.find_spec("torch") is None:
        raise InputError("costmodel calibrate run", "", "needs torch: pip install '.[calibrate]' in the costmodel "
                         "checkout (or pip install torch)")
    rc = subprocess.call(cmd)
    if rc:
        raise typer.Exit(rc)


def _write_atomically(path: Path, text: str) -> None:
    """Write the profile through a temporary file renamed over ``path`` (costmodel.files)."""
    from ..files import write_atomically
    write_atomically(path, text, "-o")


def _check_named_gpus(meas, g, why: str) -> None:
    """The GPUs the inputs name (suite provenance, rank lines, trace device names) must be the one fitted: a
    catalog GPU by :func:`costmodel.fit.assembly.gpu_key_for`, a GPU file outside the catalog by its key's
    or name's model token as a word of the device name.

    Raises:
        FitError: an input names another catalog GPU, or a GPU outside the catalog.
    """
    from ..errors import FitError
    from ..fit.assembly import gpu_key_for
    suite = [r.get("gpu_name") for s in meas.suites for r in s["provenance"] if r.get("gpu_name")]
    own = {t for t in (g.key.upper().split("-")[0], str(g.name).upper().split("-")[0]) if t}
    for name in dict.fromkeys(suite + list(getattr(meas, "device_names", []) or [])):
        key = gpu_key_for(name)
        # a GPU file outside the catalog ('h20-96gb', name 'H20-96GB') is named by its model token ("NVIDIA H20")
        if key is None and own & set(name.upper().replace("-", " ").split()):
            continue
        if key != g.key:
            raise FitError(f"the inputs were measured on {name!r} ({key or 'not a catalog GPU'}), but the profile is "
                           f"for {g.key} ({why}): pass the inputs' --gpu / --cluster, or fit each GPU's files apart")


def _check_loads(text: str, files) -> None:
    """The fitted profile must load as the model reads it; a fitted value it refuses (a negative idle
    power from a bad trace) is the inputs' fault: one error naming the field and the inputs.

    Raises:
        typer.Exit: (2) after printing the error.
    """
    import tempfile
    from ..specs import load_profile
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "fitted.yaml"
        p.write_text(text, encoding="utf-8")
        try:
            load_profile(str(p))
        except InputError as e:
            msg = str(e).replace(str(p) + ": ", "").replace(str(p), "the fitted profile")
            _fit_error(f"the fit of {', '.join(map(str, files))} gives {msg}: nothing written")


def _fit_error(e) -> None:
    print(f"costmodel: error: {e}", file=sys.stderr)
    raise typer.Exit(2)


def _check_not_builtin(out: Path, base_path) -> None:
    """Refuse an output that is the base profile the fit keeps sections from, or a built-in profile of
    the catalog (hardware/profiles, regenerated by ``python -m costmodel.fit.builtin`` only): the fit
    would replace what the model and the next fit read.

    Raises:
        InputError: naming -o.
    """
    from ..specs import hardware_dir
    if not out.exists():
        return
    if base_path and os.path.samefile(out, base_path):
        raise InputError("-o", "", f"{out} is the base profile this fit keeps sections from: writing would "
                         "overwrite it; name another file (and pass it with --profile)")
    from ..fit.builtin.data import GPUS
    builtin = (hardware_dir() / "profiles").resolve()
    where = out.resolve().parent
    # the catalog's profiles are the files `python -m costmodel.fit.builtin` writes, in this install's
    # hardware/profiles or a checkout's (which the next install reads); a fit of the user's own there
    # (the README's hardware/profiles/mycluster.yaml) may be refitted
    in_catalog_dir = where == builtin or (where.name == "profiles" and where.parent.name == "hardware")
    if in_catalog_dir and out.name in {f"{g}.yaml" for g in GPUS}:
        raise InputError("-o", "", f"{out} is a built-in profile of the catalog ({where}); write the fit "
                         "elsewhere and pass it with --profile")


@app.command(short_help="Fit a profile from measurement files.")
def fit(files: List[str] = typer.Argument(None, help="Suite JSONL, nccl-tests logs, nvidia-smi CSV, dmon or -q, dcgmi dmon, rocm-smi, amd-smi (each told by its content; Zeus power-limit CSVs are read and noted unused)."),
        output: str = typer.Option(..., "--output", "-o", help="Profile YAML to write."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="Catalog GPU (default: from the suite's provenance)."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster YAML or name: NIC bandwidth for "
                                                                      "inter-node fits."),
        base: Optional[str] = typer.Option(None, "--base", help="Profile to keep uncovered sections from: "
                                                                "a file or a built-in profile's name, of the "
                                                                "measured GPU (default: the catalog profile of "
                                                                "the GPU)."),
        collective: Optional[str] = typer.Option(None, "--collective", help="Collective of nccl-tests logs that "
                                                                            "do not name it."),
        nodes: Optional[int] = typer.Option(None, "--nodes", help="Nodes of nccl-tests logs without # Rank lines."),
        gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", help="Ranks per node of such logs; GPUs per sample of an nvidia-smi CSV without an index column."),
        force: bool = typer.Option(False, "--force", help="Replace an existing -o file.")):
    """Fit a profile from measurements; print every fitted parameter with its fit quality and warn about
    outliers and what the inputs do not cover (those sections keep the base profile's values)."""
    from ..errors import FitError
    from ..fit import FitReport, base_profile, fit_profile, load_measurements, poor_fits, resolve_gpu
    from ..fit.measurements import Measurements
    from ..readers.power_trace import misread_units
    from costmodel.collective import COLLECTIVES
    from ..specs import load_cluster
    from ..specs.profile import dump_profile
    files = list(files or [])
    if not files and not base:
        raise InputError("FILES", "", "give the measurement files to fit, or --base PROFILE alone for a profile of "
                         "the cluster's GPU that borrows every section from that one")
    if not files and not (gpu or cluster):
        raise InputError("--base", "", "without measurement files, --cluster or --gpu names the GPU the profile is for")
    for f in files:
        if Path(f).is_dir():
            raise InputError(f, "", "is a directory, not a measurement file")
        if not Path(f).is_file():
            raise InputError(f, "", not_a_file(f))
    seen = {}
    for f in files:          # one capture given twice (or a copy of it) would weigh its rows twice
        key = hashlib.sha256(Path(f).read_bytes()).hexdigest()
        if key in seen:
            same = Path(f).resolve() == Path(seen[key]).resolve()
            raise InputError(f, "", f"given twice (also as {seen[key]}{'' if same else ', the same bytes'}): "
                             "each measurement once")
        seen[key] = f
    from ..files import check_no_clobber, check_output
    out = check_output(output, "-o", files + [x for x in (base, cluster) if x], stream=True)
    for flag, v in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if v is not None and v < 1:
            raise InputError(flag, "", f"must be >= 1, got {v}")
    if collective is not None and collective not in COLLECTIVES:
        raise InputError("--collective", "", f"{collective!r} is not one of {', '.join(COLLECTIVES)}")
    rep = FitReport()
    cl = load_cluster(cluster) if cluster else None
    try:
        meas = (load_measurements(files, collective, nodes, gpus_per_node, rep, cl.gpus_per_node if cl else None)
                if files else Measurements())
        # the cluster's own GPU spec (its file may name a GPU outside the catalog), else the flag or the inputs
        g, why = (cl.gpu, f"--cluster {cl.key}") if cl and not gpu else resolve_gpu(meas, gpu)
        if gpu and cl and g.key != cl.gpu.key:
            raise InputError("--gpu", "", f"{gpu} contradicts --cluster {cl.key}, whose GPUs are {cl.gpu.key}: "
                             "drop one")
        if not gpu and cl:
            why = f"--cluster {cl.key}"        # the flag that named the GPU
        _check_named_gpus(meas, g, why)
        for tr in meas.traces:
            bad = misread_units(tr, g.tdp_w, g.devices_per_package)
            if bad:
                raise FitError(f"{tr.path or 'a power trace'}: {bad} ({g.key})")
        b, bpath = base_profile(g, base)
        if b.get("gpu") != g.key:
            # the limit the base's kernels ran under is another GPU's: this GPU's own TDP stands for it
            (b.get("power") or {}).pop("kernel_limit_w", None)
            # its GEMM waves run on this GPU's SMs (new mappings: the base's own stay as they were read)
            b["gemm"] = {dt: dict(e, num_sms=g.num_sms) if isinstance(e, dict) else e
                         for dt, e in (b.get("gemm") or {}).items()}
            rep.warnings.append(f"the base profile {bpath} was fitted for {b.get('gpu')}: the sections these inputs do "
                                f"not measure price {g.key} with {b.get('gpu')}'s efficiencies, relative to {g.key}'s "
                                "own peaks and bandwidths (borrowed: measure them to replace them)")
        if not files:
            rep.warnings.append(f"no measurement file: every section is {bpath}'s, priced against {g.key}'s datasheet "
                                "peaks and bandwidths (power by the TDP ratio); predictions rest on the datasheet "
                                "until the suite's measurements replace them")
        _check_not_builtin(out, bpath)
        prof, rep = fit_profile(meas, g, why, b, bpath, cl, rep, argv=["costmodel", "calibrate", "fit"] + sys.argv[3:])
        # an entry kept from the base keeps the base's (poor) error; one fitted here at the same path
        # with another error is this capture's own, and is checked
        kept = set(poor_fits(b))
        bad = [(p, e) for p, e in poor_fits(prof) if (p, e) not in kept]
        if bad:
            raise FitError(f"{', '.join(files)}: the fit of {bad[0][0]} misses its own data (median error "
                           f"{bad[0][1]:.0%}): check the capture's units (times in us, sizes in bytes) and that it "
                           f"is the collective and GPU count it is read as; nothing written")
    except FitError as e:
        _fit_error(e)
    text = dump_profile(prof, f"# {g.key} profile fitted by `costmodel calibrate fit` from "
                              f"{len(files)} measurement file(s); see provenance and each fit: section.\n")
    _check_loads(text, files)            # before the write: a fit the model refuses never replaces a file
    # after every other check: a fit the model refuses says why, whatever the -o file
    check_no_clobber(out, "-o", force, "the fitted profile")
    _write_atomically(out, text)
    con = report.console()
    tb = Table(title=f"Fitted parameters ({g.key}, {why})", header_style="bold")
    for col in ("section", "parameters", "fit quality"):
        tb.add_column(col)
    for row in rep.rows:
        tb.add_row(*row)
    if rep.rows:                         # a profile borrowed whole fits nothing (its warnings say so)
        con.print(tb)
    for w in rep.warnings:
        con.print(f"[yellow]warning:[/] {w}", highlight=False)
    from ..files import writes_into
    con.print(f"wrote {out}" + ("" if writes_into(out) else f"  (use: costmodel predict ... --profile {out})"),
              highlight=False)          # a pipe or /dev/null is no profile to use


def _fitted_here(e: dict, d: dict) -> bool:
    """Whether entry ``e``'s fit read one of the inputs profile ``d`` was fitted from (its provenance)."""
    mine = {str(x.get("path")) for x in ((d.get("provenance") or {}).get("inputs") or []) if isinstance(x, dict)}
    return bool(mine & set(map(str, ((e.get("fit") or {}).get("inputs") or []))))


def _flat(d, pre=""):
    """Scalar leaves of a nested mapping as (dotted key, value), lists of scalars joined."""
    for k, v in d.items():
        key = f"{pre}{k}"
        if isinstance(v, dict):
            yield from _flat(v, key + ".")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                yield from _flat(x, f"{key}[{i}].")
        else:
            yield key, v


@app.command(short_help="Print a profile with its fit quality and provenance.")
def show(profile: str = typer.Argument(..., help="Profile YAML path or catalog GPU name."),
         all_fields: bool = typer.Option(False, "--all", help="Also print every fit field and note.")):
    """Print a profile: each parameter set, its fit quality (n, R^2, median/max error), where it came
    from (fitted, kept from a base, derived from another GPU) and the provenance.  A profile whose
    ``gpu`` is one slip from a catalog GPU is shown with a note naming the GPU it may mean."""
    from ..specs import load_profile
    from .common import check_profile_gpu_name
    refuse_measurement(profile)
    p = load_profile(profile, "calibrate show PROFILE")
    try:
        # predict refuses such a profile where the cluster's GPU is another; show only displays it, and a
        # GPU file of one's own may be named one edit from a catalog GPU (h200-sxm-141gb-lc)
        check_profile_gpu_name(p)
    except InputError as e:
        print(f"costmodel: note: {e.message}", file=sys.stderr)
    d = p.raw
    con = report.console()
    tb = Table(title=f"Profile {p.path}", header_style="bold",
               caption="comm protocols: NCCL protocol, latency / asymptotic busbw over the link bandwidth "
                       "(g = the group size fitted)")
    for col in ("section", "parameters", "fit quality", "origin"):
        tb.add_column(col, overflow="fold")         # a cut name would hide which entry a row is

    def origin(e):
        if e.get("kept_from"):
            return f"kept from {e['kept_from']}"
        if e.get("derived_from"):
            return f"derived from {e['derived_from']}"
        held = (e.get("fit") or {}).get("held_at_base") if isinstance(e.get("fit"), dict) else None
        if held:          # a power fit that identified only some coefficients (idle power from a trace)
            return f"fitted, except {', '.join(held)} kept from the base profile"
        return "fitted" if isinstance(e.get("fit"), dict) else "given"

    def quality(e):
        f = e.get("fit") if isinstance(e.get("fit"), dict) else {}
        parts = [f"{k.replace('_rel_err', '')} {f[k]:.1%}" if isinstance(f.get(k), float) and "err" in k
                 else f"{k} {f[k]}" for k in ("n_points", "r2", "median_rel_err", "max_rel_err",
                                                 "median_rel_err_ge_1MiB", "max_busbw_rel_err_ge_1MiB") if f.get(k) is not None]
        return " ".join(parts) or "-"
    for dt, e in (d.get("gemm") or {}).items():
        tb.add_row(f"gemm.{dt}", f"eta_max {e['eta_max']} k_half {e['k_half']} launch {e['launch_s']} s "
                                 f"tile {e['tile_m']}x{e['tile_n']}", quality(e), origin(e))
    for sec in ("hbm", "attention", "overlap"):
        e = d.get(sec)
        if isinstance(e, dict):
            params = " ".join(f"{k} {v}" for k, v in e.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
            tb.add_row(sec, params, quality(e), origin(e))
    def lines(e):
        return " ".join(f"{q['name']} {q['alpha_s'] * 1e6:.1f}us/{q['busbw_efficiency']:.3f}" for q in e["protocols"])
    for scope in ("intra_node", "inter_node"):
        for coll, e in ((d.get("comm") or {}).get(scope) or {}).items():
            g = f" (g={e['group_size']}{', ' + e['algorithm'] if e.get('algorithm') else ''})" if e.get("group_size") else ""
            tb.add_row(f"comm.{scope}.{coll}", lines(e) + g, quality(e), origin(e))
            for k, q in (e.get("by_group_size") or {}).items():
                # a group the parent kept from the base was not fitted here, whatever its own fit says
                q = q if q.get("kept_from") or not e.get("kept_from") or _fitted_here(q, d) else \
                    dict(q, kept_from=e["kept_from"])
                tb.add_row(f"comm.{scope}.{coll} groups of {k}",
                           f"{lines(q)} (g={k}, {q.get('algorithm') or e.get('algorithm', '')})", quality(q), origin(q))
    for sec in ("power", "thermal"):
        e = d.get(sec)
        if isinstance(e, dict):
            params = " ".join(f"{k} {v}" for k, v in e.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
            tb.add_row(sec, params, quality(e), origin(e))
    con.print(tb)
    pv = d.get("provenance") or {}
    tp = Table(title="Provenance", header_style="bold", show_lines=False)
    tp.add_column("field")
    tp.add_column("value", overflow="fold")
    for k, v in _flat(pv):
        if k.startswith("warnings") or k.startswith("notes") or v is None or v == []:
            continue                 # what the inputs did not record (an nccl-tests log prints no driver)
        tp.add_row(k, ", ".join(map(str, v)) if isinstance(v, list) else str(v))
    con.print(tp)
    for w in pv.get("warnings") or []:
        con.print(f"[yellow]fit warning:[/] {w}", highlight=False)
    for n in pv.get("notes") or []:
        con.print(f"note: {n}", highlight=False)
    if all_fields:
        for k, v in _flat({s: d[s] for s in d if s != "provenance"}):
            con.print(f"{k}: {v}", highlight=False, markup=False)
