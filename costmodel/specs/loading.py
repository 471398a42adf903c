"""Loading helpers shared by the spec readers: where the built-in catalog lives, reading a YAML/JSON
mapping, resolving a catalog name or a path, and typed field access that raises
:class:`costmodel.errors.InputError` naming the file and the field.
"""
from __future__ import annotations

import difflib
import os
import re
import json
import math
from importlib import resources
from pathlib import Path

import yaml

from ..errors import CostmodelError, InputError
from ..units import parse_quantity
from ..files import read_text

#: libyaml's safe loader where PyYAML was built with it (the same YAML, parsed about ten times faster:
#: validate reads a profile and a cluster per row group), else the pure-Python one
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_YAML_LOADER):
    """:data:`_YAML_LOADER` refusing a key written twice in one mapping: PyYAML keeps the last one
    silently, so a repeated section (a second ``model:``) would replace the first unnoticed.  Keys a
    merge (``<<: *anchor``) brings in may be overridden, as YAML intends."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)          # 2 and '2' are two keys, as YAML reads them
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} written twice in one mapping (first at line "
                    f"{seen[key] + 1}): YAML would keep only the second", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


#: values a YAML document may expand to through its aliases: a run configuration holds thousands; a few
#: lines of nested aliases can stand for billions (an alias bomb), which every later walk would expand
MAX_YAML_VALUES = 1_000_000


def _expanded_size(obj, memo: dict) -> int:
    """Values ``obj`` holds counted as a reader walking it meets them (a shared node once per
    reference), memoised per node so that the count itself never walks the expansion."""
    if not isinstance(obj, (dict, list)):
        return 1
    key = id(obj)
    if key not in memo:
        memo[key] = 0                       # a cycle (YAML allows one) counts once
        items = obj.values() if isinstance(obj, dict) else obj
        memo[key] = 1 + sum(_expanded_size(v, memo) for v in items)
    return memo[key]


def yaml_load(text: str):
    """``yaml.safe_load`` through :data:`_YAML_LOADER`, refusing a key written twice in one mapping
    (:class:`_UniqueKeyLoader`) and a document that expands beyond :data:`MAX_YAML_VALUES` values
    through its aliases.  Raises yaml.YAMLError on malformed text, a repeated key or such a document."""
    # a flow list's commas and a block list's dashes bound its written values from below: a file that
    # writes more than the limit is refused before PyYAML spends seconds building it
    written = text.count(",") + text.count("\n-") + text.count("\n  -")
    if written > MAX_YAML_VALUES:
        raise yaml.YAMLError(f"it writes over {MAX_YAML_VALUES:,} values: too large for a hardware or configuration "
                             "file")
    d = yaml.load(text, Loader=_UniqueKeyLoader)
    n = _expanded_size(d, {})
    if n > MAX_YAML_VALUES:
        aliased = re.search(r"&[\w-]+", text) is not None and re.search(r"\*[\w-]+", text) is not None
        raise yaml.YAMLError((f"its aliases expand it to {n:,} values, over {MAX_YAML_VALUES:,} (a YAML alias bomb?): "
                              "write the values out") if aliased else
                             f"it holds {n:,} values, over {MAX_YAML_VALUES:,}: too large for a hardware or "
                             "configuration file")
    return d


class DuplicateKeyError(CostmodelError, ValueError):
    """A JSON object with one key twice (:func:`json_load`); ``key`` is the repeated key."""

    def __init__(self, key: str):
        super().__init__(f"key {key!r} written twice in one object: JSON readers keep only the second")
        self.key = key


def _unique_pairs(pairs) -> dict:
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKeyError(k)
        out[k] = v
    return out


def json_load(text: str):
    """``json.loads`` refusing a key written twice in one object, which Python's reader (like
    Hugging Face's) resolves silently to the last value.

    Raises:
        json.JSONDecodeError: malformed text; DuplicateKeyError: a repeated key.
    """
    return json.loads(text, object_pairs_hook=_unique_pairs)


def _package_dir(sub: str) -> Path:
    """Directory of built-in data: the source checkout's folder, else the installed package's."""
    here = Path(__file__).resolve().parent.parent
    if sub == "catalog":
        return here / "catalog"
    checkout = here.parent / "hardware"
    if (checkout / "gpus").is_dir():
        return checkout
    return Path(str(resources.files("costmodel.hardware")))


def hardware_dir() -> Path:
    """The built-in hardware catalog (hardware/ in a checkout, costmodel/hardware when installed)."""
    return _package_dir("hardware")


def catalog_dir() -> Path:
    """The built-in model catalog folder (costmodel/catalog/*.json)."""
    return _package_dir("catalog")


def _read_mapping(path: Path) -> dict:
    try:
        text = read_text(path)
    except IsADirectoryError:
        raise InputError(path, "", "is a directory, not a file") from None
    except OSError as e:
        raise InputError(path, "", f"cannot read file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise InputError(path, "", f"not a UTF-8 text file (byte {e.start}: {e.reason})") from None
    if not text.strip():
        raise InputError(path, "", "file is empty")
    try:
        data = json_load(text) if path.suffix == ".json" else yaml_load(text)
    except RecursionError:
        raise InputError(path, "", "nested too deeply to read (a spec file is a few levels of mappings)") from None
    except DuplicateKeyError as e:
        raise InputError(path, e.key, "written twice in one object: Python's JSON reader (and Hugging Face's) "
                         "keeps only the second; give it once") from None
    except json.JSONDecodeError as e:
        raise InputError(path, "", f"not valid JSON: {str(e).splitlines()[0]}") from None
    except ValueError as e:
        # PyYAML and json refuse an integer of over 4,300 digits (sys.set_int_max_str_digits)
        why = ("holds an integer of over 4,300 digits, which no spec value is" if "digits" in str(e)
               else f"not readable: {str(e).splitlines()[0]}")
        raise InputError(path, "", why) from None
    except yaml.YAMLError as e:
        raise InputError(path, "", f"not valid YAML: {yaml_error_text(e)}") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping of keys to values at the top level")
    return data


def refuse_nulls(d, where, path: str = "", skip: tuple = (), _seen=None) -> None:
    """Refuse a key written with no value (``key:``, ``null``, ``~``) anywhere in ``d`` but under the
    keys ``skip`` names: read as absent, it would take a default that a missing key is refused for.
    A YAML alias (``*id``) of a mapping already walked is not walked again (an anchor may hold itself).

    Raises:
        InputError: naming the file and the dotted key.
    """
    seen = set() if _seen is None else _seen
    if id(d) in seen:
        return
    seen.add(id(d))
    items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
    for k, v in items:
        at = f"{path}[{k}]" if isinstance(d, list) else (f"{path}.{k}" if path else str(k))
        if v is None:
            raise InputError(where, at, "has no value (null): give one, or leave the key out where it is optional")
        if not (isinstance(d, dict) and k in skip):
            refuse_nulls(v, where, at, skip, seen)


def yaml_error_text(e: yaml.YAMLError) -> str:
    """A YAML parse error as one line: where it stopped (line and column, 1-based) and why (PyYAML's
    problem, e.g. "found character '\\t' that cannot start any token"), then its context."""
    mark = getattr(e, "problem_mark", None)
    why = "; ".join(x for x in (getattr(e, "problem", None), getattr(e, "context", None)) if x)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + (why or str(e).splitlines()[0])


def _exists(p: Path) -> bool:
    """Path.exists that answers False for a name the OS cannot look up (too long, a NUL byte)."""
    try:
        return p.exists()
    except (OSError, ValueError):
        return False


def _resolve(name_or_path: str, folder: Path, exts: tuple[str, ...], what: str, flag: str) -> Path:
    """The file of a catalog name or a path (a folder with a config.json for a model).

    Raises:
        InputError: not a string or path, empty, unknown, or a path that is no readable file."""
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise InputError(flag, "", f"expected a catalog {what} name or a file path, got {type(name_or_path).__name__}")
    if not name_or_path.strip():
        raise InputError(flag, "", f"is empty: give a catalog {what} name or a {what} file's path")
    if len(name_or_path) > 4096 or "\0" in name_or_path:
        raise InputError(flag, "", f"{what} {name_or_path[:40]!r}... is neither a catalog name nor a file path "
                         f"({len(name_or_path)} characters)")
    p = Path(name_or_path)
    if p.suffix in (".json", ".yaml", ".yml") or _exists(p):
        try:
            is_dir, is_file = p.is_dir(), p.is_file()
        except (OSError, ValueError) as e:
            raise InputError(flag, "", f"{what} file {name_or_path[:80]!r}: {e.strerror or e}") from None
        if is_dir and what == "model" and (p / "config.json").is_file():
            return p / "config.json"        # a Hugging Face snapshot folder, as from_pretrained takes it
        if is_dir:
            raise InputError(flag, "", f"{what} file {name_or_path!r} is a directory, not a file"
                             + (" (nor a folder with a config.json)" if what == "model" else ""))
        if not is_file:
            raise InputError(flag, "", f"{what} file {name_or_path!r} does not exist")
        return p
    names = sorted(f.stem for ext in exts for f in folder.glob(f"*{ext}"))
    if name_or_path in names:
        for ext in exts:
            if (folder / f"{name_or_path}{ext}").is_file():
                return folder / f"{name_or_path}{ext}"
    # a GPU's name where a cluster goes, or the reverse: say which catalog holds it
    other = {"cluster": "gpus", "GPU": "clusters"}.get(what)
    if other and any((folder.parent / other / f"{name_or_path}{ext}").is_file() for ext in exts):
        raise InputError(flag, "", f"{name_or_path!r} is a catalog {'GPU' if other == 'gpus' else 'cluster'}, not a "
                         f"{what} (known {what}s: {', '.join(names)})")
    close = difflib.get_close_matches(name_or_path, names, n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(names)}"
    raise InputError(flag, "", f"unknown {what} {name_or_path!r}{hint}")


#: the least fraction of a peak a fitted efficiency may be: below it the value is a typo, and its
#: reciprocal's powers overflow the uncertainty and power arithmetic (a CPU suite's gloo collectives
#: fit about 5e-5 of the NVLink they are normalised by)
MIN_EFFICIENCY = 1e-6


def _get(d: dict, key: str, where, kind: str = "number", *, required=True, positive=True,
         default=None, prefix="", maximum=None, minimum=None):
    """The number under ``key`` (``kind`` a unit kind of :func:`parse_quantity`), in (0, maximum]
    (``positive``), at least ``minimum``; a positive fraction of a peak (``maximum`` 1) at least
    :data:`MIN_EFFICIENCY`.

    Raises:
        InputError: missing when ``required``, not a finite number, out of range (naming the field).
    """
    name = prefix + key
    fraction = maximum == 1.0 and positive          # an efficiency: a fraction of a peak
    if minimum is None and fraction:
        minimum = MIN_EFFICIENCY
    if key not in d or d[key] is None:
        if required:
            raise InputError(where, name, "missing")
        return default
    try:
        x = parse_quantity(d[key], kind, where, name)
    except OverflowError:
        raise InputError(where, name, f"must be a finite number, got an integer of {len(str(d[key]))} digits") from None
    if not math.isfinite(x):
        raise InputError(where, name, f"must be a finite number, got {d[key]!r}")
    if positive and not x > 0:
        raise InputError(where, name, f"must be positive, got {d[key]!r}")
    if maximum is not None and x > maximum:
        raise InputError(where, name, f"must be at most {maximum:g}" + (" (a fraction of the peak)" if fraction
                                                                         else "") + f", got {d[key]!r}")
    if minimum is not None and x < minimum:
        raise InputError(where, name, f"must be at least {minimum:g}" + (" (a fraction of the peak)" if fraction
                                                                          else "") + f", got {d[key]!r}")
    return x


def _get_int(d: dict, keys: tuple[str, ...], where, *, required=True, default=None, minimum=1, maximum=2**31 - 1,
             agree=True):
    """The integer under the first of ``keys`` (spellings of one count) present in ``d``.

    ``agree=False`` where the keys may legitimately differ and the first wins (a padded vocabulary
    over the tokenizer's; a generation ``top_k`` that older configs serialise beside the router's).

    Raises:
        InputError: a value that is not an integer or outside [minimum, maximum]; two spellings that
            disagree (naming both) when ``agree``; a missing required key.
    """
    found = []
    for k in keys:
        if k in d and d[k] is not None:
            v = d[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and (
                    not math.isfinite(v) or int(v) != v)):
                raise InputError(where, k, f"expected an integer, got {v!r}")
            if isinstance(v, int) and abs(v) > 10 ** 30:          # compared without a float, which would overflow
                raise InputError(where, k, f"must be <= {maximum}, got an integer of {len(str(abs(v)))} digits")
            if v < minimum:
                raise InputError(where, k, f"must be >= {minimum}, got {v!r}")
            if v > maximum:
                raise InputError(where, k, f"must be <= {maximum}, got {v!r}")
            found.append((k, int(v)))
    for k, v in found[1:] if agree else ():
        if v != found[0][1]:
            raise InputError(where, found[0][0], f"{found[0][1]} disagrees with {k} {v} (two spellings of one count)")
    if found:
        return found[0][1]
    if required:
        raise InputError(where, keys[0], "missing" + (f" (also looked for {', '.join(keys[1:])})"
                                                      if len(keys) > 1 else ""))
    return default


def _get_str(d: dict, key: str, where, choices=None, *, required=True, default=None, prefix=""):
    if key not in d or d[key] is None:
        if required:
            raise InputError(where, prefix + key, "missing")
        return default
    v = d[key]
    if not isinstance(v, str):
        raise InputError(where, prefix + key, f"expected a string, got {v!r}")
    if choices and v not in choices:
        raise InputError(where, prefix + key, f"{v!r} is not one of {', '.join(choices)}")
    return v


def _sub(d: dict, key: str, where) -> dict:
    v = d.get(key)
    if not isinstance(v, dict):
        raise InputError(where, key, "missing section" if v is None else "expected a mapping")
    return v


def check_source_keys(d: dict, where, schema=()) -> None:
    """Refuse a ``sources:`` entry that names no field of the file (a misspelt path would leave the
    field it meant unsourced while looking cited).  ``schema``: the dotted fields the file kind has; a
    source of one of them that the file leaves out says the field is missing, not misspelt.

    Raises:
        InputError: ``sources`` not a mapping, or naming ``sources.KEY`` and the closest dotted path the
            file has (or the schema field it leaves out).
    """
    if d.get("sources") is not None and not isinstance(d["sources"], dict):
        raise InputError(where, "sources", f"expected a mapping of field -> its source, got {type(d['sources']).__name__}")
    def paths(x, pre=""):
        for k, v in x.items():
            if k == "sources":
                continue
            yield pre + str(k)
            if isinstance(v, dict):
                yield from paths(v, pre + str(k) + ".")
    have = list(paths(d))
    for k in d.get("sources") or {}:
        if str(k) not in have and str(k) in schema:
            raise InputError(where, str(k), "missing (its source is given): give its value")
        if str(k) not in have:
            close = difflib.get_close_matches(str(k), have, n=1, cutoff=0.75)
            raise InputError(where, f"sources.{k}", "names no field of this file"
                             + (f" (did you mean {close[0]}?)" if close else
                                f": the file gives no {k} (give its value, or drop its source)"))


def _check_sources(d: dict, where, numeric_paths: list[str]):
    """Every one of ``numeric_paths`` the file gives has a ``sources`` entry (its own, or its section's).

    Raises:
        InputError: no sources mapping; every missing entry of the list in one message, named from the
            first; an entry that is not a citation."""
    src = d.get("sources")
    if not isinstance(src, dict):
        raise InputError(where, "sources", "missing: every number needs its source")
    missing = [p for p in numeric_paths if p not in src and p.split(".")[0] not in src and _has_path(d, p)]
    if missing:
        raise InputError(where, f"sources.{missing[0]}", "missing: every number needs its source"
                         + (f"; also sources.{', sources.'.join(missing[1:])}" if missing[1:] else ""))
    for p in numeric_paths:
        top = p.split(".")[0]
        cite = src.get(p, src.get(top))
        if _has_path(d, p) and not (isinstance(cite, str) and cite.strip()):
            raise InputError(where, f"sources.{p if p in src else top}", f"{cite!r} is not a source: give the "
                             "datasheet, capture or paper the number comes from")


def _has_path(d: dict, dotted: str) -> bool:
    """Whether the mapping ``d`` holds the dotted key (a field the file leaves out is named by the
    reader that needs it, as missing, not as an unsourced number)."""
    for part in dotted.split("."):
        if not isinstance(d, dict) or d.get(part) is None:
            return False
        d = d[part]
    return True
