// Byte-level BPE training (the GPT-2 / Qwen recipe): split text into words with the same regex
// the tokenizer applies at encode time, start every word from its raw bytes, and repeatedly merge
// the most frequent adjacent pair of tokens until the vocabulary is full. The 256 single bytes are
// always in the vocabulary, so any byte sequence can be encoded and decoded back exactly.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer_json_writer.h"

namespace dspark {

struct BpeTrainerOptions {
  int64_t vocab_size = 8192;  // total, including the 256 bytes and the special tokens
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  int64_t min_pair_count = 2;  // stop early when no pair occurs this often
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);
  // Counts the words of one document. Call for every document, then train().
  void add_text(std::string_view text);
  // Runs the merges. `on_merge(done, total)` reports progress.
  ByteLevelBpe train(const std::function<void(int64_t, int64_t)>& on_merge = {}) const;
  int64_t distinct_words() const { return int64_t(word_counts_.size()); }

 private:
  BpeTrainerOptions options_;
  std::unordered_map<std::string, int64_t> word_counts_;  // raw-byte word -> occurrences
};

}  // namespace dspark
