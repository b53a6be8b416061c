// kernels/softmax against torch::softmax: row counts and sizes below and above one vector, a
// temperature, large logits, non-finite detection; and the sampler's fast path against its
// LibTorch path.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "kernels/softmax.h"
#include "sampling/sampler.h"
#include "util/error.h"

namespace dspark::kernels {
namespace {

// The paths this CPU has.
std::vector<Isa> softmax_paths() {
  std::vector<Isa> paths;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa)) paths.push_back(isa);
  return paths;
}

TEST(SoftmaxKernel, MatchesLibTorchOverShapes) {
  if (!softmax_rows_supported()) GTEST_SKIP() << "no AVX2";
  for (Isa isa : softmax_paths()) {
    torch::manual_seed(0);
    for (int64_t rows : {1, 3, 9}) {
      for (int64_t n : {1, 15, 16, 17, 100, 8192, 151936}) {
        for (float scale : {1.0f, 1.0f / 0.7f}) {
          at::Tensor x = torch::randn({rows, n}) * 4 + 30;  // large logits: the maximum must come out
          at::Tensor y = torch::empty_like(x);
          ASSERT_TRUE(softmax_rows_f32_with(isa, x.data_ptr<float>(), rows, n, scale, y.data_ptr<float>()));
          // Against float64: LibTorch's float32 softmax drifts by ~1e-5 over a 152K row.
          const at::Tensor ref = torch::softmax(x.to(torch::kFloat64) * double(scale), -1).to(torch::kFloat32);
          EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-12))
              << isa_name(isa) << " " << rows << " x " << n << ": " << (y - ref).abs().max().item<double>();
          EXPECT_NEAR(y.sum(-1).min().item<double>(), 1.0, 1e-5);
        }
      }
    }
  }
}

TEST(SoftmaxKernel, ReportsNonFiniteRows) {
  if (!softmax_rows_supported()) GTEST_SKIP() << "no AVX2";
  for (Isa isa : softmax_paths()) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      for (int64_t at : {0, 16, 40}) {
        at::Tensor x = torch::randn({2, 41});
        x[1][at] = bad;
        at::Tensor y = torch::empty_like(x);
        EXPECT_FALSE(softmax_rows_f32_with(isa, x.data_ptr<float>(), 2, 41, 1.0f, y.data_ptr<float>()))
            << isa_name(isa) << " " << bad << " at " << at;
      }
    }
  }
}

TEST(SoftmaxKernel, SamplerFastPathMatchesTheOperatorPath) {
  // Temperature alone takes the kernel; a top-k of V is the same distribution through LibTorch.
  torch::manual_seed(1);
  at::Tensor logits = torch::randn({5, 8192}) * 3;
  SamplingParams fast;
  fast.temperature = 0.8;
  SamplingParams ops = fast;
  ops.top_p = 0.999999999;  // not 1: the operator path, with nothing of weight dropped
  const at::Tensor a = processed_probabilities(logits, fast), b = processed_probabilities(logits, ops);
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-7)) << (a - b).abs().max().item<double>();
  logits[2][7] = NAN;
  EXPECT_THROW(processed_probabilities(logits, fast), Error);
  // Draws from a float row equal draws from its float64 copy.
  Rng r1(3), r2(3);
  const at::Tensor row = a[0].contiguous();
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sample_index(row, r1), sample_index(row.to(torch::kFloat64), r2));
}

}  // namespace
}  // namespace dspark::kernels
