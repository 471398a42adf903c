"""The model_type names Hugging Face transformers registers (``CONFIG_MAPPING_NAMES`` in
src/transformers/models/auto/configuration_auto.py, huggingface/transformers at commit 001002320fa0):
a config's model_type one edit from a family the reader knows is a slip only when it is none of these
(``gpt_neox`` is GPT-NeoX, not a misspelt ``gpt_neo``)."""

HF_MODEL_TYPES = frozenset((
    "afmoe", "aimv2", "aimv2_vision_model", "albert", "align", "altclip", "apertus", "arcee", "aria", "aria_text",
    "audio-spectrogram-transformer", "audioflamingo3", "audioflamingo3_encoder", "autoformer", "aya_vision",
    "bamba", "bark", "bart", "beit", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "biogpt", "bit",
    "bitnet", "blenderbot", "blenderbot-small", "blip", "blip-2", "blip_2_qformer", "bloom", "blt", "bridgetower",
    "bros", "camembert", "canine", "chameleon", "chinese_clip", "chinese_clip_vision_model", "clap", "clip",
    "clip_text_model", "clip_vision_model", "clipseg", "clvp", "code_llama", "codegen", "cohere", "cohere2",
    "cohere2_vision", "colpali", "colqwen2", "conditional_detr", "convbert", "convnext", "convnextv2", "cpmant",
    "csm", "ctrl", "cvt", "cwm", "d_fine", "dab-detr", "dac", "data2vec-audio", "data2vec-text", "data2vec-vision",
    "dbrx", "deberta", "deberta-v2", "decision_transformer", "deepseek_v2", "deepseek_v3", "deepseek_vl",
    "deepseek_vl_hybrid", "deformable_detr", "deit", "depth_anything", "depth_pro", "detr", "dia", "diffllama",
    "dinat", "dinov2", "dinov2_with_registers", "dinov3_convnext", "dinov3_vit", "distilbert", "doge",
    "donut-swin", "dots1", "dpr", "dpt", "edgetam", "edgetam_video", "edgetam_vision_model", "efficientloftr",
    "efficientnet", "electra", "emu3", "encodec", "encoder-decoder", "eomt", "ernie", "ernie4_5", "ernie4_5_moe",
    "esm", "evolla", "exaone4", "falcon", "falcon_h1", "falcon_mamba", "fastspeech2_conformer",
    "fastspeech2_conformer_with_hifigan", "flaubert", "flava", "flex_olmo", "florence2", "fnet", "focalnet",
    "fsmt", "funnel", "fuyu", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_audio",
    "gemma3n_text", "gemma3n_vision", "git", "glm", "glm4", "glm46v", "glm4_moe", "glm4v", "glm4v_moe",
    "glm4v_moe_text", "glm4v_moe_vision", "glm4v_text", "glm4v_vision", "glpn", "got_ocr2", "gpt-sw3", "gpt2",
    "gpt_bigcode", "gpt_neo", "gpt_neox", "gpt_neox_japanese", "gpt_oss", "gptj", "granite", "granite_speech",
    "granitemoe", "granitemoehybrid", "granitemoeshared", "granitevision", "grounding-dino", "groupvit", "helium",
    "hgnet_v2", "hiera", "hubert", "hunyuan_v1_dense", "hunyuan_v1_moe", "ibert", "idefics", "idefics2",
    "idefics3", "idefics3_vision", "ijepa", "imagegpt", "informer", "instructblip", "instructblipvideo",
    "internvl", "internvl_vision", "jais2", "jamba", "janus", "jetmoe", "kosmos-2", "kosmos-2.5",
    "kyutai_speech_to_text", "layoutlm", "layoutlmv2", "layoutlmv3", "layoutxlm", "led", "levit", "lfm2",
    "lfm2_moe", "lfm2_vl", "lightglue", "lilt", "llama", "llama4", "llama4_text", "llava", "llava_next",
    "llava_next_video", "llava_onevision", "longcat_flash", "longformer", "longt5", "luke", "lxmert", "m2m_100",
    "mamba", "mamba2", "marian", "markuplm", "mask2former", "maskformer", "maskformer-swin", "mbart",
    "megatron-bert", "metaclip_2", "mgp-str", "mimi", "minimax", "ministral", "ministral3", "mistral", "mistral3",
    "mixtral", "mlcd", "mllama", "mm-grounding-dino", "mobilebert", "mobilenet_v1", "mobilenet_v2", "mobilevit",
    "mobilevitv2", "modernbert", "modernbert-decoder", "moonshine", "moshi", "mpnet", "mpt", "mra", "mt5",
    "musicgen", "musicgen_melody", "mvp", "nanochat", "nemotron", "nllb-moe", "nougat", "nystromformer", "olmo",
    "olmo2", "olmo3", "olmoe", "omdet-turbo", "oneformer", "openai-gpt", "opt", "ovis2", "owlv2", "owlvit",
    "paligemma", "parakeet_ctc", "parakeet_encoder", "patchtsmixer", "patchtst", "pegasus", "pegasus_x",
    "perceiver", "perception_lm", "persimmon", "phi", "phi3", "phi4_multimodal", "phimoe", "pix2struct", "pixtral",
    "plbart", "poolformer", "pop2piano", "prompt_depth_anything", "prophetnet", "pvt", "pvt_v2", "qwen2",
    "qwen2_5_omni", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_audio", "qwen2_audio_encoder", "qwen2_moe", "qwen2_vl",
    "qwen2_vl_text", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_omni_moe", "qwen3_vl", "qwen3_vl_moe",
    "qwen3_vl_moe_text", "qwen3_vl_text", "rag", "recurrent_gemma", "reformer", "regnet", "rembert", "resnet",
    "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "rt_detr", "rt_detr_resnet", "rt_detr_v2", "rwkv",
    "sam", "sam2", "sam2_hiera_det_model", "sam2_video", "sam2_vision_model", "sam3", "sam3_tracker",
    "sam3_tracker_video", "sam3_video", "sam3_vision_model", "sam3_vit_model", "sam_hq", "sam_hq_vision_model",
    "sam_vision_model", "seamless_m4t", "seamless_m4t_v2", "seed_oss", "segformer", "seggpt", "sew", "sew-d",
    "shieldgemma2", "siglip", "siglip2", "siglip2_vision_model", "siglip_vision_model", "smollm3", "smolvlm",
    "smolvlm_vision", "speech-encoder-decoder", "speech_to_text", "speecht5", "splinter", "squeezebert",
    "stablelm", "starcoder2", "superglue", "superpoint", "swiftformer", "swin", "swin2sr", "swinv2",
    "switch_transformers", "t5", "t5gemma", "t5gemma2", "table-transformer", "tapas", "textnet",
    "time_series_transformer", "timesfm", "timesformer", "timm_backbone", "timm_wrapper", "trocr", "tvp", "udop",
    "umt5", "unispeech", "unispeech-sat", "univnet", "upernet", "vaultgemma", "video_llama_3",
    "video_llama_3_vision", "video_llava", "videomae", "vilt", "vipllava", "vision-encoder-decoder",
    "vision-text-dual-encoder", "visual_bert", "vit", "vit_mae", "vit_msn", "vitdet", "vitmatte", "vitpose",
    "vitpose_backbone", "vits", "vivit", "vjepa2", "voxtral", "voxtral_encoder", "wav2vec2", "wav2vec2-bert",
    "wav2vec2-conformer", "wavlm", "whisper", "xclip", "xcodec", "xglm", "xlm", "xlm-roberta", "xlm-roberta-xl",
    "xlnet", "xlstm", "xmod", "yolos", "yoso", "zamba", "zamba2", "zoedepth",
))

_ENCODER = "an encoder-only model (bidirectional attention, no causal LM head): the reader prices decoder-only LMs"
_ENC_DEC = "an encoder-decoder model (an encoder stack and cross-attention): the reader prices decoder-only LMs"
_VISION = "a vision or audio model (patch or frame embeddings, no token vocabulary): the reader prices decoder-only LMs"
_SSM = "a state-space or recurrent model (no attention layers): the reader prices transformer decoders"
#: Hugging Face model_types that are not decoder-only language models (their configuration_*.py), with
#: why: read as a decoder from the keys they share (hidden_size, num_hidden_layers, intermediate_size)
#: they would be priced as a model they are not (flan-t5-base: 115M read, 248M real)
NON_DECODER_TYPES = {
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "roberta-prelayernorm", "distilbert", "albert",
                     "electra", "deberta", "deberta-v2", "modernbert", "camembert", "mpnet", "ernie", "megatron-bert",
                     "longformer", "big_bird", "funnel", "convbert", "mobilebert", "rembert", "nystromformer", "esm",
                     "flaubert", "xlm", "squeezebert", "ibert", "luke", "canine", "data2vec-text"), _ENCODER),
    **dict.fromkeys(("t5", "mt5", "umt5", "longt5", "t5gemma", "t5gemma2", "switch_transformers", "bart", "mbart",
                     "pegasus", "pegasus_x", "marian", "m2m_100", "nllb-moe", "led", "blenderbot", "blenderbot-small",
                     "plbart", "fsmt", "prophetnet", "mvp", "bigbird_pegasus", "whisper", "speecht5",
                     "encoder-decoder", "speech-encoder-decoder", "vision-encoder-decoder", "seamless_m4t",
                     "seamless_m4t_v2", "udop", "pix2struct"), _ENC_DEC),
    **dict.fromkeys(("vit", "vit_mae", "vit_msn", "deit", "beit", "swin", "swinv2", "convnext", "convnextv2", "dinov2",
                     "dinov2_with_registers", "dinov3_vit", "clip", "clip_vision_model", "siglip",
                     "siglip_vision_model", "siglip2", "siglip2_vision_model", "resnet", "wav2vec2", "hubert",
                     "wavlm", "sam", "sam2", "detr", "yolos", "segformer", "videomae"), _VISION),
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm", "recurrent_gemma"), _SSM),
}
#: keys only non-decoder models carry (T5's num_decoder_layers, BART's encoder_layers, BERT's
#: type_vocab_size, ViT's image_size, Mamba's state_size / time_step_rank / conv_kernel), with why
NON_DECODER_KEYS = {
    "is_encoder_decoder": _ENC_DEC, "num_decoder_layers": _ENC_DEC, "encoder_layers": _ENC_DEC,
    "type_vocab_size": _ENCODER, "image_size": _VISION, "num_mel_bins": _VISION,
    "state_size": _SSM, "time_step_rank": _SSM, "conv_kernel": _SSM,
}
