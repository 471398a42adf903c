"""The ``costmodel: note:`` lines a command prints on stderr, kept in the order said, so that a ``--json``
record carries every one of them (a script reading stdout alone sees what a person reading the terminal
sees)."""
from __future__ import annotations

import sys

_PREFIX = "costmodel: note: "
_SAID: list[str] = []


def start() -> None:
    """Forget the notes of an earlier command run in this process (a command begins)."""
    _SAID.clear()


def note(text: str) -> None:
    """Print ``text`` on stderr as a note (one line) and keep it; an empty text says nothing."""
    if not text:
        return
    text = text[len(_PREFIX):] if text.startswith(_PREFIX) else text
    print(_PREFIX + text, file=sys.stderr)
    _SAID.append(text)


def said() -> list[str]:
    """The notes printed since :func:`start`, in order, without their prefix."""
    return list(_SAID)
