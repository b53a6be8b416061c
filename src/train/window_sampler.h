// Which training items a step reads. ShuffledOrder visits n items once per epoch in a seeded
// random order; item `i` of the whole run is a pure function of (seed, i), so a resumed run reads
// exactly what an uninterrupted one would have read, with no data-loader state to save.
// WindowSampler applies it to a token stream cut into non-overlapping windows of seq_len + 1.
#pragma once
#include <cstdint>
#include <vector>

namespace dspark {

class ShuffledOrder {
 public:
  ShuffledOrder(int64_t n, uint64_t seed);
  int64_t size() const { return n_; }
  int64_t at(int64_t i);  // item for the i-th draw of the run (epoch i / n)

 private:
  void shuffle_for(int64_t epoch);
  int64_t n_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
};

class WindowSampler {
 public:
  WindowSampler(int64_t n_tokens, int64_t seq_len, uint64_t seed);
  int64_t windows_per_epoch() const { return order_.size(); }
  // Start offsets (in tokens) of the `batch` windows of step `step`.
  std::vector<int64_t> batch(int64_t step, int64_t batch);

 private:
  int64_t seq_len_;
  ShuffledOrder order_;
};

}  // namespace dspark
