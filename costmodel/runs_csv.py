"""Reading a CSV of measured runs in the dev-set schema (README, 'Validate'; benchmarks/data/dev_set*.csv):
its header checked against the schema's columns, each row a dict of its cells with its line in the file."""
from __future__ import annotations

import csv
import difflib
import re
from pathlib import Path

from .errors import InputError
from .files import read_text

#: every column a published-run CSV may have (README, 'Validate'; benchmarks/data/dev_set*.csv)
RUN_COLUMNS = ("row_id", "source_file", "source_url", "gpu", "num_gpus", "gpus_per_node", "interconnect_note", "model",
               "params_b", "num_layers", "hidden", "ffn_hidden", "num_heads", "num_kv_heads", "head_dim", "vocab",
               "seq_len", "num_experts", "moe_topk", "gbs", "mbs", "tp", "pp", "dp", "cp", "ep", "etp", "vp",
               "sequence_parallel", "recompute", "fsdp_or_zero", "dp_replicate", "precision", "step_time_s",
               "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "stack", "notes")

METRICS = {
    "step_time_s": "step time as published",
    "hardware_tflops_per_gpu": "hardware TFLOP/s (executed FLOPs: model FLOPs x 4/3 under full recompute, "
                               "Narayanan et al. SC21 / Megatron-DeepSpeed 'TFLOPs')",
    "model_tflops_per_gpu": "model TFLOP/s (Megatron formula, no recompute; attention s x s, or its causal "
                            "half where the row's notes say 'causal attention')",
    "tokens_per_s_per_gpu": "tokens/s/GPU (gbs x seq_len / step time / GPUs)",
}


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
#: the key of a row's line in its file (where the row starts), beside its columns' cells
LINE = "_line"


def _data_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, line) of each line that is not a comment: one whose first non-blank character is '#'
    outside a quoted cell (a line inside a multi-line notes cell is the cell's, whatever it starts with)."""
    out, quoted = [], False
    for n, ln in enumerate(lines, 1):
        if quoted or not ln.lstrip().startswith("#"):
            out.append((n, ln))
            quoted ^= ln.count('"') % 2 == 1      # an escaped quote ("") keeps the parity
    return out


def _slips(unknown, columns, cutoff: float) -> list:
    """'given' for 'meant' of each header name in ``unknown`` that stands for one of ``columns`` (the
    schema's names, lower-case): the same name in another case, else the closest at difflib ratio
    ``cutoff`` or more."""
    return [f"{u!r} for {m[0]!r}" for u in unknown
            for m in [[u.lower()] if u.lower() in columns else
                      difflib.get_close_matches(u.lower(), sorted(columns), 1, cutoff)] if m]


def read_runs_csv(path: str | Path) -> list[dict]:
    """Read a throughput CSV (dev-set schema), skipping '#' comment lines: one dict of cells per row, with the
    row's line in the file under :data:`LINE`.

    Raises:
        InputError: unreadable file, another separator than the comma, a repeated column, a header
            without the dev-set columns or any measured column (:data:`METRICS`), a row with more
            cells than the header, a malformed quoted cell (a file cut inside one), a repeated row_id, or no
            row (a row with fewer cells is reported as malformed by costmodel.validate.validate_rows).
    """
    path = Path(path)
    try:
        # lines end at \n, \r\n or \r only, as the csv module reads them: str.splitlines also splits
        # at \v, \f, U+0085 and U+2028, which a cell may hold, and cut its row in two
        numbered = _data_lines(_LINE_BREAK.split(read_text(path)))
        lines = [ln for _, ln in numbered]
    except OSError as e:
        raise InputError(path, "", f"cannot read file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise InputError(path, "", f"not a UTF-8 text file (byte {e.start}: {e.reason})") from None
    if not any(ln.strip() for ln in lines):
        raise InputError(path, "", "is empty (no header, no row)")
    head = [c.strip() for c in next(csv.reader(lines[:1], skipinitialspace=True), [])]
    for sep, name in ((";", "semicolons"), ("\t", "tabs")):
        if len(head) == 1 and sep in head[0]:
            raise InputError(path, "header", f"its columns are separated by {name}: save it as a comma-separated CSV")
    need = {"row_id", "gpu", "num_gpus", "gpus_per_node", "num_layers", "hidden", "num_heads", "gbs", "tp", "pp",
            "seq_len", "precision"}
    if not need & set(head) and any(re.fullmatch(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", c) for c in head):
        # a data row first (a header names columns; its empty cells would read as a repeated column '')
        raise InputError(path, "header", "is missing: the first line is a data row; put the schema's header line "
                         "first (README, 'Validate')")
    dup = sorted({c for c in head if head.count(c) > 1})
    if dup:                          # a repeated column: which copy a row means is ambiguous
        raise InputError(path, "header", f"column {dup[0]!r} appears {head.count(dup[0])} times")
    # the columns every row needs (``need`` above; mbs may be empty: the search picks it; the architecture
    # columns may be empty where the row names a catalog model, but not absent from the file)
    if not need & set(head):         # a README or another table: no column of the schema at all
        raise InputError(path, "header", f"not a runs CSV: its first line has none of the schema's columns "
                         f"({', '.join(sorted(need))}; README, 'Validate')")
    # strict: a quoted cell left open (a file cut mid-row) is an error, not a row missing its end
    # "a, b": spaces after commas; the header's names stripped ('notes ' is 'notes', as ' notes' is), so the
    # reader's line numbers count from the line after it
    reader = csv.DictReader(lines[1:], fieldnames=head, strict=True, skipinitialspace=True)
    rows, ends, starts = [], [], []
    blank = lambda v: v is None or not (" ".join(v) if isinstance(v, list) else v).strip()   # noqa: E731
    try:
        before = 0
        for r in reader:
            if not all(blank(v) for v in r.values()):   # a spreadsheet's empty line (",,,,") or one of spaces
                rows.append(r)
                ends.append(reader.reader.line_num)
                starts.append(numbered[before + 1][0])
            before = reader.reader.line_num
    except csv.Error as e:
        at = numbered[min(reader.reader.line_num + 1, len(numbered)) - 1][0]
        raise InputError(path, f"line {at}", f"malformed CSV ({e}): a quoted cell is not closed or holds a stray "
                         "quote (a truncated file?)") from None
    for r, end in zip(rows, ends):
        if None in r:                # DictReader keeps cells beyond the header under None
            rid = f" (row_id {r['row_id']!r})" if r.get("row_id") else ""
            raise InputError(path, f"line {numbered[end][0]}{rid}", f"{len(r[None])} cell(s) more than the "
                             "header's columns (a comma inside a cell needs quotes)")
    header = set(reader.fieldnames or [])
    unknown = sorted(header - set(RUN_COLUMNS))
    if "" in header:                 # an Excel-style trailing comma, or two commas in a row
        raise InputError(path, "header", "a column without a name (a trailing comma, or two commas in a row?)")
    if not need <= header:
        # the schema's names are lower-case: 'GBS' for 'gbs' is a slip as much as 'gbss' is
        slips = _slips(unknown, need - header, 0.8)
        raise InputError(path, "header", f"missing columns {sorted(need - header)}"
                         + (f" (misspelt? {', '.join(slips)})" if slips else ""))
    if unknown:                      # a misspelt column would leave its value to a default
        near = _slips(unknown, set(RUN_COLUMNS) - header, 0.75)
        raise InputError(path, "header", f"unknown column(s) {unknown}"
                         + (f" (did you mean {', '.join(near)}?)" if near else "")
                         + f": the schema's columns are {', '.join(RUN_COLUMNS)} (README, 'Validate')")
    if not header & set(METRICS):
        raise InputError(path, "header", f"no measured column: one of {', '.join(METRICS)}")
    if not rows:
        raise InputError(path, "", "has a header but no row")
    first: dict = {}
    cells: dict = {}
    for r, line in zip(rows, starts):
        rid = (r.get("row_id") or "").strip()
        if rid and rid in first:     # which of the two a report or a plot means would be ambiguous
            raise InputError(path, f"line {line} (row_id {rid!r})", f"row_id repeats line {first[rid]}'s: give "
                             "each row its own id")
        first.setdefault(rid, line)
        # every cell but the id the same, its measurement and notes too: one run counted twice
        same = tuple(sorted((k, (v or "").strip()) for k, v in r.items() if k not in ("row_id", LINE) and k))
        if same in cells:
            raise InputError(path, f"line {line} (row_id {rid!r})", f"repeats every cell of line {cells[same]} under "
                             "another row_id: one measurement counted twice (drop it, or say in its notes how the "
                             "runs differ)")
        cells.setdefault(same, line)
        r[LINE] = line
        for k in ("recompute", "stack", "sequence_parallel"):  # categorical cells in any case, as precision is read
            if isinstance(r.get(k), str):
                r[k] = r[k].strip().lower()
    return rows


