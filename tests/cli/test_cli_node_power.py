"""A cluster's power section: the node rating, its non-GPU share and the GPU power limit a site
enforces (costmodel/specs/node_power.py), and what predict and recommend make of them."""
import json

import pytest
import yaml

from costmodel.errors import InputError
from costmodel.specs import hardware_dir, load_cluster
from test_cli import assert_one_line_error, run

JUPITER = hardware_dir() / "clusters" / "jupiter-gh200.yaml"


def _jupiter_at_tdp(tmp_path):
    """JUPITER's file without its site limit: the GH200s at the GPU file's 900 W default limit."""
    d = yaml.safe_load(JUPITER.read_text())
    del d["power"]["gpu_power_limit"]
    del d["sources"]["power.gpu_power_limit"]
    f = tmp_path / "jupiter-at-tdp.yaml"
    f.write_text(yaml.safe_dump(d))
    return f


def test_jupiter_holds_its_gpus_to_the_superchip_limit_less_the_grace_side():
    """680 W per superchip less the 81.89 W its Grace side draws at idle, rounded down: 598 W; four of
    them fill the node's 2.72 kW rating less its 327.6 W non-GPU share (the two derivations agree)."""
    c = load_cluster("jupiter-gh200")
    assert c.gpu.tdp_w == 900.0 and c.gpu_power_limit_w == 598.0 == c.power_limit_w
    assert 4 * c.power_limit_w == pytest.approx(c.gpu_power_budget_w, abs=1.0)
    assert load_cluster("dgx-h100").power_limit_w == 700.0       # no site limit: the TDP


def test_predict_runs_under_the_site_limit_and_refuses_a_cap_above_it(tmp_path):
    """The default cap is the site's 598 W: the GEMMs' SM clock drops below the 900 W one and the step
    slows; a cap above the limit is refused naming the file's field."""
    args = ["--model", "llama3-8b", "--tp", "1", "--pp", "1", "--gbs", "64", "--seq-len", "8192", "--json"]
    site = json.loads(run("predict", "--cluster", "jupiter-gh200", *args).stdout)
    free = json.loads(run("predict", "--cluster", str(_jupiter_at_tdp(tmp_path)), *args).stdout)
    assert site["caps_w"] == [598.0] and site["compute_power_w"] == pytest.approx(598.0)
    assert max(g["peak_power_w"] for g in site["per_gpu"]) <= 598.0
    assert site["step_time_s"] > 1.05 * free["step_time_s"]
    assert site["uncapped_step_time_s"] == pytest.approx(free["uncapped_step_time_s"], rel=1e-9)
    assert_one_line_error(run("predict", "--cluster", "jupiter-gh200", *args, "--power-cap-w", "700"),
                          "--power-cap-w", "100-598 W", "power.gpu_power_limit")


def test_a_time_answer_over_the_nodes_power_rating_says_so(tmp_path):
    """JUPITER's GH200 nodes at the GPU file's 900 W limit (no site limit) leave their GPUs 2.39 kW of the
    rating; Llama 3 8B's fastest layout peaks at about 3 kW a node, and recommend and predict say so
    (JSON: node_over_budget).  Under the site's 598 W limit it fits."""
    f = _jupiter_at_tdp(tmp_path)
    p = run("recommend", "--model", "llama3-8b", "--cluster", str(f), "--nodes", "4", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    best = out["ranked"][0]
    assert out["feasible"] is True
    assert best["node_over_budget"] and best["node_gpu_peak_w"] > best["node_gpu_budget_w"] == pytest.approx(2392.4)
    assert "2.392 kW GPU budget" in p.stderr
    assert "recommend --node-power-kw 2.39 searches power caps that fit" in p.stderr
    text = run("predict", "--model", "llama3-70b", "--cluster", str(f), "--nodes", "8", "--tp", "4", "--pp", "4",
               "--gbs", "64", "--seq-len", "4096")
    assert "NODE OVER BUDGET" in " ".join(text.stdout.split())     # rich wraps the line
    site = run("recommend", "--model", "llama3-8b", "--cluster", "jupiter-gh200", "--nodes", "4", "--json")
    assert site.returncode == 0 and not json.loads(site.stdout)["ranked"][0]["node_over_budget"], site.stderr
    assert "GPU budget" not in site.stderr


@pytest.mark.parametrize("value, words", [("950W", "at most its 900 W TDP"), ("50W", "above its lowest limit 100 W"),
                                          ("fast", "power.gpu_power_limit")])
def test_a_site_limit_outside_the_gpus_range_is_refused(tmp_path, value, words):
    d = yaml.safe_load(JUPITER.read_text())
    d["power"]["gpu_power_limit"] = value
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError) as e:
        load_cluster(str(f))
    assert e.value.where == str(f) and "power.gpu_power_limit" in str(e.value) and words in str(e.value)


def test_a_site_limit_needs_its_source(tmp_path):
    d = yaml.safe_load(JUPITER.read_text())
    del d["sources"]["power.gpu_power_limit"]
    f = tmp_path / "unsourced.yaml"
    f.write_text(yaml.safe_dump(d))
    assert_one_line_error(run("hardware", "--cluster", str(f)), "power.gpu_power_limit", "source")
