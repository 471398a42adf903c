"""Output in terminals as users have them. Tables in a terminal narrower than they are: every number
printed whole (rich had cut cells to "1…" at 80 columns and printed an empty table at 40), the table
wider than the terminal instead. An output encoding other than UTF-8: ASCII stand-ins, same numbers."""
import os
import re
import subprocess
import sys

import pytest
from rich.table import Table

from costmodel import report

from cli_run import REPO

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?(?![\w.])")


def _terminal(columns, *args):
    """The command's stdout as a terminal of ``columns`` columns shows it (rich's TTY_COMPATIBLE), styles
    dropped."""
    env = dict(os.environ, TTY_COMPATIBLE="1", NO_COLOR="1", COLUMNS=str(columns))
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", *args], capture_output=True, text=True, cwd=REPO,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return _ANSI.sub("", r.stdout)


def _cells(text):
    """The numbers in the table rows (lines between box borders) of ``text``."""
    return [n for line in text.splitlines() if line.startswith("│") for n in _NUMBER.findall(line)]


@pytest.mark.parametrize("args", [
    ("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "16", "--top", "3"),
    ("models",),
    ("collectives", "--cluster", "dgx-a100-40gb", "--collective", "all_reduce", "--compare",
     "tests/data/readers/nccl_tests_oci_a100_16ranks_2nodes.txt"),
    ("validate", "benchmarks/data/dev_set.csv"),
])
def test_every_number_of_a_table_is_whole_in_a_narrow_terminal(args):
    wide = _terminal(400, *args)
    numbers = _cells(wide)
    assert len(numbers) >= 10
    for columns in (80, 40):
        narrow = _terminal(columns, *args)
        assert "…" not in narrow
        assert sorted(_cells(narrow)) == sorted(numbers), columns     # a wrapped note moves its numbers down


def test_the_model_catalog_prints_bloom_whole_at_40_columns():
    """models --model bloom-176b at 40 columns: 176.25 B parameters, 14336 hidden (it had shown '176.…')."""
    row = [line for line in _terminal(40, "models", "--model", "bloom-176b").splitlines() if "bloom-176b" in line]
    assert len(row) == 1 and [c.strip() for c in row[0].split("│")[3:-1]] == ["70", "14336", "112/112", "57344", "-",
                                                                              "176.25", "176.25", "2048"]


def test_a_table_prints_wider_than_the_console_rather_than_cut_and_a_folding_column_folds():
    """The console widens to the table's words (a folding column's long URL folds instead)."""
    from io import StringIO
    con = report.console()
    con.file, con.width = StringIO(), 30
    tb = Table(title="t")
    tb.add_column("value", justify="right")
    tb.add_column("source", overflow="fold")
    tb.add_row("123456789.125", "https://example.org/" + "x" * 80)
    con.print(tb)
    text = con.file.getvalue()
    assert "123456789.125" in text and "…" not in text and con.width == 30
    assert max(map(len, text.splitlines())) == report.whole_width(con, tb) < 80


@pytest.mark.parametrize("encoding,args,plain", [
    ("ascii", ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--tp", "2", "--mbs", "1",
               "--gbs", "16"), "+/-"),
    ("ascii", ("hardware",), "110 degC"),
    ("latin-1", ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--tp", "2", "--mbs", "1",
                 "--gbs", "16"), "±"),
])
def test_an_output_encoding_without_the_symbols_gets_the_same_numbers(encoding, args, plain):
    """PYTHONIOENCODING=ascii or latin-1: exit 0, '±' as '+/-' and '°' as 'deg' where the encoding lacks them,
    and every number of the UTF-8 output (it had ended in a UnicodeEncodeError traceback)."""
    def out(enc):
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", *args], capture_output=True, cwd=REPO, timeout=300,
                           env=dict(os.environ, PYTHONIOENCODING=enc))
        assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr[-400:]
        return r.stdout.decode(enc)
    utf8, narrow = out("utf-8"), out(encoding)
    assert plain in narrow and "Traceback" not in narrow
    assert _NUMBER.findall(narrow) == _NUMBER.findall(utf8)


def test_the_ascii_stand_ins():
    import codecs
    from costmodel.cli import _plain_text
    codecs.register_error("costmodel-plain", _plain_text)
    assert "1.5 ± 0.2 s, 89 °C, rows a, b, … 是".encode("ascii", "costmodel-plain") == b"1.5 +/- 0.2 s, 89 degC, rows a, b, ... ?"
    assert "± … °".encode("latin-1", "costmodel-plain") == "± ... °".encode("latin-1")
