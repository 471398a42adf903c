"""costmodel.pipeline_balance: the split found equals a brute-force search over every split."""
import itertools

import numpy as np
import pytest

from costmodel.pipeline_balance import balanced_split


def _brute(L, t, e, cap):
    best = None
    for n in itertools.product(*(range(1, min(L, c) + 1) for c in cap)):
        if sum(n) != L:
            continue
        pace = max(k * t + x for k, x in zip(n, e))
        best = pace if best is None or pace < best else best
    return best


@pytest.mark.parametrize("L,e,cap", [
    (12, [0.3, 0.0, 0.0, 2.6], [12, 12, 12, 12]),       # DeepSeek-like: a heavy last stage (logits, MTP)
    (10, [0.0, 0.0, 0.0], [10, 10, 10]),                # even work: PP divides nothing, any 4/3/3
    (11, [1.4, 0.0, 0.0, 0.7], [3, 12, 12, 12]),        # the first stage's memory holds 3 layers
    (9, [0.0, 5.0], [9, 9]),                             # a last stage worth five layers
])
def test_the_slowest_stage_is_as_fast_as_any_split_allows(L, e, cap):
    n = balanced_split(L, 1.0, e, cap)
    assert n is not None and n.sum() == L and (n >= 1).all() and (n <= np.asarray(cap)).all()
    assert max(k + x for k, x in zip(n, e)) == pytest.approx(_brute(L, 1.0, e, cap))


def test_no_split_where_memory_cannot_hold_the_layers():
    assert balanced_split(12, 1.0, [0, 0, 0], [3, 3, 3]) is None
    assert balanced_split(12, 1.0, [0, 0, 0], [0, 12, 12]) is None
    assert balanced_split(2, 1.0, [0, 0, 0]) is None            # fewer layers than stages
