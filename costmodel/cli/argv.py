"""A command line that gives one option two values is refused: click keeps the last value silently
(``--tp 8 --tp 4`` ran at TP 4, ``--sp --no-sp`` without SP), and a run priced on the value the user
did not mean is worse than an error.  Repeatable options (``multiple=True``: ``--derate``) and
counters are exempt.  An empty value (``--profile ''``) is refused too: read as not given, it would
fall back to a default the user did not ask for."""
from __future__ import annotations

from ..errors import InputError


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
    takes_value = {s: v for s, (_, v) in _spellings(cmd, repeatable=True).items()}
    i = start
    while i < len(argv):
        flag, eq, inline = argv[i].partition("=")
        if flag in takes_value and takes_value[flag]:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            if value is not None and not value.strip():
                raise InputError(flag, "", "is empty: give a value")
            i += 1 if eq else 2
            continue
        if not argv[i].strip():
            raise InputError(f"argument {i - start + 1}", "", "is empty: give a value")
        i += 1
