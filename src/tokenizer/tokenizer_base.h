// What the concrete tokenizers share: BOS/EOS ids, which Tokenizer::load settles from the
// tokenizer file and the model's config files after construction.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dspark {

class TokenizerBase : public Tokenizer {
 public:
  std::optional<TokenId> bos_id() const override { return bos_; }
  std::vector<TokenId> eos_ids() const override { return eos_; }

  void set_bos_id(std::optional<TokenId> bos) { bos_ = bos; }
  void set_eos_ids(std::vector<TokenId> eos) { eos_ = std::move(eos); }

 private:
  std::optional<TokenId> bos_;
  std::vector<TokenId> eos_;
};

}  // namespace dspark
