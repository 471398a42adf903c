"""A command line that gives one option two values is refused: click keeps the last value silently
(``--tp 8 --tp 4`` ran at TP 4, ``--sp --no-sp`` without SP), and a run priced on the value the user
did not mean is worse than an error.  Repeatable options (``multiple=True``: ``--derate``) and
counters are exempt.  An empty value (``--profile ''``) is refused too: read as not given, it would
fall back to a default the user did not ask for.  So is a whole-number option given a decimal
(``--nodes 1.0``): typer >= 0.29 converts through pydantic's lax mode, which takes "1.0" and refuses
"1.5", so a value's spelling decided whether it ran."""
from __future__ import annotations

import re
from typing import get_args

from ..errors import InputError

_WHOLE = re.compile(r"^[+-]?[0-9]+$")


def _leaf(group, argv: list):
    """(the click command ``argv`` runs, the index of its first argument); (None, 0) where ``argv``
    names no command of ``group``."""
    cmd, i = group, 0
    while hasattr(cmd, "commands") and i < len(argv):
        sub = cmd.commands.get(argv[i]) if not argv[i].startswith("-") else None
        if sub is None:
            return None, 0
        cmd, i = sub, i + 1
    return (None, 0) if hasattr(cmd, "commands") else (cmd, i)


def _spellings(cmd, repeatable: bool = False) -> dict:
    """Every spelling of ``cmd``'s options (on and off) -> (parameter name, whether it takes a value);
    repeatable options (``multiple``, counters) only when ``repeatable``."""
    out = {}
    for p in cmd.params:
        if not hasattr(p, "opts") or (not repeatable and (getattr(p, "multiple", False) or getattr(p, "count", False))):
            continue
        for spelling in list(p.opts) + list(getattr(p, "secondary_opts", [])):
            out[spelling] = (p.name, not getattr(p, "is_flag", False))
    return out


def check_repeated_options(group, argv: list) -> None:
    """Refuse an option ``argv`` (the arguments after the program name) gives two different values to the
    command it runs, its on and off spellings counting as one option (the same value twice is harmless).

    Args:
        group: the click group of the app (``typer.main.get_command``).
        argv: the command-line arguments, e.g. ``sys.argv[1:]``.
    Raises:
        InputError: naming the option and both values.
    """
    cmd, start = _leaf(group, list(argv))
    if cmd is None:
        return
    spell = _spellings(cmd)
    names = {k: n for k, (n, _) in spell.items()}
    takes_value = {k: v for k, (_, v) in spell.items()}
    seen: dict = {}
    i = start
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            break
        flag, eq, inline = tok.partition("=")
        if flag in names:
            value = inline if eq else (argv[i + 1] if takes_value[flag] and i + 1 < len(argv) else None)
            said = f"{flag} {value}" if value is not None else flag
            if names[flag] in seen and seen[names[flag]] != said:
                raise InputError(flag, "", f"given twice ({seen[names[flag]]}, then {said}): give it once")
            seen[names[flag]] = said
            i += 1 if eq or not takes_value[flag] else 2
            continue
        i += 1


def _words(cmd, start: int, argv: list):
    """``argv``'s words after ``start`` as ``cmd`` reads them: (index, option, its value) for an option
    that takes one (``--x v`` or ``--x=v``; value None at the end of the line), (index, None, word) for
    any other."""
    takes_value = {s: v for s, (_, v) in _spellings(cmd, repeatable=True).items()}
    i = start
    while i < len(argv):
        flag, eq, inline = argv[i].partition("=")
        if takes_value.get(flag):
            yield i, flag, (inline if eq else (argv[i + 1] if i + 1 < len(argv) else None))
            i += 1 if eq else 2
        else:
            yield i, None, argv[i]
            i += 1


def check_empty_values(group, argv: list) -> None:
    """Refuse an empty (or blank) value or argument on the command line: ``--profile ''`` had run on the
    built-in profile and ``compare --trace ''`` written nothing, silently.

    Args:
        group: the click group of the app.  argv: the arguments after the program name.
    Raises:
        InputError: naming the option (or the argument's position) that is empty.
    """
    cmd, start = _leaf(group, list(argv))
    if cmd is None:
        return
    for i, flag, value in _words(cmd, start, list(argv)):
        if flag is not None and value is not None and not value.strip():
            raise InputError(flag, "", "is empty: give a value")
        if flag is None and not value.strip():
            raise InputError(f"argument {i - start + 1}", "", "is empty: give a value")


def _takes_int(p) -> bool:
    """Whether click parameter ``p`` converts its value to an int: the annotation of typer >= 0.29's
    ``type_descriptor`` (``Optional[int]`` or ``int``), or click's ``INT`` type (named "integer") in
    earlier typer."""
    td = getattr(p, "type_descriptor", None)
    if td is not None:
        ann = getattr(td, "annotation", None)
        return ann is int or (type(None) in get_args(ann) and int in get_args(ann))
    return getattr(getattr(p, "type", None), "name", "") == "integer"


def check_integer_values(group, argv: list) -> None:
    """Refuse a whole-number option whose value is written otherwise (``--nodes 1.0``, ``--tp 8.``):
    the value must be digits with an optional sign.

    Args:
        group: the click group of the app.  argv: the arguments after the program name.
    Raises:
        InputError: naming the option and its value.
    """
    cmd, start = _leaf(group, list(argv))
    if cmd is None:
        return
    ints = {s for p in cmd.params if hasattr(p, "opts") and not getattr(p, "is_flag", False)
            and not getattr(p, "count", False) and _takes_int(p) for s in p.opts}
    for _, flag, value in _words(cmd, start, list(argv)):
        if flag in ints and value is not None and value.strip() and not _WHOLE.match(value.strip()):
            raise InputError(flag, "", f"{value!r} is not a whole number")
