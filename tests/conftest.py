"""Shared fixtures: catalog specs and a one-layout prediction helper."""
import pytest

from costmodel.layouts import LayoutTable
from costmodel.predict import predict_table
from costmodel.specs import Recipe, load_cluster, load_profile


def layout(**kw):
    """A one-row LayoutTable with Megatron-ish defaults overridden by ``kw``."""
    row = dict(tp=1, pp=1, dp=1, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    row.update(kw)
    return LayoutTable.from_rows([row])


@pytest.fixture(scope="session")
def h200():
    c = load_cluster("paper-h200")
    return c, load_profile(c.gpu.key)


def predict_one(model, cluster, profile, recipe=None, **kw):
    """Predict a single layout; returns the Prediction."""
    recipe = recipe or Recipe(gbs=128, seq_len=model.seq_len)
    return predict_table(model, recipe, cluster, profile, layout(**kw))
