"""validate on a user's own CSV: what its free-text notes, its spelling and its odd characters may and
may not decide (a new user's findings, each with the row that showed it)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel import report
from costmodel.errors import InputError
from costmodel.validate import read_runs_csv, summarize, validate_rows

REPO = Path(__file__).resolve().parents[1]
COLS = ("row_id,source_file,gpu,num_gpus,gpus_per_node,interconnect_note,model,num_layers,hidden,ffn_hidden,num_heads,"
        "num_kv_heads,vocab,seq_len,gbs,"
        "mbs,tp,pp,dp,cp,sequence_parallel,recompute,fsdp_or_zero,precision,stack,tokens_per_s_per_gpu,"
        "hardware_tflops_per_gpu,model_tflops_per_gpu,mfu,notes").split(",")
#: Llama 3 8B on 8 H100, DP 8, Megatron, 8000 tokens/s/GPU at seq 8192 and gbs 512: 65.536 s a step
BASE = dict(row_id="a1", source_file="mine", gpu="H100-SXM-80GB", num_gpus="8", gpus_per_node="8", model="llama3-8b",
            seq_len="8192", gbs="512", mbs="1", tp="1", pp="1", dp="8", cp="1", sequence_parallel="false",
            recompute="full", fsdp_or_zero="zero-1", precision="bf16", stack="megatron", tokens_per_s_per_gpu="8000")


def _cell(v: str) -> str:
    return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n') else v


def _rows(tmp_path, *rows, header=None, name="runs.csv"):
    f = tmp_path / name
    lines = [header or ",".join(COLS)] + [",".join(_cell(r.get(c, "")) for c in COLS) for r in rows]
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return validate_rows(read_runs_csv(f), str(f))


def _one(tmp_path, **kw):
    (res,) = _rows(tmp_path, dict(BASE, **kw))
    return res


def test_a_line_separator_inside_a_cell_keeps_the_row_whole(tmp_path):
    """U+2028, U+0085, \\v and \\f are not line ends in a CSV: str.splitlines had cut the row in two and
    made a phantom row of its end."""
    for ch in ("\u2028", "\x85", "\x0b", "\x0c"):
        res = _rows(tmp_path, dict(BASE, interconnect_note=f"DGX H100{ch}IB NDR"), dict(BASE, row_id="a2"))
        assert [r.row_id for r in res] == ["a1", "a2"] and not any(r.skipped for r in res), [r.skipped for r in res]
        assert res[0].measured_s == pytest.approx(65.536)


def test_negated_notes_say_the_opposite(tmp_path):
    """'non-causal attention' counts the whole s x s scores (it had been read as causal), and 'no degraded
    GPUs', 'not LoRA' and 'no CPU offload' are not the things they negate."""
    flops = dict(tokens_per_s_per_gpu="", model_tflops_per_gpu="400")
    plain, non, causal = (_one(tmp_path, **flops, notes=n).measured_s
                          for n in ("x", "non-causal attention", "causal attention"))
    assert non == pytest.approx(plain, rel=1e-12) and causal < 0.9 * plain
    assert _one(tmp_path, **flops, notes="not causal attention").measured_s == pytest.approx(plain, rel=1e-12)
    base = _one(tmp_path)
    for n in ("no degraded GPUs (dcgm checked)", "full pretraining; not LoRA", "no CPU offload",
              "without torch.compile"):
        got = _one(tmp_path, notes=n)
        assert not got.skipped and got.predicted_s == pytest.approx(base.predicted_s, rel=1e-12), (n, got.skipped)
    assert _one(tmp_path, notes="measured on degraded GPUs").skipped == "measured during a degraded-GPU period"
    assert _one(tmp_path, notes="ZeRO CPU offload").predicted_s > base.predicted_s


def test_hardware_tflops_without_the_recompute_is_not_converted_on_a_guess(tmp_path):
    """Executed FLOPs count the recomputed forward: the step they imply depends on a recompute the row
    does not give (it had been converted at full recompute of every layer while the prediction assumed
    another)."""
    got = _one(tmp_path, tokens_per_s_per_gpu="", hardware_tflops_per_gpu="400", recompute="")
    assert got.skipped.startswith("hardware_tflops_per_gpu without its recompute")
    full = _one(tmp_path, tokens_per_s_per_gpu="", hardware_tflops_per_gpu="400", recompute="full")
    assert full.measured_s == pytest.approx(4 / 3 * _one(tmp_path, tokens_per_s_per_gpu="", model_tflops_per_gpu="400",
                                                         recompute="full").measured_s, rel=1e-9)


def test_a_row_departing_from_its_catalog_model_says_so(tmp_path):
    got = _one(tmp_path, num_layers="40")
    assert got.skipped.startswith("hidden not published (the row departs from the catalog model it names: "
                                  "num_layers 40, catalog llama3-8b 32")


def test_another_gpu_named_beside_the_row_s_own_is_prose(tmp_path):
    """'H100 nodes that replaced our V100 cluster' is an H100 row on the H100 reference cluster (it had been
    skipped as contradicting the note's V100 system); a note naming only another GPU's system still is."""
    got = _one(tmp_path, interconnect_note="H100 nodes that replaced our V100 cluster; NDR IB")
    assert not got.skipped and got.cluster == "dgx-h100"
    assert any("'V100' is another GPU's system, named beside H100" in a for a in got.assumed)
    assert _one(tmp_path, interconnect_note="Selene DGX A100").skipped.startswith("gpu 'H100-SXM-80GB' contradicts")


def test_sequence_parallel_at_tp_1_is_off_as_megatron_turns_it_off(tmp_path):
    got = _one(tmp_path, sequence_parallel="true")
    assert not got.skipped and "sp=False(Megatron-LM turns sequence parallelism off at TP 1)" in got.assumed
    assert got.predicted_s == pytest.approx(_one(tmp_path).predicted_s, rel=1e-12)


def test_categorical_cells_take_any_case_and_precision_errors_name_the_column(tmp_path):
    base = _one(tmp_path)
    got = _one(tmp_path, stack="Megatron", recompute="Full", sequence_parallel="FALSE")
    assert not got.skipped and got.predicted_s == pytest.approx(base.predicted_s, rel=1e-12)
    fp8 = _one(tmp_path, gpu="A100-SXM-80GB", interconnect_note="", precision="fp8")
    assert "give the precision column bf16 or fp16" in fp8.skipped and "--precision" not in fp8.skipped


def test_header_spacing_case_and_trailing_commas(tmp_path):
    """'a, b' headers (spaces after commas) are read; 'GBS' is named as the slip for 'gbs'; a trailing comma
    is said to be one."""
    spaced = ", ".join(COLS)
    (got,) = _rows(tmp_path, BASE, header=spaced)
    assert not got.skipped and got.measured_s == pytest.approx(65.536)
    with pytest.raises(InputError, match=r"missing columns \['gbs'\] \(misspelt\? 'GBS' for 'gbs'\)"):
        _rows(tmp_path, BASE, header=",".join(c.upper() if c == "gbs" else c for c in COLS))
    with pytest.raises(InputError, match="a column without a name"):
        _rows(tmp_path, BASE, header=",".join(COLS) + ",")


def test_rows_lists_skipped_rows_and_a_sourceless_row_is_named(tmp_path):
    res = _rows(tmp_path, BASE, dict(BASE, row_id="a2", gbs="0"), dict(BASE, row_id="a3", source_file=""))
    lines = [x for x in report.validate_tables(summarize(res), res, show_rows=True) if isinstance(x, str)]
    assert any(x.startswith("a2") and " skipped: " in x for x in lines), lines
    assert any(x.startswith("a1") and "measured" in x for x in lines)
    assert "(no source_file)" in summarize(res)["sources"]


def test_plot_of_a_file_whose_rows_are_all_skipped_prints_their_reasons_first(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "bad.csv"
    f.write_text(",".join(COLS) + "\n" + ",".join(_cell(dict(BASE, stack="megatron-lm").get(c, "")) for c in COLS) + "\n")
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "validate", str(f), "--plot", str(tmp_path / "p")],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 2 and "stack 'megatron-lm' is not one of" in r.stdout, (r.stdout, r.stderr)
    assert "line 2 (row_id 'a1'): stack 'megatron-lm' is not one of" in r.stderr and "Traceback" not in r.stderr


def test_a_row_of_an_unknown_model_name_is_said_to_be_priced_as_megatron_gpt(tmp_path):
    """'acme-8b' with Llama 3 8B's columns is priced with a GELU MLP: the summary says so, with the row."""
    res = _rows(tmp_path, dict(BASE, model="acme-8b", num_layers="32", hidden="4096", ffn_hidden="14336",
                               num_heads="32", num_kv_heads="8", vocab="128256"))
    assert not res[0].skipped
    lines = [x for x in report.validate_tables(summarize(res), res) if isinstance(x, str)]
    assert any("1 row(s) priced as Megatron GPT" in x and "a1" in x for x in lines), lines


def test_a_partial_node_row_points_to_a_cluster_file(tmp_path):
    got = _one(tmp_path, num_gpus="4", gpus_per_node="4", dp="4")
    assert got.skipped.startswith("num_gpus 4 is not a whole number of dgx-h100")
    assert "--cluster takes a cluster file of 4-GPU nodes" in got.skipped


def test_an_mfu_that_contradicts_the_tflops_column_skips_the_row(tmp_path):
    """Llama 3 70B on 64 H100 under torchtitan with 829 in model_tflops_per_gpu (its tokens/s) and mfu 38:
    829 TFLOP/s is 84% of the 989 TFLOP/s bf16 peak, 2.2x the row's own MFU, and no FLOP convention (causal
    or s x s attention, recompute's 4/3) closes that gap; the row had been priced on a 9.5 s step.  It is
    skipped naming both columns, the MFU written as a percentage or a fraction; an MFU that agrees
    (84, 0.84) and an empty one leave the row as it was."""
    row = dict(BASE, model="llama3-70b", num_gpus="64", dp="8", tp="8", gbs="128", mbs="", stack="torchtitan",
               fsdp_or_zero="fsdp", sequence_parallel="", tokens_per_s_per_gpu="", model_tflops_per_gpu="829")
    plain = _one(tmp_path, **row)
    assert not plain.skipped and plain.measured_s == pytest.approx(9.515, abs=5e-4)
    for mfu in ("38", "38%", "0.38"):
        got = _one(tmp_path, **row, mfu=mfu)
        assert got.skipped and got.skipped.startswith(f"mfu-apart: mfu {mfu} and model_tflops_per_gpu disagree: the "
                                                      "MFU implies 19.58 s a step at best"), got.skipped
        assert "model_tflops_per_gpu 9.515 s, more than 1.5x apart" in got.skipped and not got.malformed
    for mfu in ("84", "0.84"):
        got = _one(tmp_path, **row, mfu=mfu)
        assert not got.skipped and got.measured_s == plain.measured_s, (mfu, got.skipped)
    # a tokens/s column is checked alike: 8000 tokens/s/GPU of Llama 3 8B is ~40% MFU, not 4%
    assert _one(tmp_path, mfu="4").skipped.startswith("mfu-apart: mfu 4 and tokens_per_s_per_gpu disagree")
    assert not _one(tmp_path, mfu="40").skipped


def test_the_report_names_every_malformed_row_by_its_line_as_the_error_does(tmp_path):
    """Two malformed rows (recompute 'fulll', gbs 0) and one skipped for a run the model does not price
    (fp32): stderr names the first malformed row by line and row_id and says the report lists the rest,
    but the report had listed them by id alone, unmarked among the other skips.  Each malformed row is
    now named as the error names it, with its cell, and --rows gives every skipped row's line."""
    f = tmp_path / "bad.csv"
    rows = [BASE, dict(BASE, row_id="a2", recompute="fulll"), dict(BASE, row_id="a3", gbs="0"),
            dict(BASE, row_id="a4", precision="fp32")]
    f.write_text("\n".join([",".join(COLS)] + [",".join(_cell(r.get(c, "")) for c in COLS) for r in rows]) + "\n")
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "validate", str(f), "--rows"], capture_output=True,
                       text=True, cwd=REPO, timeout=300, env={**os.environ, "COLUMNS": "250"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert ("line 3 (row_id 'a2'): recompute 'fulll' is not one of none, selective, full (or empty) (and 1 more "
            "malformed row(s): the report lists them)") in r.stderr
    out = r.stdout.splitlines()
    assert "  2 malformed row(s), a cell that cannot be read (the command exits 2 after this report):" in out
    assert "    line 3 (row_id 'a2'): recompute 'fulll' is not one of none, selective, full (or empty)" in out
    assert "    line 4 (row_id 'a3'): gbs must be a finite positive number, got '0'" in out
    assert not any("row_id 'a4'" in x for x in out)
    assert any(x.startswith("a3 ") and x.endswith("skipped: gbs must be a finite positive number, got '0'  "
                                                   "(line 4, malformed)") for x in out), out
    assert any(x.startswith("a4 ") and x.endswith("  (line 5)") for x in out), out
