#include "spec/dspark_source.h"

#include <torch/torch.h>

namespace dspark {

DSparkSource::DSparkSource(std::shared_ptr<DSparkDrafter> drafter, Transformer& target, std::string label)
    : drafter_(std::move(drafter)), target_(target), label_(std::move(label)) {}

at::Tensor DSparkSource::hidden(const ChunkOutput& out, int64_t rows) const {
  const at::Tensor& h = drafter_->config().context == ContextMode::Layers ? out.layer_hidden : out.final_hidden;
  return h.narrow(0, 0, rows);
}

at::Tensor DSparkSource::kept_rows(const ChunkOutput& out, int64_t rows) const {
  // A view that is its whole storage (one sequence's forward) is kept as is; a slice of a
  // batched forward is copied, so the batch's tensor is not held alive by one row.
  at::Tensor h = hidden(out, rows);
  const bool owns_storage = h.is_contiguous() && h.storage_offset() == 0 &&
                            h.storage().nbytes() == size_t(h.numel()) * h.element_size();
  return owns_storage ? h : h.clone();
}

void DSparkSource::flush_pending() {
  if (pending_.empty()) return;
  at::Tensor rows = pending_.size() == 1 ? pending_[0] : torch::cat(pending_, 0);
  pending_.clear();
  drafter_->extend_context(context_, drafter_->features_from(rows));
}

void DSparkSource::begin(const std::vector<int64_t>& prompt, const ChunkOutput& prefill) {
  // The prompt joins the context at the first propose(), like every later position: a request
  // that never drafts (auto mode choosing plain decoding) costs the drafter nothing.
  context_ = drafter_->new_context();
  pending_.clear();
  pending_.push_back(kept_rows(prefill, int64_t(prompt.size())));
}

int64_t DSparkSource::catch_up() {
  if (pending_.size() < 2) return 0;
  at::Tensor last = pending_.back();
  pending_.pop_back();
  int64_t rows = 0;
  for (const at::Tensor& t : pending_) rows += t.size(0);
  flush_pending();
  pending_.push_back(std::move(last));
  return rows;
}

DraftProposal DSparkSource::propose(int64_t anchor, int64_t n, const SamplingParams& params, Rng& rng) {
  flush_pending();
  DSparkDrafter::Draft d = drafter_->draft(target_, context_, anchor, n, params, &rng);
  return {std::move(d.tokens), std::move(d.q), std::move(d.confidence), std::move(d.conf_logits)};
}

void DSparkSource::commit(const std::vector<int64_t>& kept, const ChunkOutput& verify) {
  pending_.push_back(kept_rows(verify, int64_t(kept.size())));
}

}  // namespace dspark
