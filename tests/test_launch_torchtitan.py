"""torchtitan's configuration carries the pipeline split the prediction priced: its own default split
(the embedding and the output counted as a layer each, the remainder on the first stages), a
layers-per-stage count that reproduces it, or every stage's modules."""
import pytest

from costmodel.launch import launch_settings
from costmodel.torchtitan_split import torchtitan_split
from costmodel.specs import load_model
from costmodel.stacks import get_stack, stack_recipe

LAY = dict(tp=8, pp=8, dp=4, cp=1, ep=1, etp=8, vp=1, mbs=1, recompute="full", recompute_num_layers=0, zero=1,
           sp=True, overlap=True)


@pytest.mark.parametrize("L, stages, want", [
    (126, 8, [15] + [16] * 6 + [15]),           # 128 / 8: the embedding's and the output's place taken
    (32, 4, [8, 9, 8, 7]),                       # 34 / 4: the first two stages take the remainder
    (126, 16, [7] + [8] * 14 + [7]),
])
def test_torchtitan_split_is_its_partitioner_s(L, stages, want):
    got = torchtitan_split(L, stages)
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


def test_a_torchtitan_pipeline_that_names_no_stages_is_priced_at_torchtitan_s_own_split(tmp_path):
    """A TOML with pipeline_parallel_degree 4 and no stage names: Llama 3 8B's 32 layers run 8|9|8|7
    (34 weighted layers, the remainder first, the embedding's and the output's weight taken off the ends),
    whose 9-layer stage sets the pace: slower than the even 8|8|8|8 priced without the file."""
    import subprocess
    import sys
    from pathlib import Path
    from costmodel.run_config import read_run_config
    from costmodel.torchtitan_split import stage_layout_text
    repo = Path(__file__).resolve().parents[1]
    src = (repo / "tests" / "data" / "configs" / "torchtitan_llama3_8b.toml").read_text()
    f = tmp_path / "pp4.toml"
    f.write_text(src.replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 4"))
    cfg = read_run_config(f)
    assert (cfg.stage_split["first"], cfg.stage_split["last"]) == (1, 1) and cfg.custom_pipeline_split
    assert stage_layout_text(cfg.stage_split, 32, 4, 1) == "E" + "t" * 8 + "|" + "t" * 9 + "|" + "t" * 8 + "|" + "t" * 7 + "L"
    heavy = tmp_path / "heavy.toml"
    heavy.write_text(f.read_text().replace("pipeline_parallel_degree = 4", "pipeline_parallel_degree = 4\n"
                                           "pipeline_parallel_last_stage_less_layers = 3"))
    spec = read_run_config(heavy).stage_split
    assert (spec["first"], spec["last"]) == (1, 3) and stage_layout_text(spec, 32, 4, 1).count("|") == 3
    base = [sys.executable, "-m", "costmodel.cli", "predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes",
            "1", "--stack", "torchtitan", "--json"]
    own = subprocess.run([*base, "--config", str(f)], capture_output=True, text=True, timeout=300, cwd=repo)
    assert own.returncode in (0, 3), own.stderr
    assert "8|9|8|7" in own.stderr or "torchtitan's own split" in own.stderr
    import json
    # the same file naming its stages (8 layers each, as the model spreads them where no one says)
    stages = [["tok_embeddings"] * (s == 0) + [f"layers.{i}" for i in range(8 * s, 8 * s + 8)]
              + ["norm", "lm_head"] * (s == 3) for s in range(4)]
    even_f = tmp_path / "even.toml"
    even_f.write_text(f.read_text().replace("pipeline_parallel_degree = 4", "pipeline_parallel_degree = 4\n"
                                            f"module_fqns_per_model_part = {json.dumps(stages)}"))
    even = subprocess.run([*base, "--config", str(even_f)], capture_output=True, text=True, timeout=300, cwd=repo)
    assert even.returncode in (0, 3), even.stderr
    assert json.loads(own.stdout)["step_time_s"] > json.loads(even.stdout)["step_time_s"]



def _toml(tmp_path, name, extra):
    from pathlib import Path
    src = (Path(__file__).resolve().parent / "data" / "configs" / "torchtitan_llama3_8b.toml").read_text()
    f = tmp_path / name
    f.write_text(src.replace("pipeline_parallel_degree = 1", extra))
    return f


def test_a_torchtitan_file_s_named_stages_are_priced_and_its_stage_counts_checked(tmp_path):
    """module_fqns_per_model_part and pipeline_parallel_split_points name the run's stages (their split is
    priced, VP = stages / PP); pipeline_parallel_layers_per_stage sets how many stages torchtitan's own split
    makes (34 weighted layers of Llama 3 8B in stages of 3: 12, VP 3 on PP 4); counts torchtitan refuses are
    refused naming their key."""
    import json
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    from costmodel.torchtitan_split import stage_layout_text, stages_per_rank
    parts = [["tok_embeddings"] + [f"layers.{i}" for i in range(6)], [f"layers.{i}" for i in range(6, 16)],
             [f"layers.{i}" for i in range(16, 25)], [f"layers.{i}" for i in range(25, 32)] + ["norm", "lm_head"]]
    spec = read_run_config(_toml(tmp_path, "f.toml", "pipeline_parallel_degree = 4\nmodule_fqns_per_model_part = "
                                 + json.dumps(parts))).stage_split
    assert spec["counts"] == [6, 10, 9, 7]
    assert stage_layout_text(spec, 32, 4, 1) == "E" + "t" * 6 + "|" + "t" * 10 + "|" + "t" * 9 + "|" + "t" * 7 + "L"
    pts = read_run_config(_toml(tmp_path, "p.toml", 'pipeline_parallel_degree = 4\npipeline_parallel_split_points = '
                                '["layers.10", "layers.20", "layers.30"]')).stage_split
    assert stage_layout_text(pts, 32, 4, 1).split("|")[-1] == "ttL"
    inter = read_run_config(_toml(tmp_path, "i.toml", 'pipeline_parallel_degree = 4\npipeline_parallel_schedule = '
                                  '"Interleaved1F1B"\npipeline_parallel_layers_per_stage = 3'))
    assert stages_per_rank(inter.stage_split, 32, 4) == 3
    with pytest.raises(InputError, match="pipeline_parallel_layers_per_stage: 9 stages of 4 on PP 4"):
        stages_per_rank(dict(inter.stage_split, layers_per_stage=4), 32, 4)
    bad = parts[:1] + [parts[2], parts[1]] + parts[3:]
    with pytest.raises(InputError, match="module_fqns_per_model_part: its layers.N must name each layer once"):
        read_run_config(_toml(tmp_path, "b.toml", "pipeline_parallel_degree = 4\nmodule_fqns_per_model_part = "
                              + json.dumps(bad)))
    with pytest.raises(InputError, match="3 stages on PP 4 under 1F1B"):
        read_run_config(_toml(tmp_path, "c.toml", 'pipeline_parallel_degree = 4\npipeline_parallel_split_points = '
                              '["layers.10", "layers.20"]'))
    heavy = read_run_config(_toml(tmp_path, "h.toml", "pipeline_parallel_degree = 8\n"
                                  "pipeline_parallel_first_stage_less_layers = 5")).stage_split
    with pytest.raises(InputError, match=r"first_stage_less_layers.*input_weight \(5\) exceeds minimum layers per stage"):
        stage_layout_text(heavy, 32, 8, 1)


def test_a_torchtitan_launch_of_the_run_s_own_layout_pins_that_layout():
    """--pp-layout with VP 2 priced 6|10|8|8 per rank: the torchtitan configuration lists those virtual
    stages (it had printed an even [4] * 8 'as priced')."""
    from costmodel.pipeline_layout import with_pipeline_layout
    m = load_model("llama3-8b")
    r = stack_recipe(get_stack("torchtitan"), 256, 8192, "bf16")
    text = "Ettt|ttttt|tttt|tttt|ttt|ttttt|tttt|ttttL"
    m2, placed = with_pipeline_layout(m, text, 4, 2)
    lay = dict(LAY, tp=1, pp=4, vp=2, dp=2)
    out = launch_settings(lay, m2, r, layers=placed, fmt="torchtitan")[1]
    assert "split = [3, 5, 4, 4, 3, 5, 4, 4]" in out
