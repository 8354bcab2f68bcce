#!/usr/bin/env python3
"""Generate a tiny, random-weight Qwen2 causal LM + tokenizer, fully offline.

Usage: python make_tiny_model.py OUTPUT_DIR [--head-dim 32]

Output is byte-for-byte reproducible (same venv => same sha256 for every file):
  * weights are drawn from a private torch.Generator seeded with SEED, param by
    param in sorted-name order (independent of transformers' own init code),
  * the BPE tokenizer is trained on a fixed in-file corpus,
  * files are written by save_pretrained (safetensors, sorted JSON).

Architecture: Qwen2ForCausalLM, 2 layers, hidden 128, 4 attention heads
(head_dim 32: vLLM's CPU attention kernels need head_dim in {32,64,80,96,112,
128,...}), 2 KV heads, intermediate 256, tied embeddings, bf16, vocab 512,
ByteLevel BPE tokenizer with a ChatML chat template.

--heads 6 (hidden 192, 6 KV heads, intermediate 384, vocabulary 576) divides by tensor parallel 2 and 3: the
model of the scale test (a third host joins and leaves). --head-dim 16 (hidden 64) exists only to reproduce the "passes /health, dies on
the first request" failure of the CPU attention backend.
"""
import argparse
import json
import os
import sys

SEED = 1234
# Large-ish init so greedy decoding produces varied tokens (std 0.02 gives "qqqq...",
# which would make TP=1 vs TP=2 comparisons meaningless).
INIT_STD = 0.3
VOCAB = 512
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! This is a tiny model made for testing vLLM on CPU.",
    "Tensor parallelism splits every layer across two hosts.",
    "What is the capital of France? The capital of France is Paris.",
    "One, two, three, four, five, six, seven, eight, nine, ten.",
    "A small language model answers questions in a few words.",
    "The server is ready when the first completion comes back.",
    "def add(a, b):\n    return a + b\n",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2026.",
    "user assistant system: you are a helpful assistant.",
]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=1,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHATML,
        model_max_length=2048,
        clean_up_tokenization_spaces=False,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--head-dim", type=int, default=32, help="32 (default) or 16 (broken on vLLM CPU)")
    ap.add_argument(
        "--heads",
        type=int,
        default=4,
        help="attention heads: 4 (default; 2 KV heads: tensor parallel 1 or 2) or 6 (6 KV heads: tensor parallel 1, 2 or 3)",
    )
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    torch.use_deterministic_algorithms(True)
    heads = args.heads
    kv_heads = 2 if heads == 4 else heads
    hidden = heads * args.head_dim
    # the MLP is split across tensor-parallel ranks too: divisible by 2 and, for 6 heads, by 3
    intermediate = 256 if heads == 4 else 384

    tokenizer = build_tokenizer()
    vocab = VOCAB
    if heads != 4:
        # tensor parallel 3 splits the vocabulary too (vLLM pads it to a multiple of 64, then divides it by the TP
        # size): 576 = 9 x 64. Reserved special tokens fill the tokenizer to that size, so every id decodes.
        vocab = 576
        reserved = [f"<|reserved_{i}|>" for i in range(vocab - len(tokenizer))]
        tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", *reserved]})
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")

    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_sliding_window=False,
        torch_dtype="bfloat16",
    )
    config.architectures = ["Qwen2ForCausalLM"]
    model = Qwen2ForCausalLM(config)

    # Deterministic weights, independent of transformers' init implementation.
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:  # weights and q/k/v biases
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * INIT_STD)
    model = model.to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id
    )

    os.makedirs(args.out_dir, exist_ok=True)
    model.save_pretrained(args.out_dir, safe_serialization=True)
    tokenizer.save_pretrained(args.out_dir)

    n_params = sum(p.numel() for p in model.parameters())
    size = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(
        f"tiny Qwen2 -> {args.out_dir}: params={n_params} hidden={hidden} head_dim={args.head_dim} "
        f"layers=2 heads={heads}/{kv_heads} vocab={vocab} (tokenizer {len(tokenizer)}) "
        f"eos={eos_id} pad={pad_id} files={sorted(os.listdir(args.out_dir))} bytes={size}"
    )


if __name__ == "__main__":
    sys.exit(main())
