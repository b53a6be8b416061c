#include "spec/dspark_source.h"

#include <torch/torch.h>

namespace dspark {

DSparkSource::DSparkSource(std::shared_ptr<DSparkDrafter> drafter, Transformer& target, std::string label)
    : drafter_(std::move(drafter)), target_(target), label_(std::move(label)) {}

at::Tensor DSparkSource::hidden(const ChunkOutput& out, int64_t rows) const {
  const at::Tensor& h = drafter_->config().context == ContextMode::Layers ? out.layer_hidden : out.final_hidden;
  return h.narrow(0, 0, rows);
}

void DSparkSource::flush_pending() {
  if (pending_.empty()) return;
  at::Tensor rows = pending_.size() == 1 ? pending_[0] : torch::cat(pending_, 0);
  pending_.clear();
  drafter_->extend_context(context_, drafter_->features_from(rows));
}

void DSparkSource::begin(const std::vector<int64_t>& prompt, const ChunkOutput& prefill) {
  context_ = drafter_->new_context();
  pending_.clear();
  drafter_->extend_context(context_, drafter_->features_from(hidden(prefill, int64_t(prompt.size()))));
}

DraftProposal DSparkSource::propose(int64_t anchor, int64_t n, const SamplingParams& params, Rng& rng) {
  flush_pending();
  DSparkDrafter::Draft d = drafter_->draft(target_, context_, anchor, n, params, &rng);
  return {std::move(d.tokens), std::move(d.q), std::move(d.confidence), std::move(d.conf_logits)};
}

void DSparkSource::commit(const std::vector<int64_t>& kept, const ChunkOutput& verify) {
  // Only the kept rows, copied: the verify output may be a slice of a large batched forward.
  pending_.push_back(hidden(verify, int64_t(kept.size())).clone());
}

}  // namespace dspark
