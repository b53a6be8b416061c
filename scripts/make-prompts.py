#!/usr/bin/env python3
"""Prompt sets for the default target: the signature and docstring of Python functions.

Usage: make-prompts.py CORPUS_DIR OUT.jsonl [--max N] [--exclude OTHER.jsonl]
Walks CORPUS_DIR for .py files in sorted order and writes one JSON line per function that has a
docstring: {"prompt": "def f(...):\n    \"\"\"doc\"\"\"\n", "source": "path:line"}. Methods are
dedented to column 0. With --max, takes evenly spaced functions so every module is represented.
--exclude drops prompts that OTHER.jsonl already holds (e.g. a calibration set disjoint from the
benchmark prompts).
Standard library only; the output is the same on every machine for the same corpus.
"""
import ast
import json
import os
import sys
import textwrap


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        source = f.read()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    lines = source.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not node.body or not isinstance(node.body[0], ast.Expr):
            continue
        doc = node.body[0].value
        if not (isinstance(doc, ast.Constant) and isinstance(doc.value, str)):
            continue
        if len(doc.value) < 20:
            continue
        text = "".join(lines[node.lineno - 1:doc.end_lineno])
        text = textwrap.dedent(text)
        if len(text) > 1200:
            continue
        yield node.lineno, text


def main():
    args = sys.argv[1:]
    limit = 0
    if "--max" in args:
        i = args.index("--max")
        limit = int(args[i + 1])
        del args[i:i + 2]
    exclude = set()
    if "--exclude" in args:
        i = args.index("--exclude")
        with open(args[i + 1], encoding="utf-8") as f:
            exclude = {json.loads(line)["prompt"] for line in f if line.strip()}
        del args[i:i + 2]
    corpus, out = args
    found = []
    for root, dirs, files in os.walk(corpus):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, corpus)
                for line, text in sorted(functions(path)):
                    if text not in exclude:
                        found.append({"prompt": text, "source": f"{rel}:{line}"})
    if limit and len(found) > limit:
        step = len(found) / limit
        found = [found[int(i * step)] for i in range(limit)]
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for item in found:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    print(f"{len(found)} prompts -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
