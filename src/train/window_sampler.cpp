#include "train/window_sampler.h"

#include <random>
#include <utility>

#include "util/error.h"

namespace dspark {

WindowSampler::WindowSampler(int64_t n_tokens, int64_t seq_len, uint64_t seed)
    : n_windows_((n_tokens - 1) / seq_len), seq_len_(seq_len), seed_(seed) {
  if (n_windows_ < 1) fail("corpus of {} tokens holds no window of {} tokens", n_tokens, seq_len + 1);
}

void WindowSampler::shuffle_for(int64_t epoch) {
  order_.resize(size_t(n_windows_));
  for (int64_t i = 0; i < n_windows_; ++i) order_[size_t(i)] = i;
  // Fisher-Yates on raw mt19937_64 draws: the same order with every standard library.
  std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + uint64_t(epoch) + 1);
  for (int64_t i = n_windows_ - 1; i > 0; --i) std::swap(order_[size_t(i)], order_[size_t(rng() % uint64_t(i + 1))]);
  epoch_ = epoch;
}

std::vector<int64_t> WindowSampler::batch(int64_t step, int64_t batch) {
  std::vector<int64_t> starts;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t sample = step * batch + b;
    const int64_t epoch = sample / n_windows_;
    if (epoch != epoch_) shuffle_for(epoch);
    starts.push_back(order_[size_t(sample % n_windows_)] * seq_len_);
  }
  return starts;
}

}  // namespace dspark
