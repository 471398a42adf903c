"""validate on a CSV of one's own runs: what a file name, an empty cell or a second measure may and may not
decide (a user's findings, each with the row that showed it)."""
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.validate import read_runs_csv, summarize, validate_rows

REPO = Path(__file__).resolve().parents[1]
HEAD = ("row_id,source_file,gpu,num_gpus,gpus_per_node,model,num_layers,hidden,ffn_hidden,num_heads,num_kv_heads,vocab,"
        "seq_len,gbs,mbs,tp,pp,dp,cp,sequence_parallel,recompute,fsdp_or_zero,precision,stack,step_time_s,"
        "model_tflops_per_gpu,notes")
#: Llama 2 70B on 64 H100 at TP4 PP4 DP4, Megatron, 6.5 s a step
L70 = dict(row_id="l70", source_file="acme_h100_runs", gpu="H100-SXM-80GB", num_gpus="64", gpus_per_node="8",
           model="our-llama-70b-v2", num_layers="80", hidden="8192", ffn_hidden="28672", num_heads="64",
           num_kv_heads="8", vocab="32000", seq_len="4096", gbs="128", mbs="1", tp="4", pp="4", dp="4", cp="1",
           sequence_parallel="true", recompute="selective", fsdp_or_zero="zero-1", precision="bf16", stack="megatron",
           step_time_s="6.5", model_tflops_per_gpu="", notes="")


def _csv(tmp_path, *rows, extra_lines=()):
    cols = HEAD.split(",")
    f = tmp_path / "runs.csv"
    f.write_text("\n".join([HEAD] + [",".join(r.get(c, "") for c in cols) for r in rows] + list(extra_lines)) + "\n")
    return f


def _one(tmp_path, **kw):
    f = _csv(tmp_path, dict(L70, **kw))
    (res,) = validate_rows(read_runs_csv(f), str(f))
    return res


def test_a_file_name_decides_neither_the_architecture_nor_the_stack(tmp_path):
    """A Llama row from a file named 'bloomberg_...' is priced as Llama (it had become BLOOM); a row
    without a stack cell is skipped unless it comes from a shipped dev-set source, whose stack the
    row's assumptions then name."""
    base, bloomberg = _one(tmp_path), _one(tmp_path, source_file="bloomberg_h100_runs")
    assert bloomberg.predicted_s == pytest.approx(base.predicted_s, rel=1e-12)
    for src in ("team_torchtitan_vs_megatron", "our_nemotron_tests", "bloomberg_h100_runs"):
        assert _one(tmp_path, source_file=src, stack="").skipped == "stack unknown: add a stack column"
    shipped = _one(tmp_path, source_file="throughput/flagperf_megatron_llm_a800_h100_h800.md", stack="")
    assert shipped.predicted_s == pytest.approx(base.predicted_s, rel=1e-12)
    assert "stack=megatron(its source file)" in shipped.assumed


def test_an_fsdp_stack_without_a_sharding_cell_runs_its_default(tmp_path):
    """torchtitan shards by default (FSDP2): a row that leaves fsdp_or_zero empty is priced as ZeRO-3 and
    says so (it was skipped: 'torchtitan runs ZeRO-1 only with a pipeline'); llm-foundry likewise."""
    tt = dict(model="Llama3-8B", num_layers="32", hidden="4096", ffn_hidden="14336", num_heads="32", num_kv_heads="8",
              vocab="128256", num_gpus="8", seq_len="8192", gbs="8", tp="1", pp="1", dp="8", sequence_parallel="",
              recompute="full", fsdp_or_zero="", step_time_s="1.4")
    for stack in ("torchtitan", "llm-foundry"):
        res = _one(tmp_path, stack=stack, **tt)
        assert res.skipped is None and f"zero=3({stack}'s default data parallelism)" in res.assumed
        same = _one(tmp_path, stack=stack, **dict(tt, fsdp_or_zero="fsdp"))
        assert res.predicted_s == pytest.approx(same.predicted_s, rel=1e-12)


def test_any_catalog_gpu_with_a_catalog_cluster_is_accepted_and_the_assumed_cluster_is_named(tmp_path):
    """A B300 row (a GPU file stem of the catalog) runs on the catalog's B300 cluster; a note that names no
    cluster leaves the GPU's reference cluster, which the row's assumptions name."""
    res = _one(tmp_path, gpu="b300-sxm-288gb", gpus_per_node="8", tp="2", pp="4", dp="8", step_time_s="2.0")
    assert res.skipped is None and res.cluster.startswith("dgx-b300"), res.skipped
    assert any(a.startswith(f"cluster={res.cluster}(the reference cluster of b300-sxm-288gb") for a in res.assumed)
    assert _one(tmp_path, gpu="Gaudi3").skipped.startswith("no catalog GPU 'Gaudi3' with a catalog cluster")


def test_validate_cluster_prices_every_row_on_the_named_cluster(tmp_path):
    """--cluster names what the rows ran on: a 100 Gb/s InfiniBand H100 cluster (a file of one's own) prices
    the DP x PP traffic slower than the catalog's 400 Gb/s reference; a row of another GPU is skipped by
    name; --profile without --cluster, or a bad --cluster, is one error line."""
    f = _csv(tmp_path, L70, dict(L70, row_id="h200", gpu="H200-SXM-141GB"))
    mine = tmp_path / "ours.yaml"
    ref = (REPO / "hardware" / "clusters" / "paper-h100.yaml").read_text()
    mine.write_text(ref)
    ours = validate_rows(read_runs_csv(f), str(f), cluster=str(mine))
    ref_rows = validate_rows(read_runs_csv(f), str(f))
    assert ours[0].skipped is None and ours[0].cluster == "ours" and ref_rows[0].cluster == "dgx-h100"
    assert ours[0].predicted_s > ref_rows[0].predicted_s
    assert ours[1].skipped == f"gpu 'H200-SXM-141GB' is not --cluster {mine}'s GPU (H100-SXM-80GB)"
    from costmodel.errors import InputError
    with pytest.raises(InputError):           # the call's error, not a skip of every row
        validate_rows(read_runs_csv(f), str(f), cluster=str(mine), profile=str(tmp_path / "missing.yaml"))
    for args, want in ((["--profile", "x.yaml"], "--profile: needs --cluster"),
                       (["--cluster", "no-such-cluster"], "--cluster")):
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", "validate", str(f), *args], capture_output=True,
                           text=True, cwd=REPO, timeout=300)
        assert r.returncode == 2 and want in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_catalog_model_fills_the_architecture_columns_a_row_leaves_empty(tmp_path):
    """model=llama3-8b with num_layers, hidden, num_heads, vocab and ffn_hidden empty is the catalog model
    (it was skipped for 'vocab not published', then 'ffn_hidden', one column at a time)."""
    full = dict(model="Llama3-8B", num_layers="32", hidden="4096", ffn_hidden="14336", num_heads="32",
                num_kv_heads="8", vocab="128256", num_gpus="8", tp="1", pp="1", dp="8", gbs="64",
                sequence_parallel="", fsdp_or_zero="zero-1", step_time_s="6.0")
    bare = dict(full, model="llama3-8b", num_layers="", hidden="", ffn_hidden="", num_heads="", num_kv_heads="",
                vocab="")
    a, b = _one(tmp_path, **full), _one(tmp_path, **bare)
    assert b.skipped is None and b.predicted_s == pytest.approx(a.predicted_s, rel=1e-12)
    assert _one(tmp_path, **dict(bare, model="my-8b")).skipped == (
        "num_layers not published (or name a catalog model: `costmodel models`)")


def test_every_pair_of_measures_must_agree(tmp_path):
    """step_time_s 6.5 beside model_tflops_per_gpu 200 (18.2 s a step for this model) is two runs: skipped,
    naming both; a TFLOP/s within the FLOP conventions' spread (x 1.5) of the step time is read."""
    res = _one(tmp_path, model_tflops_per_gpu="200")
    assert res.skipped.startswith("step_time_s and model_tflops_per_gpu imply 6.5 s and 18.") and "1.5x" in res.skipped
    assert _one(tmp_path, model_tflops_per_gpu="520").skipped is None


def test_spreadsheet_blank_lines_are_not_rows_and_cells_read_as_people_write_them(tmp_path):
    """A line of commas or of spaces (a spreadsheet's export) is no row; 'BF16' is bf16, 'FULL_SHARD' is
    FSDP's full sharding; '1_28' is no number; notes naming the distributed optimizer contradict
    fsdp_or_zero 'none'; a source with no used row carries no internal counter in the summary."""
    f = _csv(tmp_path, L70, extra_lines=["," * 26, "   "])
    res = validate_rows(read_runs_csv(f), str(f))
    assert [r.row_id for r in res] == ["l70"] and res[0].skipped is None
    base = res[0].predicted_s
    assert _one(tmp_path, precision="BF16").predicted_s == pytest.approx(base, rel=1e-12)
    assert _one(tmp_path, fsdp_or_zero="FULL_SHARD", tp="8", pp="1", dp="8").skipped is None
    assert _one(tmp_path, gbs="1_28").skipped == "gbs is not a number ('1_28')"
    bad = _one(tmp_path, fsdp_or_zero="none", notes="--use-distributed-optimizer")
    assert bad.skipped.startswith("fsdp_or_zero 'none' contradicts the notes")
    s = summarize([bad])
    assert "covered" not in s["sources"]["acme_h100_runs"]


def test_a_layout_that_is_not_the_gpu_count_shows_its_product(tmp_path):
    """TP 4 x PP 4 x DP 8 on 64 GPUs: the message gives the product (it named only the GPU count)."""
    assert _one(tmp_path, dp="8").skipped == "TP 4 x PP 4 x DP 8 x CP 1 = 128, not num_gpus 64"
    assert _one(tmp_path, dp="", tp="3").skipped == ("TP 3 x PP 4 x DP 5 (num_gpus / TP x PP x CP) x CP 1 = 60, "
                                                      "not num_gpus 64")


def test_rows_lists_every_skipped_row_the_summary_counts():
    """The summary names four skipped rows of a reason and counts the rest; --rows names them all (the
    nine Megatron-LM H100 scaling rows without a precision)."""
    csv = REPO / "benchmarks" / "data" / "dev_set_hopper.csv"
    out = {}
    for extra in ((), ("--rows",)):
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", "validate", str(csv), *extra], capture_output=True,
                           text=True, cwd=REPO, timeout=300)
        out[extra] = " ".join(r.stdout.split())
    assert "megatronh100-004, and 5 more (--rows lists them)" in out[()] and "megatronh100-009" not in out[()]
    assert "megatronh100-009" in out[("--rows",)]


def test_the_interconnect_note_names_a_catalog_cluster_in_any_case_and_spelling(tmp_path):
    """'AWS-P5' and 'aws p5' are the catalog's aws-p5 as 'aws-p5' is (an upper-case note had run on the GPU's
    reference cluster, saying the note named none); 'DGX A100' on an H100 row contradicts the gpu cell."""
    head = HEAD + ",interconnect_note"
    got = {}
    for note in ("aws-p5 3200Gbps EFA", "AWS-P5 3200Gbps EFA", "our aws p5 nodes"):
        f = tmp_path / "runs.csv"
        f.write_text(head + "\n" + ",".join(L70.get(c, "") for c in HEAD.split(",")) + f",{note}\n")
        (res,) = validate_rows(read_runs_csv(f), str(f))
        assert res.cluster == "aws-p5" and not any(a.startswith("cluster=") for a in res.assumed), (note, res.assumed)
        got[note] = res.predicted_s
    assert len(set(got.values())) == 1
    f.write_text(head + "\n" + ",".join(L70.get(c, "") for c in HEAD.split(",")) + ",DGX A100 (HDR)\n")
    assert "contradicts the interconnect note's system 'DGX A100'" in validate_rows(read_runs_csv(f))[0].skipped


def test_a_hash_line_inside_a_quoted_notes_cell_is_the_cell_s_and_an_indented_comment_is_a_comment(tmp_path):
    """A multi-line notes cell whose second line starts with '#' keeps it (the reader had dropped the line
    and with it the flag it held); '  # ...' outside a cell is a comment, not a phantom row; a header's
    trailing space is stripped as its leading one is."""
    cols = HEAD.split(",")
    cells = [L70.get(c, "") for c in cols]
    cells[cols.index("notes")] = '"measured on our cluster\n# --no-overlap-grad-reduce\n"'
    f = tmp_path / "runs.csv"
    f.write_text(HEAD.replace("notes", "notes ") + "\n  # an indented comment\n" + ",".join(cells) + "\n")
    (res,) = validate_rows(read_runs_csv(f), str(f))
    assert "dp_overlap=False" in res.assumed and res.line == 3


def test_precision_is_a_required_column_and_mbs_an_optional_one(tmp_path):
    """Every row needs its precision (a header without it had passed and every row been skipped); mbs may be
    left to the search (an empty cell is), so a header without it is read."""
    cols = [c for c in HEAD.split(",") if c != "precision"]
    f = tmp_path / "runs.csv"
    f.write_text(",".join(cols) + "\n" + ",".join(L70.get(c, "") for c in cols) + "\n")
    with pytest.raises(InputError, match=r"missing columns \['precision'\]"):
        read_runs_csv(f)
    cols = [c for c in HEAD.split(",") if c != "mbs"]
    f.write_text(",".join(cols) + "\n" + ",".join(L70.get(c, "") for c in cols) + "\n")
    (res,) = validate_rows(read_runs_csv(f), str(f))
    assert not res.skipped and any(a.startswith("mbs=") for a in res.assumed)


def test_json_rows_give_the_band_as_step_times_and_the_row_s_line(tmp_path):
    """error_pct is relative to the measurement and band_rel to the prediction: the band is also given as
    step times, so in_band is measured_s inside [band_low_s, band_high_s]; each row names its line."""
    import json
    f = _csv(tmp_path, L70, dict(L70, row_id="l70b", step_time_s="9.9"))
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "validate", str(f), "--json"], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    rows = json.loads(r.stdout)["rows"]
    assert [x["line"] for x in rows] == [2, 3] and {x["flop_convention"] for x in rows} == {None}
    for x in rows:
        assert x["band_low_s"] == pytest.approx(x["predicted_s"] * (1 - x["band_rel"]))
        assert x["in_band"] == (x["band_low_s"] <= x["measured_s"] <= x["band_high_s"])
    assert {x["in_band"] for x in rows} == {True, False}


@pytest.mark.parametrize("mfu", ["4250", "abc", "0"])
def test_an_mfu_that_is_no_percentage_makes_the_row_malformed(tmp_path, mfu):
    """mfu is not read, but 4250 or 'abc' is a slip in the row: malformed, naming the column (it had passed)."""
    f = _csv(tmp_path, dict(L70, notes=""))
    f.write_text(f.read_text().replace("row_id,", "mfu,row_id,", 1).replace("\nl70,", f"\n{mfu},l70,", 1))
    (res,) = validate_rows(read_runs_csv(f), str(f))
    assert res.malformed and res.skipped == f"mfu must be a percentage in (0, 100], got {mfu!r}"
    for ok in ("42.5", "42.5%"):
        f.write_text(f.read_text().replace(f"\n{mfu},l70,", f"\n{ok},l70,", 1))
        assert not validate_rows(read_runs_csv(f), str(f))[0].skipped
        mfu = ok
