// Logits processing and seeded draws, checked on hand-computed distributions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "sampling/sampler.h"
#include "util/error.h"

namespace dspark {
namespace {

at::Tensor logits_of(std::vector<float> probs) {
  return torch::log(torch::tensor(probs));
}

TEST(Sampler, GreedyIsOneHotOnArgmax) {
  SamplingParams p;  // temperature 0
  at::Tensor probs = processed_probabilities(torch::tensor({0.1f, 2.0f, -1.0f, 1.9f}), p);
  EXPECT_TRUE(torch::equal(probs, torch::tensor({0.f, 1.f, 0.f, 0.f})));
  Rng rng(1);
  EXPECT_EQ(sample_token(torch::tensor({0.1f, 2.0f, -1.0f, 1.9f}), p, rng), 1);
}

TEST(Sampler, TemperatureScalesLogits) {
  SamplingParams p;
  p.temperature = 2.0;
  at::Tensor logits = torch::tensor({0.0f, std::log(4.0f)});
  at::Tensor probs = processed_probabilities(logits, p);
  // softmax([0, ln4] / 2) = [1, 2] / 3
  EXPECT_NEAR(probs[0].item<double>(), 1.0 / 3.0, 1e-6);
  EXPECT_NEAR(probs[1].item<double>(), 2.0 / 3.0, 1e-6);
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplingParams p;
  p.temperature = 1.0;
  p.top_k = 2;
  at::Tensor probs = processed_probabilities(logits_of({0.1f, 0.4f, 0.2f, 0.3f}), p);
  EXPECT_NEAR(probs[0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(probs[1].item<double>(), 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(probs[2].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(probs[3].item<double>(), 0.3 / 0.7, 1e-6);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.6;  // 0.4 alone < 0.6, 0.4 + 0.3 >= 0.6: keep {0.4, 0.3}
  at::Tensor probs = processed_probabilities(logits_of({0.1f, 0.4f, 0.2f, 0.3f}), p);
  EXPECT_NEAR(probs[1].item<double>(), 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(probs[3].item<double>(), 0.3 / 0.7, 1e-6);
  EXPECT_NEAR(probs[0].item<double>() + probs[2].item<double>(), 0.0, 1e-7);
  p.top_p = 0.4;  // exactly the first token's mass: only it survives
  probs = processed_probabilities(logits_of({0.1f, 0.4f, 0.2f, 0.3f}), p);
  EXPECT_NEAR(probs[1].item<double>(), 1.0, 1e-6);
}

TEST(Sampler, DrawsFollowTheDistributionAndAreReproducible) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 42;
  at::Tensor logits = logits_of({0.5f, 0.25f, 0.125f, 0.125f});
  Rng rng(p.seed);
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) counts[size_t(sample_token(logits, p, rng))]++;
  const double expected[4] = {0.5, 0.25, 0.125, 0.125};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[size_t(i)] / double(n), expected[i], 0.01) << i;
  Rng a(7), b(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(logits, p, a), sample_token(logits, p, b));
}

TEST(Sampler, BadParametersAndNaNAreErrors) {
  SamplingParams p;
  p.top_p = 0.0;
  EXPECT_THROW(validate(p), Error);
  p.top_p = 1.0;
  p.top_k = -1;
  EXPECT_THROW(validate(p), Error);
  SamplingParams ok;
  ok.temperature = 1.0;
  EXPECT_THROW(processed_probabilities(torch::tensor({0.0f, NAN}), ok), Error);
  Rng rng(0);
  EXPECT_THROW(sample_token(torch::tensor({0.0f, NAN}), SamplingParams{}, rng), Error);
}

}  // namespace
}  // namespace dspark
