"""Reading the user's text files one way, and writing output files so that a failed write never leaves
a half-written file or loses the old one: write beside the target, then rename over it (``os.replace``
is atomic on one filesystem); and never over a file the same command reads."""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable

from .errors import InputError


#: every text input is read as UTF-8 with "utf-8-sig", which drops the byte-order mark that a spreadsheet's
#: "CSV UTF-8" export and Windows editors write first (it would otherwise glue itself to the first
#: header, key or line)
TEXT_ENCODING = "utf-8-sig"


def read_text(path, lenient: bool = False) -> str:
    """The text of the file ``path`` (str or Path) as UTF-8, a leading byte-order mark dropped
    (:data:`TEXT_ENCODING`); ``lenient`` replaces bytes that are not UTF-8 with U+FFFD (logs and
    monitoring output, where a stray byte must not lose the rest) instead of raising.

    Raises:
        OSError: as ``open`` raises (missing file, a directory, no permission).
        UnicodeDecodeError: bytes that are not UTF-8, unless ``lenient`` (the caller names the file).
    """
    return Path(path).read_text(encoding=TEXT_ENCODING, errors="replace" if lenient else "strict")


def not_a_file(path) -> str:
    """Why ``path``, which is not a regular file or a directory, cannot be read as an input: missing, or
    a device, pipe or socket (``/dev/null`` is no capture)."""
    return "no such file" if not Path(path).exists() else "is not a regular file (a device, pipe or socket)"


def open_text(path, lenient: bool = False):
    """``path`` opened for reading text line by line, decoded as :func:`read_text` decodes it (the
    same ``lenient`` and errors)."""
    return open(path, encoding=TEXT_ENCODING, errors="replace" if lenient else "strict")


#: the long name of each short output option, so that the option's own value is told from the inputs
_ALIASES = {"-o": ("-o", "--output"), "--output": ("-o", "--output")}


def _named_inputs(flag: str, argv) -> list:
    """Existing files the command line names other than as ``flag``'s own value."""
    own = _ALIASES.get(flag, (flag,))
    out, skip = [], False
    for tok in argv[1:]:
        if skip:
            skip = False
            continue
        if tok in own:
            skip = True
            continue
        name, eq, val = tok.partition("=")
        if eq and name.startswith("-"):
            if name in own:
                continue
            tok = val
        if tok and not tok.startswith("-") and os.path.isfile(tok):
            out.append(tok)
    return out


def _not_regular(path) -> str:
    """What ``path`` is (its link followed) when it exists and is neither a regular file nor a folder
    ("a pipe (FIFO)", "a character device", ...); "" otherwise."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return ""
    return ("a pipe (FIFO)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def writes_into(path) -> bool:
    """Whether a text output at ``path`` is written into what is there (a pipe or a character device,
    such as ``/dev/null``) rather than replaced by a new file (:func:`write_atomically`)."""
    return _not_regular(path) in ("a pipe (FIFO)", "a character device")


def is_own_output(path) -> bool:
    """Whether ``path`` is this process's own standard output or error (``/dev/stdout``, ``/dev/fd/1``, or
    the file the shell redirected it into): a file the shell opened for this command, not one it found."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    for fd in (1, 2):
        try:
            if os.path.samestat(st, os.fstat(fd)):
                return True
        except OSError:
            continue
    return False


def check_no_clobber(path, flag: str, force: bool, what: str) -> None:
    """Refuse to replace an existing regular file at ``path`` unless ``force``: a fitted profile or a
    suite's measurements written over would be lost (a device, pipe, missing file or the command's own
    redirected output, :func:`is_own_output`, passes).

    Raises:
        InputError: naming ``flag``, the file and --force."""
    p = Path(path)
    if not force and p.is_file() and not is_own_output(p):
        raise InputError(flag, "", f"{p} exists: writing {what} would replace it; give --force to replace it, or "
                         "another file")


def check_output(path, flag: str, inputs=(), argv=None, stream: bool = False) -> Path:
    """Refuse an output path that would lose data or cannot be written.

    Args:
        path: the file to write.  flag: the option that named it, for messages.
        inputs: files the command reads that the command line may not name (a configuration's
            own references); every existing file the command line names (``argv``, default
            ``sys.argv``) other than as ``flag``'s value counts as an input too.
        stream: the output is text, which may go into an existing pipe or character device
            (``-o /dev/null``, a FIFO; :func:`writes_into`) instead of a new file.
    Returns:
        ``path`` as a Path.
    Raises:
        InputError: ``path`` is a directory, is (or links to) an input, is a device, pipe or socket that
            this output cannot go into, or its folder (a link's target's) does not exist or takes no
            new file (read-only, /proc).
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(flag, "", f"{path} is a directory; name the file to write")
    if path.exists():
        for f in list(inputs) + _named_inputs(flag, sys.argv if argv is None else argv):
            try:
                same = os.path.samefile(path, f)
            except OSError:
                same = False
            if same:
                raise InputError(flag, "", f"{path} is also an input of this command ({f}): writing would overwrite it")
    kind = _not_regular(path)
    if kind and stream and writes_into(path):
        return path             # written into as it is (never replaced): no file is made beside it
    if kind:        # replacing a device, pipe or socket by a file would break whatever else uses it
        raise InputError(flag, "", f"{path} is {kind}, not a regular file: name a file to write")
    # a symbolic link is kept and the file it points to written: that file's folder must take it
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    name = f"{path} (a link to {real})" if real != path else f"{path}"
    if real.parent.exists() and not real.parent.is_dir():
        raise InputError(flag, "", f"cannot write {name}: {real.parent} is a file, not a folder")
    if not real.parent.is_dir():
        raise InputError(flag, "", f"cannot write {name}: the folder {real.parent} does not exist")
    try:            # outputs are written beside their target, then renamed: the folder must take a file
        with tempfile.TemporaryFile(dir=real.parent):
            pass
    except OSError as e:
        raise InputError(flag, "", f"cannot write {name}: the folder {real.parent} takes no file "
                         f"({e.strerror or e})") from None
    return path


def _mode_for(path: Path) -> int:
    """The mode to give a written file: the old file's, else 0666 less the umask (as open() would)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_atomically(path, write: Callable[[str], None] | str, flag: str, inputs=()) -> Path:
    """Write ``path`` through a temporary file in its folder, renamed over it when complete.

    Args:
        path: the file to write (checked by :func:`check_output`; its folder must exist).
        write: the text to write, or a function that writes the file whose name it is given (e.g. a
            matplotlib figure's ``savefig``; the temporary name keeps the target's suffix, which
            sets the format).
        flag: the option that named the file, for messages.
        inputs: files the command reads beyond those its command line names (:func:`check_output`).
    Returns:
        the path written.
    Raises:
        InputError: :func:`check_output` refuses the path, the file cannot be written, or the writer
            refuses the format (names the flag and the path); the old file, if any, is left as it was.
    The written file keeps the old file's mode, else gets 0666 less the umask; a ``path`` that is a
    symbolic link is kept and the file it points to is written; text for a pipe or a character device
    (:func:`writes_into`) is written into it, never a file put in its place.
    """
    named = check_output(path, flag, inputs, stream=isinstance(write, str))
    # a symbolic link stays a link: the file it points to is what gets replaced
    path = Path(os.path.realpath(named)) if named.is_symlink() else named
    if isinstance(write, str) and writes_into(path):
        try:        # a pipe or device (-o /dev/null) takes the text as it is, as a shell's > would
            with open(path, "w", encoding="utf-8") as f:
                f.write(write)
        except OSError as e:
            raise InputError(flag, "", f"cannot write {named}: {e.strerror or e}") from None
        return named
    mode = _mode_for(path)
    try:
        # the name given sets the format (a link plot.png may point to a name without a suffix)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=named.suffix or path.suffix or ".tmp")
        os.close(fd)
        try:
            if isinstance(write, str):
                Path(tmp).write_text(write, encoding="utf-8")
            else:
                write(tmp)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise InputError(flag, "", f"cannot write {path}: {e.strerror or e}") from None
    except ValueError as e:                        # e.g. a figure format matplotlib does not write
        raise InputError(flag, "", f"cannot write {path}: {e}") from None
    return named


#: names of image files: a folder to create under one of them is a plot's file name given to a folder option
_IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def output_dir(path, flag: str, command: str = "this command", files=()) -> Path:
    """The folder an option names for the files it writes, created when missing inside a folder that
    exists (as :func:`check_output` wants the folder of an output file to exist: a mistyped parent is
    an error, not a new tree).  ``command`` names who writes there, for the messages; ``files`` are the
    names it will write there, each checked as :func:`check_output` checks a file.

    Raises:
        InputError: ``path`` is a file, or does not exist and is named as an image (``x.png``: a file
            name, which would have become a folder of that name), its parent folder does not exist, the
            folder cannot be created, or one of ``files`` cannot be written there (names ``flag``).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(flag, "", f"{path} is a file; name a folder for the plots")
    if not path.exists() and path.suffix.lower() in _IMAGE_SUFFIXES:
        raise InputError(flag, "", f"{path} is named as an image file; {command} writes its plots into a folder: "
                         f"name a folder for the plots (e.g. {path.with_suffix('')})")
    parent = path.absolute().parent
    if not path.exists() and parent.exists() and not parent.is_dir():
        raise InputError(flag, "", f"cannot create {path}: {parent} is a file, not a folder")
    if not path.exists() and not parent.is_dir():
        raise InputError(flag, "", f"cannot create {path}: the folder {parent} does not exist")
    try:
        if not path.exists():
            path.mkdir()
            CREATED_DIRS.append(path)
    except OSError as e:
        raise InputError(flag, "", f"cannot create the folder {path}: {e.strerror or e}") from None
    for name in files:          # a folder, pipe or dangling link of that name found now, not after the work
        check_output(path / name, flag)
    return path


#: folders :func:`output_dir` created in this process: a command that fails after creating one removes
#: it again while it is empty (costmodel.cli.main), so a refused run leaves nothing behind
CREATED_DIRS: list = []


def remove_empty_created_dirs() -> None:
    """Remove the folders :data:`CREATED_DIRS` lists that are still empty (a failed command's)."""
    for d in reversed(CREATED_DIRS):
        try:
            d.rmdir()           # only an empty folder goes
        except OSError:
            pass
    CREATED_DIRS.clear()
