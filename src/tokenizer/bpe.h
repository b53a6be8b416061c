// Byte-pair-encoding model: turns one pre-tokenized word into token ids by starting from its
// characters and repeatedly applying the highest-priority merge, as HF `tokenizers` does.
// The model is plain data (vocab + ordered merges + a few switches), so a BPE trainer can build
// one directly, and it is indifferent to the alphabet: byte-level models (GPT-2 / Qwen / Llama-3)
// feed it words already mapped through byte_level::encode, byte-fallback models (Llama-2 / Gemma)
// feed it normalized text and get <0xXX> tokens for characters missing from the vocabulary.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/string_map.h"
#include "tokenizer/tokenizer.h"

namespace dspark {

struct BpeOptions {
  std::optional<std::string> unk_token;   // emitted for characters with no token; dropped if unset
  bool fuse_unk = false;                  // consecutive unknown characters give one unk token
  bool byte_fallback = false;             // unknown characters become <0xXX> byte tokens
  bool ignore_merges = false;             // a word that is itself a token is emitted as is
  std::string continuing_subword_prefix;  // e.g. "##"; prepended to non-initial characters
  std::string end_of_word_suffix;         // e.g. "</w>"; appended to the last character
};

class BpeModel {
 public:
  // `vocab` pairs token strings with distinct ids; `merges` are in priority order (first applies
  // first), each a pair of tokens whose concatenation is also in the vocab. Throws dspark::Error
  // otherwise.
  BpeModel(std::vector<std::pair<std::string, TokenId>> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids for one word (non-empty). Thread-safe.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  // Empty for an id outside the vocabulary.
  const std::string& id_to_token(TokenId id) const;
  bool contains(TokenId id) const {
    return id >= 0 && size_t(id) < present_.size() && present_[id];
  }
  // One past the largest id.
  TokenId id_limit() const { return static_cast<TokenId>(id_to_token_.size()); }
  const BpeOptions& options() const { return options_; }

 private:
  struct Merge {
    uint32_t rank;
    TokenId result;
  };
  static uint64_t pair_key(TokenId a, TokenId b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;

  std::vector<std::string> id_to_token_;
  // Keys point into id_to_token_, which never changes after construction.
  std::unordered_map<std::string_view, TokenId> token_to_id_;
  std::vector<bool> present_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<TokenId> byte_tokens_;  // <0xXX> ids, -1 where missing (byte_fallback only)
  std::optional<TokenId> unk_id_;
  BpeOptions options_;

  // Words repeat a lot in real text; remembering their ids skips the merge loop. Bounded, and
  // simply cleared when full (cheaper than LRU bookkeeping and good enough for a hot cache).
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<TokenId>> cache_;
};

}  // namespace dspark
