"""Layout validity (Megatron-core rules), enumeration and rank-order group placement."""
import numpy as np
import pytest

from costmodel.comm import group_span
from costmodel.errors import InputError
from costmodel.layouts import check_layout, enumerate_layouts, validity
from costmodel.specs import Recipe, load_model

from conftest import layout

L70 = load_model("llama3-70b")
MIX = load_model("mixtral-8x7b")
R = Recipe(gbs=128, seq_len=8192)


@pytest.mark.parametrize("kw,rule", [
    (dict(tp=4, pp=4, dp=4), "must equal the number of GPUs"),
    (dict(tp=16, pp=2, dp=1), "TP must divide the GPUs per node"),
    (dict(tp=4, pp=3, dp=2, cp=1), "must equal"),
    (dict(tp=4, pp=8, dp=1, vp=3), "divisible by PP x VP"),
    (dict(tp=8, pp=1, dp=4, mbs=3), "gbs (128) must be divisible by DP x mbs"),
    (dict(tp=8, pp=1, dp=4, vp=2), "VP > 1 needs PP > 1"),
    (dict(tp=8, pp=1, dp=1, cp=4, sp=True), "seq_len (8192) must be divisible by 2 x CP"),
])
def test_invalid_layouts_name_their_rule(kw, rule):
    t = layout(**kw)
    n = 32 if "cp" not in kw else 32
    with pytest.raises(InputError, match=None) as e:
        check_layout(t, L70, R if kw.get("cp", 1) < 4 else Recipe(gbs=128, seq_len=8190), n, 8)
    assert rule.split(" (")[0] in str(e.value)


def test_moe_rules():
    code, msgs = validity(layout(tp=1, dp=32, ep=3), MIX, R, 32, 8)
    assert "EP must divide the number of experts" in msgs[code[0]]
    code, msgs = validity(layout(tp=8, dp=2, pp=2, ep=8), MIX, R, 32, 8)
    assert "EP must divide DP x CP" in msgs[code[0]]
    code, _ = validity(layout(tp=2, dp=8, pp=2, ep=8), MIX, R, 32, 8)
    assert code[0] == -1


def test_enumeration_is_exactly_the_valid_grid():
    t = enumerate_layouts(L70, R, 32, 8)
    code, _ = validity(t, L70, R, 32, 8, uneven_pp=True)
    assert len(t) > 0 and (code < 0).all()
    assert (t.tp * t.pp * t.dp * t.cp == 32).all()
    assert set(np.unique(t.tp)) == {1, 2, 4, 8}
    # brute force over the same grid counts the same layouts
    n = 0
    for tp in (1, 2, 4, 8):
        for cp in (1, 2, 4, 8, 16, 32):
            for pp in (1, 2, 4, 5, 8, 10, 16, 20, 32, 40, 80):      # 32: 80 layers split unevenly, VP 1
                if 32 % (tp * cp * pp):
                    continue
                dp = 32 // (tp * cp * pp)
                vps = [v for v in range(1, 81) if (80 // pp) % v == 0 and (v == 1 or pp > 1)] if 80 % pp == 0 else [1]
                for vp in vps:
                    for mbs in (1, 2, 4, 8, 16):
                        m = 128 / (dp * mbs)
                        if m != int(m) or (vp > 1 and m % pp):
                            continue
                        zeros = 1 if dp * cp == 1 else (3 if pp == 1 else 2)   # ZeRO 0,1 (+3 without PP)
                        n += 2 * zeros   # recompute none/full (selective = none under flash)
    assert len(t) == n


def test_group_span_follows_megatron_rank_order():
    # TP=4 x DP=4 on 8-GPU nodes: a DP group (stride 4) has 2 ranks per node over 2 nodes
    k, nn = group_span(np.array([4]), np.array([4]), 8)
    assert (k[0], nn[0]) == (2, 2)
    # TP=8: DP ranks are one per node
    k, nn = group_span(np.array([8]), np.array([4]), 8)
    assert (k[0], nn[0]) == (1, 4)
    # TP=2, DP=4: one node holds the whole group
    k, nn = group_span(np.array([2]), np.array([4]), 8)
    assert (k[0], nn[0]) == (4, 1)
