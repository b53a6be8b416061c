// NFC = canonical decomposition, canonical ordering of combining marks, then canonical
// composition (Unicode Standard Annex #15). Hangul syllables are handled arithmetically.
#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tokenizer/utf8.h"

namespace dspark {

namespace {

struct CombiningClassRange {
  char32_t first, last;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  uint16_t offset;
  uint8_t length;
};
struct Composition {
  char32_t first, second, composite;
};
struct CodePointRange {
  char32_t first, last;
};

#include "tokenizer/unicode_nfc_tables.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// An ill-formed byte is carried through the algorithm as this private value: it has class 0 and
// never composes, so it acts as a barrier, and it is written back as the original byte.
constexpr char32_t kRawByteBase = 0x80000000;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300 || cp >= kRawByteBase) return 0;
  const auto* end = std::end(kCombiningClasses);
  const auto* it =
      std::upper_bound(std::begin(kCombiningClasses), end, cp,
                       [](char32_t c, const CombiningClassRange& r) { return c < r.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

bool maybe_unstable(char32_t cp) {
  if (cp < 0x300) return false;
  const auto* it =
      std::upper_bound(std::begin(kMaybeUnstable), std::end(kMaybeUnstable), cp,
                       [](char32_t c, const CodePointRange& r) { return c < r.first; });
  if (it == std::begin(kMaybeUnstable)) return false;
  --it;
  return cp <= it->last;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0 && cp < kRawByteBase) {
    const auto* end = std::end(kDecompositions);
    const auto* it = std::lower_bound(std::begin(kDecompositions), end, cp,
                                      [](const Decomposition& d, char32_t c) { return d.cp < c; });
    if (it != end && it->cp == cp) {
      out.insert(out.end(), kDecompositionData + it->offset,
                 kDecompositionData + it->offset + it->length);
      return;
    }
  }
  out.push_back(cp);
}

// The primary composite of (first, second), or 0.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount)
    return first + (second - kTBase);
  const auto* end = std::end(kCompositions);
  const auto* it =
      std::lower_bound(std::begin(kCompositions), end, std::make_pair(first, second),
                       [](const Composition& c, const std::pair<char32_t, char32_t>& k) {
                         return c.first != k.first ? c.first < k.first : c.second < k.second;
                       });
  return (it != end && it->first == first && it->second == second) ? it->composite : 0;
}

}  // namespace

bool nfc_quick_check(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {  // ASCII never changes and never composes with what follows
      ++pos;
      continue;
    }
    const utf8::Char c = utf8::next(text, pos);
    if (c.cp != utf8::kInvalid && maybe_unstable(c.cp)) return false;
    pos += c.len;
  }
  return true;
}

std::string nfc(std::string_view text) {
  if (nfc_quick_check(text)) return std::string(text);

  // 1. Full canonical decomposition.
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Char c = utf8::next(text, pos);
    if (c.cp == utf8::kInvalid) {
      cps.push_back(kRawByteBase + static_cast<unsigned char>(text[pos]));
    } else {
      decompose(c.cp, cps);
    }
    pos += c.len;
  }

  // 2. Canonical ordering: stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }

  // 3. Canonical composition: each character may join the last starter unless a character in
  // between has a class >= its own (it is "blocked").
  std::vector<char32_t> out;
  out.reserve(cps.size());
  std::ptrdiff_t starter = -1;  // index in `out` of the last starter
  int last_class = -1;          // class of the last character appended after the starter
  for (char32_t cp : cps) {
    const int ccc = combining_class(cp);
    // last_class is -1 right after the starter, so an adjacent character is never blocked.
    if (starter >= 0 && last_class < ccc) {
      if (const char32_t composite = compose_pair(out[starter], cp); composite != 0) {
        out[starter] = composite;
        continue;
      }
    }
    if (ccc == 0) {
      starter = static_cast<std::ptrdiff_t>(out.size());
      last_class = -1;
    } else {
      last_class = ccc;
    }
    out.push_back(cp);
  }

  std::string result;
  result.reserve(text.size());
  for (char32_t cp : out) {
    if (cp >= kRawByteBase) {
      result += static_cast<char>(cp - kRawByteBase);
    } else {
      utf8::append(result, cp);
    }
  }
  return result;
}

}  // namespace dspark
