#!/usr/bin/env python3
"""Writes tests/data/interop/: a tiny random Qwen3 target made by Hugging Face transformers, tiny
drafters built and saved by the reference implementations themselves (DeepSeek's DeepSpec
`Qwen3DSparkModel` for every Markov kind with and without the confidence head, and z-lab's
`DFlashDraftModel`), and the outputs the reference code computes for them on a fixed context.
tests/drafter/interop_test.cpp loads the drafters through the converter and matches the outputs
(docs/interop.md).

The reference code is imported from checkouts given on the command line; nothing of it is copied
into this repository.

Usage (a developer's tool; the build and the tests never run it):
  python3 -m venv VENV
  VENV/bin/pip install torch transformers safetensors   # CPU wheels suffice
  VENV/bin/python scripts/gen-interop-goldens.py --deepspec PATH/TO/DeepSpec --dflash PATH/TO/dflash \\
      [--out tests/data/interop]

Deterministic: fixed seeds, float32 on the CPU, eager attention. Drafter weights are rounded to
bf16 (as the published checkpoints are) and the reference runs in float32 on exactly those values.

Per drafter the golden file holds `sequence` (the target tokens whose features form the context:
prompt, first anchor, accepted drafts) and two decoding steps s = 1, 2 of the reference's own inference
path (DeepSpec: eval/dspark/draft_ops.forward_dspark_draft_block + the model's Markov sampling and
confidence head; z-lab: the drafter forward + lm_head as in dflash_generate), the second step
reusing the drafter's KV cache of the first after its crop:
  step{s}.context [n, L*H]  target features of the new context rows (HF hidden_states[id + 1])
  step{s}.start [1]         the anchor's position (= context rows so far)
  step{s}.anchor [1]        the anchor token
  step{s}.base_logits       [D, V] lm_head of the block rows that draft (D = B, z-lab B - 1)
  step{s}.greedy_tokens     [D] the greedy walk's tokens (Markov head applied left to right)
  step{s}.greedy_logits     [D, V] the walk's logits (base + Markov bias given the walk's prefix)
  step{s}.greedy_conf       [D] pre-sigmoid confidence logits of the walk (with the head)
  step{s}.forced_tokens     [D] a fixed draft sequence
  step{s}.forced_logits     [D, V] logits with that sequence as the Markov head's previous tokens
  step{s}.forced_conf       [D] confidence logits for that sequence (with the head)
"""
import argparse
import json
import platform
import shutil
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, DynamicCache, Qwen3Config

SEED = 4321
VOCAB = 256
HIDDEN = 32
TARGET_LAYERS = 4
BLOCK = 5
RANK = 16
MASK_TOKEN = VOCAB - 1
LAYER_IDS = [0, 2]
PROMPT = 11        # context rows of step 1
ACCEPTED = 3       # context rows step 2 adds (anchor + 2 accepted drafts)

# name -> DeepSpec model_args (None: the z-lab model)
DRAFTERS = {
    "dflash": dict(markov_rank=0, conf=False),
    "dflash_conf": dict(markov_rank=0, conf=True, with_markov=False),
    "vanilla": dict(markov_rank=RANK, kind="vanilla", conf=False),
    "vanilla_conf": dict(markov_rank=RANK, kind="vanilla", conf=True, with_markov=True),
    "vanilla_conf_h": dict(markov_rank=RANK, kind="vanilla", conf=True, with_markov=False),
    "gated_conf": dict(markov_rank=RANK, kind="gated", conf=True, with_markov=True),
    "rnn_conf": dict(markov_rank=RANK, kind="rnn", conf=True, with_markov=True),
    "zlab": None,
}


class LegacyCropCache(DynamicCache):
    """Both references call `cache.crop(start)` in the older transformers sense (keep the first
    `start` positions); newer transformers take the number of positions to remove (negative)."""

    def crop(self, max_length):
        if max_length >= 0:
            max_length = -(self.get_seq_length() - max_length)
        super().crop(max_length)


class Args(dict):
    """DeepSpec reads model args by attribute and tests keys with `in`."""

    __getattr__ = dict.__getitem__


def make_target(out: Path):
    config = Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=TARGET_LAYERS,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
        initializer_range=0.2, attn_implementation="eager",
    )
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    model.save_pretrained(out)
    return model


def randomize(model, seed):
    """Random values everywhere (the reference's init zeroes W2 and the confidence head), rounded to
    bf16 so that the saved bf16 checkpoint holds exactly what the reference runs with."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in ("embed_tokens.weight", "lm_head.weight"):
                continue
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * 0.2)
            p.copy_(p.to(torch.bfloat16).float())


def features(target, tokens, layer_ids):
    with torch.no_grad():
        out = target(torch.tensor([tokens]), output_hidden_states=True)
    return torch.cat([out.hidden_states[i + 1] for i in layer_ids], dim=-1)[0]  # [T, L*H]


def deepspec_drafter(deepspec_root, target, spec):
    sys.path.insert(0, str(deepspec_root))
    from deepspec.modeling.dspark.qwen3.config import build_draft_config
    from deepspec.modeling.dspark.qwen3.modeling import Qwen3DSparkModel

    args = dict(num_draft_layers=2, target_layer_ids=LAYER_IDS, block_size=BLOCK, mask_token_id=MASK_TOKEN,
                num_anchors=512, markov_rank=spec["markov_rank"],
                confidence_head_alpha=1.0 if spec["conf"] else 0.0)
    if spec["conf"]:
        args["confidence_head_with_markov"] = spec["with_markov"]
    if spec["markov_rank"] > 0:
        args["markov_head_type"] = spec["kind"]
    config = build_draft_config(target.config, Args(args))
    config._attn_implementation = "eager"
    model = Qwen3DSparkModel(config).float().eval()
    model.initialize_embeddings_and_head(embed_tokens=target.model.embed_tokens, lm_head=target.lm_head)
    return model


def zlab_drafter(dflash_root, target):
    sys.path.insert(0, str(dflash_root))
    from dflash.model import DFlashDraftModel

    config = Qwen3Config(**{k: v for k, v in target.config.to_dict().items() if k in (
        "vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
        "max_position_embeddings", "rms_norm_eps", "rope_parameters", "tie_word_embeddings")})
    config.num_hidden_layers = 2
    config.layer_types = ["full_attention"] * 2
    config.block_size = BLOCK
    config.num_target_layers = TARGET_LAYERS
    config.dflash_config = {"mask_token_id": MASK_TOKEN, "target_layer_ids": [0, 1, 2]}
    config.architectures = ["DFlashDraftModel"]
    config._attn_implementation = "eager"
    return DFlashDraftModel(config).float().eval()


def deepspec_step(model, draft_ops, cache, ctx, start, anchor, forced):
    ids = torch.full((1, BLOCK), MASK_TOKEN, dtype=torch.long)
    ids[0, 0] = anchor
    position_ids = torch.arange(start + BLOCK).unsqueeze(0)
    with torch.no_grad():
        hidden = draft_ops.forward_dspark_draft_block(
            model, draft_input_ids=ids, position_ids=position_ids, past_key_values_draft=cache,
            target_hidden_states=ctx.unsqueeze(0), start=start, block_size=BLOCK)
        hidden = hidden[:, :BLOCK, :]
        base = model.compute_logits(hidden)
        tokens, logits = model.sample_draft_tokens(
            base, first_prev_token_ids=ids[:, 0], temperature=0.0, hidden_states=hidden)
        out = {"base_logits": base[0], "greedy_tokens": tokens[0], "greedy_logits": logits[0]}
        forced_t = torch.tensor([forced])
        prev = torch.cat([ids[:, :1], forced_t[:, :-1]], dim=1)
        if model.markov_head is None:
            forced_logits = base
        else:
            forced_logits = model.markov_head.apply_block_logits(
                base.unsqueeze(1), token_ids=prev.unsqueeze(1), hidden_states=hidden.unsqueeze(1))[:, 0]
        out["forced_tokens"] = forced_t[0]
        out["forced_logits"] = forced_logits[0]
        if model.confidence_head is not None:
            out["greedy_conf"] = draft_ops._predict_confidence_logits(
                model, proposal_hidden_states=hidden, draft_input_ids=ids, sampled_tokens=tokens, block_size=BLOCK)[0]
            out["forced_conf"] = model.predict_confidence_step(hidden, prev_token_ids=prev)[0]
    return out


def zlab_step(model, target, cache, ctx, start, anchor, forced):
    ids = torch.full((1, BLOCK), MASK_TOKEN, dtype=torch.long)
    ids[0, 0] = anchor
    position_ids = torch.arange(start + BLOCK).unsqueeze(0)
    with torch.no_grad():
        hidden = model(target_hidden=ctx.unsqueeze(0), noise_embedding=target.model.embed_tokens(ids),
                       position_ids=position_ids[:, cache.get_seq_length(): start + BLOCK], past_key_values=cache,
                       use_cache=True, is_causal=False)
        cache.crop(start)
        logits = target.lm_head(hidden[:, 1 - BLOCK:, :])
    return {"base_logits": logits[0], "greedy_tokens": logits[0].argmax(-1), "greedy_logits": logits[0],
            "forced_tokens": torch.tensor(forced[:BLOCK - 1]), "forced_logits": logits[0]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspec", required=True, type=Path, help="a checkout of deepseek-ai/DeepSpec")
    parser.add_argument("--dflash", required=True, type=Path, help="a checkout of z-lab/dflash")
    parser.add_argument("--out", default=Path(__file__).resolve().parent.parent / "tests/data/interop", type=Path)
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    target = make_target(args.out / "target")

    sys.path.insert(0, str(args.deepspec))
    from deepspec.eval.dspark import draft_ops

    gen = torch.Generator().manual_seed(SEED)
    prompt = torch.randint(3, VOCAB - 1, (PROMPT,), generator=gen).tolist()
    anchor1 = int(torch.randint(3, VOCAB - 1, (1,), generator=gen))
    accepted = torch.randint(3, VOCAB - 1, (ACCEPTED - 1,), generator=gen).tolist()
    anchor2 = int(torch.randint(3, VOCAB - 1, (1,), generator=gen))
    forced = [torch.randint(3, VOCAB, (BLOCK,), generator=gen).tolist() for _ in range(2)]
    sequence = prompt + [anchor1] + accepted  # context rows of both steps
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}

    for i, (name, spec) in enumerate(DRAFTERS.items()):
        zlab = spec is None
        model = zlab_drafter(args.dflash, target) if zlab else deepspec_drafter(args.deepspec, target, spec)
        randomize(model, SEED + 1 + i)
        layer_ids = model.target_layer_ids
        ctx = features(target, sequence, layer_ids)
        cache = LegacyCropCache()
        golden = {"sequence": torch.tensor(sequence)}
        steps = [(ctx[:PROMPT], PROMPT, anchor1), (ctx[PROMPT:], PROMPT + ACCEPTED, anchor2)]
        for s, (rows, start, anchor) in enumerate(steps, 1):
            if zlab:
                out = zlab_step(model, target, cache, rows, start, anchor, forced[s - 1])
            else:
                out = deepspec_step(model, draft_ops, cache, rows, start, anchor, forced[s - 1])
            out.update({"context": rows, "start": torch.tensor([start]), "anchor": torch.tensor([anchor])})
            for key, value in out.items():
                value = value.detach()
                golden[f"step{s}.{key}"] = (value.long() if key.endswith(("tokens", "start", "anchor"))
                                            else value.float()).contiguous().clone()
        drafter_dir = args.out / name
        model.to(torch.bfloat16).save_pretrained(drafter_dir)
        save_file(golden, str(drafter_dir / "golden.safetensors"), metadata={k: str(v) for k, v in meta.items()})
        print(name, "markov" if not zlab and spec["markov_rank"] else "", "tokens", golden["step1.greedy_tokens"].tolist())

    (args.out / "README.md").write_text(
        "Tiny random target and drafters made and run by the reference implementations (DeepSpec's\n"
        "Qwen3DSparkModel, z-lab's DFlashDraftModel), with the outputs they compute; written by\n"
        "scripts/gen-interop-goldens.py and checked by tests/drafter/interop_test.cpp (docs/interop.md).\n\n"
        f"Generated with: torch {meta['torch']}, transformers {meta['transformers']}, python {meta['python']};\n"
        f"DeepSpec and z-lab/dflash at the commits named in docs/interop.md.\n")
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
