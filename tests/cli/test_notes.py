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


def test_a_sliding_window_model_is_said_to_search_without_cp_on_the_te_stacks():
    """GPT-OSS alternates 128-token windows with full layers: on the megatron stack every layout is CP 1
    (Transformer Engine's p2p ring refuses the windows), which the search had done without a word; torchtitan
    runs them, and Llama 3 has no window."""
    from costmodel.cli.notes import window_cp_note
    oss = load_model("gpt-oss-120b")
    assert "every layout runs at CP 1" in window_cp_note(oss, Recipe(gbs=8, seq_len=8192))
    assert window_cp_note(oss, Recipe(gbs=8, seq_len=8192, stack="torchtitan")) is None
    assert window_cp_note(load_model("llama3-8b"), Recipe(gbs=8, seq_len=8192)) is None


def test_a_pinned_cp_the_windows_refuse_is_named_not_the_batch_rule():
    """recommend --cp 4 for a windowed model on 16 nodes with gbs 16: the plainest layout (TP 1, DP 32)
    broke the batch rule first, which the message had named; the least TP that leaves whole micro-batches
    now shows the window rule."""
    from cli_run import run
    r = run("recommend", "--model", "gpt-oss-120b", "--cluster", "hgx-h200", "--nodes", "16", "--seq-len", "65536",
            "--gbs", "16", "--cp", "4")
    assert r.returncode == 2 and "has cp=4: CP > 1 with" in r.stderr and "sliding-window layers" in r.stderr, r.stderr
    assert "must be divisible by DP x mbs" not in r.stderr


def test_torchtitan_fp8_priced_tensorwise_by_default_says_todays_torchtitan_runs_rowwise():
    """The stack's fp8 default is tensorwise (torchtitan's recipe of its 2024 tables); its converter takes
    rowwise only since 2026-04: the ranking had been priced on it with the reason printed only inside the
    launch settings.  An explicit recipe, or another stack, says nothing."""
    from costmodel.cli.notes import torchtitan_fp8_note
    from costmodel.stacks import stack_recipe
    r = stack_recipe("torchtitan", 64, 8192, "fp8")
    assert r.fp8_recipe == "tensorwise" and "--fp8-recipe rowwise prices that" in torchtitan_fp8_note(r, {})
    assert torchtitan_fp8_note(r, {"fp8_recipe": "tensorwise"}) is None
    assert torchtitan_fp8_note(stack_recipe("torchtitan", 64, 8192, "fp8", fp8_recipe="rowwise"), {}) is None
    assert torchtitan_fp8_note(stack_recipe("megatron", 64, 8192, "fp8"), {}) is None
