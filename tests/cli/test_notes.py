"""The notes predict and recommend print beside an answer (costmodel/cli/notes.py), each against the
condition that calls for it and the one that does not."""
from costmodel.cli.notes import positions_note
from costmodel.specs import Recipe, load_model


def test_a_sequence_past_the_models_positions_is_said_to_be_a_context_extension():
    """Llama 3 8B has 8,192 positions (its config's max_position_embeddings); 131,072 tokens had been priced
    with no word in predict's notes (only a comment in the Megatron arguments).  GPT-3's learned table says
    what the parameter count leaves out; a run within the limit says nothing."""
    m = load_model("llama3-8b")
    assert positions_note(m, Recipe(gbs=8, seq_len=8192)) is None
    text = positions_note(m, Recipe(gbs=8, seq_len=131072))
    assert text.startswith("seq_len 131,072 is past Llama 3 8B's 8,192 positions (max_position_embeddings)")
    assert "RoPE scaling" in text
    gpt = positions_note(load_model("gpt3-175b"), Recipe(gbs=8, seq_len=4096))
    assert "learned position table gains are left out of the parameter count" in gpt
