// model/bf16_training_linear against float64 products of the bf16-rounded operands: forward y,
// and the backward products dx and dw (autograd), for sizes the tiles take (multiples of 32).
// Tolerance: the products of bf16 values are exact in float32, only float32 sums round:
//   |got - exact| <= K u S with S = sum |a||b| over the reduction, u = 2^-24.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/bf16_training_linear.h"
#include "model/ops.h"

namespace {

at::Tensor bf16_f64(const at::Tensor& t) { return t.detach().to(torch::kBFloat16).to(torch::kFloat64); }

void expect_close(const at::Tensor& got, const at::Tensor& a, const at::Tensor& b, int64_t reduction,
                  const char* what) {
  // exact = a b (float64), scale = |a| |b|
  at::Tensor exact = at::matmul(a, b), scale = at::matmul(a.abs(), b.abs());
  const double u = std::ldexp(1.0, -24);
  at::Tensor excess = (got.to(torch::kFloat64) - exact).abs() - (reduction * u * scale + 1e-30);
  EXPECT_LE(excess.max().item<double>(), 0.0) << what;
}

void check(int64_t m, int64_t k, int64_t n) {
  torch::manual_seed(m * 131 + k * 7 + n);
  at::Tensor x = torch::randn({2, m, k}).requires_grad_(true);  // [B, M, K]
  at::Tensor w = torch::randn({n, k}).requires_grad_(true);     // [N, K]
  at::Tensor y = dspark::bf16_training_linear(x, w);            // [B, M, N]
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, m, n}));
  at::Tensor dy = torch::randn_like(y);
  y.backward(dy);
  const at::Tensor x2 = bf16_f64(x).reshape({-1, k}), w2 = bf16_f64(w), dy2 = bf16_f64(dy).reshape({-1, n});
  expect_close(y.detach().reshape({-1, n}), x2, w2.t(), k, "y");
  expect_close(x.grad().reshape({-1, k}), dy2, w2, n, "dx");
  expect_close(w.grad(), dy2.t(), x2, 2 * m, "dw");
}

TEST(Bf16TrainingLinear, MatchesRoundedFloat64Products) {
  if (!dspark::bf16_training_linear_available()) GTEST_SKIP() << "no AMX on this CPU";
  ASSERT_TRUE(dspark::bf16_training_linear_fits(64, 128, 96));
  ASSERT_FALSE(dspark::bf16_training_linear_fits(48, 128, 96));
  check(32, 128, 96);
  check(96, 64, 160);
}

TEST(Bf16TrainingLinear, DenseTakesItOnlyInsideTheScope) {
  if (!dspark::bf16_training_linear_available()) GTEST_SKIP() << "no AMX on this CPU";
  torch::manual_seed(5);
  at::Tensor x = torch::randn({32, 64}).requires_grad_(true);
  at::Tensor w = torch::randn({32, 64}).requires_grad_(true);
  at::Tensor b = torch::randn({32}).requires_grad_(true);
  at::Tensor plain = dspark::dense(x, w, b);
  at::Tensor mixed;
  {
    dspark::Bf16MatmulScope scope;
    mixed = dspark::dense(x, w, b);
  }
  at::Tensor expected = dspark::bf16_training_linear(x, w) + b;
  EXPECT_TRUE(torch::equal(mixed, expected));
  EXPECT_TRUE(torch::allclose(plain, at::linear(x, w, b)));
  mixed.sum().backward();
  EXPECT_TRUE(b.grad().defined());
  EXPECT_TRUE(torch::allclose(b.grad(), torch::full({32}, 32.0f)));
}

}  // namespace
