"""calibrate fit on inputs a user's own cluster gives it: a suite record with a field of the wrong
type, a section whose every record is bad, suite data of another GPU, a misspelled nvidia-smi column,
an nccl-tests row printing 0.00 GB/s beside a real time, a file name that names another collective
than its rows, two runs in one suite file, and a protocol a fitted group size lacks."""
import warnings

import numpy as np
import pytest

from costmodel.collective import CollectiveParams, collective_time_s
from costmodel.comm import _between
from costmodel.errors import FitError
from costmodel.fit.measurements import FitReport, capture_inputs
from costmodel.readers.nccl_tests import collective_from_name, read_nccl_tests
from costmodel.readers.nvidia_smi import read_nvidia_smi_csv
from costmodel.readers.suite_jsonl import make_record, read_suite_jsonl

from test_calibrate import P5, cli, provenance, write_jsonl


def _gemm(m=512, n=256, k=2048, time_s=6e-6, bad=None):
    """A suite GEMM record of that shape and time, with the fields of ``bad`` then set as given."""
    rec = make_record("gemm", "node0", 0, dtype="bf16", b=1, m=m, n=n, k=k, time_s=time_s,
                      flops_per_s=2.0 * m * n * k / time_s, iters=20, source="grid", t_start_unix=0.0, t_end_unix=0.0)
    return dict(rec, **(bad or {}))


def test_a_suite_field_of_the_wrong_type_is_a_named_bad_line(tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", [provenance(), _gemm(bad={"m": "512"}), _gemm(bad={"m": None}),
                                          _gemm(bad={"dtype": 16}), _gemm(bad={"m": 0}), _gemm(k=4096)])
    run = read_suite_jsonl(f)
    assert [e.split(": ", 1)[1] for e in run.errors] == [
        "gemm record: m '512' is not a whole number >= 1", "gemm record: m None is not a whole number >= 1",
        "gemm record: dtype 16 is not a name (a JSON string)", "gemm record: m 0 is not a whole number >= 1"]
    assert [r["k"] for r in run["gemm"]] == [4096]


def test_a_section_whose_every_record_is_bad_stops_the_fit(tmp_path):
    recs = [provenance()] + [_gemm(m=256 * i, time_s=6e-6 * i) for i in range(1, 5)]
    ms = write_jsonl(tmp_path / "ms.jsonl", [r if r["kind"] != "gemm" else dict(r, time_s=r["time_s"] * 1e3)
                                             for r in recs])
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(ms), str(P5), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "-o", str(out))
    assert rc == 2 and f"{ms}: all 4 gemm record(s) rejected, none usable" in se and "a time not in seconds?" in se, se
    assert not out.exists()


def test_suite_data_of_another_gpu_than_the_cluster_s_is_refused(tmp_path):
    f = write_jsonl(tmp_path / "a100.jsonl", [provenance(gpu_name="NVIDIA A100-SXM4-80GB"), _gemm()])
    rc, so, se = cli("calibrate", "fit", str(f), str(P5), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(tmp_path / "p.yaml"))
    assert rc == 2 and "measured on 'NVIDIA A100-SXM4-80GB' (a100-sxm-80gb), but the profile is for h100-sxm-80gb" in se


def test_two_runs_in_one_suite_file_are_refused_and_a_repeated_shape_left_out(tmp_path):
    end = make_record("end", "node0", 0, finished_unix=1.0, n_records=2)
    one = [provenance(), _gemm(), end]
    with pytest.raises(ValueError, match=r"s\.jsonl:4: a record after the run's 'end' record \(line 3\)"):
        read_suite_jsonl(write_jsonl(tmp_path / "s.jsonl", one + one))
    run = read_suite_jsonl(write_jsonl(tmp_path / "d.jsonl", [provenance(), _gemm(), _gemm(time_s=1.2e-5), end]))
    assert len(run["gemm"]) == 1 and run["gemm"][0]["time_s"] == 6e-6
    assert "d.jsonl:3: gemm dtype bf16, b 1, m 512, n 256, k 2048 of rank 0 again (first at line 2)" in run.errors[0]


def test_a_misspelled_nvidia_smi_field_is_refused_naming_the_field_it_means(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("timestamp, index, power.drw [W], temperature.gpu\n2026/11/30 10:00:00.000, 0, 70.95 W, 34\n")
    with pytest.raises(ValueError, match=r"p\.csv:1: header field 'power\.drw' .* did you mean 'power\.draw'"):
        read_nvidia_smi_csv(f)
    f.write_text("timestamp, index, power.draw [W], power.limit [W]\n2026/11/30 10:00:00.000, 0, 70.95 W, 700.00 W\n")
    assert read_nvidia_smi_csv(f).fields == ["timestamp", "index", "power.draw", "power.limit"]


def test_a_row_printing_zero_bandwidth_beside_a_real_time_is_left_out_named(tmp_path):
    text = P5.read_text().replace("870.3  154.22  289.16", "870.3    0.00    0.00")
    f = tmp_path / "all_reduce_perf.txt"
    f.write_text(text)
    t = read_nccl_tests(f, strict=False)
    assert any("134217728 B in 870.3 us is 154.2 GB/s" in e for e in t.errors)
    assert 134217728 not in {r.size_bytes for r in t.select("out-of-place")}
    # the tiny rows' 0.00 (8 B in 69 us: 0.0001 GB/s) stay
    assert 8 in {r.size_bytes for r in t.select("out-of-place")}


def test_a_collective_is_named_from_the_start_of_a_word_and_must_match_the_redop_column(tmp_path):
    assert collective_from_name("small_reduce_scatter_perf_8xh100.log") == "reduce_scatter"
    assert collective_from_name("ncclAllReduce") == "all_reduce"
    # the p5 all-reduce capture without the lines naming its test, its busbw halved to the (g-1)/g of
    # all_gather and reduce_scatter over 16 ranks (a composition), its redop sum kept: named all_gather
    rows = "\n".join(_halved(ln) for ln in P5.read_text().splitlines() if "_perf" not in ln and "All_reduce" not in ln)
    g = tmp_path / "all_gather_perf.txt"
    g.write_text(rows)
    with pytest.raises(FitError, match="redop sum, which all_gather does not"):
        capture_inputs(g, read_nccl_tests(g, strict=False), None, 2, 8, FitReport())
    h = tmp_path / "reduce_scatter_perf.txt"
    h.write_text(rows.replace("  sum  ", "  none  "))
    with pytest.raises(FitError, match="redop none, which reduce_scatter never prints"):
        capture_inputs(h, read_nccl_tests(h, strict=False), None, 2, 8, FitReport())


def _halved(line: str) -> str:
    """An nccl-tests data row (after a rank prefix) with both busbw columns halved; other lines as they are."""
    f = line.split()
    if len(f) == 14 and f[1].isdigit():
        f[8], f[12] = f"{float(f[8]) / 2:.2f}", f"{float(f[12]) / 2:.2f}"
        return "  ".join(f)
    return line


def test_a_protocol_a_group_size_lacks_prices_as_unusable_without_numpy_warnings():
    inf = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _between(np.array([1.0, inf, 1.0, 2.0]), np.array([3.0, 3.0, inf, 4.0]), np.array([0.5, 0.5, 0.0, 0.0]))
        p = CollectiveParams.lines(0.0, ((np.array([1e-5]), np.array([0.8])), (np.array([inf]), np.array([0.0]))))
        t = collective_time_s("all_reduce", np.array([1e8]), np.array([8.0]), np.array([450e9]), p)
    assert list(got) == [2.0, inf, 1.0, 2.0]
    assert np.isfinite(t).all() and t[0] > 0


def test_a_capture_a_thousand_times_slower_than_the_links_writes_no_profile(tmp_path):
    """The p5 all-reduce capture with every time x1000 and its bandwidths /1000 (consistent columns: a
    capture in ms relabelled, or of another machine): a fit pinned at 5 % of the link would price every
    layout with it; it is refused and nothing is written."""
    def slow(line):
        f = line.split()
        if len(f) == 14 and f[1].isdigit():
            f[6], f[10] = f"{float(f[6]) * 1e3:.1f}", f"{float(f[10]) * 1e3:.1f}"
            for j in (7, 8, 11, 12):
                f[j] = f"{float(f[j]) / 1e3:.4f}"
            return "  ".join(f)
        return line
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text("\n".join(slow(ln) for ln in P5.read_text().splitlines()) + "\n")
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(p), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "-o",
                     str(out))
    assert rc == 2 and "comm.inter_node.all_reduce: busbw efficiency" in se and "under 5 % of the link" in se, se
    assert not out.exists()


def test_a_gemm_dtype_spelt_as_torch_spells_it_is_refused_naming_the_catalog_s_name(tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", [provenance(), _gemm(bad={"dtype": "bfloat16"})])
    rc, so, se = cli("calibrate", "fit", str(f), "--cluster", "aws-p5", "-o", str(tmp_path / "p.yaml"))
    assert rc == 2 and f"{f}:2: gemm dtype 'bfloat16' is no dtype name of the catalog" in se and "write 'bf16'" in se


def test_a_cluster_or_gpu_file_given_as_a_profile_is_named_for_what_it_is():
    rc, so, se = cli("calibrate", "show", "hardware/clusters/dgx-h100.yaml")
    assert rc == 2 and "is a cluster file (gpus_per_node" in se and "give it as --cluster" in se
    rc, so, se = cli("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--profile",
                     "hardware/gpus/h100-sxm-80gb.yaml")
    assert rc == 2 and "is a GPU file" in se


def test_a_utf16_capture_is_named_as_such(tmp_path):
    p = tmp_path / "all_reduce_perf.txt"
    p.write_bytes(P5.read_text().encode("utf-16"))
    rc, so, se = cli("calibrate", "fit", str(p), "--cluster", "aws-p5", "-o", str(tmp_path / "p.yaml"))
    assert rc == 2 and "UTF-16 text" in se and "convert it to UTF-8" in se


def test_a_capture_nccl_tests_declared_failed_without_failing_rows_is_refused(tmp_path):
    """'# Out of bounds values : 3 FAILED' with every row's #wrong 0 had been fitted silently: the rows that
    broke cannot be told apart, so the capture is refused naming its trailer's line; an OK trailer reads."""
    from pathlib import Path
    from costmodel.readers.registry import read_measurement
    from costmodel.errors import CostmodelError
    src = Path(__file__).resolve().parents[1] / "data" / "readers" / "nccl_tests_oci_a100_16ranks_2nodes.txt"
    text = src.read_text()
    assert read_nccl_tests(src).meta["failed_lines"] == []
    bad = tmp_path / "all_reduce_perf.txt"
    bad.write_text(text.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED"))
    assert read_nccl_tests(bad).meta["failed_lines"] == [59]
    with pytest.raises(CostmodelError, match="line 59: nccl-tests declares the test FAILED"):
        read_measurement(bad)
