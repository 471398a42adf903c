"""Running the CLI as a user does, for the finding tests of this folder: one process per command."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args):
    """``python -m costmodel.cli ARGS`` from the repository root: its CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "costmodel.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=REPO)


def one_line(r, *needles):
    """Assert a refusal as the brief wants it: exit 2, one line on stderr naming each of ``needles``, no traceback."""
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr
