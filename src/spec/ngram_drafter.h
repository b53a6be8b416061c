// Prompt-lookup drafting (llama.cpp's lookup / ngram-simple): find the most recent earlier
// occurrence of the last n tokens (n = max_ngram down to min_ngram) in the prompt + output so
// far and propose the tokens that followed it. No model, no q (verified as a one-hot proposal).
#pragma once
#include "spec/drafter.h"

namespace dspark {

class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int64_t max_ngram = 3, int64_t min_ngram = 1) : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  std::string name() const override { return "ngram"; }
  void begin(const std::vector<int64_t>& prompt, const ChunkOutput&) override { history_ = prompt; }
  DraftProposal propose(int64_t anchor, int64_t n, const SamplingParams&, Rng&) override;
  void commit(const std::vector<int64_t>& kept, const ChunkOutput&) override {
    history_.insert(history_.end(), kept.begin(), kept.end());
  }

 private:
  int64_t max_ngram_, min_ngram_;
  std::vector<int64_t> history_;  // the tokens in the target cache (prompt + kept)
};

}  // namespace dspark
