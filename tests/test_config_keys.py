"""costmodel.config_keys: one-edit distance, and which unread keys are taken for misspellings."""
import pytest

from costmodel.config_keys import check_misspelt, one_edit_apart, track
from costmodel.errors import InputError


@pytest.mark.parametrize("a, b, apart", [
    ("micro_batch_size", "micro_batch_sise", True),            # substitution
    ("micro_batch_size", "micro_batch_sizee", True),           # insertion
    ("micro_batch_size", "micro_bach_size", True),             # deletion
    ("micro_batch_size", "mciro_batch_size", True),            # transposition of neighbours
    ("micro_batch_size", "micro_batch_size", False),           # the same key
    ("encoder_seq_length", "decoder_seq_length", False),       # two substitutions: a different key
    ("ub_tp_comm_overlap", "ub_tp_comm_overlap_cfg", False),   # an extension, not a slip
    ("micro_batch_size", "mciro_bacth_size", False),           # two transpositions
])
def test_one_edit_apart(a, b, apart):
    assert one_edit_apart(a, b) is apart and one_edit_apart(b, a) is apart


def _read(doc: dict, wanted: tuple):
    """A reader that looks up ``wanted`` in doc['model']."""
    t = track(doc)
    m = t.get("model")
    for k in wanted:
        m.get(k)
    return t


def test_an_unread_key_one_edit_from_a_missed_one_is_refused():
    t = _read({"model": {"micro_batch_sise": 1, "global_batch_size": 8}}, ("micro_batch_size", "global_batch_size"))
    with pytest.raises(InputError, match=r"cfg.yaml: model\.micro_batch_sise: .*did you mean model\.micro_batch_size\?"):
        check_misspelt(t, "cfg.yaml")


@pytest.mark.parametrize("model", [
    {"micro_batch_size": 1, "micro_batch_sise": 2},     # the key asked for is there: the near one is not needed
    {"decoder_seq_length": 4096},                       # two edits from encoder_seq_length
    {"ub_tp_comm_overlap_cfg": {"qkv_fprop": 1}},       # an extension of ub_tp_comm_overlap
    {"fp4": "nvfp4"},                                   # short keys: fp4 and fp8 are both real
    {"tokenizer_library": "megatron"},                  # unrelated and unread: left alone
])
def test_real_neighbours_and_unrelated_keys_pass(model):
    t = _read({"model": model}, ("micro_batch_size", "encoder_seq_length", "ub_tp_comm_overlap", "fp8"))
    check_misspelt(t, "cfg.yaml")


def test_nested_and_listed_mappings_are_checked_with_their_dotted_place():
    t = track({"a": {"b": [{"tensor_model_parallel_sizee": 2}]}})
    t["a"]["b"][0].get("tensor_model_parallel_size")
    with pytest.raises(InputError, match=r"a\.b\.tensor_model_parallel_sizee"):
        check_misspelt(t, "x.yaml")
