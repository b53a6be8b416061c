// Post-processors add the special tokens a model expects around an encoded sequence, e.g.
// TemplateProcessing "<bos> $A" for Gemma / Llama-2. Applied by encode(add_special = true).
#pragma once
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace dspark {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::vector<TokenId> process(std::vector<TokenId> ids) const = 0;
  // The token the processor puts first, if any (the natural BOS).
  virtual std::optional<TokenId> leading_special() const { return std::nullopt; }
};

// Builds the processor a tokenizer.json "post_processor" describes; nullptr for null.
// Supported: TemplateProcessing, ByteLevel (adds nothing), RobertaProcessing, BertProcessing,
// Sequence.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& config);

}  // namespace dspark
