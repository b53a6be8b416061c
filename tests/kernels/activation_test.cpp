// kernels/activation against LibTorch's SiLU / GELU (tanh), and the property they exist for: an
// element's result does not depend on the rest of the tensor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/activation.h"

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

}  // namespace
}  // namespace dspark::kernels
