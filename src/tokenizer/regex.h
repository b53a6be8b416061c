// Pattern matching for pre-tokenizers, normalizers and decoders. HF tokenizer.json patterns are
// written for Oniguruma; PCRE2 in UTF + Unicode-property mode accepts the ones in use (including
// the negative lookahead in `\s+(?!\S)` that std::regex and RE2 lack), so it is the engine here.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dspark {

// A compiled PCRE2 pattern. Safe to use from several threads at once.
class Regex {
 public:
  explicit Regex(std::string_view pattern);  // throws dspark::Error naming the pattern
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-overlapping, non-empty matches. Ill-formed
  // UTF-8 in `text` is allowed: it never matches (PCRE2_MATCH_INVALID_UTF).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A tokenizer.json pattern object: {"String": "literal"} or {"Regex": "..."}.
class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(std::string_view pattern);

  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // Replaces every match with `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;  // null for a literal
};

}  // namespace dspark
