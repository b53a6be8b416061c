#include "tokenizer/added_vocabulary.h"

#include "tokenizer/utf8.h"

namespace dspark {

namespace {

// Unicode White_Space, the set HF's lstrip/rstrip (Rust char::is_whitespace) swallow.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Word characters for single_word: letters, digits and '_' in ASCII, and any non-ASCII
// non-space character (a cheap approximation of Unicode \w that errs on "inside a word").
bool is_word_char(char32_t c) {
  if (c < 0x80)
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return c != utf8::kInvalid && !is_whitespace(c);
}

// The character ending just before byte `pos`.
char32_t char_before(std::string_view text, size_t pos) {
  size_t start = pos;
  while (start > 0 && pos - start < 4) {
    --start;
    if ((static_cast<unsigned char>(text[start]) & 0xC0) != 0x80) break;
  }
  const utf8::Char c = utf8::next(text, start);
  return start + c.len == pos ? c.cp : utf8::kInvalid;
}

}  // namespace

TokenMatcher::TokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  node_token_.push_back(-1);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    if (content.empty()) continue;
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    uint32_t node = 0;
    for (unsigned char b : content) {
      const uint64_t key = (uint64_t(node) << 8) | b;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, static_cast<uint32_t>(node_token_.size())).first;
        node_token_.push_back(-1);
      }
      node = it->second;
    }
    // The first entry for a string wins, as a later duplicate could not be reached either.
    if (node_token_[node] < 0) node_token_[node] = static_cast<int>(i);
  }
}

std::pair<int, size_t> TokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int, size_t> best{-1, 0};
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = edges_.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (node_token_[node] >= 0) best = {node_token_[node], i + 1 - pos};
  }
  return best;
}

std::vector<TokenMatcher::Segment> TokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t text_start = 0;  // start of the pending plain-text segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, length] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t begin = pos, end = pos + length;
    if (token.single_word) {
      const bool word_before = begin > 0 && is_word_char(char_before(text, begin));
      const bool word_after = end < text.size() && is_word_char(utf8::next(text, end).cp);
      if (word_before || word_after) {
        pos = end;  // like HF, the search resumes after the rejected match
        continue;
      }
    }
    if (token.lstrip) {
      while (begin > text_start) {
        const char32_t c = char_before(text, begin);
        if (!is_whitespace(c)) break;
        begin -= utf8::encode(c).size();
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        const utf8::Char c = utf8::next(text, end);
        if (c.cp == utf8::kInvalid || !is_whitespace(c.cp)) break;
        end += c.len;
      }
    }
    if (begin > text_start) segments.push_back({text_start, begin, -1});
    segments.push_back({begin, end, token.id});
    text_start = pos = end;
  }
  if (text_start < text.size()) segments.push_back({text_start, text.size(), -1});
  return segments;
}

}  // namespace dspark
