#include "tokenizer/utf8.h"

namespace dspark::utf8 {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// For a lead byte: the sequence length and the allowed range of the second byte (the narrower
// ranges after E0/ED/F0/F4 are what exclude overlong forms, surrogates and values > U+10FFFF).
struct Lead {
  size_t len;
  unsigned char lo, hi;
};

Lead lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // continuation byte or never-valid byte
}

}  // namespace

Char next(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {b0, 1};
  const Lead lead = lead_info(b0);
  if (lead.len == 0 || pos + lead.len > s.size()) return {kInvalid, 1};
  const auto b1 = static_cast<unsigned char>(s[pos + 1]);
  if (b1 < lead.lo || b1 > lead.hi) return {kInvalid, 1};
  char32_t cp = 0;
  switch (lead.len) {
    case 2:
      cp = ((b0 & 0x1F) << 6) | (b1 & 0x3F);
      break;
    case 3: {
      const auto b2 = static_cast<unsigned char>(s[pos + 2]);
      if (!is_continuation(b2)) return {kInvalid, 1};
      cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F);
      break;
    }
    default: {
      const auto b2 = static_cast<unsigned char>(s[pos + 2]);
      const auto b3 = static_cast<unsigned char>(s[pos + 3]);
      if (!is_continuation(b2) || !is_continuation(b3)) return {kInvalid, 1};
      cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F);
      break;
    }
  }
  return {cp, lead.len};
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode(char32_t cp) {
  std::string out;
  append(out, cp);
  return out;
}

size_t complete_prefix_length(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of an unfinished sequence.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if (is_continuation(b)) continue;
    const Lead lead = lead_info(b);
    if (lead.len <= back) return n;  // ASCII, invalid byte, or a sequence that is long enough
    // The bytes after the lead must be a valid beginning of the sequence, or they can never
    // become a character and there is nothing to wait for.
    if (back >= 2) {
      const auto b1 = static_cast<unsigned char>(s[n - back + 1]);
      if (b1 < lead.lo || b1 > lead.hi) return n;
    }
    return n - back;
  }
  return n;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Char c = next(s, pos);
    if (c.cp == kInvalid) {
      append(out, kReplacement);
    } else {
      out.append(s.substr(pos, c.len));
    }
    pos += c.len;
  }
  return out;
}

bool is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Char c = next(s, pos);
    if (c.cp == kInvalid) return false;
    pos += c.len;
  }
  return true;
}

size_t length(std::string_view s) {
  size_t count = 0;
  for (size_t pos = 0; pos < s.size(); pos += next(s, pos).len) ++count;
  return count;
}

}  // namespace dspark::utf8
