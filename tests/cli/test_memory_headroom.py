"""--mem-headroom keeps a share of each GPU's memory free in predict and recommend, and whole-number
options refuse decimals, whatever typer's conversion would take."""
import json

from cli_run import one_line, run

BASE = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "64", "--seq-len", "8192")


def _recommend(*extra):
    r = run("recommend", *BASE, "--top", "3", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_recommend_keeps_the_headroom_free_and_says_so_in_each_record():
    free, roomy = _recommend(), _recommend("--mem-headroom", "0.1")
    total = free["ranked"][0]["hbm_capacity_bytes"]
    # without headroom the winner sits above 90% of the HBM (DP4 CP2, 76.9 of 79.2 GiB)
    assert free["ranked"][0]["peak_mem_bytes"] > 0.9 * total
    assert roomy["n_feasible"] < free["n_feasible"] and roomy["n_valid"] == free["n_valid"]
    for rec in roomy["ranked"]:
        assert rec["mem_headroom"] == 0.1 and rec["hbm_total_bytes"] == total
        assert abs(rec["hbm_capacity_bytes"] - 0.9 * total) <= 1
        assert rec["peak_mem_bytes"] <= rec["hbm_capacity_bytes"]
    assert roomy["ranked"][0]["layout"] != free["ranked"][0]["layout"]
    assert "10% of the HBM kept free" in roomy["ranked"][0]["cluster_what_if"]


def test_predict_names_the_headroom_when_a_layout_no_longer_fits():
    lay = ("--tp", "1", "--pp", "1", "--cp", "2", "--zero", "1", "--recompute", "none")
    assert run("predict", *BASE, *lay).returncode == 0
    r = run("predict", *BASE, *lay, "--mem-headroom", "0.1")
    assert r.returncode == 3, r.stderr
    assert "GiB usable of H100-SXM-80GB's 79.2 GiB HBM (--mem-headroom 0.1)" in r.stderr, r.stderr


def test_a_headroom_outside_its_range_is_refused():
    one_line(run("predict", *BASE, "--mem-headroom", "0.95"), "--mem-headroom", "outside 0 .. 0.9")
    one_line(run("recommend", *BASE, "--mem-headroom", "-0.1"), "--mem-headroom", "outside 0 .. 0.9")


def test_a_whole_number_option_refuses_a_decimal():
    """typer >= 0.29 read '--nodes 1.0' as 1 and refused '--nodes 1.5'; both are refused now, in one line."""
    one_line(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1.0"),
             "--nodes: '1.0' is not a whole number")
    one_line(run("recommend", *BASE[:4], "--gbs=64.0"), "--gbs: '64.0' is not a whole number")
    one_line(run("predict", *BASE, "--tp", "2", "--mbs", "1e0"), "--mbs: '1e0' is not a whole number")
