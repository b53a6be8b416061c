#!/usr/bin/env python3
"""Writes tests/data/hf_parity/: tiny random-weight models of every supported architecture, made
and run by Hugging Face transformers itself, with the hidden states and logits it computes.
tests/model/hf_parity_test.cpp checks the engine against them (docs/parity.md).

Usage (a developer's tool; the build and the tests never run it):
  python3 -m venv VENV
  VENV/bin/pip install torch transformers safetensors   # CPU wheels suffice
  VENV/bin/python scripts/gen-hf-parity.py [--out tests/data/hf_parity]

Deterministic: fixed seeds, float32 on the CPU, eager attention. The versions it ran with are
printed and written into every golden file and into README.md in the output folder; regenerate
the whole folder when changing them, and expect tiny (~1e-6) differences across versions.
"""
import argparse
import json
import platform
import shutil
from pathlib import Path

import safetensors
import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

SEED = 1234
PROMPT_LENGTHS = (29, 17)  # longer than every sliding window below (8), so the window matters
VOCAB = 256


def common(**overrides):
    """The shape every model shares: small enough to commit, large enough to catch a wrong head
    layout (GQA: 4 query heads share 2 key/value heads) or RoPE half-split."""
    config = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        # Weights of std 0.2 (not 0.02) so that activations and logits are of order 1 and every
        # part of the computation visibly changes them.
        initializer_range=0.2,
    )
    config.update(overrides)
    return config


# name -> (config class, config kwargs). Every supported architecture and the options that change
# the computation: q/k norms, q/k/v biases, linear and llama3 RoPE scaling, tied embeddings, Gemma's softcaps,
# sandwich norms, query_pre_attn_scalar, sliding windows and a separate local RoPE theta, and
# Gemma-4's per-layer head geometry, KV sharing, k = v, proportional RoPE and per-layer embeddings.
MODELS = {
    "qwen3": (transformers.Qwen3Config, common(rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "qwen2": (
        transformers.Qwen2Config,
        # Layer 0 full, layer 1 sliding (from max_window_layers on), as Qwen2's config allows;
        # linear RoPE scaling, which applies to both kinds of layer.
        common(
            use_sliding_window=True,
            sliding_window=8,
            max_window_layers=1,
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
        ),
    ),
    "llama3": (
        transformers.LlamaConfig,
        # original_max_position_embeddings 64 with head_dim 16 puts RoPE wavelengths in all three
        # llama3 bands (kept, interpolated, divided by factor).
        common(
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            }
        ),
    ),
    "llama_tied": (
        transformers.LlamaConfig,
        # attention_bias: Llama then has biases on q, k, v and o (Qwen2 on q, k, v only).
        common(tie_word_embeddings=True, attention_bias=True),
    ),
    "gemma2": (
        transformers.Gemma2Config,
        common(
            hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True,
            sliding_window=8,
            query_pre_attn_scalar=24,  # differs from head_dim so a wrong attention scale shows
            # Caps near the scores' and logits' own scale, so that tanh bends them without
            # flattening them.
            attn_logit_softcapping=2.0,
            final_logit_softcapping=5.0,
        ),
    ),
    "gemma3": (
        transformers.Gemma3TextConfig,
        common(
            hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True,
            num_hidden_layers=3,
            sliding_window=8,
            sliding_window_pattern=2,  # layers 0 and 2 local, 1 global
            query_pre_attn_scalar=24,
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        ),
    ),
    "gemma4": (
        transformers.Gemma4TextConfig,
        # The Gemma-4 text decoder: sliding layers of head_dim 16 with 2 KV heads, full layers of
        # head_dim 32 with 1 KV head whose values are the key projection (attention_k_eq_v) and
        # proportional RoPE on a quarter of the dims; layers 2 and 3 reuse the keys/values of
        # layers 0 (sliding) and 1 (full) and have double-wide MLPs; per-layer embeddings of width
        # 8. A smaller vocabulary and MLP keep the files small.
        common(
            vocab_size=128,
            intermediate_size=32,
            hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True,
            num_hidden_layers=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            sliding_window=8,
            global_head_dim=32,
            num_global_key_value_heads=1,
            attention_k_eq_v=True,
            num_kv_shared_layers=2,
            use_double_wide_mlp=True,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=128,
            final_logit_softcapping=5.0,
            rope_parameters={
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        ),
    ),
}

# Norms that scale by (1 + w), identity at w = 0 (Gemma-4's scale by w, as Llama's).
ONE_PLUS_W_NORMS = ("gemma2", "gemma3_text")


def randomize_norms_and_biases(model):
    """Freshly initialised norms are identities (weight 1, or 0 for Gemma's 1 + w) and biases are
    zero, so a swapped or missing one would go unnoticed: perturb them."""
    identity = 0.0 if model.config.model_type in ONE_PLUS_W_NORMS else 1.0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:
                param.copy_((identity if "norm" in name else 0.0) + 0.3 * torch.randn_like(param))
        # Gemma-4 multiplies each layer's output by a stored scalar (a buffer, saved with the weights).
        for name, buffer in model.named_buffers():
            if name.endswith("layer_scalar"):
                buffer.copy_(1.0 + 0.3 * torch.randn_like(buffer))


def versions():
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "python": platform.python_version(),
    }


def record(model, tokens):
    """Every layer's output (hooks on the decoder layers: HF's hidden_states[-1] is after the final
    norm, not the last layer's output), the embeddings, the final post-norm hidden and the logits."""
    layer_outputs = []
    hooks = [
        layer.register_forward_hook(lambda _m, _in, out: layer_outputs.append(out[0] if isinstance(out, tuple) else out))
        for layer in model.model.layers
    ]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([tokens]), output_hidden_states=True, use_cache=False)
    for hook in hooks:
        hook.remove()
    hidden = out.hidden_states
    num_layers = len(model.model.layers)
    assert len(hidden) == num_layers + 1 and len(layer_outputs) == num_layers
    # hidden_states[l + 1] is layer l's output for every layer but the last.
    for l in range(num_layers - 1):
        assert torch.equal(hidden[l + 1], layer_outputs[l]), l
    return {
        "tokens": torch.tensor(tokens, dtype=torch.int64),
        "embeddings": hidden[0][0],
        "layers": torch.stack([h[0] for h in layer_outputs]),  # [L, T, H]
        "final_hidden": hidden[-1][0],
        "logits": out.logits[0].float(),
    }


def check_cached_decoding(model, tokens, logits):
    """transformers' own KV-cache path (chunks as the engine's test takes them) gives the full
    forward's logits: the goldens hold for both paths. Gemma-4's KV-shared layers read keys and
    values from the cache of another layer there."""
    ends = [e for e in (5, 8, 20) if e < len(tokens)]
    ends += list(range(ends[-1] + 1, len(tokens) + 1))
    cache = transformers.DynamicCache(config=model.config)
    pieces, begin = [], 0
    with torch.no_grad():
        for end in ends:
            out = model(input_ids=torch.tensor([tokens[begin:end]]), cache=cache, use_cache=True)
            cache = out.cache
            pieces.append(out.logits[0])
            begin = end
    diff = (torch.cat(pieces) - logits).abs().max().item()
    assert diff < 1e-4, f"transformers' cached logits differ from its full forward by {diff}"
    return diff


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/data/hf_parity"))
    args = parser.parse_args()
    out_root = Path(args.out)
    pinned = versions()
    print("versions:", json.dumps(pinned))

    torch.set_num_threads(1)
    if out_root.exists():
        shutil.rmtree(out_root)
    for index, (name, (config_class, kwargs)) in enumerate(MODELS.items()):
        torch.manual_seed(SEED + index)
        config = config_class(**kwargs)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
        model.eval()
        randomize_norms_and_biases(model)
        model_dir = out_root / name
        model.save_pretrained(model_dir, safe_serialization=True)
        # Reload what was written so the goldens come from exactly the committed files.
        model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32)
        model.eval()

        generator = torch.Generator().manual_seed(SEED + 100 + index)
        tensors = {}
        cached_diff = 0.0
        for p, length in enumerate(PROMPT_LENGTHS):
            tokens = torch.randint(3, config.vocab_size, (length,), generator=generator).tolist()
            recorded = record(model, tokens)
            cached_diff = max(cached_diff, check_cached_decoding(model, tokens, recorded["logits"]))
            for key, value in recorded.items():
                tensors[f"prompt{p}.{key}"] = value.contiguous()
        # One metadata key: safetensors writes several in no fixed order, and the files should be
        # byte-for-byte reproducible.
        generated_with = ", ".join(f"{k} {v}" for k, v in pinned.items())
        metadata = {"generated_with": f"{generated_with}, seed {SEED + index}"}
        save_file(tensors, str(model_dir / "golden.safetensors"), metadata=metadata)
        size = sum(f.stat().st_size for f in model_dir.iterdir())
        print(f"{name}: {config.architectures[0]}, {size / 1024:.0f} KiB, transformers' own KV-cache path "
              f"within {cached_diff:.1e} of its full forward")

    (out_root / "README.md").write_text(
        "Tiny random-weight models and the outputs Hugging Face transformers computes for them, written\n"
        "by scripts/gen-hf-parity.py and checked by tests/model/hf_parity_test.cpp (docs/parity.md).\n\n"
        "Generated with: " + ", ".join(f"{k} {v}" for k, v in pinned.items()) + ".\n"
    )


if __name__ == "__main__":
    main()
