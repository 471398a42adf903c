"""Readers of the public measurement files (costmodel/readers) on the real copies in hardware/profiles/data."""
from pathlib import Path

import pytest

from costmodel.readers import (NcclTestsParseError, parse_quantity, read_allreduce_bench, read_azure_results,
                                 read_mamf, read_massaged_nccl_table, read_mlengineering_nvls, read_nccl_tests,
                                 read_xla_collective_table, read_xla_matmul_table)

DATA = Path(__file__).resolve().parents[2] / "hardware" / "profiles" / "data"
P5 = DATA / "aws_p5_2node_16xH100_allreduce.txt"


def test_nccl_reader_parses_aws_p5():
    t = read_nccl_tests(P5)
    assert t.errors == []
    oop = t.select("out-of-place", table=0)
    assert len(oop) == 32 and len(t.select("in-place", table=0)) == 32
    assert (oop[0].size_bytes, oop[-1].size_bytes) == (8, 16 * 2 ** 30)
    by_size = {r.size_bytes: r for r in oop}
    assert by_size[2 ** 30].busbw == pytest.approx(436.95)
    assert by_size[2 ** 30].time_us == pytest.approx(4607.6)
    assert by_size[16 * 2 ** 30].busbw == pytest.approx(487.09)
    assert t.select("in-place", table=0)[-1].busbw == pytest.approx(487.26)
    # second capture ("[1,0]<stdout>:" prefix, '...' elision) is a separate table
    t1 = t.select("out-of-place", table=1)
    assert [r.size_bytes for r in t1] == [0, 2 ** 26, 2 ** 27, 2 ** 28, 2 ** 29, 2 ** 30, 2 ** 31]
    assert t1[-1].busbw == pytest.approx(437.79)
    assert len(t.rows) == 2 * (32 + 7)


def test_nccl_reader_truncated_line_names_file_and_line_and_keeps_good_rows(tmp_path):
    lines = P5.read_text().splitlines()
    bad = next(i for i, ln in enumerate(lines) if ln.startswith("0:      2097152"))
    lines[bad] = lines[bad][:60]  # cut inside the out-of-place columns
    f = tmp_path / "truncated.txt"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(NcclTestsParseError) as ei:
        read_nccl_tests(f)
    msg = str(ei.value)
    assert f"{f}:{bad + 1}:" in msg and "truncated" in msg
    assert len(ei.value.rows) == 2 * (32 + 7) - 2
    assert 2097152 not in {r.size_bytes for r in ei.value.rows if r.table == 0}
    lenient = read_nccl_tests(f, strict=False)
    assert len(lenient.errors) == 1 and len(lenient.rows) == len(ei.value.rows)


def test_nccl_reader_non_numeric_field(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                 "   1024  256 float sum -1 10.0 0.1 0.2 0 10.0 0.1 0.2 0\n"
                 "   2048  512 float sum -1 abc 0.1 0.2 0 10.0 0.1 0.2 0\n")
    with pytest.raises(NcclTestsParseError, match=r"x\.txt:3: non-numeric"):
        read_nccl_tests(f)


def test_nccl_reader_refuses_a_damaged_rank_range_without_expanding_it(tmp_path):
    """An abbreviated 'Rank a .. Rank b' line with a damaged bound is a bad line named FILE:LINE (it once
    expanded into one record per rank: 10^23 of them, until the process ran out of memory)."""
    src = (Path(__file__).resolve().parents[1] / "data" / "readers" / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt")
    good = read_nccl_tests(src)
    assert good.meta["n_ranks"] == 16
    for bound in ("99999999999999999999999", "3"):          # far too many ranks; a range that runs backwards
        f = tmp_path / "range.txt"
        f.write_text(src.read_text().replace("Rank  8 .. Rank 15", f"Rank  8 .. Rank {bound}"))
        with pytest.raises(NcclTestsParseError, match=rf"range\.txt:7: rank range 8 \.\.\. {bound} is not a range"):
            read_nccl_tests(f)
        lenient = read_nccl_tests(f, strict=False)
        assert len(lenient.errors) == 1 and len(lenient.rows) == len(good.rows)


def test_other_nccl_formats():
    sr = read_nccl_tests(DATA / "liplus_a100_8gpu_sendrecv.txt").select()
    assert [r.busbw for r in sr] == [110.81, 188.60, 192.75, 195.10]
    iss = read_nccl_tests(DATA / "github_issue_excerpts_partial_tables.txt")  # old format without root column
    assert {(r.size_bytes, r.busbw) for r in iss.rows if r.placement == "out-of-place"} >= {
        (524288000, 334.90), (268435456, 4.33), (536870912, 0.51)}
    m = read_massaged_nccl_table(DATA / "mlengineering_a100_8gpu_nvlink_allreduce.txt")
    assert len(m) == 20 and m[0]["size_bytes"] == 32768 and m[-1]["busbw"] == 234.89


def test_xla_tables():
    mm = read_xla_matmul_table(DATA / "xla_matmul_perf_table_sm90_sm100.csv", "sm_90")
    assert len(mm) == 375
    r = next(x for x in mm if (x["b"], x["m"], x["n"], x["k"]) == (4, 4096, 2048, 4096))
    assert r["flops_per_s"] == pytest.approx(8.05e14, rel=1e-3)
    assert r["time_s"] == pytest.approx(2 * 4 * 4096 * 2048 * 4096 / r["flops_per_s"])
    co = read_xla_collective_table(DATA / "xla_collective_perf_table_sm90_sm100_8gpu.csv", "sm_90")
    ar = [x for x in co if x["collective"] == "all_reduce" and x["num_groups"] == 1]
    assert len(ar) == 22 and ar[-1]["size_bytes"] == 2 ** 31
    assert ar[-1]["time_s"] == pytest.approx(9338.175e-6, rel=1e-5)  # size / throughput
    assert {x["element_type"] for x in co} == {"F32"}
    assert sum(x["collective"] == "send_recv" for x in co) == 66


def test_markdown_tables():
    assert parse_quantity("32KiB") == 32768 and parse_quantity("1.44GBps") == 1.44e9
    assert parse_quantity("86.9%") == pytest.approx(0.869)
    az = read_azure_results(DATA / "azure_nd_a100_h100_h200_gemm_hbm_nvbw_nccl.md")
    assert set(az) == {"ND A100 v4", "ND H100 v5", "ND H200 v5"}
    assert az["ND A100 v4"]["gemm"][0]["dtype"] == "fp16" and az["ND H100 v5"]["gemm"][0]["dtype"] == "fp8"
    nc = az["ND H100 v5"]["nccl"]
    assert nc["sizes"][0] == 1024 and nc["sizes"][-1] == 8 * 2 ** 30 and len(nc["sizes"]) == 24
    assert nc["busbw"][-1] == pytest.approx(478.87e9) and nc["algorithm"] == "nvls"
    assert az["ND H200 v5"]["hbm"]["Triad"] == pytest.approx(4.15e12)
    assert az["ND A100 v4"]["attention"] == {"flash_attention_2": 179.5e12, "standard": 46.0e12, "head_dim": 64}
    gb = read_azure_results(DATA / "azure_nd_gb200_v6_gemm_nvbw_nccl.md")["ND GB200 v6"]
    assert "hbm" not in gb and gb["nccl"]["algorithm"] == "ring"
    mamf = read_mamf(DATA / "mamf_max_achievable_matmul_tflops.md")
    h = next(x for x in mamf if x["accelerator"] == "NVIDIA H100 SXM" and x["dtype"] == "bf16")
    assert (h["mamf_flops"], h["m"], h["n"], h["k"]) == (794.5e12, 2048, 2048, 13312)
    assert sum(x["dtype"] == "fp8" for x in mamf) == 8
    nv = read_mlengineering_nvls(DATA / "mlengineering_h200_b200_nvls_and_collectives.md")
    assert nv["gpu_sweep"]["H200"][-1] == dict(gpus=8, algo="nvls", busbw=473.1e9, busbw_nvls_off=365.6e9,
                                               size_bytes=8 * 2 ** 30)
    assert [c["collective"] for c in nv["collectives"]["H200"]] == ["all_reduce", "all_reduce", "all_gather",
                                                                    "reduce_scatter"]
    bench = read_allreduce_bench(DATA / "mlengineering_allreduce_bench_h200_b200_pytorch.md")
    assert bench[1]["columns"]["4 nodes"][-1] == pytest.approx(381.80e9) and bench[1]["size_bytes"][-1] == 16 * 2 ** 30


def test_vllm_gemm_bench_reads_every_provider_and_refuses_a_short_row(tmp_path):
    """vLLM's bench_nvfp4_gemm.py output on B200: 11 batch sizes (the GEMM's M) per provider of the
    N=6144 K=4096 table; TFLOP/s -> time = 2 M N K / FLOP/s; a row with a value missing names its line."""
    from costmodel.readers import read_vllm_gemm_bench
    d = read_vllm_gemm_bench(DATA / "vllm_b200_nvfp4_gemm_llama8b.md")
    assert set(d) == {"torch-bf16", "nvfp4", "nvfp4-noquant"} and all(len(v) == 11 for v in d.values())
    big = d["nvfp4-noquant"][-1]
    assert (big["m"], big["n"], big["k"]) == (16384, 6144, 4096)
    assert big["time_s"] == pytest.approx(2 * 16384 * 6144 * 4096 / 3904.329097e12, rel=1e-9)
    bad = tmp_path / "bad.md"
    bad.write_text("x, N=8 K=8, BF16 vs NVFP4 GEMMs TFLOP/s:\n    batch_size   torch-bf16   nvfp4\n0   1.0   5.9\n")
    with pytest.raises(ValueError, match="line 3"):
        read_vllm_gemm_bench(bad)
