// Which training windows a step reads. The corpus is cut into non-overlapping windows of
// seq_len + 1 tokens; each epoch visits all of them once in a seeded random order. The windows of
// step s are a pure function of (seed, s), so a resumed run reads exactly what an uninterrupted
// one would have read, with no data-loader state to save.
#pragma once
#include <cstdint>
#include <vector>

namespace dspark {

class WindowSampler {
 public:
  WindowSampler(int64_t n_tokens, int64_t seq_len, uint64_t seed);
  int64_t windows_per_epoch() const { return n_windows_; }
  // Start offsets (in tokens) of the `batch` windows of step `step`.
  std::vector<int64_t> batch(int64_t step, int64_t batch);

 private:
  void shuffle_for(int64_t epoch);
  int64_t n_windows_, seq_len_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace dspark
