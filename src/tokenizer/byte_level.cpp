#include "tokenizer/byte_level.h"

#include <cstdint>

#include "tokenizer/utf8.h"

namespace dspark::byte_level {

namespace {

// Printable bytes keep their own code point; the other 68 (controls, space, 0x7F-0xA0, 0xAD) are
// mapped, in byte order, to U+0100, U+0101, ... That is GPT-2's table, so vocabularies written
// with it (GPT-2, Qwen, Llama-3, ...) read back byte for byte.
struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8{};
  std::array<int16_t, 0x144> from_char{};  // alphabet character -> byte, or -1
  Tables() {
    from_char.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_char[b] = printable ? char32_t(b) : next++;
      to_utf8[b] = utf8::encode(to_char[b]);
      from_char[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return tables().to_char[b]; }

std::optional<unsigned char> char_to_byte(char32_t c) {
  if (c >= tables().from_char.size() || tables().from_char[c] < 0) return std::nullopt;
  return static_cast<unsigned char>(tables().from_char[c]);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += tables().to_utf8[b];
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Char c = utf8::next(text, pos);
    if (c.cp == utf8::kInvalid) return std::nullopt;
    const auto b = char_to_byte(c.cp);
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
    pos += c.len;
  }
  return out;
}

}  // namespace dspark::byte_level
