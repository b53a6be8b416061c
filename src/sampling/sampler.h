// Logits processing (temperature, top-k, top-p) and seeded draws. The speculative verifier uses
// the same `processed_probabilities` for target and draft distributions, which is what keeps
// sampled speculative decoding lossless.
#pragma once
#include <ATen/Tensor.h>

#include <cstdint>
#include <random>
#include <vector>

namespace dspark {

struct SamplingParams {
  double temperature = 0.0;  // <= 0: greedy (argmax)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0; }
};

// Throws dspark::Error for out-of-range values (negative top-k, top-p outside (0, 1], NaN).
void validate(const SamplingParams& params);

// logits [..., V] -> probabilities [..., V] float32, HF order: temperature, then top-k, then
// top-p (keeps the smallest set of most likely tokens whose mass reaches top_p). Greedy gives a
// one-hot on the argmax. Non-finite logits throw dspark::Error.
at::Tensor processed_probabilities(const at::Tensor& logits, const SamplingParams& params);

// Reproducible random numbers: a seeded 64-bit Mersenne Twister, independent of LibTorch's RNG.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(engine_); }

 private:
  std::mt19937_64 engine_;
};

// Whether t is a contiguous float32 tensor in host memory: the sampling paths then read its rows
// directly instead of going through LibTorch operators.
bool is_host_f32(const at::Tensor& t);

// Draws an index from probabilities [V] (need not be normalised) by inverse CDF in float64.
int64_t sample_index(const at::Tensor& probs, Rng& rng);
// The same over V floats on the host (the same float64 sums, so the same draw).
int64_t sample_index(const float* probs, int64_t V, Rng& rng);

// Greedy: argmax of logits [V] (lowest index on ties). Sampling: a draw from the processed logits.
int64_t sample_token(const at::Tensor& logits, const SamplingParams& params, Rng& rng);

// Greedy tokens of every row of logits [n, V]: n argmaxes (lowest index on ties), as sample_token
// row by row. On a GPU the argmaxes and the finiteness check stay there and the n ids come back in
// one copy (a verify step's whole chunk at once instead of one wait per token).
std::vector<int64_t> greedy_tokens(const at::Tensor& logits);

}  // namespace dspark
