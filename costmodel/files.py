"""Writing output files so that a failed write never leaves a half-written file or loses the old one:
write beside the target, then rename over it (``os.replace`` is atomic on one filesystem)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

from .errors import InputError


def write_atomically(path, write: Callable[[str], None] | str, flag: str) -> Path:
    """Write ``path`` through a temporary file in its folder, renamed over it when complete.

    Args:
        path: the file to write (its folder is created).
        write: the text to write, or a function that writes the file whose name it is given (e.g. a
            matplotlib figure's ``savefig``; the temporary name keeps the target's suffix, which
            sets the format).
        flag: the option that named the file, for messages.
    Returns:
        the path written.
    Raises:
        InputError: the folder or file cannot be written, or the writer refuses the format (names the
            flag and the path); the old file, if any, is left as it was.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix or ".tmp")
        os.close(fd)
        try:
            if isinstance(write, str):
                Path(tmp).write_text(write, encoding="utf-8")
            else:
                write(tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise InputError(flag, "", f"cannot write {path}: {e.strerror or e}") from None
    except ValueError as e:                        # e.g. a figure format matplotlib does not write
        raise InputError(flag, "", f"cannot write {path}: {e}") from None
    return path
