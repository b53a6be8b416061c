// Added tokens ("<|im_start|>", "<start_of_turn>", "<think>", ...): strings that must become one
// token wherever they appear, found in the text before any normalization or pre-tokenization
// could break them apart. Matching is leftmost, then longest, like HF's Aho-Corasick search.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dspark {

struct AddedToken {
  std::string content;
  TokenId id = -1;
  bool special = false;      // skipped by decode(skip_special = true)
  bool lstrip = false;       // swallows whitespace on its left
  bool rstrip = false;       // swallows whitespace on its right
  bool single_word = false;  // matches only when not inside a word
  bool normalized = false;   // matched in the normalized text rather than the raw text
};

// A dictionary of strings found by a byte trie.
class TokenMatcher {
 public:
  TokenMatcher() = default;
  explicit TokenMatcher(const std::vector<AddedToken>& tokens);

  struct Segment {
    size_t begin, end;  // byte range in the text
    TokenId id;         // the token, or -1 for plain text between tokens
  };
  // Cuts `text` into plain-text segments and token matches; empty text segments are omitted.
  std::vector<Segment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  // The longest token starting at `pos`, as (token index, length); index -1 if none.
  std::pair<int, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  // Trie edges keyed by (node << 8 | byte); node 0 is the root.
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::vector<int> node_token_;  // token index ending at each node, or -1
  bool first_byte_[256] = {};    // fast skip of positions no token can start at
};

}  // namespace dspark
