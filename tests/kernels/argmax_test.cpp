// kernels/argmax against at::argmax: many sizes (odd ones, below and above one vector), ties
// (the first maximum wins), and non-finite detection.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "kernels/argmax.h"

namespace dspark::kernels {
namespace {

// Every path this CPU has.
std::vector<Isa> argmax_paths() {
  std::vector<Isa> paths;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa)) paths.push_back(isa);
  return paths;
}

TEST(ArgmaxKernel, MatchesLibTorchOverSizes) {
  for (Isa isa : argmax_paths()) {
    torch::manual_seed(0);
    for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 257, 1000, 8192, 8193, 151936}) {
      for (int trial = 0; trial < 4; ++trial) {
        at::Tensor x = torch::randn({n});
        const ArgmaxResult r = argmax_f32_with(isa, x.data_ptr<float>(), n);
        EXPECT_EQ(r.index, x.argmax().item<int64_t>()) << isa_name(isa) << " n = " << n;
        EXPECT_TRUE(r.all_finite);
      }
    }
  }
}

TEST(ArgmaxKernel, TiesGoToTheFirstMaximum) {
  for (Isa isa : argmax_paths()) {
    for (int64_t n : {5, 40, 8192}) {
      // Few distinct values, so the maximum repeats across lanes and in the tail.
      at::Tensor x = torch::randint(0, 3, {n}).to(torch::kFloat32);
      const ArgmaxResult r = argmax_f32_with(isa, x.data_ptr<float>(), n);
      EXPECT_EQ(r.index, x.argmax().item<int64_t>()) << isa_name(isa) << " n = " << n;
      at::Tensor same = torch::full({n}, 2.5f);
      EXPECT_EQ(argmax_f32_with(isa, same.data_ptr<float>(), n).index, 0);
      // The maximum only in the last element (tail) and only in the first.
      at::Tensor last = torch::zeros({n});
      last[n - 1] = 1.0f;
      EXPECT_EQ(argmax_f32_with(isa, last.data_ptr<float>(), n).index, n - 1);
      at::Tensor first = torch::zeros({n});
      first[0] = 1.0f;
      EXPECT_EQ(argmax_f32_with(isa, first.data_ptr<float>(), n).index, 0);
    }
  }
}

TEST(ArgmaxKernel, ReportsNonFiniteValuesAndNeverPicksNaN) {
  for (Isa isa : argmax_paths()) {
    for (int64_t n : {7, 64, 8195}) {
      for (int64_t at : {int64_t(0), n / 2, n - 1}) {
        for (float bad : {NAN, INFINITY, -INFINITY}) {
          at::Tensor x = torch::randn({n});
          x[at] = bad;
          const ArgmaxResult r = argmax_f32_with(isa, x.data_ptr<float>(), n);
          EXPECT_FALSE(r.all_finite) << isa_name(isa) << " n = " << n << ", at " << at << ", value " << bad;
          if (std::isnan(bad) && n > 1) EXPECT_NE(r.index, at);
          if (bad > 0) EXPECT_EQ(r.index, at);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dspark::kernels
