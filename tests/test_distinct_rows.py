"""costmodel.distinct_rows: a term evaluated once per distinct row of its declared fields gives what it
gives on every row, and cannot read a field it did not declare."""
import numpy as np
import pytest

from costmodel.distinct_rows import on_distinct_rows, unique_rows
from costmodel.layout_fields import uses_layout_fields
from costmodel.layouts import enumerate_layouts
from costmodel.predict import predict_table
from costmodel.schedule import step_times
from costmodel.memory import memory_bytes
from costmodel.specs import Recipe, load_cluster, load_model, load_profile
from costmodel.stage_params import _stage_params_rows, stage_params


def _space(model_name, nodes, gbs):
    model, cluster = load_model(model_name), load_cluster("dgx-h100", nodes=nodes)
    recipe = Recipe(gbs=gbs, seq_len=model.seq_len)
    return model, recipe, cluster, enumerate_layouts(model, recipe, cluster.num_gpus, cluster.scale_up_gpus, max_mbs=4)


@pytest.mark.parametrize("name,nodes,gbs", [("deepseek-v3", 32, 1024), ("llama3.1-405b", 64, 512)])
def test_stage_params_on_distinct_rows_equal_every_row(name, nodes, gbs):
    """DeepSeek-V3 (dense layers first, MTP on the last stage) and Llama 3.1 405B (126 layers: uneven
    and accounted splits): the deduplicated per-GPU parameters equal the term on all rows, exactly."""
    model, _, _, table = _space(name, nodes, gbs)
    assert len(table) > 1000
    for light in (False, True):
        d, e = stage_params(model, table, light)
        d_all, e_all = _stage_params_rows(model, light, table)
        assert np.array_equal(d, np.broadcast_to(d_all, d.shape)) and np.array_equal(e, np.broadcast_to(e_all, e.shape))
    first, _ = unique_rows(*(getattr(table, f) for f in _stage_params_rows.layout_fields))
    assert len(first) < len(table) / 10          # what the dedupe saves on a search space


def test_predict_table_shares_the_stage_parameters_without_changing_a_step_or_a_byte():
    """predict_table hands one stage_params result to step_times and memory_bytes; each computing its
    own gives the same step times and peak memory on every layout of a DeepSeek-V3 space."""
    model, recipe, cluster, table = _space("deepseek-v3", 32, 1024)
    profile = load_profile(cluster.gpu.key)
    pred = predict_table(model, recipe, cluster, profile, table)
    terms = pred.terms
    own = step_times(model, recipe, cluster, profile, table, terms.compute, terms.comm)
    assert np.array_equal(own.step_time_s, pred.step_time_s)
    assert np.array_equal(memory_bytes(model, recipe, table, cluster.gpu).peak_bytes, pred.memory.peak_bytes)


def test_a_term_reading_an_undeclared_field_fails():
    """The view handed to the term holds only the declared fields: reading another raises at once."""
    @uses_layout_fields("tp")
    def reads_pp(t):
        return t.pp

    _, _, _, table = _space("llama3-8b", 1, 64)
    with pytest.raises(AttributeError, match="'pp' is read but not declared"):
        on_distinct_rows(reads_pp, table)
