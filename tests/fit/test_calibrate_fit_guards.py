"""`costmodel calibrate fit` / `show` refusing inputs that cannot calibrate the GPU they are fitted for:
a CPU run of the suite, rates beyond the datasheet, a collective fit that explains none of its capture,
a capture in the wrong time unit, nccl-tests logs whose topology is not given, a profile naming no
catalog GPU, and a rebased profile whose in-node and cross-node lines disagree.

Every input is synthetic, written to ``tmp_path``."""
import numpy as np
import pytest
import yaml

from costmodel.readers.suite_jsonl import make_record
from test_calibrate import cli, provenance, write_jsonl

H100 = "NVIDIA H100 80GB HBM3"


def nccl_log(path, times_us, sizes=None, ranks=8, rank_lines=True, name=H100, coll="all_reduce", nodes=1,
             binary=True):
    """Write an nccl-tests ``<coll>_perf`` stdout of ``nodes`` nodes: ``# Rank`` lines (``ranks`` GPUs
    named ``name``, split evenly over hosts gpu-a01...) unless ``rank_lines`` is false, then one row per
    size (bytes, default 8 B doubling) with out-of-place and in-place time ``times_us`` and the
    algbw/busbw nccl-tests prints from them; without ``binary`` no line names the ``*_perf`` test."""
    sizes = sizes or [8 * 2 ** i for i in range(len(times_us))]
    factor = {"all_reduce": 2 * (ranks - 1) / ranks}.get(coll, (ranks - 1) / ranks)
    head = ["# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105",
            f"# Collective test starting: {coll}_perf" if binary else "#",
            f"# nThread 1 nGpus 1 minBytes 8 maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 iters: 20",
            "#", "# Using devices"]
    if rank_lines:
        per = ranks // nodes
        head += [f"#  Rank {r:2d} Group  0 Pid  {40000 + r} on    gpu-a{1 + r // per:02d} device {r % per:2d} "
                 f"[0x{18 + 16 * (r % per):x}] {name}" for r in range(ranks)]
    head += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
             "algbw   busbw #wrong",
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
             "(GB/s)       "]
    rows = []
    for n, t in zip(sizes, times_us):
        alg = n / (t * 1e3)
        cell = f"{t:9.2f} {alg:7.2f} {alg * factor:7.2f}      0"
        rows.append(f"{n:12d} {n // 4:13d}     float     sum      -1 {cell} {cell}")
    path.write_text("\n".join(head + rows + ["# Avg bus bandwidth    : 1.0", "#"]) + "\n")
    return path


# ------------------------------------------------------------------ a latency-bound sweep is fitted
def test_a_flat_latency_bound_sweep_is_fitted_not_held_at_the_base_s_slow_ll_line(tmp_path):
    """An 8-GPU all-reduce flat at 24 us from 8 B to 512 KiB: the H100 base's LL line (1.5 % of the
    link) climbs to 136 us at 512 KiB, and holding its efficiency had written a fit of R2 -105 that
    missed its own rows by 23-33 %; LL's efficiency is now fitted, the rows come back within 5 %."""
    rng = np.random.default_rng(0)
    sizes = [8 * 2 ** i for i in range(17)]
    # 24 us, plus the bus bytes at 80 % of the 450 GB/s NVLink (2.5 us at 512 KiB), +-0.4 us of timer spread
    times = [24.0 + 1.75 * n / (0.8 * 450e3) + rng.uniform(-0.4, 0.4) for n in sizes]
    log = nccl_log(tmp_path / "flat_all_reduce_perf.log", times, sizes)
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(log), "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 0, se
    e = yaml.safe_load(out.read_text())["comm"]["intra_node"]["all_reduce"]
    assert e["fit"]["max_rel_err"] < 0.05 and e["fit"]["median_rel_err"] < 0.03, e["fit"]
    ll = e["protocols"][0]
    assert ll["name"] == "LL" and ll["alpha_s"] == pytest.approx(24e-6, rel=0.05) and ll["busbw_efficiency"] > 0.3
    assert "LL's latency and efficiency fitted" in e["fit"]["method"]
    # Simple's line is still the base profile's: the sweep never reaches it
    base = yaml.safe_load(open(__import__("test_calibrate").REPO / "hardware/profiles/h100-sxm-80gb.yaml"))
    assert e["protocols"][-1] == base["comm"]["intra_node"]["all_reduce"]["protocols"][-1]


def test_a_collective_fit_worse_than_the_capture_s_mean_is_refused():
    """R2 below 0 and a row missed by more than 10 %: refused, naming the inputs and the section; a flat
    capture's R2 dipping under 0 at a 3 % error is not."""
    from costmodel.errors import FitError
    from costmodel.fit.comm import _check_explains
    bad = dict(n_points=17, r2=-104.7, median_rel_err=0.075, max_rel_err=0.496, inputs=["x_all_reduce_perf.log"])
    with pytest.raises(FitError, match=r"x_all_reduce_perf.log: comm.intra_node.all_reduce: the fit explains none "
                                       r"of its 17 measured times \(R2 -104.7, median error 8%, max 50%\)"):
        _check_explains("comm.intra_node.all_reduce", bad, [8 * 2 ** i for i in range(17)])
    _check_explains("comm.intra_node.all_reduce", dict(bad, r2=-0.2, median_rel_err=0.01, max_rel_err=0.03),
                    [8 * 2 ** i for i in range(17)])
    # two sizes: a line misses them only where held at a bound, which the bound's own warning reports
    _check_explains("comm.intra_node.all_reduce", dict(bad, n_points=2), [2 ** 20, 2 ** 30])


# ------------------------------------------------------------------------- a suite run without a GPU
def _hbm(bytes_per_s, op="copy", nbytes=2 ** 30):
    """A suite HBM record moving ``nbytes`` at ``bytes_per_s``."""
    return make_record("hbm", "node0", 0, op=op, bytes=nbytes, time_s=nbytes / bytes_per_s, bytes_per_s=bytes_per_s,
                       iters=20, t_start_unix=0.0, t_end_unix=0.0)


def test_a_suite_run_on_cpu_is_refused_naming_the_file_and_the_provenance_field(tmp_path):
    """The suite's CPU smoke run (device cpu, backend gloo, gpu_name null) had been fitted as an H100's
    (HBM efficiency 0.007, predictions 20x slow) with a warning: now refused, nothing written."""
    cpu = dict(provenance(gpu_name=None, device="cpu"), backend="gloo")
    raw = write_jsonl(tmp_path / "cpu_quick.jsonl", [cpu, _hbm(23e9), _hbm(24e9, "triad")])
    out = tmp_path / "p.yaml"
    for extra in (["--gpu", "h100-sxm-80gb"], []):
        rc, so, se = cli("calibrate", "fit", str(raw), *extra, "-o", str(out))
        assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
        assert f"{raw}:1: provenance device 'cpu', backend 'gloo', gpu_name null: the suite ran without a GPU" in se
        assert "measurements not taken on a GPU cannot calibrate one" in se
    # gloo on a CUDA device is no NCCL measurement either
    gloo = write_jsonl(tmp_path / "gloo.jsonl", [dict(provenance(), backend="gloo"), _hbm(2.9e12)])
    rc, so, se = cli("calibrate", "fit", str(gloo), "-o", str(out))
    assert rc == 2 and f"{gloo}:1: provenance device 'cuda', backend 'gloo'" in se, se
    assert "its collectives ran over gloo, not NCCL" in se and "ran without a GPU" not in se


def test_an_hbm_efficiency_far_below_the_datasheet_is_refused(tmp_path):
    """Copies at 0.1 of the H100's 3.35 TB/s are no HBM: refused naming the file, as 1.58 (above the
    datasheet) is refused by the profile loader; 0.85 is fitted."""
    out = tmp_path / "p.yaml"
    slow = write_jsonl(tmp_path / "slow.jsonl", [provenance(), _hbm(0.335e12), _hbm(0.33e12, "triad")])
    rc, so, se = cli("calibrate", "fit", str(slow), "-o", str(out))
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert f"{slow}: hbm: the copies ran at 0.099 of h100-sxm-80gb's datasheet 3.35 TB/s" in se
    assert "under the 0.2 no GPU's HBM runs at" in se
    ok = write_jsonl(tmp_path / "ok.jsonl", [provenance(), _hbm(2.85e12), _hbm(2.9e12, "triad")])
    rc, so, se = cli("calibrate", "fit", str(ok), "-o", str(out))
    assert rc == 0, se
    assert yaml.safe_load(out.read_text())["hbm"]["efficiency"] == pytest.approx(0.858, abs=0.002)


# ------------------------------------------------------------------------ GEMMs beyond the datasheet
def _gemms(eta, shapes=None, launch_s=5e-6):
    """Suite bf16 GEMM records timed as ``2 m n k / (eta x 989.4 TFLOP/s) + launch_s`` (the H100 SXM's
    dense BF16 peak)."""
    shapes = shapes or [(m, n, k) for m in (1024, 4096, 8192) for n in (1024, 4096, 8192) for k in (1024, 8192)]
    out = []
    for m, n, k in shapes:
        t = 2.0 * m * n * k / (eta * 989.4e12) + launch_s
        out.append(make_record("gemm", "node0", 0, dtype="bf16", b=1, m=m, n=n, k=k, time_s=t,
                               flops_per_s=2.0 * m * n * k / t, iters=20, source="grid", t_start_unix=0.0,
                               t_end_unix=0.0))
    return out


def test_gemms_faster_than_the_datasheet_peak_are_refused(tmp_path):
    """An 8192^3 GEMM timed at 1.3x the H100's 989 TFLOP/s had been fitted with eta_max clamped to 1.000
    and no word: refused, naming the file, line, shape and rate."""
    recs = [provenance()] + _gemms(0.8)
    fast = 2.0 * 8192 ** 3 / (1.3 * 989.4e12)
    recs.append(make_record("gemm", "node0", 0, dtype="bf16", b=1, m=8192, n=8192, k=8192 * 2, time_s=2 * fast,
                            flops_per_s=1.3 * 989.4e12, iters=20, source="grid", t_start_unix=0.0, t_end_unix=0.0))
    raw = write_jsonl(tmp_path / "fast.jsonl", recs)
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(raw), "-o", str(out))
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert (f"{raw}:{len(recs)}: gemm bf16 8192x8192x16384 ran at 1286 TFLOP/s, 1.30x h100-sxm-80gb's datasheet "
            "dense bf16 peak 989.4 TFLOP/s (1 of 19 bf16 GEMMs above it by more than 2%)") in se
    # 1 % above the peak is within the timer's and the boost clock's tolerance
    ok = write_jsonl(tmp_path / "ok.jsonl", [provenance()] + _gemms(0.8)[:-1] + _gemms(1.01, [(8192, 8192, 8192)], 0.0))
    rc, so, se = cli("calibrate", "fit", str(ok), "-o", str(out))
    assert rc == 0, se


def test_a_gemm_fit_pinned_at_the_datasheet_peak_warns(tmp_path):
    """GEMMs timed at the full datasheet peak: eta_max sits at its bound 1, which the fit now says."""
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(write_jsonl(tmp_path / "peak.jsonl", [provenance()] + _gemms(1.0))),
                     "-o", str(out))
    assert rc == 0, se
    assert yaml.safe_load(out.read_text())["gemm"]["bf16"]["eta_max"] == pytest.approx(1.0, abs=1e-3)
    assert "gemm.bf16: eta_max 1.000 sits at its bound 1 (the datasheet dense peak)" in " ".join((so + se).split())
    real = write_jsonl(tmp_path / "real.jsonl", [provenance()] + _gemms(0.8))
    before = out.read_text()
    # the first profile is kept unless --force says to replace it
    rc, so, se = cli("calibrate", "fit", str(real), "-o", str(out))
    assert rc == 2 and f"-o: {out} exists: writing the fitted profile would replace it; give --force" in se
    assert out.read_text() == before
    rc, so, se = cli("calibrate", "fit", str(real), "-o", str(out), "--force")
    assert rc == 0 and "sits at its bound 1" not in so + se, se
    assert yaml.safe_load(out.read_text())["gemm"]["bf16"]["eta_max"] < 0.9


# ------------------------------------------------------------------------ a capture in milliseconds
def _ms_capture(path, ranks=8, nodes=1, link_gbs=450.0):
    """An all-reduce 8 B..8 GiB whose times (and the algbw printed from them) are in ms under the (us)
    header: 25 us plus the bus bytes at 80 % of ``link_gbs`` GB/s, written / 1000."""
    sizes = [8 * 2 ** i for i in range(31)]
    f = 2 * (ranks - 1) / ranks
    return nccl_log(path, [(25.0 + f * n / (0.8 * link_gbs * 1e3)) / 1e3 for n in sizes], sizes, ranks=ranks,
                    nodes=nodes)


def test_a_capture_in_milliseconds_is_refused_naming_the_file_and_the_unit(tmp_path):
    """A whole capture in ms (algbw agreeing with the times, so no row is a bad line) had been refused
    with a busbw efficiency at its bound and no file named; now the file, the fastest row and the unit."""
    out = tmp_path / "p.yaml"
    log = _ms_capture(tmp_path / "allms_all_reduce_perf.log")
    rc, so, se = cli("calibrate", "fit", str(log), "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert f"{log}: comm.intra_node.all_reduce: at 8192 MiB the capture took" in se, se
    assert "x faster than the 450 GB/s link at busbw efficiency 1.2 allows" in se
    assert "its times are in another unit than the header's (us) (milliseconds?)" in se
    # across 2 nodes: the in-node floor names the capture and the unit too
    log2 = _ms_capture(tmp_path / "allms2_all_reduce_perf.log", ranks=16, nodes=2, link_gbs=50.0)
    rc, so, se = cli("calibrate", "fit", str(log2), "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert f"{log2}: comm.inter_node.all_reduce: at " in se and "(milliseconds?)" in se, se


def test_a_collective_at_its_lower_bound_names_the_capture(tmp_path):
    """The refusals of a busbw efficiency at a bound name the capture they are about."""
    from costmodel.errors import FitError
    from costmodel.fit.primitives import warn_at_bound
    from costmodel.fit import FitReport
    from costmodel.specs.params import CollectiveParams
    slow = CollectiveParams.from_protocols([(2e-5, 0.01), (4e-5, 0.02)])
    with pytest.raises(FitError, match=r"^x_perf.log: comm.intra_node.all_reduce: busbw efficiency 0.0200 is under 5 %"):
        warn_at_bound("comm.intra_node.all_reduce", slow, 1.0, FitReport(), [8, 2 ** 20, 2 ** 30], ["x_perf.log"])


# ------------------------------------------------------------- nccl-tests logs without their topology
def _sweep(path, **kw):
    """An 8-GPU all-reduce 8 B..8 GiB: 25 us plus the bus bytes at 80 % of 450 GB/s."""
    sizes = [8 * 2 ** i for i in range(31)]
    return nccl_log(path, [25.0 + 1.75 * n / (0.8 * 450e3) for n in sizes], sizes, **kw)


def test_a_capture_without_rank_lines_needs_nodes_and_gpus_per_node(tmp_path):
    """Without '# Rank' lines the fit had split the ranks busbw/algbw implies by the cluster's GPUs per
    node; the README says it refuses without --nodes and --gpus-per-node, and now it does, naming the
    flags missing."""
    log = _sweep(tmp_path / "norank_all_reduce_perf.log", rank_lines=False)
    out = tmp_path / "p.yaml"
    fit = ("calibrate", "fit", str(log), "--cluster", "dgx-h100", "-o", str(out))
    rc, so, se = cli(*fit)
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert f"{log}: nccl-tests capture has no '# Rank' lines to tell its topology: pass --nodes and --gpus-per-node" in se
    rc, so, se = cli(*fit, "--nodes", "1")
    assert rc == 2 and "to tell its topology: pass --gpus-per-node (the run's nodes" in se, se
    rc, so, se = cli(*fit, "--nodes", "1", "--gpus-per-node", "8")
    assert rc == 0, se
    fitted = yaml.safe_load(out.read_text())["comm"]["intra_node"]["all_reduce"]
    assert fitted["group_size"] == 8 and fitted["fit"]["n_points"] == 31


def test_a_capture_naming_no_collective_needs_the_collective_flag(tmp_path):
    """No *_perf line and no collective in the file name: --collective, not a reading of busbw/algbw."""
    log = _sweep(tmp_path / "capture.log", binary=False)
    out = tmp_path / "p.yaml"
    fit = ("calibrate", "fit", str(log), "--cluster", "dgx-h100", "-o", str(out))
    rc, so, se = cli(*fit)
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert (f"{log}: nccl-tests capture does not say which collective it measured (no *_perf command line and no "
            "collective in the file name): pass --collective") in se
    rc, so, se = cli(*fit, "--collective", "all_reduce")
    assert rc == 0, se


# ------------------------------------------------------------------ calibrate show of a misspelt GPU
def test_show_names_the_gpu_a_profile_s_slip_may_mean(tmp_path):
    """A profile saying gpu: h100-sxm-80gbb had been shown without a word while predict refuses it; show
    says which GPU it may mean, and still shows it (a GPU file of one's own may be named one edit from a
    catalog GPU, h200-sxm-141gb-lc)."""
    from test_calibrate import REPO
    text = (REPO / "hardware/profiles/h100-sxm-80gb.yaml").read_text()
    assert "\ngpu: h100-sxm-80gb\n" in text
    typo = tmp_path / "typo_gpu.yaml"
    typo.write_text(text.replace("\ngpu: h100-sxm-80gb\n", "\ngpu: h100-sxm-80gbb\n", 1))
    rc, so, se = cli("calibrate", "show", str(typo))
    assert rc == 0 and "comm.intra_node.all_reduce" in so, se
    assert ("costmodel: note: 'h100-sxm-80gbb' is no GPU of the catalog; did you mean h100-sxm-80gb? (the GPU the "
            "profile was fitted for)") in se
    ok = tmp_path / "ok.yaml"
    ok.write_text(text)
    rc, so, se = cli("calibrate", "show", str(ok))
    assert rc == 0 and "comm.intra_node.all_reduce" in so, se


# ------------------------------------------------------- a --base refit of the node keeps its cross-node
def test_a_base_refit_of_a_slower_node_is_checked_against_the_base_s_cross_node_fit(tmp_path):
    """A profile fitted in one call from an 8-GPU and a 2-node capture, then refitted with --base from a
    slower 8-GPU capture alone: the base's cross-node line was fitted to a capture the slower node could
    not have run (its in-node part alone takes longer), which a one-call fit of the two refuses; the
    --base refit had written it, now it is refused alike, naming the base profile and both captures."""
    from costmodel.collectives_table import capture_time_s
    from costmodel.specs import load_cluster, load_profile
    sizes = [8 * 2 ** i for i in range(31)]

    def node(path, eff):
        return nccl_log(path, [25.0 + 1.75 * n / (eff * 450e3) for n in sizes], sizes)
    fast, slow = node(tmp_path / "fast_all_reduce_perf.log", 1.0), node(tmp_path / "slow_all_reduce_perf.log", 0.1)
    # 16 ranks on 2 nodes at half the speed the built-in H100 profile prices them on dgx-h100 (a slower fabric)
    t = 2 * capture_time_s("all_reduce", sizes, 8, 2, load_cluster("dgx-h100"), load_profile("h100-sxm-80gb"))
    cross = nccl_log(tmp_path / "x_all_reduce_perf.log", list(t * 1e6), sizes, ranks=16, nodes=2)
    base = tmp_path / "base.yaml"
    rc, so, se = cli("calibrate", "fit", str(fast), str(cross), "--cluster", "dgx-h100", "-o", str(base))
    assert rc == 0, se
    out = tmp_path / "rebased.yaml"
    rc, so, se = cli("calibrate", "fit", str(slow), str(cross), "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 2 and "the capture is faster than the link" in se and not out.exists(), se     # one call
    rc, so, se = cli("calibrate", "fit", str(slow), "--cluster", "dgx-h100", "--base", str(base), "-o", str(out))
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists(), se
    assert (f"{base}: comm.inter_node.all_reduce (fitted on {cross}, 2 nodes x 8 GPUs) ran faster than its in-node "
            f"part alone takes with this fit's intra-node all_reduce ({slow})") in se
    rc, so, se = cli("calibrate", "fit", str(node(tmp_path / "same_all_reduce_perf.log", 0.95)), "--cluster",
                     "dgx-h100", "--base", str(base), "-o", str(out))
    assert rc == 0, se
