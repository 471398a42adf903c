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


def test_real_keys_one_edit_apart_pass_when_the_reader_looks_up_both():
    """fp4 is one edit from fp8: a reader that looks up only fp8 takes it for a misspelling, one that
    looks up both (as the Megatron-Bridge reader does) does not."""
    only = _read({"model": {"fp4": "nvfp4"}}, ("fp8",))
    with pytest.raises(InputError, match=r"model\.fp4: .*did you mean model\.fp8\?"):
        check_misspelt(only, "cfg.yaml")
    check_misspelt(_read({"model": {"fp4": "nvfp4"}}, ("fp8", "fp4")), "cfg.yaml")


def test_every_misspelling_is_named_in_one_message():
    t = _read({"model": {"micro_batch_sise": 1, "global_batch_sise": 8}}, ("micro_batch_size", "global_batch_size"))
    with pytest.raises(InputError, match=r"model\.micro_batch_sise: .*; also model\.global_batch_sise: did you mean "
                                         r"model\.global_batch_size\?"):
        check_misspelt(t, "cfg.yaml")
