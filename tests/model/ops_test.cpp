// The fast CPU paths of model/ops against the LibTorch formulas they replace.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/ops.h"
#include "model/rope.h"

namespace dspark {
namespace {

// The LibTorch path, forced by asking for gradients.
at::Tensor reference_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, bool gemma) {
  at::Tensor xg = x.clone().requires_grad_(true);
  return rms_norm(xg, w, eps, gemma).detach();
}

TEST(RmsNormFastPath, MatchesLibTorchOverShapes) {
  torch::manual_seed(0);
  for (bool gemma : {false, true})
    for (int64_t rows : {1, 3, 8, 16})
      for (int64_t n : {1, 7, 64, 255, 1024}) {
        at::Tensor x = torch::randn({rows, n}) * 3;
        at::Tensor w = torch::randn({n});
        at::Tensor fast = rms_norm(x, w, 1e-6, gemma);
        at::Tensor ref = reference_rms_norm(x, w, 1e-6, gemma);
        EXPECT_TRUE(torch::allclose(fast, ref, 1e-5, 1e-6))
            << "rows " << rows << " n " << n << " gemma " << gemma << " max diff "
            << (fast - ref).abs().max().item<double>();
      }
}

TEST(RmsNormFastPath, KeepsLeadingShapeAndHandlesStridedInput) {
  torch::manual_seed(1);
  at::Tensor x = torch::randn({2, 4, 64}).transpose(0, 1);  // [4, 2, 64], not contiguous
  at::Tensor w = torch::randn({64});
  at::Tensor fast = rms_norm(x, w, 1e-6);
  EXPECT_EQ(fast.sizes(), x.sizes());
  EXPECT_TRUE(torch::allclose(fast, reference_rms_norm(x, w, 1e-6, false), 1e-5, 1e-6));
}

}  // namespace
}  // namespace dspark

namespace dspark {
namespace {

TEST(RopeFastPath, MatchesLibTorchOverShapes) {
  torch::manual_seed(2);
  const at::Tensor inv_freq = rope_inverse_frequencies(64, 10000.0, RopeScaling{});
  for (int64_t N : {1, 5, 16}) {
    at::Tensor positions = torch::arange(100, 100 + N, torch::kInt64);
    auto [cos, sin] = rope_tables(inv_freq, positions);
    at::Tensor x = torch::randn({N, 3, 64});
    at::Tensor fast = apply_rope(x, cos, sin);
    at::Tensor ref = apply_rope(x.clone().requires_grad_(true), cos, sin).detach();  // LibTorch path
    EXPECT_TRUE(torch::allclose(fast, ref, 1e-6, 1e-6)) << "N " << N;
  }
}

}  // namespace
}  // namespace dspark
