// Writes a byte-level BPE tokenizer as an HF tokenizer.json (GPT-2 / Qwen layout: ByteLevel
// pre-tokenizer with the Qwen split regex, ByteLevel decoder), readable by this engine's loader
// and by the HF ecosystem. Used by `init-random` and by the BPE trainer.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dspark {

struct ByteLevelBpe {
  // Token i's raw bytes, in id order. The first 256 are usually the single bytes.
  std::vector<std::string> tokens;
  // Merges in priority order, as pairs of raw-byte strings.
  std::vector<std::pair<std::string, std::string>> merges;
  // Special tokens appended after `tokens` (ids tokens.size(), ...), e.g. "<|endoftext|>".
  std::vector<std::string> special_tokens;
};

// The pre-tokenizer's split regex; a BPE trainer must split words the same way.
const std::string& byte_level_split_pattern();

std::string tokenizer_json(const ByteLevelBpe& bpe);
void write_tokenizer_json(const std::string& path, const ByteLevelBpe& bpe);  // atomic

}  // namespace dspark
