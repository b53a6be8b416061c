#include "spec/model_drafter.h"

#include <torch/torch.h>

#include "util/error.h"

namespace dspark {

ModelDrafter::ModelDrafter(std::shared_ptr<Transformer> draft, const Transformer& target)
    : draft_(std::move(draft)), cache_(draft_->new_cache()) {
  if (draft_->config().vocab_size != target.config().vocab_size)
    fail("draft model vocabulary ({}) differs from the target's ({}); it must share the target's tokenizer",
         draft_->config().vocab_size, target.config().vocab_size);
}

void ModelDrafter::begin(const std::vector<int64_t>& prompt, const ChunkOutput&) {
  cache_ = draft_->new_cache();
  pending_ = prompt;
  anchor_pos_ = -1;
}

DraftProposal ModelDrafter::propose(int64_t anchor, int64_t n, const SamplingParams& params, Rng& rng) {
  torch::NoGradGuard no_grad;
  DraftProposal out;
  std::vector<int64_t> chunk = pending_;
  chunk.push_back(anchor);
  pending_.clear();
  anchor_pos_ = cache_.length() + int64_t(chunk.size()) - 1;
  const int64_t room = draft_->config().max_position_embeddings - cache_.length() - int64_t(chunk.size());
  n = std::min(n, room);
  if (n <= 0) {
    chunk.pop_back();  // nothing drafted; the anchor comes back through commit()
    pending_ = chunk;
    anchor_pos_ = -1;
    return out;
  }
  at::Tensor logits = draft_->forward(cache_, chunk, LogitsAt::Last).logits[0];
  for (int64_t k = 0; k < n; ++k) {
    int64_t token;
    if (params.greedy()) {
      token = sample_token(logits, params, rng);
    } else {
      at::Tensor q = processed_probabilities(logits, params);
      token = sample_index(q, rng);
      out.q.push_back(q);
    }
    out.tokens.push_back(token);
    if (k + 1 < n) logits = draft_->forward(cache_, {token}, LogitsAt::Last).logits[0];
  }
  return out;
}

void ModelDrafter::commit(const std::vector<int64_t>& kept, const ChunkOutput&) {
  if (anchor_pos_ < 0) {  // no proposal since the last commit: the kept tokens are all new
    pending_.insert(pending_.end(), kept.begin(), kept.end());
    return;
  }
  // The cache holds the anchor and the drafts fed so far; keep what the target kept.
  const int64_t valid = anchor_pos_ + int64_t(kept.size());
  if (cache_.length() >= valid) {
    cache_.truncate(valid);
  } else {
    const int64_t have = cache_.length() - anchor_pos_;  // kept tokens already in the cache
    pending_.assign(kept.begin() + have, kept.end());
  }
  anchor_pos_ = -1;
}

}  // namespace dspark
