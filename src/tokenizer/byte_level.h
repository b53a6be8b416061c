// The GPT-2 byte-level alphabet: every byte 0..255 gets a printable Unicode character, so any byte
// string becomes a text string that a BPE vocabulary can hold ("Ġ" is the space byte 0x20, "Ċ" is
// '\n'). Used by the ByteLevel pre-tokenizer and decoder, and by a BPE trainer that writes vocab
// and merges in this alphabet.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace dspark::byte_level {

// The character standing for byte b.
char32_t byte_to_char(unsigned char b);
// The byte a character stands for, if it is one of the 256 alphabet characters.
std::optional<unsigned char> char_to_byte(char32_t c);

// Raw bytes -> byte-level string (each input byte becomes one alphabet character, 1-2 UTF-8 bytes).
std::string encode(std::string_view bytes);
// Byte-level string -> raw bytes; nullopt when it holds a character outside the alphabet.
std::optional<std::string> decode(std::string_view text);

}  // namespace dspark::byte_level
