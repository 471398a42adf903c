"""A user's own GPU, cluster and profile files (hardware/README.md), as a new user writes and
breaks them: the answer follows the files' contents, not their names; every defect is one line
naming the file and the field, exit 2."""
import json
import re
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.specs import hardware_dir, load_cluster, load_gpu, load_profile
from costmodel.stacks import get_stack, stack_recipe
from test_cli import assert_one_line_error, run

GPUS, CLUSTERS, PROFILES = (hardware_dir() / d for d in ("gpus", "clusters", "profiles"))
H100_CLUSTER = (CLUSTERS / "dgx-h100.yaml").read_text()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_renamed_copy_of_a_catalog_gpu_predicts_what_the_catalog_gpu_does(tmp_path):
    """The H100 file under another name: the same attention kernel (TE's cuDNN default on Hopper),
    the same step time and the same model-form band, because they follow ``architecture``."""
    gpu = _write(tmp_path, "my-accelerator.yaml", (GPUS / "h100-sxm-80gb.yaml").read_text())
    mine = load_cluster(str(_write(tmp_path, "mine.yaml", H100_CLUSTER.replace("gpu: h100-sxm-80gb", f"gpu: {gpu}"))))
    assert mine.gpu.architecture == "hopper" and mine.gpu.path == str(gpu)
    assert stack_recipe(get_stack("megatron"), 64, 4096, "bf16", gpu=mine.gpu).attention_kernel == "cudnn"
    args = ("--model", "llama3-8b", "--tp", "2", "--gbs", "64", "--seq-len", "4096", "--profile", "h100-sxm-80gb",
            "--json")
    ours, cat = run("predict", "--cluster", str(tmp_path / "mine.yaml"), *args), run("predict", "--cluster", "dgx-h100",
                                                                                    "--nodes", "1", *args)
    assert ours.returncode == 0 and cat.returncode == 0, ours.stderr + cat.stderr
    a, b = json.loads(ours.stdout), json.loads(cat.stdout)
    assert a["recipe"]["attention_kernel"] == b["recipe"]["attention_kernel"] == "cudnn"
    assert a["step_time_s"] == pytest.approx(b["step_time_s"], rel=1e-9)
    assert a["step_time_band"] == b["step_time_band"]


def test_a_gpu_file_without_its_architecture_is_refused(tmp_path):
    text = re.sub(r"(?m)^architecture:.*\n", "", (GPUS / "h100-sxm-80gb.yaml").read_text())
    with pytest.raises(InputError, match="architecture: missing: one of volta") as e:
        load_gpu(str(_write(tmp_path, "g.yaml", text)))
    assert e.value.where.endswith("g.yaml")
    with pytest.raises(InputError, match="'hoper' is not one of volta"):
        load_gpu(str(_write(tmp_path, "h.yaml", text.replace("vendor: nvidia", "vendor: nvidia\narchitecture: hoper"))))


def test_a_misspelt_gpu_key_is_named_with_the_key_it_meant(tmp_path):
    text = (GPUS / "h100-sxm-80gb.yaml").read_text().replace("\nhbm_capacity:", "\nhbm_capacty:", 1)
    with pytest.raises(InputError, match="unknown key \\(did you mean hbm_capacity\\? known: name") as e:
        load_gpu(str(_write(tmp_path, "g.yaml", text)))
    assert e.value.where.endswith("g.yaml") and e.value.field == "hbm_capacty"


def test_a_gpu_file_needs_a_16_bit_peak(tmp_path):
    text = re.sub(r"(?m)^  (bf16|fp16):.*\n", "", (GPUS / "h100-sxm-80gb.yaml").read_text())
    with pytest.raises(InputError, match="peak_tflops: needs bf16 or fp16"):
        load_gpu(str(_write(tmp_path, "g.yaml", text)))


def test_a_relative_gpu_path_in_a_cluster_file_is_relative_to_that_file(tmp_path):
    (tmp_path / "hw").mkdir()
    _write(tmp_path / "hw", "mygpu.yaml", (GPUS / "h100-sxm-80gb.yaml").read_text())
    cl = _write(tmp_path / "hw", "c.yaml", H100_CLUSTER.replace("gpu: h100-sxm-80gb", "gpu: ./mygpu.yaml"))
    p = run("predict", "--model", "llama3-8b", "--cluster", str(cl), "--tp", "8", "--profile", "h100-sxm-80gb",
            cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("old, new, field, why", [
    ("  node_power_budget: 10.2kW", "  node_power_budget: 10.2", "power.node_power_budget",
     "a bare number reads as watts"),
    ("  node_power_budget: 10.2kW", "  node_power_budget: 3kW", "power.node_other_power",
     "leave the 8 GPUs at least their lowest power limit (8 x 200 W)"),
    ("  upstream: [[], [], [], [], [0], [1], [2], [3]]", "  upstream: [[4], [], [], [], [0], [1], [2], [3]]",
     "cooling.upstream", "slots 0 -> 4 -> 0 heat each other in a circle"),
    ("row: front", "row: frnt", "cooling.slots[0].row", "'frnt' is not one of front, middle, rear, coldplate"),
    ("airflow: front-to-back", "airflow: back-to-frnt", "cooling.airflow", "is not one of front-to-back"),
    ("  inter_node.bandwidth_per_nic:", "  inter_node.bandwith_per_nic:", "sources.inter_node.bandwith_per_nic",
     "names no field of this file (did you mean inter_node.bandwidth_per_nic?)"),
    # a misspelt section is named as the typo it is, not as the section it leaves missing
    ("\ninter_node:\n", "\ninter_nodes:\n", "inter_nodes", "unknown key (did you mean inter_node?"),
    ("  type: air", "  typ: air", "cooling.typ", "unknown key (did you mean type?")])
def test_a_broken_cluster_file_is_one_line_naming_the_field(tmp_path, old, new, field, why):
    assert old in H100_CLUSTER
    cl = _write(tmp_path, "c.yaml", H100_CLUSTER.replace(old, new, 1))
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", str(cl), "--tp", "8"),
                          f"{cl}: {field}", why)


def test_a_gpu_name_given_as_a_cluster_or_the_reverse_is_named_as_such():
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "h100-sxm-80gb", "--tp", "8"),
                          "--cluster: 'h100-sxm-80gb' is a catalog GPU, not a cluster (known clusters: aws-p5")
    assert_one_line_error(run("hardware", "--gpu", "dgx-h100"), "--gpu: 'dgx-h100' is a catalog cluster, not a GPU")


def test_the_cluster_flag_refuses_an_empty_name_and_a_gpu_file():
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "", "--tp", "8"), "--cluster: is empty")
    gpu = GPUS / "h100-sxm-80gb.yaml"
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", str(gpu), "--tp", "8"),
                          "--cluster:", "is a GPU file")


@pytest.mark.parametrize("old, new, field, why", [
    ("  kernel_limit_w: 700.0", "  kernel_limt_w: 500.0", "power.kernel_limt_w", "did you mean kernel_limit_w?"),
    ("  spin_w: 33.91", "  spin_ww: 33.91", "power.spin_ww", "did you mean spin_w?"),
    ("  gamma: 2.53", "  gamma: 25.3", "power.gamma", "25.3 is outside 0.5 .. 4"),
    ("  static_w: 80.5", "  static_w: 130.0", "power.static_w", "130 W must lie in 0 .. idle_w (121.8 W)"),
    ("  static_w: 80.5", "  static_w: -5", "power.static_w", "must lie in 0 .. idle_w"),
    ("\nthermal:\n", "\nstatic_w: 60\nthermal:\n", "static_w", "a key of the power: section, not of the profile's top"),
    ("\nthermal:\n", "\nfoo: 1\nthermal:\n", "foo", "unknown key (known: gpu, provenance"),
    ("  tau_s:", "  tau:", "thermal.tau", "unknown key")])
def test_a_misspelt_or_impossible_power_coefficient_is_refused(tmp_path, old, new, field, why):
    text = (PROFILES / "h100-sxm-80gb.yaml").read_text()
    assert old in text
    prof = _write(tmp_path, "p.yaml", text.replace(old, new, 1))
    with pytest.raises(InputError, match=re.escape(why)) as e:
        load_profile(str(prof))
    assert e.value.where == str(prof) and e.value.field == field


def test_a_profile_without_static_w_keeps_the_whole_idle_power_at_every_clock(tmp_path):
    """static_w is optional (profiles written before it): without it the idle power is taken as
    clock-independent, as the power law was before, and a capped GPU holds a lower clock."""
    from costmodel.power import clock_ratio
    text = (PROFILES / "h100-sxm-80gb.yaml").read_text()
    prof = _write(tmp_path, "p.yaml", text.replace("  static_w: 80.5\n", "", 1))
    old, new = load_profile(str(prof)).power, load_profile("h100-sxm-80gb").power
    assert old.static_w is None and old.static_floor_w == old.idle_w == 121.8 and new.static_w == 80.5
    assert float(clock_ratio(old, 700.0, 400.0)) < float(clock_ratio(new, 700.0, 400.0))


def test_recommend_refuses_a_power_cap_the_gpus_cannot_hold():
    """A B200 draws 190 W idle at its lowest clock (nvidia-smi): under a 220 W limit its busy GPUs stay
    above it at every level, so no answer keeps the limit: exit 3 naming the least cap that holds (it had
    answered with the GPUs above the limit and a note).  Under 300 W the GPUs hold it, whatever level
    each stage's cap is set to (a 200 W level runs at the floor clock, still under 300 W)."""
    p = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-b200", "--nodes", "1", "--gbs", "64",
            "--seq-len", "8192", "--power-cap-w", "220", "--json")
    assert p.returncode == 3, p.stderr
    rec = json.loads(p.stdout)
    assert rec["feasible"] is False and rec["binding"] == "power_cap" and rec["units"]["power_cap"] == "W"
    assert 225.0 < rec["required"]["power_cap"] < 300.0
    assert "no layout holds its GPUs under --power-cap-w 220 W" in " ".join(p.stderr.split())
    ok = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-b200", "--nodes", "1", "--gbs", "64",
             "--seq-len", "8192", "--power-cap-w", "300", "--json")
    assert ok.returncode == 0, ok.stderr
    assert all(g["busy_power_w"] <= 300.5 for g in json.loads(ok.stdout)["per_gpu"])


def test_energy_search_with_a_profile_lacking_its_thermal_model_is_one_line(tmp_path):
    lines, out, skip = (PROFILES / "h100-sxm-80gb.yaml").read_text().split("\n"), [], False
    for ln in lines:                              # drop the thermal: section
        skip = ln.startswith("thermal:") or (skip and ln.startswith(" "))
        if not skip:
            out.append(ln)
    prof = _write(tmp_path, "p.yaml", "\n".join(out))
    for extra in (("--objective", "energy"), ("--power-cap-w", "400"), ("--pareto",)):
        p = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--profile", str(prof),
                *extra)
        assert_one_line_error(p, f"{prof}: thermal: missing")


def test_recommend_json_says_infeasible_on_stdout():
    p = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "4", "--gbs", "64",
            "--seq-len", "4096", "--max-temp-c", "40", "--json")
    assert p.returncode == 3 and "Traceback" not in p.stderr
    rec = json.loads(p.stdout)
    assert rec["feasible"] is False and rec["binding"] == "temperature"
    assert rec["required"]["temperature"] > 40.0


def test_a_required_field_left_out_is_named_missing_not_as_its_source(tmp_path):
    """A GPU file without its tdp: with the source kept, the message says tdp is missing, its source given
    (it had suggested dropping the source); without either, 'tdp: missing' (it had said 'sources.tdp:
    missing: every number needs its source')."""
    from costmodel.errors import InputError
    from costmodel.specs import hardware_dir, load_gpu
    text = (hardware_dir() / "gpus" / "h100-sxm-80gb.yaml").read_text()
    lines = text.splitlines(keepends=True)
    no_value = "".join(ln for ln in lines if not ln.startswith("tdp:"))
    f = tmp_path / "g.yaml"
    f.write_text(no_value)
    with pytest.raises(InputError, match=r"g.yaml: tdp: missing \(its source is given\): give its value"):
        load_gpu(str(f))
    f.write_text("".join(ln for ln in no_value.splitlines(keepends=True) if not ln.lstrip().startswith("tdp:")))
    with pytest.raises(InputError, match=r"g.yaml: tdp: missing$"):
        load_gpu(str(f))


@pytest.mark.parametrize("old,new,field,why", [
    ("  bf16: 989.4\n", "  bf16: 989.4\n  fp9: 1000\n", "peak_tflops.fp9", "not a number format the model reads"),
    ("architecture: hopper\n", "architecture: cdna3\n", "architecture", "cdna3 is an amd architecture; vendor says nvidia"),
])
def test_a_gpu_file_with_a_peak_or_architecture_it_cannot_have_is_refused(tmp_path, old, new, field, why):
    """An unknown format's peak had been ignored; an NVIDIA GPU of an AMD architecture had taken AMD's
    kernels and error band."""
    text = (hardware_dir() / "gpus" / "h100-sxm-80gb.yaml").read_text()
    assert text.count(old) == 1, old
    f = tmp_path / "g.yaml"
    f.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=re.escape(f"{field}: {why}")):
        load_gpu(str(f))


def test_an_empty_source_is_no_source(tmp_path):
    """Every number needs its source: an empty string had passed for one."""
    text = (hardware_dir() / "gpus" / "h100-sxm-80gb.yaml").read_text()
    line = next(ln for ln in text.splitlines(keepends=True) if ln.startswith("  tdp: "))
    f = tmp_path / "g.yaml"
    f.write_text(text.replace(line, '  tdp: ""\n', 1))
    with pytest.raises(InputError, match=r"sources.tdp: '' is not a source"):
        load_gpu(str(f))


@pytest.mark.parametrize("key", ["cooling.slots", "cooling.preheat_c_per_w", "cooling.upstream"])
def test_the_cooling_layout_needs_its_source_like_every_other_number(tmp_path, key):
    """The slots' resistances, the preheat and the upstream map move every predicted temperature (a
    rear slot's 1.5 x resistance: 55 -> 70 C): unsourced, they are refused like any number."""
    text = re.sub(rf"(?m)^  {re.escape(key)}:.*\n", "", H100_CLUSTER)
    with pytest.raises(InputError, match="every number needs its source") as e:
        load_cluster(str(_write(tmp_path, "c.yaml", text)))
    assert e.value.field == f"sources.{key}"


def test_a_gpu_file_whose_sm_count_contradicts_the_profile_is_refused(tmp_path):
    """The GEMM model's waves run on the profile's num_sms: an H200 file saying 66 SMs with the H200
    profile (132) would be ignored silently; it is refused naming the GPU file's num_sms."""
    gpu = _write(tmp_path, "half.yaml", re.sub(r"(?m)^num_sms:.*$", "num_sms: 66", (GPUS / "h200-sxm-141gb.yaml").read_text()))
    cl = _write(tmp_path, "c.yaml", (CLUSTERS / "paper-h200.yaml").read_text().replace("gpu: h200-sxm-141gb", f"gpu: {gpu}"))
    p = run("predict", "--model", "llama3-8b", "--cluster", str(cl), "--profile", "h200-sxm-141gb", "--tp", "1", "--gbs", "64",
            "--seq-len", "4096")
    assert_one_line_error(p, "half.yaml", "num_sms: 66 contradicts", "gemm.bf16.num_sms 132")


def test_a_preheat_coefficient_without_its_upstream_slots_is_refused(tmp_path):
    """paper-h200 without ``cooling.upstream`` (and its source line) had run every slot at the front
    slots' temperature, its rear slots' preheat silently gone; an explicit list of empty lists (no slot
    behind another, as azure-nd-mi300x says) still loads."""
    text = (CLUSTERS / "paper-h200.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith(("upstream:", "cooling.upstream:"))]
    with pytest.raises(InputError, match=r"cooling\.upstream: missing: preheat_c_per_w 0\.0107"):
        load_cluster(str(_write(tmp_path, "no-upstream.yaml", "\n".join(lines) + "\n")))
    assert not any(load_cluster("azure-nd-mi300x").cooling.upstream)


def test_a_profile_whose_gpu_is_a_slip_for_a_catalog_gpu_is_refused(tmp_path):
    """A hand-edited profile saying ``gpu: h100-sxm-8gb``: no catalog GPU, so the check of its peaks and
    TDP against the cluster's could not run; one edit from h100-sxm-80gb, it is named as a slip."""
    prof = _write(tmp_path, "p.yaml", (PROFILES / "h100-sxm-80gb.yaml").read_text().replace(
        "gpu: h100-sxm-80gb", "gpu: h100-sxm-8gb", 1))
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "1", "--pp", "1", "--mbs", "1",
            "--gbs", "64", "--profile", str(prof))
    assert_one_line_error(r, f"{prof}: gpu: 'h100-sxm-8gb' is no GPU of the catalog; did you mean h100-sxm-80gb?")


@pytest.mark.parametrize("value,said", [
    ("42", "must be a name, the GPU file stem this profile was fitted for (e.g. h100-sxm-80gb), got 42 (a number)"),
    ("[h100-sxm-80gb]", "must be a name, the GPU file stem this profile was fitted for (e.g. h100-sxm-80gb), got "
                        "['h100-sxm-80gb'] (a list)"),
    ("''", "empty: name the GPU file stem this profile was fitted for (e.g. h100-sxm-80gb)"),
    (None, "missing: the GPU file stem this profile was fitted for (e.g. h100-sxm-80gb)"),
])
def test_a_profile_gpu_of_the_wrong_type_is_not_called_missing(tmp_path, value, said):
    """``gpu: 42`` is present with the wrong type (it had been called missing); no ``gpu`` line is missing."""
    prof = _write(tmp_path, "p.yaml", (PROFILES / "h100-sxm-80gb.yaml").read_text().replace(
        "gpu: h100-sxm-80gb\n", "" if value is None else f"gpu: {value}\n", 1))
    with pytest.raises(InputError) as e:
        load_profile(str(prof))
    assert str(e.value) == f"{prof}: gpu: {said}"


def test_hardware_says_how_to_give_a_gpu_of_one_s_own_a_profile(tmp_path):
    """A GPU file of one's own (an H20, not in the catalog) has no built-in profile: `hardware --cluster` says
    how to fit one, not 'unknown profile; did you mean mi250?' (a catalog name a few letters alike)."""
    _write(tmp_path, "h20.yaml", (GPUS / "h100-sxm-80gb.yaml").read_text())
    cl = _write(tmp_path, "c.yaml", H100_CLUSTER.replace("gpu: h100-sxm-80gb", "gpu: ./h20.yaml"))
    p = run("hardware", "--cluster", str(cl), "--json")
    assert p.returncode == 0, p.stderr
    assert "did you mean" not in p.stdout and "no built-in profile for h20: fit one (costmodel calibrate fit" in p.stdout
