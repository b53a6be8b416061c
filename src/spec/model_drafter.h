// Classic two-model speculation: a small LM sharing the target's tokenizer drafts n tokens one by
// one (its own KV cache), returning the distributions q_k it drew them from; rejected tokens are
// rolled back by truncating its cache.
#pragma once
#include <memory>

#include "spec/drafter.h"

namespace dspark {

class ModelDrafter : public Drafter {
 public:
  // Throws dspark::Error when the draft model's vocabulary differs from the target's.
  ModelDrafter(std::shared_ptr<Transformer> draft, const Transformer& target);
  std::string name() const override { return "model"; }
  void begin(const std::vector<int64_t>& prompt, const ChunkOutput&) override;
  DraftProposal propose(int64_t anchor, int64_t n, const SamplingParams& params, Rng& rng) override;
  void commit(const std::vector<int64_t>& kept, const ChunkOutput&) override;

 private:
  std::shared_ptr<Transformer> draft_;
  KVCache cache_;
  std::vector<int64_t> pending_;  // accepted tokens not yet in the draft cache
  int64_t anchor_pos_ = -1;       // cache position of the last proposal's anchor; -1: none pending
};

}  // namespace dspark
