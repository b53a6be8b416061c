// Pre-tokenizers: cut normalized text into words before BPE, so that merges never cross word
// boundaries (the regex Split of GPT-2 / Qwen / Llama-3), and rewrite the words (ByteLevel maps
// bytes to the byte-level alphabet, Metaspace turns spaces into "▁").
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dspark {

struct PreToken {
  std::string text;
  // True when the piece begins at the very start of the input text: Metaspace's
  // prepend_scheme "first" adds its "▁" only there.
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their refinement; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<PreToken>& pieces) const = 0;
};

// Builds the pre-tokenizer a tokenizer.json "pre_tokenizer" object describes; nullptr for null.
// Supported: Split, ByteLevel, Metaspace, Sequence. Throws dspark::Error for anything else.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config);

}  // namespace dspark
