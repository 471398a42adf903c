"""The error every reader raises in strict mode: the bad lines with file and line, and the good data."""
from __future__ import annotations


class ReaderParseError(ValueError):
    """Some lines of a measurement file could not be parsed; the parsed data is kept.

    Args:
        what: the format, for the message (e.g. "nccl-tests lines").
        errors: ``"FILE:LINE: reason"`` strings, one per bad line.
        data: what did parse (a list of rows or a table object), kept as ``data`` and ``rows``.
    """

    def __init__(self, what: str, errors, data):
        shown = list(errors)[:20]
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"unparsable {what}:\n  " + "\n  ".join(shown) + more)
        self.errors = list(errors)
        self.data = data
        self.rows = list(data) if isinstance(data, list) else getattr(data, "rows", data)
