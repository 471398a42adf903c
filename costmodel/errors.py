"""Every exception the project raises, under one root, and the exit code the CLI gives each.

    CostmodelError                      exit 2 unless noted
    +-- InputError                      bad flag, file or field: names where and what
    +-- ReaderParseError                a measurement file or log with unparsable lines (good rows kept)
    |   +-- NcclTestsParseError, NvidiaSmiParseError, NvidiaSmiDmonParseError, DcgmParseError,
    |   |   ZeusParseError, FlagPerfParseError, TrainingLogParseError   (one per format)
    |   +-- NoUsableDataError           nothing usable in a file (empty, unknown format, all bad)
    +-- FitError                        nothing to fit, or inputs that contradict each other
    +-- InfeasibleError                 exit 3: no layout meets the power/thermal/memory limits
    +-- SolverUnavailableError          the requested MIP solver is not installed

The CLI (costmodel/cli) turns any CostmodelError into one line on stderr and ``exit_code``.
"""
from __future__ import annotations

from pathlib import Path


class CostmodelError(Exception):
    """Root of every error the project raises on purpose; ``exit_code`` is the CLI's status."""

    exit_code = 2


class InputError(CostmodelError, ValueError):
    """Bad user input: names the file (or flag) and the field, and says what is wrong.

    Args:
        where: a file path or a CLI flag such as ``--tp``.
        field: the offending field or key (may be empty).
        message: what is wrong and, where useful, what is expected.
    """

    def __init__(self, where: str, field: str, message: str):
        self.where, self.field, self.message = str(where), field, message
        loc = f"{self.where}: {field}: " if field else f"{self.where}: "
        super().__init__(loc + message)


class ReaderParseError(CostmodelError, ValueError):
    """Some lines of a measurement file could not be parsed; the parsed data is kept.

    Args:
        what: the format, for the message (e.g. "nccl-tests lines").
        errors: ``"FILE:LINE: reason"`` strings, one per bad line.
        data: what did parse (a list of rows or a table object), kept as ``data`` and ``rows``.
    """

    what = "lines"

    def __init__(self, errors, data, what: str | None = None):
        what = what or self.what
        shown = list(errors)[:20]
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"unparsable {what}:\n  " + "\n  ".join(shown) + more)
        self.errors = list(errors)
        self.data = data
        self.rows = list(data) if isinstance(data, list) else getattr(data, "rows", data)


class NcclTestsParseError(ReaderParseError):
    """nccl-tests output (strict mode) with bad lines; ``rows`` are the good rows."""

    what = "nccl-tests lines"


class NvidiaSmiParseError(ReaderParseError):
    """``nvidia-smi --query-gpu`` CSV (strict mode) with bad lines; ``trace`` is the SmiTrace of the good ones."""

    what = "nvidia-smi CSV lines"

    @property
    def trace(self):
        """The SmiTrace of the lines that did parse."""
        return self.data


class _TableParseError(ReaderParseError):
    """A reader error whose good data is one table: ``table`` (also ``data``)."""

    @property
    def table(self):
        """The table of the lines that did parse."""
        return self.data


class NvidiaSmiDmonParseError(_TableParseError):
    """``nvidia-smi dmon`` output (strict mode) with bad lines; ``table`` is the DmonTable of the good ones."""

    what = "nvidia-smi dmon lines"


class DcgmParseError(_TableParseError):
    """``dcgmi dmon`` output (strict mode) with bad lines; ``table`` is the DcgmTable of the good ones."""

    what = "dcgmi dmon lines"


class ZeusParseError(ReaderParseError):
    """A Zeus power-limit CSV (strict mode) with bad rows; ``rows`` are the good rows."""

    what = "Zeus CSV rows"


class PerseusParseError(ReaderParseError):
    """A Perseus locked-clock stage profile with bad rows; ``rows`` are the good rows."""

    what = "Perseus stage-profile rows"


class FlagPerfParseError(ReaderParseError):
    """FlagPerf tables (strict mode) with bad rows; ``rows`` are the good rows."""

    what = "FlagPerf rows"


class TrainingLogParseError(ReaderParseError):
    """A training log with no iteration line, or (strict mode) iteration-like lines that do not parse.

    ``log`` (also ``data``) is the TrainingLog of everything that did parse.
    """

    what = "training log"

    @property
    def log(self):
        """The TrainingLog of the lines that did parse."""
        return self.data


class NoUsableDataError(ReaderParseError):
    """A measurement file gave nothing usable: empty, header only, every line bad, or an unknown format.

    Attributes:
        path: the file.
        reason: what is missing, in words.
        errors: the reader's ``"FILE:LINE: reason"`` strings (empty when the format was not recognised).
        data: whatever the reader returned (None when nothing was read).
    """

    def __init__(self, path, reason, errors=(), data=None):
        errors = list(errors)
        shown = "".join(f"\n  {e}" for e in errors[:10])
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        Exception.__init__(self, f"{path}: no usable measurement data: {reason}{shown}{more}")
        self.path, self.reason, self.errors, self.data = Path(path), reason, errors, data
        self.rows = []


class FitError(CostmodelError, ValueError):
    """Nothing usable to fit, or inputs that contradict each other (the message names the file)."""


class InfeasibleError(CostmodelError):
    """No layout satisfies the limits (CLI exit code 3).

    Args:
        binding: the limit family to relax: 'temperature', 'node_power', 'memory', 'power_cap' (a per-GPU
            cap the lowest clock cannot hold), or several
            joined by '+' when no single family suffices.
        message: e.g. "max temperature 83.0 C must rise to 86.4 C (+3.4 C, layout ...) ...".
        required: family -> the least limit value that makes the instance feasible (C, W, bytes)
            for every family that suffices alone (or the joint values).
        relative: family -> (required - limit) / limit.
    """

    exit_code = 3
    #: family -> (unit, factor from ``required``'s unit): the unit the limit is given in, which ``--json``
    #: reports (a node budget is set as --node-power-kw; a temperature as --max-temp-c; HBM in bytes)
    JSON_UNITS = {"temperature": ("C", 1.0), "node_power": ("kW", 1e-3), "memory": ("bytes", 1.0),
                  "power_cap": ("W", 1.0)}

    def __init__(self, binding: str, message: str, required: dict | None = None, relative: dict | None = None):
        self.binding, self.message = binding, message
        self.required, self.relative = dict(required or {}), dict(relative or {})
        super().__init__(message)

    def record(self) -> dict:
        """The answer as ``--json`` prints it: feasible false, the binding limit family, the message,
        and per family the least limit that suffices (``required``) and how far above the limit it is
        (``excess``), both in the unit the limit is given in (:data:`JSON_UNITS`: C, kW, bytes; named per
        family under ``units``), and, for the ratio-scale families (power, memory), the excess as a
        fraction of the limit (``relative``; a fraction of a Celsius reading means nothing)."""
        scale = {f: self.JSON_UNITS.get(f, ("", 1.0))[1] for f in self.required}
        limit = {f: self.required[f] / (1.0 + r) for f, r in self.relative.items()
                 if f in self.required and 1.0 + r > 0}
        # 12 significant digits: the float arithmetic's last bits (0.6000000000000001) say nothing
        sig = lambda v: float(f"{v:.12g}")  # noqa: E731
        return dict(feasible=False, binding=self.binding, message=self.message,
                    required={f: sig(v * scale[f]) for f, v in self.required.items()},
                    excess={f: sig((self.required[f] - v) * scale[f]) for f, v in limit.items()},
                    relative={f: sig(r) for f, r in self.relative.items() if f != "temperature"},
                    units={f: self.JSON_UNITS[f][0] for f in self.required if f in self.JSON_UNITS})


class SolverUnavailableError(CostmodelError):
    """The requested MIP solver (e.g. HiGHS) is not installed."""
