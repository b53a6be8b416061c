#include "tokenizer/tokenizer_json_writer.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "tokenizer/byte_level.h"

namespace dspark {
const std::string& byte_level_split_pattern() {
  // The Qwen2 / GPT-4 style split: contractions, letters, single digits, punctuation runs,
  // newlines, and whitespace that is not followed by a non-space.
  static const std::string pattern =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  return pattern;
}

std::string tokenizer_json(const ByteLevelBpe& bpe) {
  using json = nlohmann::json;
  json vocab = json::object();
  for (size_t i = 0; i < bpe.tokens.size(); ++i) vocab[byte_level::encode(bpe.tokens[i])] = i;
  json merges = json::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back(byte_level::encode(a) + " " + byte_level::encode(b));
  json added = json::array();
  for (size_t i = 0; i < bpe.special_tokens.size(); ++i)
    added.push_back({{"id", bpe.tokens.size() + i}, {"content", bpe.special_tokens[i]},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  const std::string pattern = byte_level_split_pattern();
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
