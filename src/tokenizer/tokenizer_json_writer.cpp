#include "tokenizer/tokenizer_json_writer.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace dspark {
namespace {

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& byte_level_alphabet() {
  // Printable bytes map to themselves; the other 68 bytes map to U+0100 upwards, in byte order.
  static const std::vector<std::string> alphabet = [] {
    std::vector<std::string> table(256);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      table[b] = utf8(printable ? b : next++);
    }
    return table;
  }();
  return alphabet;
}

std::string byte_level_encode(const std::string& raw) {
  std::string out;
  for (unsigned char c : raw) out += byte_level_alphabet()[c];
  return out;
}

std::string tokenizer_json(const ByteLevelBpe& bpe) {
  using json = nlohmann::json;
  json vocab = json::object();
  for (size_t i = 0; i < bpe.tokens.size(); ++i) vocab[byte_level_encode(bpe.tokens[i])] = i;
  json merges = json::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back(byte_level_encode(a) + " " + byte_level_encode(b));
  json added = json::array();
  for (size_t i = 0; i < bpe.special_tokens.size(); ++i)
    added.push_back({{"id", bpe.tokens.size() + i}, {"content", bpe.special_tokens[i]},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  // The Qwen2 / GPT-4 style split: contractions, letters, single digits, punctuation runs,
  // newlines, and whitespace that is not followed by a non-space.
  const std::string pattern =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}},
  };
  return tok.dump(1);
}

void write_tokenizer_json(const std::string& path, const ByteLevelBpe& bpe) {
  io::write_text_atomic(path, tokenizer_json(bpe));
}

}  // namespace dspark
