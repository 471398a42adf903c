"""Megatron-core's --pipeline-model-parallel-layout: parsed as Megatron-core reads it, checked against the
layout and the model, echoed in the launch settings (predict --pp-layout: tests/cli/test_cli_config.py)."""
import pytest

from costmodel.errors import InputError
from costmodel.launch import pipeline_split_settings
from costmodel.pipeline_layout import parse_pipeline_layout
from costmodel.specs import load_model
from costmodel.specs.recipe import Recipe

#: Megatron-Bridge's DeepSeek-V3 pre-training recipe (tests/data/configs/megatron_bridge_deepseek_v3_pretrain_h100_fp8_sc_v1.yaml):
#: 61 layers and one MTP module on PP 8 x VP 4, or PP 16 x VP 2
DSV3 = "Et|(tt|)*30mL"


def test_deepseek_v3_layout_by_rank():
    """32 virtual stages: the first holds the embedding and one layer, 30 hold two, the last the MTP
    module and the loss.  On PP 16 x VP 2, rank s runs stages s and s + 16: rank 0 has 1 + 2 layers,
    rank 15 has 2 and the MTP module, the others 4; on PP 8 x VP 4 rank 0 has 1 + 2 + 2 + 2 = 7 and
    rank 7 2 + 2 + 2 = 6 with the MTP module, the others 8."""
    a = parse_pipeline_layout(DSV3, 16, 2, 61, 1)
    assert a.rank_layers() == [3] + [4] * 14 + [2] and a.rank_mtp() == [0] * 15 + [1]
    b = parse_pipeline_layout(DSV3, 8, 4, 61, 1)
    assert b.rank_layers() == [7] + [8] * 6 + [6] and sum(b.rank_layers()) == 61
    assert b.describe() == "7|8|8|8|8|8|8|6+1m"
    # a repeat inside a group, cosmetic commas and an empty stage, read as Megatron-core reads them
    # (its own docstring's example: 'Ettt|(tt|)*29,m|L')
    assert parse_pipeline_layout("E(t*2|)*3tL", 2, 2, 7, 0).rank_layers() == [4, 3]
    assert parse_pipeline_layout("Et*3|(tt|)*29,m|L", 16, 2, 61, 1).describe() == "5|" + "4|" * 13 + "2+1m|2"
    assert parse_pipeline_layout("E|t*4|t*4|L", 2, 2, 8, 0).rank_layers() == [4, 4]


@pytest.mark.parametrize("text,needle", [
    ("Et|(tt|)*29mL", "has 31 stages"),
    ("Et|(tt|)*30mL|", "has 33 stages (a trailing '|' opens an empty one)"),
    ("Et|(tt|)*0mL", "has 2 stages"),                       # *0 writes nothing, as in Megatron-core
    ("Et|(tt|)*30L", "places 0 MTP modules; the model has 1"),
    ("Et|(tt|)*30tmL", "places 62 transformer layers; the model has 61"),
    ("t|(tt|)*30mLE", "the embedding 'E' must be the first layer"),
    ("Et|(tt|)*30Lm", "the loss 'L' must be the last layer"),
    ("Et|(tt|)*29m|ttL", "the transformer layers must come before the MTP modules"),
    ("Et|(tt|)*30mLx", "'x' is not a layout symbol"),
    ("Et|(tt|)*30 mL", "' ' is not a layout symbol"),
    ("Et|(tt|)*30m-L", "'-' is not a layout symbol ("),         # only the character that is wrong
    ("Et|(tt|)*30m*L", "'*' left after the repeats are written out (a repeat is X*N or (...)*N, N a count)"),
    ("Et|(tt|*30mL", "unbalanced, nested"),
    ("Et|((tt|)*15)*2mL", "unbalanced, nested"),
    ("t*999999999", "expands to more than"),
    ("", "empty"),
])
def test_bad_layouts_are_refused_naming_what_is_wrong(text, needle):
    with pytest.raises(InputError) as e:
        parse_pipeline_layout(text, 16, 2, 61, 1)
    assert e.value.where == "--pp-layout" and needle in str(e.value)


def test_launch_settings_echo_the_layout_given():
    m = load_model("deepseek-v3")
    lay = dict(tp=1, pp=16, vp=2)
    assert pipeline_split_settings(lay, m, Recipe(gbs=16384, seq_len=4096), parse_pipeline_layout(DSV3, 16, 2, 61, 1)) \
        == ("layout", DSV3)


def test_a_stray_character_in_a_repeat_is_the_one_named():
    """'E|t*-16|t*48|L': the '-' is wrong; the '*', '1' and '6' it strands had been named as not layout symbols."""
    with pytest.raises(InputError) as e:
        parse_pipeline_layout("E|t*-16|t*48|L", 4, 1, 64, 0)
    assert str(e.value) == ("--pp-layout: 'E|t*-16|t*48|L': '-' is not a layout symbol (E embedding, t transformer "
                            "layer, m MTP module, L loss, | stage end, X*N and (...)*N repeats, ',' cosmetic)")


def test_the_json_and_settings_formats_state_an_uneven_split():
    """--format json and settings carry the split Megatron-core is given: DeepSeek-V3's 61 layers at PP 8 x
    VP 2 as the layout the megatron format prints; Llama 3.1 405B at PP 8 x VP 8 as the embedding and loss
    counted as layers; an even split as none. (They had carried "vp": 2 alone, which Megatron's default
    split refuses.)"""
    import json
    from costmodel.launch import launch_settings, megatron_args
    from costmodel.specs import Recipe, load_model
    ds, r = load_model("deepseek-v3"), Recipe(gbs=8192, seq_len=4096)
    lay = dict(tp=4, pp=8, dp=32, cp=1, ep=64, etp=1, vp=2, mbs=1, recompute="none", recompute_num_layers=0, zero=1,
               sp=True, overlap=True)
    d = json.loads(launch_settings(lay, ds, r, fmt="json")[1])
    text = d["pipeline_split"]["value"]
    assert d["pipeline_split"]["kind"] == "layout" and f'--pipeline-model-parallel-layout "{text}"' in megatron_args(lay, ds, r)
    assert text.count("|") == 15 and text.count("t") == 61 and text.endswith("mL")
    settings = launch_settings(lay, ds, r, fmt="settings")[1]
    assert f"pipeline split: 8|8|8|8|8|7|7|7 transformer layers per stage (Megatron-core pipeline layout {text})" in settings
    big = load_model("llama3.1-405b")
    lay405 = dict(lay, pp=8, vp=8, ep=1, etp=4)
    assert json.loads(launch_settings(lay405, big, r, fmt="json")[1])["pipeline_split"] == {"kind": "accounted",
                                                                                            "value": None}
    assert "(the embedding and the loss counted as pipeline layers)" in launch_settings(lay405, big, r, fmt="settings")[1]
    even = dict(lay405, pp=2, vp=1)
    assert json.loads(launch_settings(even, big, r, fmt="json")[1])["pipeline_split"] is None
    assert "pipeline split" not in launch_settings(even, big, r, fmt="settings")[1]
