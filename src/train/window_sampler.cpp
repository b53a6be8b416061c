#include "train/window_sampler.h"

#include <random>
#include <utility>

#include "util/error.h"

namespace dspark {

ShuffledOrder::ShuffledOrder(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  if (n_ < 1) fail("nothing to sample from");
}

void ShuffledOrder::shuffle_for(int64_t epoch) {
  order_.resize(size_t(n_));
  for (int64_t i = 0; i < n_; ++i) order_[size_t(i)] = i;
  // Fisher-Yates on raw mt19937_64 draws: the same order with every standard library.
  std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + uint64_t(epoch) + 1);
  for (int64_t i = n_ - 1; i > 0; --i) std::swap(order_[size_t(i)], order_[size_t(rng() % uint64_t(i + 1))]);
  epoch_ = epoch;
}

int64_t ShuffledOrder::at(int64_t i) {
  const int64_t epoch = i / n_;
  if (epoch != epoch_) shuffle_for(epoch);
  return order_[size_t(i % n_)];
}

static int64_t window_count(int64_t n_tokens, int64_t seq_len) {
  const int64_t n = (n_tokens - 1) / seq_len;
  if (n < 1) fail("corpus of {} tokens holds no window of {} tokens", n_tokens, seq_len + 1);
  return n;
}

WindowSampler::WindowSampler(int64_t n_tokens, int64_t seq_len, uint64_t seed)
    : seq_len_(seq_len), order_(window_count(n_tokens, seq_len), seed) {}

std::vector<int64_t> WindowSampler::batch(int64_t step, int64_t batch) {
  std::vector<int64_t> starts;
  for (int64_t b = 0; b < batch; ++b) starts.push_back(order_.at(step * batch + b) * seq_len_);
  return starts;
}

}  // namespace dspark
