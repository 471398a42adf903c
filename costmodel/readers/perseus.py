"""Reader for Perseus (SOSP'24) locked-clock stage profiles.

Format (ml-energy/zeus ``sosp24_data/emulation/stage_profile/<model>+<gpu>_bf16.csv``; Chung et al.,
"Perseus: Reducing Energy Bloat in Large Model Training", SOSP 2024): CSV with header
``stage,instruction,frequency,time,energy``; one row per (pipeline stage, instruction ``forward`` or
``backward``, SM clock locked at ``frequency`` MHz): the time in s and the GPU energy in J of one
micro-batch's pass.  Lines starting with ``#`` (our copies' source header) are skipped.

Sources read with it: the A100 SXM GPT-3 175B and BLOOM profiles copied to
``hardware/profiles/data/perseus_sosp24_<model>_a100_sxm_stage_clock_sweep.csv``.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from costmodel.errors import InputError, PerseusParseError
from ..files import read_text

_COLUMNS = ("stage", "instruction", "frequency", "time", "energy")


@dataclass(frozen=True)
class PerseusRow:
    """One (stage, pass, clock) measurement.

    Attributes:
        stage: pipeline stage index.
        instruction: ``forward`` or ``backward``.
        sm_clock_mhz: locked SM clock, MHz.
        time_s: time of the pass, s.
        energy_j: GPU energy of the pass, J.
        line: 1-based line number in the file.
    """

    stage: int
    instruction: str
    sm_clock_mhz: float
    time_s: float
    energy_j: float
    line: int

    @property
    def power_w(self) -> float:
        """Average power of the pass, W (energy / time)."""
        return self.energy_j / self.time_s


def read_perseus_stage_profile(path, strict: bool = True) -> list[PerseusRow]:
    """Rows of a Perseus stage profile.

    Raises:
        InputError: unreadable file or a header without the Perseus columns.
        PerseusParseError: (strict) some rows are malformed (non-numeric, non-positive time, energy or
            clock, an unknown instruction); ``rows`` holds the good ones.  Not strict: they are skipped.
    """
    p = Path(path)
    try:
        text = read_text(p)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(p, "", f"cannot read ({e})") from None
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.startswith("#")]
    if not lines:
        raise InputError(p, "", "no header line")
    header = [c.strip() for c in next(csv.reader([lines[0][1]]))]
    if tuple(header) != _COLUMNS:
        raise InputError(p, "header", f"expected {','.join(_COLUMNS)}, got {','.join(header)}")
    rows, errors = [], []
    for i, ln in lines[1:]:
        cells = next(csv.reader([ln]))
        try:
            if len(cells) != len(_COLUMNS):
                raise ValueError(f"{len(cells)} fields, expected {len(_COLUMNS)}")
            stage, instr, f, t, e = int(cells[0]), cells[1].strip(), float(cells[2]), float(cells[3]), float(cells[4])
            if instr not in ("forward", "backward"):
                raise ValueError(f"instruction {instr!r} is not forward or backward")
            if not all(math.isfinite(x) and x > 0 for x in (f, t, e)):
                raise ValueError("frequency, time and energy must be positive numbers")
        except ValueError as err:
            errors.append(f"{p}:{i}: {err}")
            continue
        rows.append(PerseusRow(stage, instr, f, t, e, i))
    if errors and strict:
        raise PerseusParseError(errors, rows)
    return rows
