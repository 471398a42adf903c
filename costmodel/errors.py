"""The one exception type the CLI turns into a clear message and exit code 2."""
from __future__ import annotations


class InputError(ValueError):
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
