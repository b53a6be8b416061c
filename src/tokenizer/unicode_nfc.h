// Unicode Normalization Form C, needed by tokenizers whose normalizer is "NFC" (Qwen2/Qwen3).
// Own implementation over tables generated from Unicode data (see gen_unicode_nfc_tables.py),
// because the project has no ICU.
#pragma once
#include <string>
#include <string_view>

namespace dspark {

// NFC of `text`. Ill-formed UTF-8 bytes pass through unchanged and block composition across them.
std::string nfc(std::string_view text);

// True when nfc(text) == text is guaranteed without doing the work (the common case: text with no
// combining marks and no decomposable characters).
bool nfc_quick_check(std::string_view text);

}  // namespace dspark
