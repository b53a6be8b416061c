#include "engine/drafter_factory.h"

#include "drafter/deepspec_format.h"

#include "spec/dspark_source.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"
#include "util/error.h"

namespace dspark {

DrafterFactory::DrafterFactory(const DrafterChoice& c, Transformer& target, const LoadOptions& load_options)
    : target_(target) {
  if (int(!c.dspark_dir.empty()) + int(!c.kind.empty()) + int(!c.draft_model_dir.empty()) > 1)
    fail("give at most one of -d, --draft and --draft-model");
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
  }
}

std::unique_ptr<Drafter> DrafterFactory::make() const {
  if (kind_ == "ngram") return std::make_unique<NgramDrafter>();
  if (kind_ == "model") return std::make_unique<ModelDrafter>(draft_model_, target_);
  if (dspark_) return std::make_unique<DSparkSource>(dspark_, target_, kind_);
  return nullptr;
}

int64_t DrafterFactory::block_size() const { return dspark_ ? dspark_->config().max_drafts() : 0; }

}  // namespace dspark
