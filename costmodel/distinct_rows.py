"""Distinct rows of a table's integer columns without sorting (:func:`unique_rows`), and a cost term
evaluated once per distinct row of the layout fields it declares (:func:`on_distinct_rows`): a search
space holds many layouts per distinct row of, e.g., the fields that set a stage's parameters."""
from __future__ import annotations

import numpy as np

from .layout_fields import LayoutView


def _dense_codes(c: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """Codes 0..k-1 of one integer or bool column of n rows, in value order, and k, its distinct
    count: a presence table over the value range, or a sort where that range far exceeds n."""
    if c.dtype == bool:
        return c.astype(np.int64), 2
    top = int(c.max()) + 1
    if top > 4 * n + 1024:      # values far beyond the row count (a billion-layer model's VP)
        uniq, dense = np.unique(c, return_inverse=True)
        return dense.ravel(), len(uniq)
    present = np.zeros(top, dtype=bool)
    present[c] = True
    rank = np.cumsum(present) - 1
    return rank[c], int(rank[-1]) + 1


def _renumber(key: np.ndarray, radix: int) -> tuple[np.ndarray, int]:
    """Keys of range ``radix`` renumbered 0..d-1 in the same order, and d, their distinct count."""
    present = np.zeros(radix, dtype=bool)
    present[key] = True
    rank = np.cumsum(present) - 1
    return rank[key], int(rank[-1]) + 1


def unique_rows(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of non-negative integer (or bool) columns without sorting.

    Each column is mapped to dense codes, the codes are combined into one mixed-radix key, and a
    presence table over the key range yields the distinct rows.  Whenever the next column would
    take the key range past 4n, the key is first renumbered to its distinct values (at most n), so
    every table stays O(n): O(n x columns) in all, which beats np.unique's sort on the hot path.

    Returns:
        (first, inverse): ``first`` indexes one representative row per distinct row, and
        ``rows[first][inverse]`` reproduces every row.
    """
    n = len(cols[0])
    if n <= 1:                                            # a single layout: nothing to dedupe
        return np.arange(n), np.arange(n)
    limit = 4 * n + 1024
    key = np.zeros(n, dtype=np.int64)
    radix = 1
    for c in cols:
        code, k = _dense_codes(c, n)
        if k == 1:
            continue
        if radix * k > limit:
            key, radix = _renumber(key, radix)
            if radix * k > limit:        # a column of nearly n distinct values: sort this once
                uniq, key = np.unique(key * k + code, return_inverse=True)
                key, radix = key.ravel(), len(uniq)
                continue
        key += code * radix
        radix *= k
    first_of = np.full(radix, -1, dtype=np.int64)
    first_of[key[::-1]] = np.arange(n - 1, -1, -1)       # first occurrence of each key
    used = np.flatnonzero(first_of >= 0)
    slot = np.zeros(radix, dtype=np.int64)
    slot[used] = np.arange(len(used))
    return first_of[used], slot[key]


def on_distinct_rows(term, t, *args):
    """``term(*args, view)`` evaluated on the distinct rows of ``term.layout_fields`` of ``t`` (a
    :class:`costmodel.layouts.LayoutTable` or :class:`~costmodel.layout_fields.LayoutView` holding those
    fields; costmodel.layout_fields.uses_layout_fields), expanded back to every row of ``t``.

    Returns:
        ``term``'s result with each array (or each array of a tuple) of length len(t).
    Raises:
        AttributeError: ``t`` lacks one of the declared fields.
    """
    names = term.layout_fields
    cols = [getattr(t, f) for f in names]
    first, inv = unique_rows(*cols)
    out = term(*args, LayoutView({f: c[first] for f, c in zip(names, cols)}, len(first)))
    if isinstance(out, tuple):
        return tuple(np.broadcast_to(x, first.shape)[inv] for x in out)
    return np.broadcast_to(out, first.shape)[inv]
