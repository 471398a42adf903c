"""Catalog model files as a developer adds them: costmodel's own keys only, a name the catalog can be
asked by, a published parameter count that agrees with the architecture."""
import json

import pytest

from costmodel.errors import InputError
from costmodel.specs import catalog_dir, list_models, load_model
from costmodel.specs.model_config import OWN_KEYS


@pytest.mark.parametrize("name", list_models())
def test_catalog_files_use_only_the_keys_costmodel_reads_and_their_own_name(name):
    d = json.loads((catalog_dir() / f"{name}.json").read_text())
    assert sorted(k for k in d if k.startswith("_") and k not in OWN_KEYS) == []
    m = load_model(name)
    assert m.name == name
    # the published total, where the file gives one (Llama 4 Scout's 109B counts its vision encoder),
    # within 1 % (rounding) of what the architecture gives
    assert m.params_published is None or abs(m.params() / m.params_published - 1) < 0.01


def _llama_with(tmp_path, **keys):
    d = json.loads((catalog_dir() / "llama3-8b.json").read_text())
    d.update(keys)
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    return str(p)


@pytest.mark.parametrize("value, needle", [(20e9, "2e+10 disagrees with the 8.03e+09 parameters"),
                                           ("8B", "expected a positive number"), (0, "expected a positive number"),
                                           (True, "expected a positive number")])
def test_a_published_count_the_architecture_contradicts_is_refused(tmp_path, value, needle):
    with pytest.raises(InputError) as e:
        load_model(_llama_with(tmp_path, _params_published=value))
    assert "_params_published" in str(e.value) and needle in str(e.value)


def test_a_published_count_rounded_to_two_digits_is_taken(tmp_path):
    # Llama 3 8B: 8,030,261,248 parameters, "8.0B" within rounding
    assert load_model(_llama_with(tmp_path, _params_published=8.0e9)).params_published == 8.0e9


def test_a_catalog_file_whose_name_is_not_its_file_name_is_refused(tmp_path, monkeypatch):
    (tmp_path / "qwen2.5-14b-x.json").write_text((catalog_dir() / "llama3-8b.json").read_text())
    monkeypatch.setattr("costmodel.specs.loading.catalog_dir", lambda: tmp_path)
    with pytest.raises(InputError) as e:
        load_model("qwen2.5-14b-x")
    assert "_name" in str(e.value) and "'llama3-8b' differs from the file's name 'qwen2.5-14b-x'" in str(e.value)


def test_every_profile_is_keyed_by_its_file_name():
    """A profile's key is its file's stem (what derived_from chains and the notes compare against; a
    local name had once shadowed it, keying every profile 'note')."""
    from costmodel.specs import hardware_dir, load_profile
    for f in sorted((hardware_dir() / "profiles").glob("*.yaml")):
        assert load_profile(str(f)).key == f.stem, f.name


def test_the_v100_32gb_holds_what_cuda_reports_not_32e9_bytes():
    """'32GB' of HBM2 is 32 GiB of stacks; CUDA reports 34,089,730,048 bytes (32510 MiB) on a V100-SXM2-32GB, where
    the datasheet figure read as 32e9 bytes had left 29.8 GiB (the non-NVLink trial)."""
    from costmodel.specs import load_gpu
    assert load_gpu("v100-sxm2-32gb").capacity_bytes == 34089730048 // 2**20 * 2**20 == 32510 * 2**20
