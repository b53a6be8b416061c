// kernels/activation against LibTorch's SiLU / GELU (tanh), and the property they exist for: an
// element's result does not depend on the rest of the tensor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/activation.h"
#include "kernels/avx2_exp.h"
#include "kernels/avx512_exp.h"

namespace dspark::kernels {
namespace {

TEST(ActivationKernel, MatchesLibTorch) {
  torch::manual_seed(0);
  for (int64_t n : {1, 15, 16, 17, 48, 1000, 70000}) {
    at::Tensor x = torch::randn({n}) * 4;
    at::Tensor y = torch::empty_like(x);
    silu_f32(x.data_ptr<float>(), y.data_ptr<float>(), n);
    EXPECT_TRUE(torch::allclose(y, torch::silu(x), 1e-6, 1e-6)) << "silu, n = " << n;
    gelu_tanh_f32(x.data_ptr<float>(), y.data_ptr<float>(), n);
    EXPECT_TRUE(torch::allclose(y, torch::gelu(x, "tanh"), 1e-6, 1e-6)) << "gelu, n = " << n;
  }
}

TEST(ActivationKernel, AnElementDoesNotDependOnTheRest) {
  torch::manual_seed(1);
  at::Tensor x = torch::randn({23, 48}) * 4;  // 23 rows of 48, e.g. a batch of sequences
  at::Tensor all = torch::empty_like(x), row = torch::empty({48});
  for (auto* f : {&silu_f32, &gelu_tanh_f32}) {
    f(x.data_ptr<float>(), all.data_ptr<float>(), x.numel());
    for (int64_t r = 0; r < 23; ++r) {
      at::Tensor xr = x[r].contiguous();
      f(xr.data_ptr<float>(), row.data_ptr<float>(), 48);
      EXPECT_TRUE(torch::equal(row, all[r])) << "row " << r;
    }
  }
}

__attribute__((target("avx512f"))) void exp16(const float* x, float* y) {
  _mm512_storeu_ps(y, avx512_exp(_mm512_loadu_ps(x)));
}

// Within 3 ulp of exp in double over float's whole range; saturates and keeps NaN.
TEST(ActivationKernel, VectorExpIsAccurate) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "CPU lacks AVX-512";
  std::vector<float> x;
  for (float v = -104.0f; v <= 89.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.33f, -103.0f, -200.0f, 500.0f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  while (x.size() % 16) x.push_back(0.5f);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 16) exp16(x.data() + i, y.data() + i);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(double(x[i]));
    if (want > std::numeric_limits<float>::max()) {
      EXPECT_TRUE(std::isinf(y[i])) << x[i];
    } else if (want < std::numeric_limits<float>::min()) {  // denormal range: absolute error
      EXPECT_LE(std::abs(y[i] - want), 3 * std::ldexp(1.0, -23) * std::numeric_limits<float>::min()) << x[i];
    } else {
      EXPECT_LE(std::abs(y[i] - want), 3 * std::ldexp(1.0, -23) * want) << x[i];
    }
  }
  float nan16[16], out[16];
  for (float& v : nan16) v = std::nanf("");
  exp16(nan16, out);
  EXPECT_TRUE(std::isnan(out[0]));
}

__attribute__((target("avx2,fma"))) void exp8(const float* x, float* y) {
  _mm256_storeu_ps(y, avx2_exp(_mm256_loadu_ps(x)));
}

// The AVX2 exp: the same accuracy down to e^-86.9; below, 0 (no denormals); saturates, keeps NaN.
TEST(ActivationKernel, Avx2ExpIsAccurate) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "CPU lacks AVX2";
  std::vector<float> x;
  for (float v = -104.0f; v <= 89.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.7228f, 88.73f, -86.9f, -87.33f, -103.0f, -200.0f, 500.0f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  while (x.size() % 8) x.push_back(0.5f);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 8) exp8(x.data() + i, y.data() + i);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(double(x[i]));
    if (want > std::numeric_limits<float>::max()) {
      EXPECT_TRUE(std::isinf(y[i]) && y[i] > 0) << x[i];
    } else if (x[i] < -86.9f) {
      EXPECT_EQ(y[i], 0.0f) << x[i];
    } else {
      EXPECT_LE(std::abs(y[i] - want), 3 * std::ldexp(1.0, -23) * want) << x[i];
    }
  }
  float nan8[8], out[8];
  for (float& v : nan8) v = std::nanf("");
  exp8(nan8, out);
  EXPECT_TRUE(std::isnan(out[0]));
}

}  // namespace
}  // namespace dspark::kernels
