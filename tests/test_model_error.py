"""The model-form error (costmodel.model_error): regimes, the estimator, the shipped table and the
band coverage it gives on the dev sets."""
from pathlib import Path

import pytest
import yaml

from costmodel.errors import InputError
from costmodel.model_error import estimate, generation, load_model_form, regime, size_class

REPO = Path(__file__).resolve().parents[1]
DEV_SETS = [REPO / "benchmarks" / "data" / "dev_set.csv", REPO / "benchmarks" / "data" / "dev_set_hopper.csv"]


def test_regimes_and_fallbacks(tmp_path):
    from costmodel.specs import load_gpu
    h100 = load_gpu("h100-sxm-80gb")
    assert generation(h100) == generation(load_gpu("h200-sxm-141gb")) == "hopper"
    assert generation(load_gpu("a100-sxm-80gb")) == "ampere"
    # the generation is the file's architecture, not its name: B300/GB300 are Blackwell, a renamed
    # copy of the H100 file is still Hopper
    assert generation(load_gpu("b300-sxm-288gb")) == generation(load_gpu("gb300-288gb")) == "blackwell"
    mine = tmp_path / "my-accelerator.yaml"
    mine.write_text((Path(h100.path)).read_text())
    assert generation(load_gpu(str(mine))) == "hopper"
    assert size_class(1.3e9) == "<3B" and size_class(8e9) == "3-30B" and size_class(70e9) == ">30B"
    assert regime("megatron", h100, 70e9) == ("megatron", "hopper", ">30B")
    assert regime("megatron", h100, 46.7e9, moe=True) == ("megatron", "hopper", "moe")
    # 68.27th percentile of |deviation|: 7 of 10 deviations within it
    tab = estimate([("s", "g", "<3B")] * 10, [0.01 * k for k in range(10)] )
    assert tab["s/g/<3B"]["n"] == 10 and tab["s/g/<3B"]["sigma_rel"] == pytest.approx(0.0614, abs=1e-4)
    assert set(tab) == {"s/g/<3B", "s/g", "g", "all"}
    from costmodel.model_error import ModelFormError
    mf = ModelFormError(tab, "x")
    assert mf.sigma(("s", "g", ">30B"))[1] == "s/g"            # too few rows of its own: the coarser level
    # a generation no row measured takes the widest measured generation's sigma, not the overall mean
    assert mf.sigma(("t", "h", "<3B"))[1] == "unmeasured h: as g"
    two = ModelFormError(dict(tab, g2={"sigma_rel": 0.3, "n": 5}, all={"sigma_rel": 0.1, "n": 15}), "x")
    assert two.sigma(("t", "h", "<3B")) == (0.3, "unmeasured h: as g2", 5)
    assert two.sigma(("s", "g", "<3B"))[1] == "s/g/<3B"
    assert ModelFormError({}, "x").sigma(("s", "g", "<3B")) == (0.0, None, 0)
    # an MoE regime without rows of its own takes every MoE row's error before the dense rows'
    regs = [("s", "g", "<3B")] * 6 + [("s", "g", "moe")] * 3 + [("t", "h", "moe")] * 3
    tab = estimate(regs, [0.01] * 6 + [0.4] * 6)
    assert tab["moe"] == {"sigma_rel": 0.4, "n": 6} and "s/g/moe" not in tab
    mf = ModelFormError(tab, "x")
    assert mf.sigma(("s", "g", "moe"))[:2] == (0.4, "moe") and mf.sigma(("s", "g", "3-30B"))[1] == "s/g"
    # and a dense model's stack/generation level is its dense rows' alone: the MoE rows' routing errors
    # (0.4) do not widen it; they count in the overall level
    assert tab["s/g"] == {"sigma_rel": 0.01, "n": 6} and tab["all"]["n"] == 12


def test_the_shipped_table_is_what_the_model_gives_today():
    """Regenerating the table from the dev sets must give the shipped numbers: a physics change that
    forgets ``python -m costmodel.fit.model_form`` fails here."""
    from costmodel.fit.model_form import DEV_SETS as ALL_SETS, measure
    shipped = yaml.safe_load((REPO / "hardware" / "model_form.yaml").read_text())["sigma"]
    assert [p.name for p in ALL_SETS] == ["dev_set.csv", "dev_set_hopper.csv", "dev_set_megatron_bridge.csv",
                                          "dev_set_moe.csv"]
    assert measure(ALL_SETS)["sigma"] == shipped
    assert shipped["megatron/hopper/moe"]["n"] >= 5 and shipped["moe"]["sigma_rel"] > 0.2   # MoE errs widely


def test_one_sigma_band_covers_about_two_thirds_of_published_runs():
    from costmodel.validate import read_runs_csv, summarize, validate_rows
    for path in DEV_SETS:
        cov = summarize(validate_rows(read_runs_csv(path), str(path)))["overall"]["band_coverage"]
        assert 0.55 <= cov <= 0.80, (path.name, cov)


def test_a_malformed_table_is_named(tmp_path):
    bad = tmp_path / "mf.yaml"
    bad.write_text("sigma:\n  all: {sigma_rel: -1, n: 3}\n")
    with pytest.raises(InputError, match="sigma.all"):
        load_model_form(str(bad))


def test_the_cached_table_cannot_be_changed_by_a_caller():
    """load_model_form is cached: an edit of its table had changed every later band in the process."""
    t = load_model_form().table
    with pytest.raises(TypeError):
        t["all"]["sigma_rel"] = 5.0
    with pytest.raises(TypeError):
        t["new"] = {"sigma_rel": 1.0, "n": 9}
