"""predict --config: a run's own NeMo YAML or torchtitan TOML as the layout source (real configs)."""
import json
from pathlib import Path

from test_cli import assert_one_line_error, run

REPO = Path(__file__).resolve().parents[2]
NEMO = REPO / "tests" / "data" / "configs" / "nemo_launcher_llama3_8b.yaml"
TITAN = REPO / "tests" / "data" / "configs" / "torchtitan_llama3_8b.toml"


def test_nemo_launcher_config_sets_layout_batch_and_world():
    """NeMo-Framework-Launcher's Llama 3 8B: 16 nodes x 8 GPUs, TP 1, PP 1, CP 2, mbs 1, gbs 2048, seq 8192,
    bf16, the distributed optimizer, no recomputation, flash attention."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    lay = r["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["mbs"], lay["zero"], lay["recompute"]) == \
        (1, 1, 2, 64, 1, 1, "none")
    assert r["num_gpus"] == 128 and r["recipe"]["gbs"] == 2048 and r["recipe"]["seq_len"] == 8192
    assert "--config" in p.stderr and "model.context_parallel_size" not in p.stderr   # a summary, not an error


def test_torchtitan_toml_takes_fsdp_and_local_batch_times_dp():
    """torchtitan's last TOML Llama 3 8B preset: FSDP over every rank (shard degree -1), local batch 1,
    selective recomputation: on 8 nodes x 8 GPUs the global batch is 1 x 64."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "8", "--config", str(TITAN), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["layout"]["zero"] == 3 and r["layout"]["recompute"] == "selective" and r["recipe"]["gbs"] == 64


def test_flags_that_agree_pass_and_flags_that_contradict_are_refused(tmp_path):
    ok = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--cp", "2")
    assert ok.returncode == 0, ok.stderr
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO),
                              "--cp", "4"), "--cp", "model.context_parallel_size")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "jupiter-gh200", "--config", str(NEMO)),
                          "trainer.devices", "jupiter-gh200")
    py = tmp_path / "cfg.py"
    py.write_text("def llama3_8b():\n    return None\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(py)), "code")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {tensor_model_parallel_size: two}\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(bad)),
                          "model.tensor_model_parallel_size")
    toml = tmp_path / "x.toml"
    toml.write_text("[job]\nname = 'x'\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(toml)),
                          "torchtitan")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(tmp_path)),
                          "directory")
