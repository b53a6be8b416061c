// Which drafter speculative decoding uses, loaded once and instantiated per sequence.
//
// The weights (a DSpark / DFlash drafter, a draft LM) are shared; every sequence gets its own
// Drafter object holding its own state (the drafter's context keys/values, the draft model's KV
// cache, the n-gram history). Used by generate, bench and the server alike.
#pragma once
#include <memory>
#include <string>

#include "drafter/dspark_drafter.h"
#include "spec/drafter.h"

namespace dspark {

// At most one of the three may be set; none: plain decoding.
struct DrafterChoice {
  std::string dspark_dir;       // -d: a DSpark / DFlash drafter directory
  std::string kind;             // --draft: a model-free drafter ("ngram")
  std::string draft_model_dir;  // --draft-model: a small LM sharing the target's tokenizer
  // --draft-vocab N > 0 with -d: cut a whole-vocabulary drafter at load to its N most frequent
  // tokens, as counted in the token_counts.json beside it (drafter/draft_vocab.h); a drafter
  // that already has a draft vocabulary must have N tokens.
  int64_t draft_vocab = 0;
  bool empty() const { return dspark_dir.empty() && kind.empty() && draft_model_dir.empty(); }
};

class DrafterFactory {
 public:
  // Loads the weights and checks them against the target (one-line dspark::Error otherwise).
  // `load_options` are used for a draft model (dtype, device as the target's).
  DrafterFactory(const DrafterChoice& choice, Transformer& target, const LoadOptions& load_options = {});

  // A fresh drafter for one sequence; null for plain decoding.
  std::unique_ptr<Drafter> make() const;

  bool plain() const { return kind_ == "none"; }
  // none | dspark | dflash | ngram | model
  const std::string& kind() const { return kind_; }
  // What the user gave (directory or kind), for reports.
  const std::string& label() const { return label_; }
  // The DSpark / DFlash drafter when there is one (verify setup, calibration).
  const DSparkDrafter* dspark() const { return dspark_.get(); }
  int64_t block_size() const;  // 0: unlimited / none

 private:
  // The whole-vocabulary drafter loaded from `dir` replaced by its cut to `n` tokens.
  void cut_draft_vocab(const std::string& dir, int64_t n);

  Transformer& target_;
  std::string kind_ = "none", label_ = "none";
  std::shared_ptr<DSparkDrafter> dspark_;
  std::shared_ptr<Transformer> draft_model_;
};

}  // namespace dspark
