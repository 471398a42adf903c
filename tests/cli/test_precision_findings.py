"""Low-precision recipes and long-context attention a user found priced or refused wrongly, each now one
line naming the flag and the rule (exit 2)."""
from cli_run import one_line, run

L8 = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "64", "--seq-len", "4096")


def test_bf16_edge_layers_are_megatrons_switch_and_recommend_names_it():
    """--bf16-edge-layers is Megatron-core's --first-last-layers-bf16: on torchtitan, llm-foundry or DeepSpeed
    no printed configuration could run it (it had been priced there); 17 edge layers of a 32-layer model
    are refused by recommend by the flag (it had blamed the gbs and the GPU count)."""
    fp8 = ("--precision", "fp8", "--fp8-recipe", "tensorwise")
    for stack in ("torchtitan", "llm-foundry", "deepspeed"):
        one_line(run("predict", *L8, "--tp", "1", *fp8, "--bf16-edge-layers", "4", "--stack", stack),
                 "--bf16-edge-layers: is Megatron-core's --first-last-layers-bf16", f"the {stack} stack")
    one_line(run("recommend", *L8, *fp8, "--bf16-edge-layers", "17"),
             "--bf16-edge-layers: 17 keeps the first and the last 17 layers", "num_layers (32)")
    # 16 of 32 is every layer in BF16: an fp8 run with no fp8 layer (its power had been priced as fp8 GEMMs)
    one_line(run("predict", *L8, "--tp", "1", *fp8, "--bf16-edge-layers", "16"),
             "--bf16-edge-layers 16 keeps the first and the last 16 layers in BF16, which is every layer of 32",
             "--precision bf16")


def test_a_precision_the_profile_never_measured_names_the_flag():
    """MI300X lists an fp8 peak but its built-in profile has no fp8 GEMM fit: the refusal names --precision
    and what to do (it named only the profile's key)."""
    one_line(run("predict", "--model", "llama3-8b", "--cluster", "azure-nd-mi300x", "--tp", "2", "--gbs", "64",
                 "--precision", "fp8"), "--precision: fp8 runs its GEMMs on fp8 tensor cores", "--profile")


def test_context_parallelism_needs_fused_attention_on_megatron():
    """Megatron-core's unfused DotProductAttention asserts CP 1 ('Context parallelism is only supported by
    TEDotProductAttention!', megatron/core/transformer/dot_product_attention.py)."""
    one_line(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "8", "--cp", "4",
                 "--seq-len", "131072", "--gbs", "8", "--no-flash-attention", "--recompute", "selective"),
             "Context parallelism is only supported by TEDotProductAttention")


def test_fp4_peaks_are_listed_and_edge_layers_are_a_layer_count():
    """costmodel hardware shows the FP4 peak --precision nvfp4 runs at (B200's 9 PFLOP/s dense, NVIDIA DGX
    B200 datasheet via hardware/gpus); --bf16-edge-layers is a whole count in JSON and messages (2, not 2.0)."""
    import json
    r = run("hardware", "--json")
    gpus = {g["gpu"]: g for g in json.loads(r.stdout)["gpus"]}
    assert gpus["b200-sxm-180gb"]["peak_fp4_tflops"] == 9000.0 and gpus["h100-sxm-80gb"]["peak_fp4_tflops"] is None
    r = run("predict", *L8, "--tp", "2", "--precision", "fp8", "--fp8-recipe", "tensorwise", "--bf16-edge-layers", "2",
            "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["recipe"]["bf16_edge_layers"] == 2
    one_line(run("predict", *L8, "--tp", "2", "--precision", "fp8", "--fp8-recipe", "tensorwise",
                 "--bf16-edge-layers", "-1"), "got -1")


def test_auto_recompute_refuses_a_layer_count_and_counts_print_whole():
    """--recompute auto with --recompute-num-layers names the clash (the layout had printed 'none(3)');
    a document length above the sequence prints as the count typed (2000000, not 2e+06)."""
    one_line(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--seq-len", "8192",
                 "--gbs", "64", "--recompute", "auto", "--recompute-num-layers", "3"),
             "--recompute-num-layers: --recompute auto chooses")
    one_line(run("predict", *L8, "--doc-tokens", "2000000"), "got 2000000")


def test_fp8_parameter_gathers_without_a_sharded_optimizer_are_refused_and_under_fsdp_said():
    """--fp8-param-gather with --zero 0 had been taken (the JSON said it on) though nothing priced it and
    Megatron-LM asserts the distributed optimizer or FSDP for it; under FSDP it runs, priced at 16 bits."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--gbs", "64", "--precision",
            "fp8", "--fp8-param-gather")
    one_line(run(*base, "--zero", "0"), "--fp8-param-gather", "needs Megatron's distributed optimizer or FSDP")
    r = run(*base, "--zero", "3", "--tp", "1", "--pp", "1")
    assert r.returncode == 0 and "--fp8-param-gather under FSDP (ZeRO-3) is priced as 16-bit" in r.stderr, r.stderr
    assert run(*base, "--zero", "1", "--recompute", "full").returncode == 0
