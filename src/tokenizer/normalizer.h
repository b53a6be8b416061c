// Normalizers: the first step of an HF tokenizer, rewriting each stretch of text between added
// tokens (e.g. NFC for Qwen, " " -> "▁" for Gemma, Prepend("▁") + Replace for Llama-2).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace dspark {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
};

// Builds the normalizer a tokenizer.json "normalizer" object describes; nullptr for JSON null.
// Supported: NFC, Replace, Prepend, Strip, Sequence. Throws dspark::Error for anything else.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config);

}  // namespace dspark
