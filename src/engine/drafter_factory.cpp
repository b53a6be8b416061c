#include "engine/drafter_factory.h"

#include <filesystem>

#include "drafter/deepspec_format.h"
#include "drafter/draft_vocab.h"

#include "spec/dspark_source.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"
#include "util/error.h"

namespace dspark {

DrafterFactory::DrafterFactory(const DrafterChoice& c, Transformer& target, const LoadOptions& load_options)
    : target_(target) {
  if (int(!c.dspark_dir.empty()) + int(!c.kind.empty()) + int(!c.draft_model_dir.empty()) > 1)
    fail("give at most one of -d, --draft and --draft-model");
  if (c.draft_vocab < 0) fail("--draft-vocab must be > 0, not {}", c.draft_vocab);
  if (c.draft_vocab > 0 && c.dspark_dir.empty()) fail("--draft-vocab applies to a DSpark / DFlash drafter (-d)");
  if (!c.kind.empty()) {
    if (c.kind != "ngram") fail("unknown --draft '{}' (want ngram)", c.kind);
    kind_ = label_ = "ngram";
  } else if (!c.draft_model_dir.empty()) {
    draft_model_ = std::shared_ptr<Transformer>(Transformer::load(c.draft_model_dir, load_options));
    ModelDrafter check(draft_model_, target);  // vocabulary check, one-line error
    kind_ = "model";
    label_ = c.draft_model_dir;
  } else if (!c.dspark_dir.empty()) {
    dspark_ = std::shared_ptr<DSparkDrafter>(load_drafter_dir(c.dspark_dir, target));
    const DSparkConfig& dc = dspark_->config();
    kind_ = dc.markov == MarkovKind::None && !dc.confidence ? "dflash" : "dspark";
    label_ = c.dspark_dir;
    if (c.draft_vocab > 0) cut_draft_vocab(c.dspark_dir, c.draft_vocab);
  }
}

void DrafterFactory::cut_draft_vocab(const std::string& dir, int64_t n) {
  const int64_t vocab = target_.config().vocab_size;
  const int64_t has = dspark_->config().draft_vocab_size;
  if (has > 0) {
    if (has != n) fail("{}: the drafter already has a draft vocabulary of {} tokens, not --draft-vocab {}", dir, has, n);
    return;
  }
  const std::string counts_path = (std::filesystem::path(dir) / kTokenCountsFile).string();
  if (!std::filesystem::exists(counts_path))
    fail("{}: no {} to choose a draft vocabulary from (dspark convert --draft-vocab N --data REGEN writes one)", dir,
         kTokenCountsFile);
  const at::Tensor d2t = most_frequent_tokens(read_token_counts(counts_path, vocab), n);
  dspark_ = std::shared_ptr<DSparkDrafter>(dspark_->with_draft_vocab(target_, d2t));
  label_ = fmt::format("{} (vocab {})", dir, n);
}

std::unique_ptr<Drafter> DrafterFactory::make() const {
  if (kind_ == "ngram") return std::make_unique<NgramDrafter>();
  if (kind_ == "model") return std::make_unique<ModelDrafter>(draft_model_, target_);
  if (dspark_) return std::make_unique<DSparkSource>(dspark_, target_, kind_);
  return nullptr;
}

int64_t DrafterFactory::block_size() const { return dspark_ ? dspark_->config().max_drafts() : 0; }

}  // namespace dspark
