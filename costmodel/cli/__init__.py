"""The ``costmodel`` command line: a thin typer layer over the library, one module per command.

Every :class:`costmodel.errors.CostmodelError` becomes one line on stderr and its exit code (2 for
bad input, 3 when no layout meets the limits), in :func:`main`.
"""
from __future__ import annotations

import codecs
import json
import sys

import typer

from .argv import check_empty_values, check_integer_values, check_repeated_options
from .calibrate import app as calibrate_app
from .collectives import collectives
from .compare import compare
from ..errors import CostmodelError, InfeasibleError
from ..files import remove_empty_created_dirs
from .hardware import hardware
from .models import models
from .predict import predict
from .recommend import recommend
from .validate import validate

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Calibrated cost model of distributed LLM training: predict step time and "
                       "memory of any parallel layout, and recommend the best one.")
# the command list shows these (click cuts a longer first sentence at the terminal width with "...")
_SHORT = {recommend: "Best layouts of a model on a cluster, with reasons.",
          predict: "Step time, memory, power and energy of one layout.",
          compare: "Measured run vs prediction, metric by metric.",
          validate: "Step-time error on a CSV of published runs.",
          collectives: "Predicted nccl-tests table; error vs a capture.",
          models: "The built-in model catalog.",
          hardware: "Catalog GPUs and clusters with their sources."}
for _command in (recommend, predict, compare, validate, collectives, models, hardware):
    app.command(short_help=_SHORT[_command])(_command)
app.add_typer(calibrate_app, name="calibrate", short_help="Run the suite, fit a profile, show a profile.")


#: what an output encoding without these characters (ascii, latin-1) shows instead; anything else is '?'
_PLAIN = {"±": "+/-", "°": "deg", "…": "...", "−": "-", "–": "-", "—": "--", "×": "x", "µ": "u", "’": "'"}


def _plain_text(err: UnicodeEncodeError):
    """The codec error handler of :func:`tolerant_output`: ASCII for what the encoding cannot show."""
    return "".join(_PLAIN.get(ch, "?") for ch in err.object[err.start:err.end]), err.end


def tolerant_output() -> None:
    """Make stdout and stderr write what their encoding cannot show as ASCII (``±`` as ``+/-``, ``…`` as
    ``...``): PYTHONIOENCODING=ascii or a latin-1 locale then gets the numbers, not a UnicodeEncodeError."""
    codecs.register_error("costmodel-plain", _plain_text)
    for stream in (sys.stdout, sys.stderr):
        if callable(getattr(stream, "reconfigure", None)):
            stream.reconfigure(errors="costmodel-plain")


def main() -> None:
    """Console entry point: run the typer app; a CostmodelError becomes one line and its exit code."""
    tolerant_output()
    try:
        check_repeated_options(typer.main.get_command(app), sys.argv[1:])
        check_empty_values(typer.main.get_command(app), sys.argv[1:])
        check_integer_values(typer.main.get_command(app), sys.argv[1:])
        rc = app(standalone_mode=False)   # returns the code of a typer.Exit raised by a command
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except CostmodelError as e:
        if not isinstance(e, InfeasibleError):
            remove_empty_created_dirs()      # a refused run leaves no empty --plot folder behind
        kind = "infeasible" if isinstance(e, InfeasibleError) else "error"
        if isinstance(e, InfeasibleError) and "--json" in sys.argv[1:]:
            from .notes import said
            # a script reading stdout gets the answer too, with the notes printed before it
            print(json.dumps(dict(e.record(), **({"notes": said()} if said() else {})), indent=2))
        print(f"costmodel: {kind}: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except OSError as e:            # an unreadable, unwritable or unnameable file: name it, no traceback
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"costmodel: error: {where}{e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("costmodel: aborted", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        # usage errors (bad flag, missing option, no command) come from click, or from the copy of
        # click that typer >= 0.29 vendors: both carry show() and exit_code
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            fmt = getattr(e, "format_message", None)
            if type(e).__name__ == "NoArgsIsHelpError" or not callable(fmt):
                e.show()                      # a bare command: its help is the answer
            else:                             # one line, like every other error
                ctx = getattr(e, "ctx", None)
                names, c = [], ctx
                while c is not None and c.parent is not None:      # the command path below the program
                    names.append(c.info_name)
                    c = c.parent
                cmd = f" (costmodel {' '.join(reversed(names))} --help)" if names else ""
                print(f"costmodel: error: {' '.join(fmt().split())}{cmd}", file=sys.stderr)
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
