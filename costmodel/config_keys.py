"""Misspelt keys in a run configuration file (``predict --config``, ``compare --config``).

A configuration reader looks a value up by its key and, when the key is absent, leaves the field to
the flags and the stack's default.  A key typed with one slip (``tensor_model_parallel_sizee``,
``micro_batch_sise``) is therefore not an error to the reader: the run would be priced on a default
its author never chose.  This module records which keys each mapping of the parsed file was asked for
(:func:`track`) and, after the reader is done, refuses a key that nobody asked for when it is one edit
away from a key that was asked for and is absent (:func:`check_misspelt`).

One edit is the optimal-string-alignment distance (Damerau 1964: an insertion, a deletion, a
substitution or a transposition of two neighbouring characters).  Keys of the same family that differ
by more (``encoder_seq_length`` and ``decoder_seq_length``, ``ub_tp_comm_overlap`` and
``ub_tp_comm_overlap_cfg``) are never taken for each other.  Real keys one edit apart (``fp8`` and
``fp4``, ``fp8_recipe`` and ``fp4_recipe``) are safe only because the reader looks up both: a key it
looked up is never taken for a misspelling.  When the reader refuses a value, the misspellings are
checked first: a refusal that follows from a misspelt key would otherwise name the wrong one.
"""
from __future__ import annotations

from .errors import InputError

#: keys shorter than this are not checked (one edit turns any two-letter key into another)
MIN_KEY_CHARS = 3


class TrackedMapping(dict):
    """A dict that remembers the keys looked up in it (``get``, ``[]``, ``in``) and its dotted place
    in the file (``where``, '' at the top)."""

    def __init__(self, items, where: str):
        super().__init__(items)
        self.where = where
        self.asked: set = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)


def track(obj, where: str = ""):
    """``obj`` (a parsed YAML/TOML document) with every mapping, nested ones and those inside lists
    too, replaced by a :class:`TrackedMapping`; other values as they are."""
    if isinstance(obj, dict):
        return TrackedMapping({k: track(v, f"{where}{k}." if isinstance(k, str) else where)
                               for k, v in obj.items()}, where)
    if isinstance(obj, list):
        return [track(v, where) for v in obj]
    return obj


def one_edit_apart(a: str, b: str) -> bool:
    """True when the optimal-string-alignment distance of ``a`` and ``b`` is exactly 1 (one insertion,
    deletion, substitution, or transposition of neighbouring characters; Damerau 1964)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = next((i for i, (x, y) in enumerate(zip(short, long_)) if x != y), len(short))
    return short[i:] == long_[i + 1:]


def _mappings(obj):
    if isinstance(obj, TrackedMapping):
        yield obj
        for v in dict.values(obj):
            yield from _mappings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _mappings(v)


def misspelt_keys(doc) -> list:
    """``(dotted key as written, dotted key it stands for)`` for every key of ``doc`` (a :func:`track`-ed
    document the reader has read) that was never looked up and is one edit from a key that was looked
    up in the same mapping and is absent; in the file's order."""
    found = []
    for m in _mappings(doc):
        missing = [k for k in m.asked if isinstance(k, str) and len(k) >= MIN_KEY_CHARS and not dict.__contains__(m, k)]
        if not missing:
            continue
        for key in dict.keys(m):
            if not isinstance(key, str) or key in m.asked or len(key) < MIN_KEY_CHARS:
                continue
            # a file's key is not a slip for a reader's private one ('bias' is not '_bias')
            near = sorted(k for k in missing if one_edit_apart(key, k) and k.startswith("_") == key.startswith("_"))
            if near:
                found.append((m.where + key, m.where + near[0]))
    return found


def misplaced_keys(doc) -> list:
    """``(dotted key as written, dotted key the reader looked for)`` for every key of ``doc`` that nobody
    looked up where it stands but that the reader looked up, and did not find, in another mapping: a
    real key in the wrong section (torchtitan's ``tensor_parallel_degree`` under ``[training]``, NeMo's
    ``tensor_model_parallel_size`` under ``trainer``), which its framework would refuse and which read
    as written would leave the default in force."""
    wanted: dict = {}
    for m in _mappings(doc):
        for k in m.asked:
            if isinstance(k, str) and len(k) >= MIN_KEY_CHARS and not dict.__contains__(m, k):
                wanted.setdefault(k, m.where + k)
    found = []
    for m in _mappings(doc):
        for key in dict.keys(m):
            if isinstance(key, str) and key not in m.asked and key in wanted and wanted[key] != m.where + key:
                found.append((m.where + key, wanted[key]))
    return found


def check_misspelt(doc, path: str, misplaced: bool = True) -> None:
    """Refuse the keys :func:`misspelt_keys` and (with ``misplaced``) :func:`misplaced_keys` find, all of
    them in one message.

    Raises:
        InputError: naming the file and the first such key, and each key with the one it stands for.
    """
    moved = misplaced_keys(doc) if misplaced else []
    if moved:
        what = "; ".join(f"{k}: read as {near}" for k, near in moved[1:])
        raise InputError(path, moved[0][0], f"in the wrong section: the reader (and the framework) reads it as "
                         f"{moved[0][1]}; read where it stands it would be ignored and the default taken"
                         + (f"; also {what}" if what else ""))
    found = misspelt_keys(doc)
    if found:
        what = "; ".join(f"{k}: did you mean {near}?" for k, near in found[1:])
        raise InputError(path, found[0][0], f"not a key the reader knows; did you mean {found[0][1]}? (one edit "
                         "away; read as written it would be ignored and the default taken)" + (f"; also {what}" if what else ""))


def read_checked(read, doc, path: str):
    """``read()`` (a reader of the tracked ``doc``), then :func:`check_misspelt`; when the reader refuses
    a value, the misspellings are checked first, since a refusal that a misspelt key caused would name
    the wrong key.

    Raises:
        InputError: a misspelt key, or the reader's own refusal.
    """
    try:
        out = read()
    except InputError:
        # a slip may have caused the refusal; a key in another section is said once the reader got through
        check_misspelt(doc, path, misplaced=False)
        raise
    check_misspelt(doc, path)
    return out

