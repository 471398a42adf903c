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


@pytest.mark.parametrize("L,pp,e", [(61, 18, 2.7), (61, 2, 3.1), (12, 4, 2.6), (9, 2, 5.0), (10, 3, 0.0), (7, 7, 0.4)])
def test_the_balance_bound_never_exceeds_what_the_best_split_gains(L, pp, e):
    """recommend prices a layout past its first ten only where its step times this bound could beat the best
    found (costmodel.cli.recommend): the bound must not exceed the best split's pace over the default
    split's (ceil(L/PP) layers and the extra on the last stage), or a winner is skipped."""
    from costmodel.layouts import uneven_split
    from costmodel.pipeline_balance import balanced_pace_ratio
    extra = [0.0] * (pp - 1) + [e]
    default = max(n + x for n, x in zip(uneven_split(L, pp), extra))
    best = max(n + x for n, x in zip(balanced_split(L, 1.0, extra), extra))
    bound = float(balanced_pace_ratio(L, pp, e, False))
    assert bound <= best / default + 1e-12
    # and it is the mean pace's: tight where the layers can be spread evenly
    assert bound == pytest.approx(min((L + e) / pp / default, 1.0))
