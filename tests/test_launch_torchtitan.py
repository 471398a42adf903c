"""torchtitan's configuration carries the pipeline split the prediction priced: its own default split
(the embedding and the output counted as a layer each, the remainder on the first stages), a
layers-per-stage count that reproduces it, or every stage's modules."""
import pytest

from costmodel.launch import launch_settings, torchtitan_default_split
from costmodel.specs import load_model
from costmodel.stacks import get_stack, stack_recipe

LAY = dict(tp=8, pp=8, dp=4, cp=1, ep=1, etp=8, vp=1, mbs=1, recompute="full", recompute_num_layers=0, zero=1,
           sp=True, overlap=True)


@pytest.mark.parametrize("L, stages, want", [
    (126, 8, [15] + [16] * 6 + [15]),           # 128 / 8: the embedding's and the output's place taken
    (32, 4, [8, 9, 8, 7]),                       # 34 / 4: the first two stages take the remainder
    (126, 16, [7] + [8] * 14 + [7]),
])
def test_torchtitan_default_split_is_its_partitioner_s(L, stages, want):
    got = torchtitan_default_split(L, stages)
    assert got == want and sum(got) == L


def _modules(text: str) -> list:
    """The module_fqns_per_model_part the printed lines build (the config function's two statements)."""
    body = [ln.strip() for ln in text.splitlines()]
    i = next(k for k, ln in enumerate(body) if ln.startswith("split = "))
    code = "\n".join(body[i:i + 4]).replace("config.parallelism.module_fqns_per_model_part", "parts")
    scope = {}
    exec(code, scope)              # noqa: S102 - our own printed lines
    return scope["parts"]


def test_the_priced_split_is_pinned_where_torchtitan_s_own_differs():
    m = load_model("llama3.1-405b")
    r = stack_recipe(get_stack("torchtitan"), 256, 8192, "bf16")
    text = launch_settings(LAY, m, r, fmt="torchtitan")[1]
    compile(text, "torchtitan_config", "exec")
    parts = _modules(text)
    assert [sum(x.startswith("layers.") for x in p) for p in parts] == [16, 16, 16, 16, 16, 16, 15, 15]
    # torchtitan's module names (its partitioner's: the output projection is lm_head)
    assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "lm_head"]
    assert [x for p in parts for x in p if x.startswith("layers.")] == [f"layers.{i}" for i in range(126)]
    # PP 8 x VP 2 counts the embedding and the loss as layers: torchtitan's own split, 8 per stage
    vp = launch_settings(dict(LAY, vp=2), m, r, fmt="torchtitan")[1]
    assert "pipeline_parallel_layers_per_stage = 8" in vp and "module_fqns_per_model_part" not in vp
    # 126 layers over PP 2: 63 each, as torchtitan splits 128 (the embedding and the output in)
    two = launch_settings(dict(LAY, pp=2, dp=16), m, r, fmt="torchtitan")[1]
    assert "module_fqns_per_model_part" not in two and "layers_per_stage" not in two
