// UTF-8 helpers shared by the tokenizer pieces. Text handed to a tokenizer is not guaranteed to be
// valid UTF-8 (and decoded token bytes often are not), so every helper here treats a byte that
// does not start a well-formed sequence as a unit of its own instead of failing: byte-level and
// byte-fallback models can still encode such text losslessly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dspark::utf8 {

// Marks an ill-formed byte in `Char::cp`; `Char::len` is then 1.
inline constexpr char32_t kInvalid = 0xFFFFFFFF;
inline constexpr char32_t kReplacement = 0xFFFD;

struct Char {
  char32_t cp;  // code point, or kInvalid
  size_t len;   // bytes consumed (>= 1)
};

// Decodes the character starting at s[pos] (pos < s.size()). Rejects overlong forms, surrogates
// and values above U+10FFFF, as a strict UTF-8 decoder must.
Char next(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of cp.
void append(std::string& out, char32_t cp);
std::string encode(char32_t cp);

// Length of the longest prefix of `s` that does not end inside a character that later bytes could
// still complete. The held-back tail is at most 3 bytes: a valid lead byte followed by fewer
// continuation bytes than it announces.
size_t complete_prefix_length(std::string_view s);

// Copy of `s` with every ill-formed byte replaced by U+FFFD (one per byte, as HF tokenizers and
// Python's errors="replace" do for the common cases).
std::string sanitize(std::string_view s);

bool is_valid(std::string_view s);

// Number of characters (ill-formed bytes count one each).
size_t length(std::string_view s);

}  // namespace dspark::utf8
