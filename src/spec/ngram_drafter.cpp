#include "spec/ngram_drafter.h"

namespace dspark {

DraftProposal NgramDrafter::propose(int64_t anchor, int64_t n, const SamplingParams&, Rng&) {
  std::vector<int64_t> seq = history_;
  seq.push_back(anchor);
  DraftProposal out;
  const int64_t len = int64_t(seq.size());
  for (int64_t k = std::min(max_ngram_, len - 1); k >= min_ngram_ && out.tokens.empty(); --k) {
    // The latest earlier match of the suffix seq[len-k, len).
    for (int64_t start = len - k - 1; start >= 0; --start) {
      bool match = true;
      for (int64_t i = 0; i < k && match; ++i) match = seq[size_t(start + i)] == seq[size_t(len - k + i)];
      if (!match) continue;
      for (int64_t j = start + k; j < len && int64_t(out.tokens.size()) < n; ++j) out.tokens.push_back(seq[size_t(j)]);
      break;
    }
  }
  return out;
}

}  // namespace dspark
